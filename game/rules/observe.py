"""Which signals a query observed, decided from the tables, columns and filters the gateway reports.

The rule (also in docs/cli.md):

- Only successful queries observe anything.
- A query observes a signal when it observes any one of the signal's reveals. It observes a reveal
  when one of its reads is the reveal's table and every column the reveal lists was read (named
  anywhere in the query: projected, filtered, grouped, aggregated; ``count(*)`` names none), the
  query counted the table's rows if the reveal says ``counts``, and the filters did not exclude the
  reveal's place:
  - replica: when the reveal names a replica and the filters on ``replica`` admit only other
    replicas, the reveal is excluded. Parsed forms: ``replica = 'v'``, ``replica IN ('a', 'b')``,
    ``replica != 'v'`` / ``<>``, ``replica NOT IN (...)`` and ORs of equalities;
  - time: when the reveal names a window [start_s, end_s) and the bounds on ``ts`` (``ts >= '...'``,
    ``>``, ``<``, ``<=``, ``=``, ``BETWEEN``, with or without a ``::TIMESTAMP`` cast) leave no
    instant of that window, the reveal is excluded.
  Anything unparseable counts as not excluding. The gateway merges all scans of one table into one
  read, so filters on the same column may come from different scans (a self-join comparing two
  replicas): a reveal is excluded by replica only when every parsed replica filter excludes it, and
  time bounds that contradict each other are taken to come from different scans and ignored.
- Schema exploration (DESCRIBE, SHOW, SUMMARIZE, the ``catalog`` view, ``duckdb_*`` and
  ``information_schema``) observes no signal but is never counted as a wasted query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from game.query.sqltokens import split_top_level, strip_parens
from incidents.spec import Incident, Reveal, Signal, replica_index

SCHEMA_TABLES = frozenset({"catalog", "information_schema", "pg_catalog"})
_SCHEMA_WORDS = re.compile(
    r"^\s*(describe|show|summarize|pragma)\b|\bcatalog\b|\binformation_schema\b|\bduckdb_\w+\s*\(",
    re.IGNORECASE,
)

# Latency decomposition: both halves of TTFT, or the whole request split into first token and decode.
LATENCY_SPLITS: tuple[frozenset[str], ...] = (
    frozenset({"queue_s", "prefill_s"}),
    frozenset({"ttft_s", "decode_s"}),
)


@dataclass(frozen=True)
class Read:
    """One table a query read: the gateway's TableRead in plain, hashable-enough form."""

    table: str
    columns: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()
    counted: bool = False  # a count aggregate sat above the scan

    @classmethod
    def of(cls, raw: Any) -> Read:
        """From a TableRead, a Read, or its dict form ({table, columns, filters, counted})."""
        if isinstance(raw, Read):
            return raw
        if isinstance(raw, Mapping):
            return cls(str(raw.get("table", "")), tuple(map(str, raw.get("columns") or ())),
                       tuple(map(str, raw.get("filters") or ())), bool(raw.get("counted", False)))
        return cls(str(raw.table), tuple(map(str, raw.columns)), tuple(map(str, raw.filters)),
                   bool(getattr(raw, "counted", False)))

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "columns": list(self.columns), "filters": list(self.filters),
                "counted": self.counted}


@dataclass
class TimeBounds:
    """Bounds on ``ts`` in simulated seconds from t=0; None means unbounded on that side."""

    low: float | None = None
    low_strict: bool = False
    high: float | None = None
    high_strict: bool = False
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- columns and filters

_IDENT = r'(?:"?(?P<col>[A-Za-z_][A-Za-z0-9_]*)"?)'


def _strip_literals(text: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", text)


def filter_columns(filter_text: str) -> set[str]:
    """Column-like identifiers in one filter, lower case; words inside string literals do not count."""
    words = re.findall(r'"([^"]+)"|\b([A-Za-z_][A-Za-z0-9_]*)\b', _strip_literals(filter_text))
    return {(quoted or bare).lower() for quoted, bare in words}


def columns_read(read: Read) -> set[str]:
    """Columns a read touched: projected, or used by a scan filter (lower case)."""
    found = {c.lower().strip('"') for c in read.columns}
    for f in read.filters:
        found |= filter_columns(f)
    return found


def _literal(text: str) -> str | None:
    match = re.fullmatch(r"\s*'((?:[^']|'')*)'\s*(?:::\s*[A-Za-z_ ]+)?\s*", text)
    return match.group(1).replace("''", "'") if match else None


def _literal_list(text: str) -> list[str] | None:
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        return None
    values = [_literal(item) for item in split_top_level(inner[1:-1], ",")]
    if not values or any(v is None for v in values):
        return None
    return [v for v in values if v is not None]


def replica_admits(filter_text: str, replica: str) -> bool | None:
    """Whether one filter on ``replica`` lets rows of `replica` through; None when it is not a parseable
    replica filter (then it must not count as excluding)."""
    text = strip_parens(filter_text)
    parts = split_top_level(text, "OR")
    if len(parts) > 1:
        verdicts = [replica_admits(p, replica) for p in parts]
        if any(v is None for v in verdicts):
            return None
        return any(verdicts)
    match = re.fullmatch(_IDENT + r"\s*(?P<op>=|==|!=|<>)\s*(?P<rest>.+)", text, re.DOTALL)
    if match and match.group("col").lower() == "replica":
        value = _literal(match.group("rest"))
        if value is None:
            return None
        return (value == replica) == (match.group("op") in ("=", "=="))
    match = re.fullmatch(_IDENT + r"\s+(?P<neg>NOT\s+)?IN\s*(?P<rest>\(.*\))", text, re.S | re.I)
    if match and match.group("col").lower() == "replica":
        values = _literal_list(match.group("rest"))
        if values is None:
            return None
        return (replica in values) != bool(match.group("neg"))
    return None


def _seconds(value: str, t0: datetime) -> float | None:
    try:
        stamp = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(UTC).replace(tzinfo=None)
    return (stamp - t0).total_seconds()


_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "="}


