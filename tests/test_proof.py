"""Deep validation (telemetry_gen.proving.proof): claims must hold with the faults and fail without them,
expectations must hold, signals must discriminate, and every distractor's world must show what the page
states and be told apart from the truth by some reference query. Two small fixtures are simulated once
each (with their hypothesis worlds)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from incidents.loader import load_incident
from incidents.spec import Incident
from telemetry_gen.proving import proof
from telemetry_gen.proving.proof import (
    MIN_LIKELIHOOD_RATIO,
    DiscriminationCheck,
    ProofReport,
    likelihood_separation,
    prove,
    result_difference,
)

pytestmark = pytest.mark.slow  # proves fixture incidents (simulations with and without faults, worlds)

DATA = Path(__file__).parent / "data" / "incidents"
C = TypeVar("C")


@pytest.fixture(scope="module", autouse=True)
def _cache(library_cache: Path) -> Iterator[Path]:
    """Builds go to the run's shared test cache, not the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield library_cache


@pytest.fixture(scope="module")
def throttle() -> Incident:
    return load_incident(DATA / "proof-slow-replica.yaml")


@pytest.fixture(scope="module")
def true_report(throttle: Incident) -> ProofReport:
    return prove(throttle, 0)


@pytest.fixture(scope="module")
def false_report() -> ProofReport:
    return prove(load_incident(DATA / "proof-false-claims.yaml"), 0)


def by_id(checks: Sequence[C], attr: str, ident: str) -> C:
    [found] = [c for c in checks if getattr(c, attr) == ident]
    return found


# ---------------------------------------------------------------- the true fixture


def test_throttle_claim_holds_with_the_fault_and_not_in_the_ablation(true_report: ProofReport) -> None:
    claim = by_id(true_report.claims, "symptom_id", "prefill-slow-on-part")
    assert claim.with_faults.holds, claim.with_faults.message
    assert claim.with_faults.observed >= 1.4
    assert not claim.without_faults.holds, claim.without_faults.message
    # without the fault the two replicas run the same hardware: their p90s are close
    assert 0.8 < claim.without_faults.observed < 1.2
    assert claim.ok and claim.problem is None


def test_throttle_fixture_proves_completely(true_report: ProofReport) -> None:
    assert true_report.ok, true_report.problems()
    assert true_report.error is None
    assert {e.signal_id for e in true_report.expectations} == {"clock-drop", "no-preemptions", "deploy-seen"}
    assert all(e.ok for e in true_report.expectations)
    assert true_report.fault_wall_s is not None and true_report.fault_wall_s > 0
    assert true_report.ablation_wall_s is not None and true_report.ablation_wall_s > 0
    assert true_report.check_wall_s is not None and true_report.check_wall_s > 0
    assert true_report.worlds_wall_s is not None


def test_every_distractor_world_is_told_apart_from_the_truth(true_report: ProofReport) -> None:
    worlds = {w.hypothesis_id: w for w in true_report.worlds if w.kind == "rival"}
    # the truth on its other traffic draws shows the page too
    assert [(w.hypothesis_id, w.ok) for w in true_report.worlds if w.kind == "draw"] == [("truth~1", True),
                                                                                         ("truth~2", True)]
    assert set(worlds) == {"overload", "bad-deploy", "kv-pressure"}  # the true hypothesis has no world of its own
    for w in worlds.values():
        assert w.ok and w.missing == () and w.error is None, w.problem
        assert w.separated_by is not None and w.difference
    # only the throttled world's clock falls: the clock query separates every distractor
    assert worlds["bad-deploy"].separated_by == "signal clock-drop"
    assert "min_clock_mhz" in (worlds["bad-deploy"].difference or "")


