"""What a query showed, and whether it tells two worlds apart.

A query's result is reduced to features a reader of the table would notice:

- rows are grouped by their text cells (replica, message, task, ...; a time stamp or a number is a
  value, not a key), so a ``GROUP BY replica`` result has one group per replica and a log listing
  one group per message;
- per group: how many rows it has, and for every numeric or time column its value (a group of one
  row) or its 10th, 50th and 90th percentile over the group's rows (time stamps as seconds).

A feature of one world that the other lacks (a log message that only one world prints) counts as a
full difference. Identifier columns (``*_id``, ``seed``) are not features: which requests happen
to appear says nothing about the cause.

The query **separates** world A from world B when some feature differs between them by more than
`NOISE_FACTOR` times what it differs between A and A's noise world (the same variant with other
traffic), and by more than `MIN_RELATIVE` in relative terms. Empty results have no features, so a
zero-row or ``LIMIT 0`` query separates nothing, whatever columns it named.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

NOISE_FACTOR = 3.0
"""A difference is material when it exceeds this many times the same feature's seed-to-seed noise."""
MIN_RELATIVE = 0.05
"""...and at least this relative size (5%), so deterministic features with zero noise need a real change."""
MAX_GROUPS = 500
"""Groups beyond this many (in first-seen order) are not compared: per-row listings carry no more."""
QUANTILES = (0.1, 0.5, 0.9)
_EPOCH = datetime(1970, 1, 1)

Feature = tuple[tuple[str, ...], str]
"""(group key, feature name)."""


def _number(value: Any, origin: datetime = _EPOCH) -> float | None:
    if value is None or isinstance(value, bool | str | bytes):
        return float(value) if isinstance(value, bool) else None
    if isinstance(value, int | float | Decimal | np.integer | np.floating):
        x = float(value)
        return x if math.isfinite(x) else None
    if isinstance(value, datetime):
        naive = value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
        return (naive - origin).total_seconds()
    if isinstance(value, date):
        return (datetime(value.year, value.month, value.day) - origin).total_seconds()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, time):
        return value.hour * 3600 + value.minute * 60 + value.second + value.microsecond / 1e6
    return None


def _is_identifier(column: str) -> bool:
    name = column.lower().strip('"')
    return name.endswith("_id") or name in ("id", "seed", "output_hash")


def _is_key(value: Any) -> bool:
    return isinstance(value, str | bytes | bool)


@dataclass(frozen=True)
class Shown:
    """A query result reduced to its features: feature -> value. Empty for an empty result."""

    features: dict[Feature, float]
    rows: int

    @property
    def empty(self) -> bool:
        return self.rows == 0


def shown(columns: Sequence[str], rows: Sequence[Sequence[Any]], origin: datetime | None = None) -> Shown:
    """The features of a result table (see the module docstring). Time stamps count as seconds from
    `origin` (naive UTC; the incident's t=0), so an hour's shift is a large change, not a rounding error."""
    origin = _EPOCH if origin is None else origin.replace(tzinfo=None)
    if not rows:
        return Shown({}, 0)
    width = len(columns)
    # a column is a key when its non-null cells are text (or booleans); numbers and times are values
    kinds: list[str] = []
    for j in range(width):
        cells = [r[j] for r in rows if j < len(r) and r[j] is not None]
        if not cells:
            kinds.append("skip")
        elif all(_is_key(c) for c in cells):
            kinds.append("key")
        elif _is_identifier(columns[j]):
            kinds.append("skip")
        elif all(_number(c) is not None for c in cells):
            kinds.append("value")
        else:
            kinds.append("key")  # lists, structs, mixed: compare their text
    groups: dict[tuple[str, ...], list[Sequence[Any]]] = defaultdict(list)
    for r in rows:
        key = tuple(str(r[j]) for j in range(width) if kinds[j] == "key" and j < len(r))
        if key in groups or len(groups) < MAX_GROUPS:
            groups[key].append(r)
    features: dict[Feature, float] = {}
    for key, members in groups.items():
        features[(key, "#rows")] = float(len(members))
        for j in range(width):
            if kinds[j] != "value":
                continue
            values = [x for r in members if (x := _number(r[j], origin)) is not None]
            if not values:
                continue
            if len(members) == 1:
                features[(key, columns[j])] = values[0]
                continue
            arr = np.asarray(values, dtype=float)
            for q in QUANTILES:
                features[(key, f"{columns[j]}@{q:g}")] = float(np.quantile(arr, q))
    return Shown(features, len(rows))


def relative_gap(a: float | None, b: float | None) -> float:
    """|a - b| relative to the larger magnitude, in 0..1 (0..2 across zero); 1 when one is missing."""
    if a is None and b is None:
        return 0.0
    if a is None or b is None:
        return 1.0
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def separating_features(truth: Shown, other: Shown, noise: Shown) -> list[Feature]:
    """Features on which `other` differs from `truth` materially (beyond `noise`, the truth's second seed).

    None when the truth's result is empty: the player saw no rows, so nothing was shown to differ."""
    if truth.empty:
        return []
    out = []
    for feature in truth.features.keys() | other.features.keys():
        gap = relative_gap(truth.features.get(feature), other.features.get(feature))
        if gap < MIN_RELATIVE:
            continue
        chance = relative_gap(truth.features.get(feature), noise.features.get(feature))
        if gap > NOISE_FACTOR * chance:
            out.append(feature)
    return sorted(out)


def separates(truth: Shown, other: Shown, noise: Shown) -> bool:
    """Whether a reader of these results could tell the two worlds apart (see the module docstring)."""
    return bool(separating_features(truth, other, noise))


def describe_feature(feature: Feature) -> str:
    """A short phrase for a feature: 'p50 of prefill_s where replica=vllm-2'."""
    key, name = feature
    where = f" for {', '.join(key)}" if key else ""
    if name == "#rows":
        return f"row count{where}"
    if "@" not in name:
        return f"{name}{where}"
    column, _, q = name.rpartition("@")
    label = {"0.1": "p10", "0.5": "median", "0.9": "p90"}.get(q, q)
    return f"{label} of {column}{where}"


def shown_of(result: Mapping[str, Any] | Any, origin: datetime | None = None) -> Shown:
    """`shown` of a QueryResult (or its dict form)."""
    if isinstance(result, Mapping):
        return shown(list(result.get("columns") or []), list(result.get("rows") or []), origin)
    return shown(list(result.columns), list(result.rows), origin)