def ts_bounds(filters: Iterable[str], t0: datetime) -> TimeBounds:
    """Intersect the parseable bounds on ``ts`` in `filters`; `t0` is the naive-UTC instant of t=0."""
    bounds = TimeBounds()
    for raw in filters:
        text = strip_parens(raw)
        between = re.fullmatch(_IDENT + r"\s+BETWEEN\s+(?P<a>.+?)\s+AND\s+(?P<b>.+)", text, re.I | re.S)
        if between and between.group("col").lower() == "ts":
            pairs = [(">=", between.group("a")), ("<=", between.group("b"))]
        else:
            match = re.fullmatch(_IDENT + r"\s*(?P<op>>=|<=|>|<|=)\s*(?P<rest>.+)", text, re.DOTALL)
            flipped = re.fullmatch(
                r"(?P<rest>'.+?'(?:\s*::\s*[A-Za-z_ ]+)?)\s*(?P<op>>=|<=|>|<|=)\s*" + _IDENT, text, re.DOTALL)
            if match and match.group("col").lower() == "ts":
                pairs = [(match.group("op"), match.group("rest"))]
            elif flipped and flipped.group("col").lower() == "ts":
                pairs = [(_FLIP[flipped.group("op")], flipped.group("rest"))]
            else:
                continue
        for op, rest in pairs:
            value = _literal(rest)
            seconds = None if value is None else _seconds(value, t0)
            if seconds is None:
                bounds.notes.append(f"unparsed: {raw}")
                continue
            _tighten(bounds, op, seconds)
    return bounds


def _tighten(b: TimeBounds, op: str, s: float) -> None:
    if op in (">", ">=", "="):
        strict = op == ">"
        if b.low is None or s > b.low or (s == b.low and strict):
            b.low, b.low_strict = s, strict
    if op in ("<", "<=", "="):
        strict = op == "<"
        if b.high is None or s < b.high or (s == b.high and strict):
            b.high, b.high_strict = s, strict


def window_excluded(bounds: TimeBounds, window: tuple[float, float]) -> bool:
    """Whether `bounds` leave no instant of the half-open window [start_s, end_s)."""
    low, high = bounds.low, bounds.high
    if low is not None and high is not None and (low > high or (low == high and (bounds.low_strict or
                                                                                 bounds.high_strict))):
        return False  # contradictory: the bounds come from different scans of the table
    start, end = window
    if high is not None and (high < start or (high == start and bounds.high_strict)):
        return True
    return low is not None and low >= end


# ---------------------------------------------------------------- reveals and signals


def _replica_name(ref: int | str | None) -> str | None:
    if ref is None:
        return None
    index = replica_index(ref)
    return f"vllm-{index}" if index is not None else str(ref)


def read_observes(read: Read, reveal: Reveal, t0: datetime) -> bool:
    """Whether `read` saw the place `reveal` names (see the module docstring for the rule)."""
    if read.table.lower() != reveal.table.lower():
        return False
    if not {c.lower() for c in reveal.columns} <= columns_read(read):
        return False
    if reveal.counts and not read.counted:
        return False
    replica = _replica_name(reveal.replica)
    if replica is not None:
        verdicts = [replica_admits(f, replica) for f in read.filters]
        parsed = [v for v in verdicts if v is not None]
        if parsed and not any(parsed):
            return False
    return not (reveal.window is not None and window_excluded(ts_bounds(read.filters, t0), reveal.window))


def signal_observed(signal: Signal, reads: Sequence[Read], t0: datetime) -> bool:
    """Whether any read observed any of the signal's reveals."""
    return any(read_observes(r, rv, t0) for r in reads for rv in signal.reveals)


def observed_signals(incident: Incident, reads: Iterable[Any], ok: bool = True) -> list[str]:
    """Ids of the incident's signals one query observed, in incident order; [] for a failed query.

    `reads` are TableRead objects, Reads or their dicts."""
    if not ok:
        return []
    parsed = [Read.of(r) for r in reads]
    t0 = incident.window.start
    return [s.id for s in incident.signals if signal_observed(s, parsed, t0)]


def is_schema_exploration(sql: str, reads: Iterable[Any]) -> bool:
    """A query about the database's shape rather than its data: DESCRIBE/SHOW/SUMMARIZE, the catalog
    view or DuckDB's metadata functions, reading no telemetry table other than the catalog."""
    tables = {Read.of(r).table.lower() for r in reads}
    if tables - SCHEMA_TABLES:
        return sql.strip().lower().startswith(("describe", "show", "summarize"))
    return bool(_SCHEMA_WORDS.search(_strip_literals(sql)))


def decomposes_latency(reads: Iterable[Any]) -> bool:
    """Whether a query read the requests table's latency parts (queue_s and prefill_s, or ttft_s and
    decode_s), whatever it did with them."""
    for raw in reads:
        read = Read.of(raw)
        if read.table.lower() != "requests":
            continue
        cols = columns_read(read)
        if any(split <= cols for split in LATENCY_SPLITS):
            return True
    return False


def is_latency_incident(incident: Incident) -> bool:
    """Tagged as a latency incident: a tag containing "latency" or "ttft"."""
    return any("latency" in t.lower() or "ttft" in t.lower() for t in incident.tags)