def test_signals_discriminate_by_data_or_by_likelihood(true_report: ProofReport) -> None:
    clock = by_id(true_report.discrimination, "signal_id", "clock-drop")
    # the throttled replica's minimum clock exists only with the fault
    assert clock.data_change is not None and "min_clock_mhz" in clock.data_change
    assert "vllm-1" in clock.data_change
    # a gateway deploy is noise: the same rows either way, so only its likelihoods (0.9 vs 0.3) carry it
    deploy = by_id(true_report.discrimination, "signal_id", "deploy-seen")
    assert deploy.data_change is None
    assert deploy.by_likelihood and deploy.ok
    assert set(deploy.pair or ()) == {"throttle", "bad-deploy"}


def test_report_lines_name_every_check(true_report: ProofReport) -> None:
    text = "\n".join(true_report.lines())
    assert text.splitlines()[0] == "proof-slow-replica seed 0: ok"
    assert "FAIL" not in text
    for ident in ("prefill-slow-on-part", "clock-drop", "no-preemptions", "deploy-seen"):
        assert ident in text
    assert "wall time" in text


# ---------------------------------------------------------------- the false fixture


def test_overstated_claim_reports_observed_against_required(false_report: ProofReport) -> None:
    claim = by_id(false_report.claims, "symptom_id", "prefill-ten-times")
    assert not claim.ok
    assert not claim.with_faults.holds
    assert claim.with_faults.required == 10
    assert 1 < claim.with_faults.observed < 10
    margin = proof.claim_margin(claim.with_faults, claim.compare)
    assert margin == pytest.approx(claim.with_faults.observed - 10)
    problem = claim.problem or ""
    assert "prefill-ten-times" in problem and "does not hold with the faults" in problem
    assert "required >= 10x" in problem and "short by" in problem
    as_dict = claim.to_dict()
    assert as_dict["with_faults"]["observed"] == pytest.approx(claim.with_faults.observed)
    assert as_dict["with_faults"]["required"] == 10


def test_claim_true_without_the_fault_is_not_proof(false_report: ProofReport) -> None:
    claim = by_id(false_report.claims, "symptom_id", "steady-traffic")
    assert claim.with_faults.holds and claim.without_faults.holds
    assert not claim.ok
    assert "also holds without the faults" in (claim.problem or "")


def test_failing_expectation_and_non_discriminating_signal(false_report: ProofReport) -> None:
    clock = by_id(false_report.expectations, "signal_id", "clock-drop")
    assert not clock.ok
    assert "required < 100" in (clock.problem or "")
    deploy = by_id(false_report.discrimination, "signal_id", "deploy-seen")
    assert not deploy.ok
    assert deploy.data_change is None
    assert math.exp(deploy.separation) == pytest.approx(0.6 / 0.5)
    assert "does not discriminate" in (deploy.problem or "")
    # the same signal's data criterion still works for the clock
    assert by_id(false_report.discrimination, "signal_id", "clock-drop").ok


def test_a_distractor_whose_world_lacks_a_briefed_symptom_is_a_strawman(false_report: ProofReport) -> None:
    # the page claims ten times slower prefill on one replica: no distractor's world shows that (nor the truth's)
    worlds = {w.hypothesis_id: w for w in false_report.worlds if w.kind == "rival"}
    assert set(worlds) == {"overload", "bad-deploy", "kv-pressure"}
    # nor does the truth on its other draws: the page holds by luck of no draw at all
    draws = [w for w in false_report.worlds if w.kind == "draw"]
    assert len(draws) == 2 and all("traffic draw" in (w.problem or "") for w in draws)
    for w in worlds.values():
        # named once per member of the family that lacks it
        assert not w.ok and {sid for sid, _ in w.missing} == {"prefill-ten-times"} and len(w.missing) == 2
        assert "is a strawman" in (w.problem or "") and "briefed: false" in (w.problem or "")
        assert w.separated_by is not None  # still told apart from the truth: the one problem is the page


