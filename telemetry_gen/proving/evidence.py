"""What a query showed, and whether a reader of it could rule a hypothesis out.

A result is reduced to the **features a reader reads** (`shown`):

- rows are grouped by their text cells (replica, log message, task, ...). Numbers are values wherever
  they appear: a cell of numeric-looking text (``CAST(avg(x) AS VARCHAR)``) is a number, and a text cell
  is its template plus its numbers (``"... 0.75 GiB is free"`` is the group ``"... # GiB is free"`` with
  the value 0.75), so digits in a log line never make a group of their own. A number inside text is read
  line by line: as a level, and against its siblings only where each group is one line, never as a
  curve;
- **presence**: which texts each column shows (an error line, a config change, a replica), column by
  column, so a row that differs from another in one cell is not a new thing. Only an absence counts
  against a rival (what its cause needs and the result lacks, in a result short enough to read whole);
- **levels**: per group, its row count, each numeric column's median and maximum, and each time
  column's median and first time. A reader cannot know what magnitude an alternative cause predicts, so
  a magnitude is read as zero or not (and its sign); its size counts only where the incident declares
  what sizes the cause can have (`members`), and a row count only where no traffic draw moves it;
- **peers**: per group, each numeric column's median against the median of its siblings (the groups
  that differ from it in one key cell: "vllm-3's SM clock is 0.4x its siblings'"), read as up, down or
  flat (its size, like any size, only against declared members), and which group stands clear as
  highest or lowest;
- **shape**, for a group of `SERIES_MIN` or more rows with a time column, in time order: where the
  series ends against where it started (its trend: up, down or flat), when it first leaves its early
  level by a step a reader sees (onset), and when a prominent peak comes.

Identifier columns (``*_id``, ``seed``, ``output_hash``) are not features: which requests happen to
appear says nothing about the cause.

A hypothesis is a family of worlds (`telemetry_gen.proving.worlds`). `ruling` decides whether what the player
saw rules rival R out: a category (a text in a column, which group stands out, the direction of a
magnitude) rules R out when every other traffic draw of the truth shows what the player saw and no
member of R's family does. A size or a time (when a series starts to move, peaks, or a row happens)
rules R out only when R's family spans the severities and onsets its incident declares (`members`),
and the value seen lies outside everything the family produced by a floor and by `NOISE_FACTOR` times
the spread of chance (between the truth's draws, or inside R's family): where the incident does not say
how severe or how early an alternative cause would have been, nobody knows. An empty result has no
features, so a zero-row or ``LIMIT 0`` query rules out nothing, whatever columns it named.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

ROW_CAP = 1000
"""Rows a player's query shows, in every front end (game.query.limits takes it from here), and so the rows a
reading is made from: evidence is computed on what was shown, never on rows nobody saw."""
NOISE_FACTOR = 3.0
"""A difference rules out only when it exceeds this many times the spread seen between traffic draws."""
RATIO_FACTOR = 1.25
"""A group stands out as highest or lowest when this many times the next one. A reader does not know how
severe an alternative cause would have been, so magnitudes are read as directions (up, down, flat; zero
or not), and as sizes only where the incident says what sizes a cause can have (docs/scoring.md)."""
FLAT = 1.1
"""A ratio within this factor of 1 reads as flat (no change, no difference from the peers); beyond it,
up or down. A difference of direction still has to be beyond chance (`_magnitude`)."""
LEVEL_SIZE_FACTOR = 1.5
"""A level (a mean, a rate, a ratio the player computed) tells a rival apart by its size only when the
rival's family spans the severities its incident declares (`members`), and then only when it lies this
many times outside everything the family produced: the family says what sizes the cause can have."""
RATIO_SIZE_FACTOR = 2.0
"""Two ratios of a group against its siblings, of one direction, tell apart when one is this many times
the other (beyond chance) and the rival's family spans the severities its incident declares (`members`):
how far below its siblings a restarted or throttled replica would run is the cause's severity, which
nobody knows for a rival whose incident does not say (docs/scoring.md, "A worked reading")."""
TIME_FLOOR_S = 300.0
"""A time reading (when something starts, peaks, happens), against a family whose members declare its
onsets, rules out only when this many seconds outside them (a five-minute bucket)..."""
TIME_FLOOR_SHARE = 0.25
"""...and this share of the incident's window."""
ABSENCE_ROWS = 50
"""What a result lacks is read only in a result of at most this many rows (a screen or two, read whole):
a line missing from hundreds of near-identical log lines is found by asking for it (a WHERE, a count),
not by reading. Fitted on the library at seed 0 (a DISTINCT listing of the logs, 475-540 rows, settled
minutes-to-first-token by a missing 'Preemptions' variant); every expert absence reading has 1-20 rows."""
MAX_GROUPS = 500
"""Groups beyond this many (in first-seen order) are not compared: per-row listings carry no more."""
PEER_GROUPS = 64
"""Peer readings (a group against the others) only in results of at most this many groups."""
RANK_GROUPS = 12
"""Which group is highest or lowest is read only among at most this many groups, and only when it stands
RATIO_FACTOR clear of the next one: the order of near-equal groups is luck."""
SERIES_MIN = 4
"""Rows a group needs in a result with a time column before its shape (trend, onset, peak) is read."""
ONSET_MIN = 0.05
"""A series has an onset only when it moves by at least this share of its early level. A plot scales to
the series, so a small step is visible: whether its time is chance is the family's to say."""
PEAK_MIN = 1.05
"""A series has a peak only when its largest value is at least this many times its median."""
KEY_CHARS = 80
"""Group labels are cut to this many characters in descriptions."""

