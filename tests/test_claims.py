"""Claims against a small hand-made telemetry database whose answers are known by construction."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from incidents.claims import (
    ClaimResult,
    evaluate_expectation,
    evaluate_incident,
    evaluate_symptom,
    symptom_sql,
    window_bounds_sql,
)
from incidents.loader import render_template
from incidents.spec import Incident, Signal, Symptom

T0 = datetime(2025, 3, 4, 9, 0, 0)
BEFORE = [0, 3600]
AFTER = [3600, 7200]
# Before t=3600 every ok request has ttft 1.0; after it, request i (0..59) has ttft i + 1, on
# replica vllm-(i % 2). Six failed requests (ttft NULL) arrive after t=3600.
AFTER_TTFT = np.arange(1.0, 61.0)


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()
    db.execute(
        "CREATE TABLE requests (request_id BIGINT, ts TIMESTAMP, replica VARCHAR, status VARCHAR, "
        "ttft_s DOUBLE, prompt_tokens BIGINT)"
    )
    rows: list[tuple[Any, ...]] = []
    for i in range(60):
        rows.append((i, T0 + timedelta(seconds=30 + 60 * i), f"vllm-{i % 2}", "ok", 1.0, 100))
    for i in range(60):
        rows.append(
            (100 + i, T0 + timedelta(seconds=3630 + 60 * i), f"vllm-{i % 2}", "ok", float(AFTER_TTFT[i]), 100 + i)
        )
    for i in range(6):
        rows.append((200 + i, T0 + timedelta(seconds=3700 + 500 * i), "vllm-0", "error", None, 50))
    db.executemany("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?)", rows)
    db.execute("CREATE TABLE metrics (ts TIMESTAMP, replica VARCHAR, name VARCHAR, value DOUBLE)")
    samples = []
    for t in range(0, 7200, 10):
        # a counter that grows by one per scrape on vllm-0 and stays at 5 on vllm-1
        samples.append((T0 + timedelta(seconds=t), "vllm-0", "vllm:num_preemptions_total", t / 10))
        samples.append((T0 + timedelta(seconds=t), "vllm-1", "vllm:num_preemptions_total", 5.0))
    db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)", samples)
    return db


def symptom(**overrides: Any) -> Symptom:
    base: dict[str, Any] = {
        "id": "s",
        "claim": "c",
        "metric": {"table": "requests", "column": "ttft_s", "where": "status = 'ok'"},
        "aggregate": "p99",
        "a": {"window": AFTER},
        "b": {"window": BEFORE},
        "compare": "ratio_at_least",
        "value": 2.5,
    }
    base.update(overrides)
    return Symptom.model_validate(base)


def signal(query: str, expect: dict[str, Any]) -> Signal:
    return Signal.model_validate(
        {
            "id": "sig",
            "shows": "s",
            "reveals": [{"table": "requests", "columns": ["ttft_s"]}],
            "query": query,
            "expect": expect,
        }
    )


# ---------------------------------------------------------------- symptoms


def test_ratio_claim_holds_and_message_names_windows(con: duckdb.DuckDBPyConnection) -> None:
    result = evaluate_symptom(con, symptom(aggregate="p50"), T0)
    expected = np.percentile(AFTER_TTFT, 50) / 1.0
    assert result.holds
    assert result.a_value == pytest.approx(np.percentile(AFTER_TTFT, 50))
    assert result.b_value == pytest.approx(1.0)
    assert result.observed == pytest.approx(expected)
    assert result.message == (
        f"p50 of requests.ttft_s: {expected:.3g}x (window 3600-7200 s vs 0-3600 s); required >= 2.5x"
    )


def test_ratio_claim_that_is_too_strong_fails(con: duckdb.DuckDBPyConnection) -> None:
    result = evaluate_symptom(con, symptom(aggregate="mean", value=31.0), T0)
    assert not result.holds
    assert result.observed == pytest.approx(30.5)
    assert "required >= 31x" in result.message


@pytest.mark.parametrize(
    ("aggregate", "expected"),
    [
        ("mean", float(np.mean(AFTER_TTFT))),
        ("p50", float(np.percentile(AFTER_TTFT, 50))),
        ("p90", float(np.percentile(AFTER_TTFT, 90))),
        ("p95", float(np.percentile(AFTER_TTFT, 95))),
        ("p99", float(np.percentile(AFTER_TTFT, 99))),
        ("max", 60.0),
        ("min", 1.0),
        ("sum", float(AFTER_TTFT.sum())),
        ("count", 60.0),
        ("rate", 60 / 3600),
        ("increase", 59.0),
    ],
)
def test_each_aggregate_matches_numpy(con: duckdb.DuckDBPyConnection, aggregate: str, expected: float) -> None:
    one_sided = symptom(aggregate=aggregate, b=None, compare="at_least", value=0.0)
    result = evaluate_symptom(con, one_sided, T0)
    assert result.holds
    assert result.a_value == pytest.approx(expected, rel=1e-12)
    assert result.b_value is None


def test_percentile_of_an_integer_column_interpolates(con: duckdb.DuckDBPyConnection) -> None:
    # prompt_tokens after t=3600 are 100..159: the p50 lies between two integers
    s = symptom(
        metric={"table": "requests", "column": "prompt_tokens", "where": "status = 'ok'"},
        aggregate="p50",
        b=None,
        compare="at_least",
        value=0,
    )
    assert evaluate_symptom(con, s, T0).a_value == pytest.approx(129.5)


@pytest.mark.parametrize(
    ("compare", "value", "holds"),
    [
        ("ratio_at_least", 30.5, True),
        ("ratio_at_least", 30.6, False),
        ("ratio_at_most", 30.5, True),
        ("ratio_at_most", 30.4, False),
        ("difference_at_least", 29.5, True),
        ("difference_at_least", 29.6, False),
        ("difference_at_most", 29.5, True),
        ("difference_at_most", 29.4, False),
    ],
)
def test_two_sided_comparisons_and_their_boundaries(
    con: duckdb.DuckDBPyConnection, compare: str, value: float, holds: bool
) -> None:
    # mean after = 30.5, mean before = 1.0
    result = evaluate_symptom(con, symptom(aggregate="mean", compare=compare, value=value), T0)
    assert result.holds is holds
    observed = 30.5 if compare.startswith("ratio") else 29.5
    assert result.observed == pytest.approx(observed)


@pytest.mark.parametrize(
    ("compare", "value", "holds"),
    [
        ("at_least", 60.0, True),
        ("at_least", 60.5, False),
        ("at_most", 60.0, True),
        ("at_most", 59.9, False),
    ],
)
def test_one_sided_comparisons(con: duckdb.DuckDBPyConnection, compare: str, value: float, holds: bool) -> None:
    result = evaluate_symptom(con, symptom(aggregate="max", b=None, compare=compare, value=value), T0)
    assert result.holds is holds
    op = ">=" if compare == "at_least" else "<="
    assert result.message == f"max of requests.ttft_s: 60 (window 3600-7200 s); required {op} {value:g}"


def test_difference_message_is_signed(con: duckdb.DuckDBPyConnection) -> None:
    result = evaluate_symptom(
        con,
        symptom(aggregate="mean", a={"window": BEFORE}, b={"window": AFTER}, compare="difference_at_most", value=0),
        T0,
    )
    assert result.holds
    assert result.message.startswith("mean of requests.ttft_s: -29.5 (window 0-3600 s vs 3600-7200 s)")


def test_groups_are_compared_through_side_filters(con: duckdb.DuckDBPyConnection) -> None:
    # after t=3600, vllm-1 got the even ttft values (2..60) and vllm-0 the odd ones (1..59)
    s = symptom(
        aggregate="mean",
        a={"window": AFTER, "where": "replica = 'vllm-1'"},
        b={"window": AFTER, "where": "replica = 'vllm-0'"},
        compare="difference_at_least",
        value=1.0,
    )
    result = evaluate_symptom(con, s, T0)
    assert result.holds
    assert (result.a_value, result.b_value) == (pytest.approx(31.0), pytest.approx(30.0))
    assert "where replica = 'vllm-1' vs 3600-7200 s, where replica = 'vllm-0'" in result.message


def test_counter_increase_is_filtered_by_replica(con: duckdb.DuckDBPyConnection) -> None:
    metric = {"table": "metrics", "column": "value", "where": "name = 'vllm:num_preemptions_total'"}
    busy = symptom(
        metric=metric,
        aggregate="increase",
        a={"window": AFTER, "where": "replica = 'vllm-0'"},
        b=None,
        compare="at_least",
        value=359,
    )
    idle = symptom(
        metric=metric,
        aggregate="increase",
        a={"window": AFTER, "where": "replica = 'vllm-1'"},
        b=None,
        compare="at_most",
        value=0,
    )
    assert evaluate_symptom(con, busy, T0).a_value == pytest.approx(359.0)  # samples 3600..7190 s
    assert evaluate_symptom(con, busy, T0).holds
    assert evaluate_symptom(con, idle, T0).holds


def test_error_rate_uses_the_window_length(con: duckdb.DuckDBPyConnection) -> None:
    s = symptom(
        metric={"table": "requests", "column": "request_id"},
        aggregate="rate",
        a={"window": AFTER, "where": "status = 'error'"},
        b=None,
        compare="at_most",
        value=0.001,
    )
    result = evaluate_symptom(con, s, T0)
    assert result.a_value == pytest.approx(6 / 3600)
    assert not result.holds


def test_windows_are_half_open(con: duckdb.DuckDBPyConnection) -> None:
    # ok requests after t=3600 arrive at 3630, 3690, ...: [3630, 3690) holds exactly one of them
    count = symptom(aggregate="count", a={"window": [3630, 3690]}, b=None, compare="at_least", value=0)
    assert evaluate_symptom(con, count, T0).a_value == 1
    fractional = symptom(aggregate="count", a={"window": [3629.9995, 3630.0005]}, b=None, compare="at_least", value=0)
    assert evaluate_symptom(con, fractional, T0).a_value == 1
    just_after = symptom(aggregate="count", a={"window": [3630.000001, 3690]}, b=None, compare="at_least", value=0)
    # no rows at all in that side: a count of nothing is 0, not an error
    assert evaluate_symptom(con, just_after, T0).a_value == 0
    at_least_one = symptom(aggregate="count", a={"window": [3630.000001, 3690]}, b=None, compare="at_least", value=1)
    assert evaluate_symptom(con, at_least_one, T0).holds is False


def test_empty_side_fails_with_a_message_not_an_exception(con: duckdb.DuckDBPyConnection) -> None:
    empty_a = evaluate_symptom(con, symptom(a={"window": [8000, 9000]}), T0)
    assert not empty_a.holds and "side a selects no rows" in empty_a.message and empty_a.observed is None
    empty_b = evaluate_symptom(con, symptom(b={"window": [8000, 9000]}), T0)
    assert not empty_b.holds and "side b selects no rows" in empty_b.message


def test_side_with_only_nulls_fails(con: duckdb.DuckDBPyConnection) -> None:
    s = symptom(
        metric={"table": "requests", "column": "ttft_s"},
        aggregate="mean",
        a={"window": AFTER, "where": "status = 'error'"},
        b=None,
        compare="at_least",
        value=0,
    )
    result = evaluate_symptom(con, s, T0)
    assert not result.holds and "no non-null values" in result.message


def test_ratio_with_zero_denominator_fails(con: duckdb.DuckDBPyConnection) -> None:
    metric = {"table": "metrics", "column": "value", "where": "name = 'vllm:num_preemptions_total'"}
    s = symptom(
        metric=metric,
        aggregate="increase",
        a={"window": AFTER, "where": "replica = 'vllm-0'"},
        b={"window": AFTER, "where": "replica = 'vllm-1'"},
        compare="ratio_at_least",
        value=2,
    )
    result = evaluate_symptom(con, s, T0)
    assert not result.holds and "ratio undefined: side b is 0" in result.message


def test_broken_sql_fails_with_a_message(con: duckdb.DuckDBPyConnection) -> None:
    s = symptom(metric={"table": "requests", "column": "ttft_s", "where": "no_such_column = 1"})
    result = evaluate_symptom(con, s, T0)
    assert not result.holds and "query failed" in result.message


def test_symptom_sql_is_one_select_with_timestamp_bounds() -> None:
    sql = symptom_sql(symptom(), T0)
    statements = duckdb.connect().extract_statements(sql)
    assert len(statements) == 1 and statements[0].type == duckdb.StatementType.SELECT
    assert "TIMESTAMP '2025-03-04 09:00:00.000000' + INTERVAL 3600 SECOND" in sql
    assert "quantile_cont" in sql
    assert "b_value" in sql and "NULL AS b_value" not in sql
    assert "NULL AS b_value" in symptom_sql(symptom(b=None, compare="at_least"), T0)


def test_window_bounds_select_the_right_instants() -> None:
    db = duckdb.connect()
    db.execute("CREATE TABLE t (ts TIMESTAMP)")
    db.executemany("INSERT INTO t VALUES (?)", [(T0 + timedelta(seconds=s),) for s in (9.999999, 10, 10.5, 20)])
    cond = window_bounds_sql(T0, (10, 20))
    assert db.execute(f"SELECT count(*) FROM t WHERE {cond}").fetchone() == (2,)
    cond = window_bounds_sql(T0, (10.25, 20.0))
    assert db.execute(f"SELECT count(*) FROM t WHERE {cond}").fetchone() == (1,)


@functools.cache
def _scratch() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.floats(0.01, 100), min_size=1, max_size=30),
    st.lists(st.floats(0.01, 100), min_size=1, max_size=30),
    st.sampled_from(["p50", "p90", "p95", "p99", "mean", "max"]),
)
def test_ratio_matches_numpy_on_random_data(a: list[float], b: list[float], aggregate: str) -> None:
    db = _scratch()
    rows = [(5000 + i, v) for i, v in enumerate(a)] + [(10 + i, v) for i, v in enumerate(b)]
    values = ", ".join(f"({s}, {v!r})" for s, v in rows)
    db.execute(
        "CREATE OR REPLACE TABLE requests AS SELECT TIMESTAMP '2025-03-04 09:00:00' + to_seconds(s) AS ts, "
        f"v AS ttft_s, 'ok' AS status FROM (VALUES {values}) AS r(s, v)"
    )

    def agg(x: list[float]) -> float:
        if aggregate == "mean":
            return float(np.mean(x))
        if aggregate == "max":
            return float(np.max(x))
        return float(np.percentile(x, int(aggregate[1:])))

    result = evaluate_symptom(db, symptom(aggregate=aggregate, value=1.0), T0)
    expected = agg(a) / agg(b)
    assert result.observed == pytest.approx(expected, rel=1e-9)
    assert result.holds is (expected >= 1.0)


# ---------------------------------------------------------------- signal expectations

BY_REPLICA = (
    "SELECT replica, avg(ttft_s) AS mean_ttft, count(*) AS n FROM requests "
    "WHERE status = 'ok' AND ts >= TIMESTAMP '2025-03-04 10:00:00' GROUP BY replica ORDER BY mean_ttft DESC"
)


@pytest.mark.parametrize(
    ("expect", "holds"),
    [
        ({"column": "replica", "op": "==", "value": "vllm-1"}, True),
        ({"column": "replica", "op": "==", "value": "vllm-0"}, False),
        ({"column": "replica", "op": "!=", "value": "vllm-0"}, True),
        ({"column": "replica", "op": "==", "value": "vllm-0", "row": 1}, True),
        ({"column": "mean_ttft", "op": "==", "value": 31.0}, True),
        ({"column": "mean_ttft", "op": "==", "value": 31.0 + 1e-12}, True),  # float equality is approximate
        ({"column": "mean_ttft", "op": ">", "value": 31.0}, False),
        ({"column": "mean_ttft", "op": ">=", "value": 31.0}, True),
        ({"column": "mean_ttft", "op": "<", "value": 31.5}, True),
        ({"column": "mean_ttft", "op": "<=", "value": 30.9}, False),
        ({"column": "n", "op": "==", "value": 30}, True),
        ({"rows_at_least": 2}, True),
        ({"rows_at_least": 3}, False),
    ],
)
def test_expectation_checks_cells_and_row_counts(
    con: duckdb.DuckDBPyConnection, expect: dict[str, Any], holds: bool
) -> None:
    result = evaluate_expectation(con, signal(BY_REPLICA, expect))
    assert result.holds is holds, result.message


def test_expectation_message(con: duckdb.DuckDBPyConnection) -> None:
    result = evaluate_expectation(con, signal(BY_REPLICA, {"column": "mean_ttft", "op": ">", "value": 30}))
    assert result.message == "signal sig: mean_ttft = 31 (row 0); required > 30"
    assert (result.a_value, result.observed, result.required) == (31.0, 31.0, 30)


@pytest.mark.parametrize(
    ("query", "expect", "fragment"),
    [
        (BY_REPLICA, {"column": "p99", "op": ">", "value": 1}, "no column 'p99' (columns: replica, mean_ttft, n)"),
        (BY_REPLICA, {"column": "replica", "op": "==", "value": "vllm-1", "row": 5}, "returned 2 rows"),
        ("SELECT nope FROM requests", {"rows_at_least": 1}, "query failed"),
        ("SELECT NULL AS x", {"column": "x", "op": "==", "value": 1}, "x is NULL in row 0"),
        ("SELECT 'abc' AS x", {"column": "x", "op": ">", "value": 1}, "cannot compare x = 'abc' with 1"),
        ("SELECT 1 AS x WHERE false", {"rows_at_least": 1}, "0 rows; required >= 1"),
    ],
)
def test_expectation_failures_explain_themselves(
    con: duckdb.DuckDBPyConnection, query: str, expect: dict[str, Any], fragment: str
) -> None:
    result = evaluate_expectation(con, signal(query, expect))
    assert not result.holds
    assert fragment in result.message


def test_connection_is_usable_after_a_partially_read_result(con: duckdb.DuckDBPyConnection) -> None:
    big = signal("SELECT * FROM range(1000000) AS r(i)", {"rows_at_least": 3})
    assert evaluate_expectation(con, big).holds
    assert con.execute("SELECT count(*) FROM requests").fetchone() == (126,)


def test_evaluate_incident_labels_every_claim(con: duckdb.DuckDBPyConnection) -> None:
    from incidents.loader import load_incident_text

    inc: Incident = load_incident_text(render_template("claims-test"))
    results = evaluate_incident(con, inc)
    assert [label for label, _ in results] == (
        [f"symptom {s.id}" for s in inc.symptoms] + [f"signal {s.id}" for s in inc.signals]
    )
    assert all(isinstance(r, ClaimResult) for _, r in results)
