"""Check an incident's claims against its built telemetry database.

Symptoms become one SQL query each (pure text generation, `symptom_sql`); signals run their
reference query and compare a cell or the row count with `expect`. Evaluation never raises
for a claim that does not hold or cannot be evaluated (no rows, a failing query): it returns
a ClaimResult with holds=False and a message that says why.

Times: a side's window [start_s, end_s) is simulated seconds after t0, the naive-UTC
wall-clock instant of t=0 (`Incident.window.start`), matching the TIMESTAMP `ts` columns. The
timing aggregates `first` / `last` give the side's earliest / latest `ts` in the same seconds, so
"the first OOM came after the peak began" is `first` compared `at_least` the peak's start.

Counting aggregates (count, sum, rate, distinct) are 0 over no rows: "no crash before T" is a count
`at_most` 0 over [0, T). The others fail on a side that selects no rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import duckdb

from incidents.spec import ExpectRows, Incident, Side, Signal, Symptom

_PERCENTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
_FLOAT_EQ_REL = 1e-9
_FLOAT_EQ_ABS = 1e-12

Scalar = float | int | str | bool | None


@dataclass(frozen=True)
class ClaimResult:
    """Outcome of one claim.

    a_value / b_value: the aggregates of the two sides (b_value None for one-sided claims), or
    for an expectation the observed cell (or row count). observed: the compared quantity
    (ratio, difference or value). required: the threshold. holds is False whenever the claim
    could not be evaluated.
    """

    holds: bool
    a_value: Scalar
    b_value: Scalar
    observed: Scalar
    required: Scalar
    message: str


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _seconds_interval(seconds: float) -> str:
    if float(seconds).is_integer():
        return f"INTERVAL {int(seconds)} SECOND"
    return f"INTERVAL {round(seconds * 1_000_000)} MICROSECOND"


def _timestamp(t0: datetime) -> str:
    return f"TIMESTAMP '{t0.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def window_bounds_sql(t0: datetime, window: tuple[float, float], column: str = "ts") -> str:
    """SQL boolean: `column` within [t0 + start_s, t0 + end_s)."""
    start, end = window
    ts = _timestamp(t0)
    col = _quote(column)
    return f"{col} >= {ts} + {_seconds_interval(start)} AND {col} < {ts} + {_seconds_interval(end)}"


def _aggregate_sql(aggregate: str, column: str, window: tuple[float, float] | None, t0: datetime) -> str:
    # cast: quantile_cont of an integer column would otherwise return an integer
    x = f"CAST({_quote(column)} AS DOUBLE)"
    if aggregate in ("first", "last"):
        # seconds after t=0, so a timing claim compares with the times written elsewhere in the file
        edge = "min" if aggregate == "first" else "max"
        return f"date_diff('microsecond', {_timestamp(t0)}, {edge}({_quote(column)})) / 1e6"
    if aggregate == "distinct":
        return f"count(DISTINCT {_quote(column)})"
    if aggregate in _PERCENTILES:
        return f"quantile_cont({x}, {_PERCENTILES[aggregate]})"
    if aggregate == "mean":
        return f"avg({x})"
    if aggregate in ("max", "min", "sum"):
        return f"{aggregate}({x})"
    if aggregate == "count":
        return f"count({_quote(column)})"
    if aggregate == "rate":
        if window is None:
            raise ValueError("aggregate 'rate' needs a window")
        return f"count({_quote(column)}) / {float(window[1] - window[0])!r}"
    if aggregate == "increase":
        return f"max({x}) - min({x})"
    raise ValueError(f"unknown aggregate {aggregate!r}")


def _side_sql(symptom: Symptom, side: Side, t0: datetime) -> str:
    filters = [f"({symptom.metric.where})"] if symptom.metric.where else []
    if side.where:
        filters.append(f"({side.where})")
    if side.window is not None:
        filters.append(window_bounds_sql(t0, side.window))
    where = " WHERE " + " AND ".join(filters) if filters else ""
    agg = _aggregate_sql(symptom.aggregate, symptom.metric.column, side.window, t0)
    return f"SELECT {agg} AS v, count(*) AS n FROM {_quote(symptom.metric.table)}{where}"


def symptom_sql(symptom: Symptom, t0: datetime) -> str:
    """One SELECT returning a single row (a_value, a_rows, b_value, b_rows).

    a_rows / b_rows count the rows each side selected (b_* are NULL for a one-sided claim).
    """
    a = _side_sql(symptom, symptom.a, t0)
    if symptom.b is None:
        return f"SELECT a.v AS a_value, a.n AS a_rows, NULL AS b_value, NULL AS b_rows\nFROM ({a}) AS a"
    b = _side_sql(symptom, symptom.b, t0)
    return f"SELECT a.v AS a_value, a.n AS a_rows, b.v AS b_value, b.n AS b_rows\nFROM ({a}) AS a, ({b}) AS b"


def symptom_series_sql(symptom: Symptom, t0: datetime, bucket_s: int = 300) -> str:
    """The symptom's measure over time, one row per `bucket_s` bucket of its table's whole window
    (columns t, v): the page's own symptom as a player re-measures it. Side filters and windows are left
    out: this is the measure, not the claim."""
    where = f" WHERE ({symptom.metric.where})" if symptom.metric.where else ""
    aggregate = "count" if symptom.aggregate == "rate" else symptom.aggregate
    if aggregate in ("first", "last"):
        aggregate = "count"
    agg = _aggregate_sql(aggregate, symptom.metric.column, None, t0)
    return (f"SELECT time_bucket(INTERVAL {int(bucket_s)} SECOND, ts) AS t, {agg} AS v "
            f"FROM {_quote(symptom.metric.table)}{where} GROUP BY 1 ORDER BY 1")


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    if abs(x) >= 100:
        return f"{x:.1f}"
    return f"{x:.3g}"


def _side_text(side: Side) -> str:
    parts = []
    if side.window is not None:
        parts.append(f"{_fmt(side.window[0])}-{_fmt(side.window[1])} s")
    if side.where:
        parts.append(f"where {side.where}")
    return ", ".join(parts) if parts else "whole run"


def _sides_text(symptom: Symptom) -> str:
    a, b = symptom.a, symptom.b
    if b is None:
        return f"window {_side_text(a)}" if a.window is not None else _side_text(a)
    if a.window is not None and b.window is not None and not a.where and not b.where:
        return f"window {_side_text(a)} vs {_side_text(b)}"
    return f"{_side_text(a)} vs {_side_text(b)}"


def _as_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        return float(value)
    return None


_ZERO_WHEN_EMPTY = frozenset({"count", "sum", "rate", "distinct"})


def claim_label(symptom: Symptom) -> str:
    """What a symptom measures, for messages: 'p90 of requests.ttft_s', 'first events row (s after t=0)'."""
    table, column = symptom.metric.table, symptom.metric.column
    if symptom.aggregate in ("first", "last"):
        return f"{symptom.aggregate} {table} row (s after t=0)"
    if symptom.aggregate == "distinct":
        return f"distinct {table}.{column}"
    return f"{symptom.aggregate} of {table}.{column}"


def evaluate_symptom(con: duckdb.DuckDBPyConnection, symptom: Symptom, t0: datetime) -> ClaimResult:
    """Evaluate one symptom on the database behind `con`; see the module docstring for semantics."""
    label = claim_label(symptom)
    sides = _sides_text(symptom)
    required = float(symptom.value)

    def fail(why: str, a: Scalar = None, b: Scalar = None) -> ClaimResult:
        return ClaimResult(False, a, b, None, required, f"{label}: {why} ({sides})")

    try:
        row = con.execute(symptom_sql(symptom, t0)).fetchone()
    except duckdb.Error as exc:
        return fail(f"query failed: {str(exc).splitlines()[0]}")
    if row is None:
        return fail("query returned nothing")
    a_raw, a_rows, b_raw, b_rows = row
    a_value, b_value = _as_float(a_raw), _as_float(b_raw)
    # counting aggregates have a value over no rows: nothing happened, so 0
    if symptom.aggregate in _ZERO_WHEN_EMPTY:
        a_value = a_value if a_rows and a_value is not None else 0.0
        a_rows = 1
        if symptom.b is not None:
            b_value = b_value if b_rows and b_value is not None else 0.0
            b_rows = 1
    if not a_rows:
        return fail("side a selects no rows")
    if symptom.b is not None and not b_rows:
        return fail("side b selects no rows", a_value)
    if a_value is None:
        return fail("side a has no non-null values", a_value, b_value)
    if symptom.b is not None and b_value is None:
        return fail("side b has no non-null values", a_value, b_value)

    op = ">=" if symptom.compare.endswith("at_least") else "<="
    if symptom.compare.startswith("ratio_"):
        assert b_value is not None
        if b_value == 0:
            return fail(f"ratio undefined: side b is 0 (side a {_fmt(a_value)})", a_value, b_value)
        observed = a_value / b_value
        shown, unit = f"{_fmt(observed)}x", "x"
    elif symptom.compare.startswith("difference_"):
        assert b_value is not None
        observed = a_value - b_value
        shown, unit = ("+" if observed >= 0 else "") + _fmt(observed), ""
    else:
        observed = a_value
        shown, unit = _fmt(observed), ""
    if symptom.aggregate in ("first", "last") and not symptom.compare.startswith("ratio_"):
        shown, unit = f"{shown} s", " s"
    holds = observed >= required if op == ">=" else observed <= required
    message = f"{label}: {shown} ({sides}); required {op} {_fmt(required)}{unit}"
    return ClaimResult(holds, a_value, b_value, observed, required, message)


def _compare(actual: Any, op: str, expected: Any) -> bool | None:
    """actual <op> expected, or None when the two cannot be compared."""
    a_num, e_num = _as_float(actual), _as_float(expected)
    if isinstance(expected, bool) or isinstance(actual, bool):
        if op in ("==", "!=") and isinstance(actual, bool) and isinstance(expected, bool):
            return (actual == expected) == (op == "==")
        return None
    if a_num is not None and e_num is not None:
        equal = math.isclose(a_num, e_num, rel_tol=_FLOAT_EQ_REL, abs_tol=_FLOAT_EQ_ABS)
        return {
            "==": equal,
            "!=": not equal,
            ">=": a_num >= e_num or equal,
            "<=": a_num <= e_num or equal,
            ">": a_num > e_num and not equal,
            "<": a_num < e_num and not equal,
        }[op]
    if isinstance(actual, str) and isinstance(expected, str):
        return {
            "==": actual == expected,
            "!=": actual != expected,
            ">=": actual >= expected,
            "<=": actual <= expected,
            ">": actual > expected,
            "<": actual < expected,
        }[op]
    return None


def evaluate_expectation(con: duckdb.DuckDBPyConnection, signal: Signal) -> ClaimResult:
    """Run the signal's reference query and check its `expect` (a cell or a row count)."""
    expect = signal.expect
    label = f"signal {signal.id}"
    need = expect.rows_at_least if isinstance(expect, ExpectRows) else expect.row + 1
    try:
        con.execute(signal.query)
        columns = [d[0] for d in con.description or []]
        rows = con.fetchmany(max(need, 1))
        con.abort()
    except duckdb.Error as exc:
        required = expect.rows_at_least if isinstance(expect, ExpectRows) else expect.value
        return ClaimResult(False, None, None, None, required, f"{label}: query failed: {str(exc).splitlines()[0]}")

    if isinstance(expect, ExpectRows):
        count = len(rows)
        shown = f"{count}+" if count >= need and need > 0 else str(count)
        holds = count >= expect.rows_at_least
        return ClaimResult(
            holds,
            count,
            None,
            count,
            expect.rows_at_least,
            f"{label}: {shown} rows; required >= {expect.rows_at_least}",
        )

    def fail(why: str, actual: Scalar = None) -> ClaimResult:
        return ClaimResult(False, actual, None, actual, expect.value, f"{label}: {why}")

    if expect.column not in columns:
        return fail(f"query has no column '{expect.column}' (columns: {', '.join(columns)})")
    if len(rows) <= expect.row:
        return fail(f"query returned {len(rows)} rows; expected a value in row {expect.row}")
    actual = rows[expect.row][columns.index(expect.column)]
    if isinstance(actual, Decimal):
        actual = float(actual)
    if actual is None:
        return fail(f"{expect.column} is NULL in row {expect.row}")
    result = _compare(actual, expect.op, expect.value)
    shown = _fmt(actual) if isinstance(actual, int | float) and not isinstance(actual, bool) else repr(actual)
    if result is None:
        return fail(
            f"cannot compare {expect.column} = {shown} with {expect.value!r}",
            actual if isinstance(actual, int | float | str | bool) else str(actual),
        )
    wanted = (
        _fmt(expect.value)
        if isinstance(expect.value, int | float) and not isinstance(expect.value, bool)
        else repr(expect.value)
    )
    return ClaimResult(
        result,
        actual,
        None,
        actual,
        expect.value,
        f"{label}: {expect.column} = {shown} (row {expect.row}); required {expect.op} {wanted}",
    )


def evaluate_incident(con: duckdb.DuckDBPyConnection, incident: Incident) -> list[tuple[str, ClaimResult]]:
    """Every symptom and signal expectation of `incident`, labelled 'symptom <id>' / 'signal <id>'."""
    t0 = incident.window.start
    results = [(f"symptom {s.id}", evaluate_symptom(con, s, t0)) for s in incident.symptoms]
    results += [(f"signal {s.id}", evaluate_expectation(con, s)) for s in incident.signals]
    return results