PRESENT, COUNT, LEVEL, PEAK_LEVEL, WHEN, FIRST, PEER, TOP, BOTTOM, TREND, ONSET, PEAK_AT = (
    "present", "count", "level", "max", "when", "first", "peer", "top", "bottom", "trend", "onset", "peak_at")
_RATIOS = frozenset({PEER, TREND})
_TIMES = frozenset({WHEN, FIRST, ONSET, PEAK_AT})
_CATEGORIES = frozenset({TOP, BOTTOM})
CATEGORY_MARGIN = 10.0
"""The margin a category reading is reported with (it has no scale: the groups differ, or they do not)."""
_EPOCH = datetime(1970, 1, 1)
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_NUMBER_SHAPES = frozenset({"#", "nan", "-nan", "inf", "-inf"})
"""Texts a computed number column shows of itself: a NaN where a division had nothing to divide (a rival
that disables prefix caching has no cache queries to divide hits by), '#' for the numbers beside it."""
_TIME_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?([+-]\d{2}(:?\d{2})?|Z)?$")
"""A date or time stamp written as text (a CAST of ts to VARCHAR): read as the time it is, not as a text
whose digits are levels (its minute read as zero or not)."""
_ADDRESS = re.compile(r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]\b")
"""A PCI address (``0000:2a:00.0``) names a device, as a replica's name does: the replica column says which."""
_UNITS = r"(?:x|ms|us|s|GiB|MiB|KiB|GB|MB|KB)?"
"""Unit suffixes a number may carry and still stand on its own ("1.46x", "12ms", "0.75GiB")."""
_IN_TEXT = re.compile(r"(?<![\w.\-])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?" + _UNITS
                      + r"(?!\.?\w|-\w)")


@dataclass(frozen=True, order=True)
class Feature:
    """One reading of a result: its `kind` (module constants), the group it is about and the column."""

    kind: str
    key: tuple[str, ...]
    column: str = ""


Value = float | str


@dataclass(frozen=True)
class Shown:
    """A result reduced to what a reader reads. `rows` is -1 for a query that failed on that world."""

    features: dict[Feature, Value]
    rows: int
    cells: frozenset[tuple[str, str]] = frozenset()
    """(column, text) of every text cell the result shows, as its template (numbers as ``#``)."""
    truncated: bool = False
    """The result stopped at the row cap: a text missing from it may be in the rows not shown."""
    columns: tuple[str, ...] = ()
    """The result's column names in the order the query put them (which reading is cited, `cite`)."""

    @property
    def empty(self) -> bool:
        return self.rows <= 0

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "truncated": self.truncated, "cells": sorted(list(c) for c in self.cells),
                "features": [[f.kind, list(f.key), f.column, v] for f, v in sorted(self.features.items())],
                "columns": list(self.columns)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Shown:
        feats: dict[Feature, Value] = {}
        for kind, key, column, value in data.get("features", []):
            feats[Feature(str(kind), tuple(str(k) for k in key), str(column))] = (
                value if isinstance(value, str) else float(value))
        cells = frozenset((str(c[0]), str(c[1])) for c in data.get("cells", []) if len(c) == 2)
        columns = tuple(str(c) for c in data.get("columns", []))  # absent in results cached before it was kept
        return cls(feats, int(data.get("rows", 0)), cells, bool(data.get("truncated", False)), columns)