def test_false_report_summary(false_report: ProofReport) -> None:
    assert not false_report.ok
    problems = false_report.problems()
    # two claims, one expectation, one discrimination, three strawman distractors, and the page missing on
    # the truth's two other traffic draws
    assert len(problems) == 9
    assert sum("is a strawman" in p for p in problems) == 3
    assert sum("another traffic draw" in p for p in problems) == 2
    data = json.loads(json.dumps(false_report.to_dict()))
    assert data["ok"] is False and data["incident"] == "proof-false-claims" and data["seed"] == 0
    assert set(data) >= {"claims", "expectations", "discrimination", "wall_s", "problems", "error"}
    assert [c["symptom"] for c in data["claims"]] == ["prefill-ten-times", "steady-traffic"]
    worlds = [w for w in data["worlds"] if w["kind"] != "snippets"]
    assert len(worlds) == 5 and not any(w["ok"] for w in worlds)
    # the starter-snippet check is said when it passes, with what the snippets leave open
    [snips] = [w for w in data["worlds"] if w["kind"] == "snippets"]
    assert snips["ok"] and snips["left_open"]
    # one FAIL line per failure: a world with several problems (a strawman twice over) gets a line for each,
    # at its own place in the file
    failures = false_report.failures()
    assert len(failures) > len(problems)
    assert sum(line.lstrip().startswith("FAIL") for line in false_report.lines()) == len(failures)


