"""Which result can be drawn as lines, and how: pure functions, no Textual.

A result is plottable when it has a time column and a numeric column. A text column with few distinct
values (a replica, an app) splits the rows into one line per value. Times become epoch seconds (UTC)
on the x axis; the axis is labelled in wall-clock time.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_GROUPS = 8
"""At most this many lines; a grouping column with more distinct values is not used."""

_NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                  "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "DECIMAL")
_TIME_TYPES = ("TIMESTAMP", "DATE", "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_S", "TIMESTAMP_MS",
               "TIMESTAMP_NS")
_TEXT_TYPES = ("VARCHAR", "TEXT", "STRING", "ENUM")

# seconds between x ticks: the first that gives at most the wanted number of ticks
_TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


@dataclass
class Series:
    """One line: x in epoch seconds (UTC), y in the column's unit; equal lengths, x ascending."""

    label: str
    x: list[float]
    y: list[float]


@dataclass
class Marker:
    """A vertical mark at epoch second `x` (UTC), e.g. a deploy."""

    x: float
    label: str


@dataclass
class PlotSpec:
    """What to draw. `value_columns` are the numeric columns one can cycle through."""

    time_column: str
    value_column: str
    group_column: str | None
    series: list[Series]
    value_columns: list[str] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)

    @property
    def x_range(self) -> tuple[float, float] | None:
        xs = [x for s in self.series for x in s.x]
        return (min(xs), max(xs)) if xs else None


def _base_type(type_name: str) -> str:
    return type_name.upper().split("(")[0].strip()


def is_time(type_name: str, sample: Any = None) -> bool:
    base = _base_type(type_name)
    if base in _TIME_TYPES or base.startswith("TIMESTAMP"):
        return True
    if type_name:
        return False
    if isinstance(sample, str):
        # journalled rows keep timestamps as ISO text
        return len(sample) >= 10 and sample[4:5] == "-" and epoch_seconds(sample) is not None
    return isinstance(sample, dt.datetime | dt.date)


def is_numeric(type_name: str, sample: Any = None) -> bool:
    if type_name:
        return _base_type(type_name) in _NUMERIC_TYPES
    return isinstance(sample, int | float) and not isinstance(sample, bool)


def is_text(type_name: str, sample: Any = None) -> bool:
    if type_name:
        return _base_type(type_name) in _TEXT_TYPES
    return isinstance(sample, str)


def epoch_seconds(value: Any) -> float | None:
    """Seconds since 1970-01-01 UTC of a datetime or date (naive means UTC); None for anything else."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return aware.timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    if isinstance(value, str):
        try:
            return epoch_seconds(dt.datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def plot_spec(columns: Sequence[str], types: Sequence[str], rows: Sequence[Sequence[Any]],
              value_column: str | None = None, max_groups: int = MAX_GROUPS) -> PlotSpec | str:
    """Lines for a query result, or a one-line reason why it cannot be drawn.

    `types` are DuckDB type names (may be empty strings; then the first row's values decide). The
    value column is `value_column` when numeric, else the first numeric column that is not the time.
    Rows with a NULL time or value are skipped; each series is sorted by time."""
    if not rows:
        return "no rows to plot"
    types = list(types) + [""] * (len(columns) - len(types))
    first = rows[0]
    time_idx = next((i for i, t in enumerate(types) if is_time(t, first[i])), None)
    if time_idx is None:
        return "no time column: select a timestamp (e.g. ts or time_bucket(...)) to plot"
    numeric = [i for i, t in enumerate(types) if i != time_idx and is_numeric(t, first[i])]
    if not numeric:
        return "no numeric column next to the time column"
    names = list(columns)
    y_idx = names.index(value_column) if value_column in names and names.index(value_column) in numeric \
        else numeric[0]
    group_idx = None
    for i, t in enumerate(types):
        if i in (time_idx, y_idx) or not is_text(t, first[i]):
            continue
        if len({row[i] for row in rows}) <= max_groups:
            group_idx = i
            break
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        x, y = epoch_seconds(row[time_idx]), _float(row[y_idx])
        if x is None or y is None:
            continue
        key = "" if group_idx is None else ("NULL" if row[group_idx] is None else str(row[group_idx]))
        xs, ys = groups.setdefault(key, ([], []))
        xs.append(x)
        ys.append(y)
    if not groups:
        return "every row has a NULL time or value"
    series = []
    for key in sorted(groups):
        xs, ys = groups[key]
        order = sorted(range(len(xs)), key=xs.__getitem__)
        series.append(Series(key or names[y_idx], [xs[k] for k in order], [ys[k] for k in order]))
    return PlotSpec(names[time_idx], names[y_idx], None if group_idx is None else names[group_idx], series,
                    value_columns=[names[i] for i in numeric])


def markers_in_range(markers: Sequence[Marker], low: float, high: float) -> list[Marker]:
    """Markers with low <= x <= high; markers at the same second are merged into one label."""
    merged: dict[float, list[str]] = {}
    for m in markers:
        if low <= m.x <= high and m.label not in merged.setdefault(m.x, []):
            merged[m.x].append(m.label)
    return [Marker(x, ", ".join(labels)) for x, labels in sorted(merged.items())]


def clock_ticks(low: float, high: float, max_ticks: int = 6) -> list[float]:
    """Round wall-clock instants (epoch seconds) between low and high, at most `max_ticks` of them,
    on a step of 1 s .. 1 day chosen so that labels land on whole minutes or hours when they can."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low or max_ticks < 1:
        return []
    span = high - low
    step = next((s for s in _TICK_STEPS if span / s <= max_ticks), None)
    if step is None:
        step = _TICK_STEPS[-1] * math.ceil(span / (_TICK_STEPS[-1] * max_ticks))
    first = math.ceil(low / step) * step
    if first < low:  # low / step can underflow to 0
        first += step
    return [first + k * step for k in range(int((high - first) // step) + 1)]


def clock_label(seconds: float, step: float) -> str:
    """HH:MM (HH:MM:SS below a minute's step) of an epoch second in UTC."""
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return stamp.strftime("%H:%M:%S" if step < 60 else "%H:%M")