FAILED = Shown({}, -1)


def _number(value: Any, origin: datetime = _EPOCH) -> float | None:
    if value is None or isinstance(value, bool | bytes):
        return None
    if isinstance(value, str):
        text = value.strip()
        return _finite(float(text)) if _NUMBER.match(text) else None
    if isinstance(value, int | float | Decimal | np.integer | np.floating):
        return _finite(float(value))
    if isinstance(value, timedelta):
        return value.total_seconds()
    return None


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _time(value: Any, origin: datetime) -> float | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        naive = value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
        return (naive - origin).total_seconds()
    if isinstance(value, date):
        return (datetime(value.year, value.month, value.day) - origin).total_seconds()
    if isinstance(value, time):
        return value.hour * 3600 + value.minute * 60 + value.second + value.microsecond / 1e6
    return None


def _is_identifier(column: str) -> bool:
    name = column.lower().strip('"')
    return name.endswith("_id") or name in ("id", "seed", "output_hash")


def template(text: str) -> tuple[str, list[float]]:
    """A text cell as its template and its numbers: every number that stands on its own (``0.75``,
    ``12.5%``, ``1,024``, ``(3``, with a unit: ``1.46x``, ``12ms``) becomes ``#``, and so does a PCI
    address; digits that are part of a name (``vllm-3``, ``3a``, ``0.12.1-patch3``, ``2026-11``) stay
    as written, so names keep their digits."""
    numbers: list[float] = []

    def take(match: re.Match[str]) -> str:
        digits = re.sub(r"[A-Za-z]+$", "", match.group(0))
        x = _finite(float(digits.replace(",", "")))
        if x is None:
            return match.group(0)
        numbers.append(x)
        return "#"

    return _IN_TEXT.sub(take, _ADDRESS.sub("#", text)), numbers


@dataclass
class _Group:
    rows: int = 0
    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    series: list[tuple[float, dict[str, float]]] = field(default_factory=list)