def test_a_failing_simulation_becomes_an_error_not_an_exception(
    throttle: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("engine exploded")

    monkeypatch.setattr(proof, "ensure_database", broken)
    report = prove(throttle, 3)
    assert not report.ok
    assert report.error is not None and "engine exploded" in report.error
    assert "simulation with the faults" in report.error
    assert report.claims == [] and report.seed == 3


# ---------------------------------------------------------------- pure comparisons


def test_result_difference_ignores_row_order_and_small_changes() -> None:
    cols = ["replica", "p90"]
    a = [("vllm-0", 1.00), ("vllm-1", 2.00)]
    b = [("vllm-1", 2.10), ("vllm-0", 0.95)]  # reordered, both within 10 %
    assert result_difference(cols, a, cols, b) is None


def test_result_difference_finds_a_material_numeric_change() -> None:
    cols = ["replica", "p90"]
    a = [("vllm-0", 1.0), ("vllm-1", 2.0)]
    b = [("vllm-0", 1.0), ("vllm-1", 1.5)]
    change = result_difference(cols, a, cols, b)
    assert change is not None and "p90" in change and "replica=vllm-1" in change


def test_result_difference_rows_strings_nulls_and_columns() -> None:
    cols = ["replica", "n"]
    assert "rows" in (result_difference(cols, [("vllm-0", 1)], cols, []) or "")
    only = result_difference(cols, [("vllm-1", 1)], cols, [("vllm-0", 1)])
    assert only is not None and "vllm-1" in only
    assert result_difference(cols, [("vllm-0", None)], cols, [("vllm-0", 1)]) is not None
    assert result_difference(cols, [("vllm-0", None)], cols, [("vllm-0", None)]) is None
    assert result_difference(["a"], [(1,)], ["b"], [(1,)]) is not None
    # all-numeric results compare as sorted values
    assert result_difference(["x"], [(1.0,), (5.0,)], ["x"], [(5.0,), (1.0,)]) is None
    assert result_difference(["x"], [(1.0,), (5.0,)], ["x"], [(1.0,), (9.0,)]) is not None


def _with_likelihoods(inc: Incident, likelihoods: dict[str, float]) -> Any:
    return inc.signals[0].model_copy(update={"likelihoods": likelihoods})


def test_likelihood_separation(throttle: Incident) -> None:
    flat = _with_likelihoods(throttle, {})
    sep, _ = likelihood_separation(flat, throttle)
    assert sep == 0.0  # every hypothesis gets the default: nothing separates
    sig = _with_likelihoods(throttle, {"throttle": 0.3, "overload": 0.1})  # 0.3 / 0.1 is 2.999... in floats
    sep, pair = likelihood_separation(sig, throttle)
    assert pair == ("throttle", "overload") and math.exp(sep) == pytest.approx(MIN_LIKELIHOOD_RATIO)
    assert DiscriminationCheck("s", None, sep, pair).ok
    weak = _with_likelihoods(throttle, {"throttle": 0.5, "kv-pressure": 0.2})
    sep, pair = likelihood_separation(weak, throttle)
    assert pair == ("throttle", "kv-pressure") and not DiscriminationCheck("s", None, sep, pair).ok
    zero = _with_likelihoods(throttle, {"throttle": 0.9, "bad-deploy": 0.0})
    assert likelihood_separation(zero, throttle)[0] == math.inf
    # a data change is enough on its own
    assert DiscriminationCheck("s", "p90 changed", 0.0, pair).ok


def test_a_world_whose_config_change_cannot_start_says_so(tmp_path: Path) -> None:
    """A distractor's config change that leaves too little KV cache for max_model_len fails to start and
    the replica comes back on its old config: the world then looks like the fault-free run, and the
    strawman line must say why instead of only that a symptom is missing."""
    from telemetry_gen.proving.proof import _open, failed_starts
    from telemetry_gen.proving.report import WorldCheck
    from telemetry_gen.proving.worlds import TRUTH, build_world

    text = (DATA / "proof-slow-replica.yaml").read_text()
    assert "params: {gpu_memory_utilization: 0.3}" in text
    path = tmp_path / "proof-slow-replica.yaml"
    path.write_text(text.replace("params: {gpu_memory_utilization: 0.3}", "params: {gpu_memory_utilization: 0.2}"))
    inc = load_incident(path)
    world = _open(Path(build_world(inc, 0, "kv-pressure").path))
    truth = _open(Path(build_world(inc, 0, TRUTH).path))
    try:
        note = failed_starts(world)
        assert failed_starts(truth) is None
    finally:
        world.close()
        truth.close()
    assert note is not None and "failed to start" in note and "vllm-0" in note and "ValueError" in note
    line = WorldCheck("kv-pressure", (("slow", "p90 1.0x, needs 1.5x"),), None, note=note).problem
    assert line is not None and "strawman" in line and "failed to start" in line


def test_the_page_ruling_a_rival_out_or_the_snippets_settling_fail_the_proof() -> None:
    """Checks 7 and 8 of telemetry_gen.proving.proof: measuring the page is no evidence against a family that
    shows the page, and the starter snippets must not solve an incident of difficulty 2 or more. Each
    failure names what to edit: the rival's world, or the incident's difficulty."""
    from telemetry_gen.proving.report import WorldCheck

    fine = WorldCheck("router-skew", (), "signal per-replica", "reading")
    assert fine.ok and fine.problem is None
    by_page = WorldCheck("router-skew", (), "signal per-replica", "reading",
                         page_rules_out="symptom p99-up: p99_ttft_s is 4.1 (the rival's worlds: 0.5 to 1.2)")
    assert not by_page.ok
    [(where, line)] = by_page.parts()
    assert where == ("hypotheses", "router-skew", "world") and "page's own measurement" in line and "4.1" in line
    settled = WorldCheck("starter snippets", kind="snippets",
                         settled_by=(("a", "snippet latency: gateway_s flat"), ("b", "snippet percentiles: x")))
    assert not settled.ok
    [(where, line)] = settled.parts()
    assert where == ("difficulty",) and "gateway_s flat" in line and "snippet percentiles" in line
    assert WorldCheck("starter snippets", kind="snippets").ok
    # a passing check is said too, with what the snippets leave open, so an author sees that it ran
    from telemetry_gen.proving.report import ProofReport

    open_two = WorldCheck("starter snippets", kind="snippets", left_open=("a", "b"))
    assert open_two.ok and open_two.to_dict()["left_open"] == ["a", "b"]
    said = ProofReport("x", 0, worlds=[open_two]).lines()
    assert "  ok   the starter snippets leave 2 distractors open (a, b): a player needs queries of their own" in said
    assert settled.to_dict()["settled_by"] == [list(x) for x in settled.settled_by]
