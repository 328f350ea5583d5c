"""Context, timing and distinct-count claims: what each computes (on a hand-made database), how the proof
judges them with and without the faults (on a simulated fixture), and what the static check refuses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from incidents.claims import ClaimResult, evaluate_symptom
from incidents.loader import check_incident_text, load_incident_text
from incidents.spec import Symptom
from telemetry_gen.proving.proof import ClaimCheck, ProofReport, prove

pytestmark = pytest.mark.slow  # proves fixture incidents (simulations with and without faults)

DATA = Path(__file__).parent / "data" / "incidents"
FIXTURE = DATA / "proof-context-claims.yaml"
T0 = datetime(2025, 3, 4, 9, 0, 0)


# ---------------------------------------------------------------- what the aggregates compute


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    """Crashes at t=700 (vllm-1), 900 (vllm-0) and 1300 (vllm-1); a NULL replica at 1500 (fleet-wide)."""
    db = duckdb.connect()
    db.execute("CREATE TABLE events (ts TIMESTAMP, replica VARCHAR, kind VARCHAR)")
    rows = [(700.5, "vllm-1", "crash"), (900, "vllm-0", "crash"), (1300, "vllm-1", "crash"),
            (1500, None, "crash"), (100, "vllm-0", "deploy")]
    db.executemany("INSERT INTO events VALUES (?, ?, ?)",
                   [(T0 + timedelta(seconds=t), r, k) for t, r, k in rows])
    return db


def claim(**overrides: Any) -> Symptom:
    base: dict[str, Any] = {"id": "s", "claim": "c", "metric": {"table": "events", "column": "ts",
                            "where": "kind = 'crash'"}, "aggregate": "first", "a": {"window": [0, 1800]},
                            "compare": "at_least", "value": 600}
    base.update(overrides)
    return Symptom.model_validate(base)


def test_first_and_last_are_seconds_after_t0(con: duckdb.DuckDBPyConnection) -> None:
    first = evaluate_symptom(con, claim(), T0)
    assert first.holds and first.observed == pytest.approx(700.5)
    assert "700 s" in first.message or "700.5 s" in first.message
    assert not evaluate_symptom(con, claim(value=701), T0).holds
    last = evaluate_symptom(con, claim(aggregate="last", compare="at_most", value=1500), T0)
    assert last.holds and last.observed == pytest.approx(1500)
    # a window narrows the rows: the first crash after 800 s is the one at 900
    later = evaluate_symptom(con, claim(a={"window": [800, 1800]}), T0)
    assert later.observed == pytest.approx(900)


def test_first_of_no_rows_fails_so_it_is_evidence(con: duckdb.DuckDBPyConnection) -> None:
    """"The first OOM came after the peak" is false when there is no OOM at all (the run without the fault)."""
    result = evaluate_symptom(con, claim(metric={"table": "events", "column": "ts", "where": "kind = 'oom'"}), T0)
    assert not result.holds and "selects no rows" in result.message


def test_difference_of_first_times_orders_two_events(con: duckdb.DuckDBPyConnection) -> None:
    # the first crash on vllm-0 came 199.5 s after the first on vllm-1
    result = evaluate_symptom(con, claim(a={"where": "replica = 'vllm-0'"}, b={"where": "replica = 'vllm-1'"},
                                         compare="difference_at_least", value=199), T0)
    assert result.holds and result.observed == pytest.approx(199.5)


def test_distinct_counts_values_not_rows(con: duckdb.DuckDBPyConnection) -> None:
    two = claim(metric={"table": "events", "column": "replica", "where": "kind = 'crash'"}, aggregate="distinct",
                compare="at_least", value=2)
    result = evaluate_symptom(con, two, T0)
    # three crashes on two replicas (and one with no replica): NULL is no value
    assert result.holds and result.observed == 2
    assert not evaluate_symptom(con, claim(**{**two.model_dump(), "value": 3}), T0).holds
    # over no rows it is 0, like count: "no replica crashed before 600 s" holds
    none_yet = claim(**{**two.model_dump(), "a": {"window": [0, 600]}, "compare": "at_most", "value": 0})
    assert evaluate_symptom(con, none_yet, T0).holds


# ---------------------------------------------------------------- how the proof judges them


def _result(holds: bool) -> ClaimResult:
    return ClaimResult(holds, 1.0, None, 1.0, 1.0, "count of x: 1; required <= 1")


@pytest.mark.parametrize(("context", "with_faults", "without", "ok"), [
    (False, True, False, True),   # evidence: the fault makes it true
    (False, True, True, False),   # evidence that holds anyway proves nothing
    (True, True, True, True),     # context: true either way
    (True, True, False, False),   # "context" that needs the fault is evidence
    (True, False, True, False),   # the page states it, so it must hold with the faults
])
def test_context_claims_must_hold_with_and_without_the_faults(
    context: bool, with_faults: bool, without: bool, ok: bool
) -> None:

    check = ClaimCheck("s", "c", "at_most", _result(with_faults), _result(without), context=context)
    assert check.ok is ok
    assert (check.problem is None) is ok
    assert check.to_dict()["context"] is context


def test_problems_say_which_way_to_go() -> None:
    holds_anyway = ClaimCheck("s", "c", "at_most", _result(True), _result(True))
    assert "mark it `context: true`" in (holds_anyway.problem or "")
    needs_fault = ClaimCheck("s", "c", "at_most", _result(True), _result(False), context=True)
    problem = needs_fault.problem or ""
    assert problem.startswith("context symptom s does not hold without the faults")
    assert "remove `context: true`" in problem


@pytest.fixture(scope="module")
def _cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield library_cache


def _prove(text: str) -> ProofReport:
    return prove(load_incident_text(text, "fixture.yaml"), 0, worlds=False)


@pytest.fixture(scope="module")
def report(_cache: Path) -> ProofReport:
    return _prove(FIXTURE.read_text())


def _check(report: ProofReport, ident: str) -> ClaimCheck:
    [found] = [c for c in report.claims if c.symptom_id == ident]
    return found


def test_simulated_context_claims_hold_on_both_runs(report: ProofReport) -> None:
    assert report.ok, report.problems()
    for ident in ("nothing-failed", "clocks-nominal-before"):
        check = _check(report, ident)
        assert check.context and check.with_faults.holds and check.without_faults.holds
    assert report.worlds == [] and not report.worlds_checked
    assert any("claims only" in line for line in report.lines())


def test_simulated_timing_and_distinct_claims_need_the_fault(report: ProofReport) -> None:
    timing = _check(report, "clock-fell-at-the-slowdown")
    # the throttle starts at 200 s; the first low clock sample is the next scrape
    assert 200 <= float(timing.with_faults.observed or 0) <= 220
    assert not timing.without_faults.holds and "selects no rows" in timing.without_faults.message
    distinct = _check(report, "one-replica-throttled")
    assert distinct.with_faults.observed == 1 and distinct.without_faults.observed == 0


def test_context_flag_on_an_effect_of_the_fault_fails(_cache: Path) -> None:
    timing = "    briefed: false\n    metric: {table: metrics, column: ts,"
    text = FIXTURE.read_text().replace(timing, timing.replace("    metric:", "    context: true\n    metric:"))
    check = _check(_prove(text), "clock-fell-at-the-slowdown")
    assert check.context and not check.ok
    assert "does not hold without the faults" in (check.problem or "")


def test_without_the_context_flag_a_fact_fails_the_ablation_rule(_cache: Path) -> None:
    text = FIXTURE.read_text().replace("    context: true\n    metric: {table: requests",
                                       "    metric: {table: requests", 1)
    check = _check(_prove(text), "nothing-failed")
    assert not check.context and not check.ok
    assert "also holds without the faults" in (check.problem or "")


# ---------------------------------------------------------------- what the static check refuses


def _line(text: str, needle: str, after: int = 0) -> int:
    """1-based number of the first line after line `after` that contains `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), start=1) if i > after and needle in line)


def test_a_timing_claim_must_read_ts() -> None:
    text = FIXTURE.read_text().replace("{table: metrics, column: ts, where", "{table: metrics, column: value, where")
    [diag] = check_incident_text(text, "f.yaml")
    assert diag.line == _line(text, "column: value, where", after=_line(text, "id: clock-fell-at-the-slowdown"))
    assert "aggregate 'first'" in diag.message and "ts" in (diag.hint or "")


def test_a_numeric_aggregate_of_a_text_column_is_refused() -> None:
    text = FIXTURE.read_text().replace("{table: requests, column: prefill_s,", "{table: requests, column: replica,")
    [diag] = check_incident_text(text, "f.yaml")
    assert "aggregate 'p90' needs a numeric column; requests.replica is VARCHAR" in diag.message
    assert "distinct" in (diag.hint or "")


def test_an_incident_of_context_claims_only_is_refused_but_loads() -> None:
    text = FIXTURE.read_text()
    for ident in ("prefill-slow-on-part", "clock-fell-at-the-slowdown", "one-replica-throttled"):
        start = text.index(f"  - id: {ident}\n")
        end = text.find("  - id: ", start + 1)
        end = text.index("hypotheses:") if end < 0 or end > text.index("hypotheses:") else end
        text = text[:start] + text[end:]
    [diag] = check_incident_text(text, "f.yaml")
    assert "every symptom is `context: true`" in diag.message
    assert diag.line == _line(text, "symptoms:")
    load_incident_text(text, "f.yaml")  # a drill may still play it; `validate` refuses it