def _kinds(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Per column: 'value' (numbers, numeric text, durations), 'time', 'text' (a key, templated) or 'skip'."""
    kinds = []
    for j, name in enumerate(columns):
        cells = [r[j] for r in rows if j < len(r) and r[j] is not None]
        if not cells:
            kinds.append("skip")
        elif all(isinstance(c, datetime | date | time) or (isinstance(c, str) and _TIME_TEXT.match(c.strip()))
                 for c in cells):
            kinds.append("time")
        elif all(_number(c) is not None for c in cells):
            kinds.append("skip" if _is_identifier(name) else "value")
        elif _is_identifier(name):
            kinds.append("skip")
        else:
            kinds.append("text")
    return kinds


def shown(columns: Sequence[str], rows: Sequence[Sequence[Any]], origin: datetime | None = None, *,
          truncated: bool = False) -> Shown:
    """The features of a result table (see the module docstring). Time stamps count as seconds from
    `origin` (naive UTC; the incident's t=0). `truncated`: the rows stopped at the row cap."""
    origin = _EPOCH if origin is None else origin.replace(tzinfo=None)
    names = [str(c) for c in columns]
    if not rows:
        return Shown({}, 0, columns=tuple(names))
    kinds = _kinds(names, rows)
    axis = next((j for j, k in enumerate(kinds) if k == "time"), None)
    # a number read out of a text cell belongs to that cell's template: its siblings share the template
    text_position = {names[j]: i for i, j in enumerate(j for j, k in enumerate(kinds) if k == "text")}
    groups: dict[tuple[str, ...], _Group] = {}
    cells: set[tuple[str, str]] = set()
    for r in rows:
        key: list[str] = []
        values: dict[str, float] = {}
        for j, kind in enumerate(kinds):
            if j >= len(r) or r[j] is None or kind == "skip":
                continue
            cell = r[j]
            if kind == "text" and (whole := _number(cell) if isinstance(cell, str) else None) is not None:
                # a cell that is a number is a value whatever its neighbours hold ('2048' beside 'True'),
                # so that two worlds whose columns mix differently still compare the same rows
                values[names[j]] = whole
            elif kind == "text":
                # a boolean as the result grid prints it (true/false), so a reading cites what was shown
                boolean = isinstance(cell, bool | np.bool_)
                text, numbers = template(("true" if cell else "false") if boolean else str(cell))
                key.append(text)
                cells.add((names[j], text))
                for i, found in enumerate(numbers):
                    values[f"{names[j]}#{i + 1}"] = found
            elif kind == "value":
                number = _number(cell)
                if number is not None:
                    values[names[j]] = number
            else:
                t = _time(cell, origin)
                if t is not None:
                    values[names[j]] = t
        gkey = tuple(key)
        group = groups.get(gkey)
        if group is None:
            if len(groups) >= MAX_GROUPS:
                continue
            group = groups[gkey] = _Group()
        group.rows += 1
        for col, x in values.items():
            (group.times if col in names and kinds[names.index(col)] == "time" else group.values)[col].append(x)
        if axis is not None and names[axis] in values:
            # a series is read from columns (plotted or scanned down); a number inside a log line is read
            # line by line, never as a curve
            group.series.append((values[names[axis]], {c: x for c, x in values.items()
                                                        if c != names[axis] and c in names}))
    features: dict[Feature, Value] = {}
    levels: dict[str, dict[tuple[str, ...], float]] = defaultdict(dict)
    for gkey, group in groups.items():
        if gkey and axis is None:
            # how many rows of a kind (evaluations per version, changes per replica); in a series the
            # rows are time buckets, and without a key the count is the result's length: neither is a kind
            features[Feature(COUNT, gkey)] = float(group.rows)
        for col, xs in group.values.items():
            if group.rows > ABSENCE_ROWS and col.rpartition("#")[0] in text_position:
                # The numbers inside hundreds of log lines of one template are found by asking for them (a
                # WHERE, a max, an average), not by reading, as a missing line is (ABSENCE_ROWS): the one
                # 'Waiting: 1 reqs' among zeros, or whether most of them read zero (a proxy for when the
                # queue began, which nobody knows of a rival), is no reading of a dump.
                continue
            med = float(np.median(xs))
            features[Feature(LEVEL, gkey, col)] = med
            levels[col][gkey] = med
            if len(xs) > 1:
                features[Feature(PEAK_LEVEL, gkey, col)] = float(max(xs))
        for col, ts in group.times.items():
            features[Feature(WHEN, gkey, col)] = float(np.median(ts))
            if len(ts) > 1:
                features[Feature(FIRST, gkey, col)] = float(min(ts))
        if len(group.series) >= SERIES_MIN:
            features.update(_shape(gkey, group.series))
    for col, per_group in levels.items():
        if len(per_group) > PEER_GROUPS:
            continue
        source, mark, _ = col.rpartition("#")
        fixed = text_position.get(source) if mark else None
        if fixed is not None and any(groups[g].rows > 1 for g in per_group):
            continue  # a number inside text is compared across lines only where each group is one line
        features.update(_peers(col, per_group, fixed))
        if 3 <= len(per_group) <= RANK_GROUPS:
            ordered = sorted(per_group.items(), key=lambda kv: kv[1])
            if _clear(ordered[-1][1], ordered[-2][1]):
                features[Feature(TOP, (), col)] = _label(ordered[-1][0])
            if _clear(ordered[1][1], ordered[0][1]):
                features[Feature(BOTTOM, (), col)] = _label(ordered[0][0])
    return Shown(features, len(rows), frozenset(cells), truncated, tuple(names))


def _peers(col: str, per_group: Mapping[tuple[str, ...], float], fixed: int | None = None) -> dict[Feature, Value]:
    """Each group's value against the median of its siblings: the groups that differ from it in exactly
    one key cell (the other replicas in the same period; the same replica in the other periods). The
    feature's column names the cell that varies (``value|1``: siblings by the second key cell). Key cell
    `fixed` never varies (a number from a log line is compared only with the same line's template)."""
    out: dict[Feature, Value] = {}
    keys = list(per_group)
    width = max((len(k) for k in keys), default=0)
    for pos in range(width):
        if pos == fixed:
            continue
        families: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
        for k in keys:
            if len(k) == width:
                families[k[:pos] + k[pos + 1:]].append(k)
        for members in families.values():
            if len(members) < 2:
                continue
            for k in members:
                ref = float(np.median([per_group[m] for m in members if m != k]))
                x = per_group[k]
                if x != 0 and ref != 0 and (x > 0) == (ref > 0):
                    out[Feature(PEER, k, f"{col}|{pos}")] = x / ref
    return out


def _clear(high: float, low: float) -> bool:
    """Whether `high` stands RATIO_FACTOR clear of `low` (both of one sign; zero against non-zero counts)."""
    if high <= low:
        return False
    if low > 0:
        return high / low >= RATIO_FACTOR
    if high < 0:
        return low / high >= RATIO_FACTOR
    return True


def _label(key: tuple[str, ...]) -> str:
    return ", ".join(key) if key else "(all rows)"


def _shape(key: tuple[str, ...], series: list[tuple[float, dict[str, float]]]) -> dict[Feature, Value]:
    """Trend, onset and peak time of every value column of one group's rows in time order."""
    ordered = sorted(series, key=lambda p: p[0])
    out: dict[Feature, Value] = {}
    columns = {c for _, vals in ordered for c in vals}
    for col in sorted(columns):
        points = [(t, vals[col]) for t, vals in ordered if col in vals]
        if len(points) < SERIES_MIN:
            continue
        ts = np.asarray([p[0] for p in points])
        ys = np.asarray([p[1] for p in points])
        third = max(1, len(ys) // 3)
        start, end = float(ys[:third].mean()), float(ys[-third:].mean())
        if start != 0 and end != 0 and (start > 0) == (end > 0):
            out[Feature(TREND, key, col)] = end / start
        med = float(np.median(ys))
        if med > 0 and float(ys.max()) >= PEAK_MIN * med:
            out[Feature(PEAK_AT, key, col)] = float(ts[int(np.argmax(ys))])
        base = float(np.median(ys[: max(1, len(ys) // 4)]))
        moved = np.abs(ys - base)
        largest = float(moved.max())
        if largest > 0 and largest >= ONSET_MIN * abs(base):
            out[Feature(ONSET, key, col)] = float(ts[int(np.argmax(moved >= 0.5 * largest))])
    return out


def shown_of(result: Mapping[str, Any] | Any, origin: datetime | None = None) -> Shown:
    """`shown` of a QueryResult (or its dict form)."""
    if isinstance(result, Mapping):
        return shown(list(result.get("columns") or []), list(result.get("rows") or []), origin,
                     truncated=bool(result.get("truncated")))
    return shown(list(result.columns), list(result.rows), origin, truncated=bool(getattr(result, "truncated", False)))


# ---------------------------------------------------------------- ruling a rival out


@dataclass(frozen=True)
class Reading:
    """A feature on which what the player saw lies outside everything a rival's family produced.

    `seen` is the player's value, `rival` the rival's members' values (None: the member lacks it),
    `margin` how many times the required distance the gap is (above 1; `CATEGORY_MARGIN` for a category)."""

    feature: Feature
    seen: Value | None
    rival: tuple[Value | None, ...]
    margin: float


def _distance(kind: str, a: float, b: float) -> float:
    """Distance between two values of a feature of `kind`: seconds for times, log ratio otherwise
    (infinite for zero against non-zero or opposite signs)."""
    if kind in _TIMES:
        return abs(a - b)
    if a == b:
        return 0.0
    if a == 0 or b == 0 or (a > 0) != (b > 0):
        return math.inf
    return abs(math.log(abs(a) / abs(b)))


def direction(kind: str, value: float) -> str:
    """What a reader reads off a magnitude without knowing what a cause predicts: for a ratio (a group
    against its siblings, where a series ends against where it started) whether it is up, down or flat
    (within `FLAT` of 1); for any other level, zero or its sign."""
    if kind in _RATIOS:
        return "up" if value > FLAT else ("down" if value < 1 / FLAT else "flat")
    return "zero" if value == 0 else ("positive" if value > 0 else "negative")


def _magnitude(feature: Feature, x: float, truths: Sequence[Shown], rvals: Sequence[float],
               drawn: Sequence[float], sized: bool) -> float | None:
    """The margin by which magnitude `x` rules out a rival whose members show `rvals`, or None.

    Chance is the largest log distance from `x` to the truth's other draws, or between the rival's
    written world on its traffic draws (`drawn`; its declared members widen `rvals`, not chance).
    Another direction (up, down, flat; zero or not) on every truth draw against every rival member
    counts when every truth draw, the one seen included, lies more than FLAT and NOISE_FACTOR times the
    spread of the rival's own draws from every member (the truth's spread is no bar: every draw reads the
    same way). A size counts only when the rival's family
    spans the severities the incident declares for it (`sized`): for a group against its siblings
    (RATIO_SIZE_FACTOR) or a level (LEVEL_SIZE_FACTOR); otherwise nobody knows what size the rival predicts."""
    kind = feature.kind
    values = [t.features.get(feature) for t in truths]
    if any(not isinstance(v, float) for v in values):
        return None
    if kind == COUNT:
        # a row count no traffic draw moves (evaluations per version, changes per replica) is the fleet's
        # structure: a rival whose every world logs another count, at least LEVEL_SIZE_FACTOR apart, is
        # another structure. A count that traffic moves is a size, which nobody knows for a rival.
        # Only fewer rows than the rival needs count: more of a kind (another restart, another change)
        # can have any cause, so it contradicts no rival. And a count is a size: without declared members
        # nobody knows how many rows a cause adds to what the fleet logs anyway (two config changes on a
        # replica do not rule out a third that a rival needs: one of the two may be its change).
        if not sized or any(v != x for v in values) or len(set(rvals)) != 1 or x >= rvals[0]:
            return None
        ratio = max(x, rvals[0]) / min(x, rvals[0])
        return round(min(math.log(ratio) / math.log(LEVEL_SIZE_FACTOR), CATEGORY_MARGIN), 3) \
            if ratio >= LEVEL_SIZE_FACTOR else None
    mine = direction(kind, x)
    if any(direction(kind, float(v)) != mine for v in values if isinstance(v, float)):
        return None
    gap = 0.0 if _between(x, rvals) else min(_distance(kind, x, r) for r in rvals)
    if gap == 0.0:
        return None
    rival_chance = max(_distance(kind, a, b) for a in drawn for b in drawn)
    chance = max(max(_distance(kind, x, float(v)) for v in values if isinstance(v, float)), rival_chance)
    if all(direction(kind, r) != mine for r in rvals):
        if not math.isfinite(gap):
            return CATEGORY_MARGIN
        # Every draw of the truth reads the same way, so its spread is no bar here (a trend of 2x to 4x
        # on every draw is 'up' against a flat rival); but the draws nearest the rival must stand apart
        # from it too, so a reading near the boundary (0.97x, another draw 1.05x, against a rival at
        # 1.11x) is not another direction; and the rival's own draws must not wander as far.
        apart = min(_distance(kind, float(v), r) for v in (x, *values) if isinstance(v, float) for r in rvals)
        need = max(math.log(FLAT), NOISE_FACTOR * rival_chance)
        return round(min(gap / need, CATEGORY_MARGIN), 3) if apart > need else None
    if sized and kind == PEER:
        floor = math.log(RATIO_SIZE_FACTOR)
    elif sized and kind in (LEVEL, PEAK_LEVEL):
        floor = math.log(LEVEL_SIZE_FACTOR)
    else:
        return None
    need = max(floor, NOISE_FACTOR * chance)
    return round(min(gap / need, CATEGORY_MARGIN), 3) if math.isfinite(gap) and gap > need else None


def _between(x: float, values: Sequence[float]) -> bool:
    return min(values) <= x <= max(values)


def _time_floor(span_s: float) -> float:
    return max(TIME_FLOOR_S, TIME_FLOOR_SHARE * span_s)


def _category(feature: Feature, value: Value, truths: Sequence[Shown], members: tuple[Value | None, ...]) -> bool:
    """A category the player saw that every truth draw shows too and no rival member does."""
    return (all(t.features.get(feature) == value for t in truths) and value not in members)


def ruling(seen: Shown, truth_others: Sequence[Shown], rival_family: Sequence[Shown], *,
           span_s: float = 3600.0, sized: bool | None = None, draws: int = 2,
           made: Collection[str] = (), labels: Collection[str] = ()) -> list[Reading]:
    """Readings on which `seen` (the player's result on the true world) rules the rival out, largest
    margin first; empty when it does not. `truth_others` are the same query on the truth's other traffic
    draws, `rival_family` on every member of the rival's family: first its written world on `draws`
    traffic draws (their spread is chance), then its declared members (other severities and onsets: they
    widen what the family produces, they are not chance). `sized` defaults to whether there are declared
    members. A member on which the query failed (`rows` -1) is left out; without a truth draw or a rival
    member left, nothing is ruled out. `made`: result columns whose values the query computed
    (thresholds.made_columns); no presence is read from them but a number's shape ('nan', '#').
    `labels`: columns labelling a per-row threshold (thresholds.label_columns); no presence at all.

    - presence: a text every member of the rival's family shows in a column and neither the player's
      result nor the truth's other draws do (only in results not cut at the row cap, of at most
      ABSENCE_ROWS rows): what the rival's cause requires is missing. A text only the truth shows rules
      nothing out: no cause forbids an unrelated restart, error line or change, and neither does a kind
      of row seen more often than the rival needs (see `_magnitude`);
    - which group stands out: a category (see `_category`);
    - a magnitude: see `_magnitude` (a direction, or a size where a size is known: `sized` says the
      rival's family spans the severities the incident declares for it);
    - a time, only against a family that spans the onsets the incident declares (`sized`): the value
      seen must lie outside the rival's times by more than the time floor and by more than NOISE_FACTOR
      times the spread of chance (between the player's draw and the truth's others, or inside the
      rival's family)."""
    if seen.empty:
        return []
    truths = [t for t in truth_others if t.rows >= 0]
    rivals = [r for r in rival_family if r.rows >= 0]
    if not truths or not rivals:
        return []
    if sized is None:
        sized = len(rival_family) > draws
    rival_draws = [r for r in rival_family[:draws] if r.rows >= 0]
    out: list[Reading] = []
    # presence, column by column: a text every world of the rival shows (an OOM line, a config change, a
    # restart its cause needs) and neither the player's result nor any other draw of the truth does. A
    # text only the truth shows is something else that happened: no cause forbids an unrelated restart,
    # error line or deploy, so it rules nothing out. In a result cut at the row cap a missing text may be
    # in the rows not shown, so absence there reads as nothing.
    # Only in columns read from a table (thresholds.made_columns): which texts a computed column shows is the
    # player's making (a threshold's label, the first text in sort order, a number spelled as letters).
    if not seen.truncated and seen.rows <= ABSENCE_ROWS:
        for column, text in set.intersection(*(set(r.cells) for r in rivals)) - seen.cells:
            if column in labels or (column in made and text not in _NUMBER_SHAPES):
                continue
            cell = (column, text)
            if all(cell not in t.cells for t in truths) and not any(r.truncated for r in rivals):
                out.append(Reading(Feature(PRESENT, (text,), column), 0.0, tuple(1.0 for _ in rivals),
                                   CATEGORY_MARGIN))
    for feature, value in seen.features.items():
        kind = feature.kind
        if kind == LEVEL and Feature(PEAK_LEVEL, feature.key, feature.column) in seen.features:
            continue  # a group of many rows is zero or not by its largest value, not its median
        members = tuple(r.features.get(feature) for r in rivals)
        if any(v is None for v in members):
            continue  # the rival lacks the group: presence speaks for it
        if kind in _CATEGORIES:
            if _category(feature, value, truths, members):
                out.append(Reading(feature, value, members, CATEGORY_MARGIN))
            continue
        if isinstance(value, str) or any(isinstance(v, str) for v in members):
            continue
        x = float(value)
        rvals = [float(v) for v in members if v is not None and not isinstance(v, str)]
        drawn = [float(v) for r in rival_draws if isinstance(v := r.features.get(feature), float)] or rvals
        if kind in _TIMES:
            if not sized or _between(x, rvals):
                continue  # when a rival's cause would have begun is known only where the incident says
            gap = min(abs(x - r) for r in rvals)
            chance = max(abs(x - float(tv)) if isinstance(tv := t.features.get(feature), float) else math.inf
                         for t in truths)
            spread = max(drawn) - min(drawn)
            need = max(_time_floor(span_s), NOISE_FACTOR * max(chance, spread))
            if math.isfinite(need) and gap > need:
                out.append(Reading(feature, x, members, round(gap / need, 3)))
            continue
        reading = _magnitude(feature, x, truths, rvals, drawn, sized)
        if reading is not None:
            out.append(Reading(feature, x, members, reading))
    out.sort(key=lambda r: (-r.margin, r.feature))
    return out


def cite(readings: Sequence[Reading], seen: Shown) -> Reading:
    """The reading of `readings` (non-empty; each rules the same rival out) a reader would cite: a text
    present or missing, or which group stands out, before any number; then the number in the column the
    query put first, because that is what the player asked to read (`score` before the `ci_low` beside
    it, whose ratios run larger only because its values are smaller); then the largest margin. Which
    reading is cited never changes whether the rival is ruled out."""
    position = {name: i for i, name in enumerate(seen.columns)}

    def rank(r: Reading) -> tuple[int, int, float, Feature]:
        f = r.feature
        if f.kind == PRESENT or f.kind in _CATEGORIES:
            return (0, 0, -r.margin, f)
        # a peer's column carries which key cell varies (`score|1`), a number read out of text its place
        # in the text (`message#2`)
        base = f.column.partition("|")[0].partition("#")[0]
        return (1, position.get(base, len(position)), -r.margin, f)

    return min(readings, key=rank)


# ---------------------------------------------------------------- in a reader's words


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _clock(seconds: float, origin: datetime | None) -> str:
    if origin is None:
        return f"{seconds:.0f} s in"
    return (origin.replace(tzinfo=None) + timedelta(seconds=seconds)).strftime("%H:%M")


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= KEY_CHARS else text[: KEY_CHARS - 3] + "..."


def _where(key: tuple[str, ...]) -> str:
    return f" for {_cut(', '.join(key))}" if key else ""


def _range(values: Sequence[Value | None], fmt: Any) -> str:
    nums = sorted(float(v) for v in values if v is not None and not isinstance(v, str))
    if not nums:
        return "none"
    lo, hi = fmt(nums[0]), fmt(nums[-1])
    return lo if lo == hi else f"{lo} to {hi}"


def describe_reading(reading: Reading, origin: datetime | None = None) -> str:
    """The reading as a reader would cite it: what the result shows, and what the rival's worlds show."""
    f, seen = reading.feature, reading.seen
    col = f.column
    if f.kind == PRESENT:
        label = _cut(", ".join(f.key))
        return (f"the result shows {col} '{label}'; none of the rival's worlds does" if seen
                else f"no {col} '{label}' in the result; every one of the rival's worlds shows one")
    if f.kind in _CATEGORIES:
        word = "highest" if f.kind == TOP else "lowest"
        others = ", ".join(sorted({_cut(str(v)) for v in reading.rival if v is not None}))
        return f"{_cut(str(seen))} has the {word} {col} (the rival's worlds: {others})"
    if seen is None or isinstance(seen, str):
        return f"{f.kind} of {col}{_where(f.key)}"
    x = float(seen)
    if f.kind in _TIMES:
        what = {WHEN: f"{col}{_where(f.key)} is at", FIRST: f"the first {col}{_where(f.key)} is at",
                ONSET: f"{col}{_where(f.key)} leaves its early level at",
                PEAK_AT: f"{col}{_where(f.key)} peaks at"}[f.kind]
        return f"{what} {_clock(x, origin)} (the rival's worlds: {_range(reading.rival, lambda s: _clock(s, origin))})"
    if f.kind == PEER:
        col = col.rpartition("|")[0] or col
        return (f"{col}{_where(f.key)} is {x:.2f}x the other rows' "
                f"(the rival's worlds: {_range(reading.rival, lambda v: f'{v:.2f}x')})")
    if f.kind == TREND:
        # the trend is the mean of the last third of the rows over the mean of the first third (`_shape`):
        # said so, because a dip inside the first third moves it while both end rows read alike
        return (f"{col}{_where(f.key)} over its last third of rows averages {x:.2f}x its first third "
                f"(the rival's worlds: {_range(reading.rival, lambda v: f'{v:.2f}x')})")
    what = {COUNT: f"{_fmt(x)} rows{_where(f.key)}", LEVEL: f"{col}{_where(f.key)} is {_fmt(x)}",
            PEAK_LEVEL: f"the largest {col}{_where(f.key)} is {_fmt(x)}"}.get(f.kind, f"{col} {_fmt(x)}")
    return f"{what} (the rival's worlds: {_range(reading.rival, _fmt)})"
