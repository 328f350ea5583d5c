"""The score: a proper log score under the belief the evidence justifies, rivals ruled out, pins read
by direction, and the hostile players the rule must not reward.

These tests feed `score` hand-written evidence (which rivals each query ruled out), so each property
is checked on its own; tests/test_assess.py and tests/test_players.py derive the evidence from real
queries on the simulated worlds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from game.rules.scoring import (
    CONCLUSION_POINTS,
    TRUTH_OUTCOME,
    QueryEvidence,
    conclusion_skill,
    expected_log_score,
    pin_verdict,
    score,
)
from game.session import Session
from incidents.loader import load_incident
from incidents.spec import Incident

DATA = Path(__file__).parent / "data" / "incidents"
# tui-mini: throttle (true), overload, bad-deploy, kv-pressure
RIVALS = ("overload", "bad-deploy", "kv-pressure")


@pytest.fixture(scope="module")
def mini() -> Incident:
    return load_incident(DATA / "tui-mini.yaml")


class FakeGateway:
    """Answers every query with one row; the evidence comes separately."""

    def run(self, sql: str):
        from game.query.gateway import QueryResult

        return QueryResult(sql, ok=True, columns=["x"], rows=[(1,)], row_count=1)


def play(incident: Incident, ruled: list[tuple[str, ...]], ranking: list[tuple[str, float]] | None,
         pins: list[tuple[int, str, str]] = (), hints: int = 0, submit: bool = True,
         schema: set[int] = frozenset()) -> tuple[list, dict[int, QueryEvidence]]:
    """Events of a session that ran one query per entry of `ruled` (the rivals it ruled out), then
    pinned, ranked and submitted; and the evidence of those queries."""
    session = Session.in_memory(incident, 0, "test")
    session.start()
    evidence = {}
    for i, rivals in enumerate(ruled, start=1):
        session.run_query(FakeGateway(), f"SELECT {i}")
        evidence[i] = QueryEvidence(i, f"SELECT {i}", True, 1, i in schema, tuple(rivals),
                                    {r: "median of x" for r in rivals})
    for q, h, stance in pins:
        session.pin(q, h, stance)
    for _ in range(hints):
        session.take_hint()
    if ranking is not None:
        session.rank(ranking)
        if submit:
            session.submit(ranking)
    return session.events, evidence


def total(incident: Incident, *args, **kwargs) -> float:
    events, evidence = play(incident, *args, **kwargs)
    return score(incident, events, evidence).total


ALL_OUT = [("overload",), ("bad-deploy",), ("kv-pressure",)]
SPREAD = [("throttle", 70.0), ("overload", 10.0), ("bad-deploy", 10.0), ("kv-pressure", 10.0)]


# ------------------------------------------------------------------ the rule itself


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4), st.integers(1, 4))
def test_reporting_the_ideal_belief_maximises_the_expected_score(weights: list[float], open_worlds: int) -> None:
    outcomes = [TRUTH_OUTCOME, *RIVALS]
    belief = {o: 1.0 / open_worlds for o in outcomes[:open_worlds]}
    norm = sum(weights)
    other = {o: w / norm for o, w in zip(outcomes, weights, strict=True)}
    honest = dict.fromkeys(outcomes, 0.0) | belief
    assert expected_log_score(honest, belief) >= expected_log_score(other, belief) - 1e-12


def test_even_spread_is_zero_and_certainty_after_full_evidence_is_one() -> None:
    outcomes = [TRUTH_OUTCOME, *RIVALS]
    even = dict.fromkeys(outcomes, 0.25)
    assert conclusion_skill(even, {TRUTH_OUTCOME: 1.0}, 4) == pytest.approx(0.0)
    assert conclusion_skill(even, dict.fromkeys(outcomes, 0.25), 4) == pytest.approx(0.0)
    sure = {TRUTH_OUTCOME: 1.0}
    assert conclusion_skill(sure, {TRUTH_OUTCOME: 1.0}, 4) == pytest.approx(1.0)
    assert conclusion_skill({RIVALS[0]: 1.0}, {TRUTH_OUTCOME: 1.0}, 4) == -1.0


@pytest.mark.parametrize(("hypothesis", "stance", "ruled", "verdict"), [
    ("overload", "refutes", {"overload"}, "right"),
    ("overload", "supports", {"overload"}, "wrong"),
    ("overload", "refutes", {"bad-deploy"}, "wrong"),
    ("overload", "supports", {"bad-deploy"}, "right"),
    ("overload", "refutes", set(), "silent"),
    ("throttle", "supports", {"bad-deploy"}, "right"),
    ("throttle", "refutes", {"bad-deploy"}, "wrong"),
    ("throttle", "supports", set(), "silent"),
])
def test_pin_verdicts(hypothesis: str, stance: str, ruled: set[str], verdict: str) -> None:
    assert pin_verdict(hypothesis, stance, ruled, {"throttle"}) == verdict


# ------------------------------------------------------------------ players


def test_expert_scores_high(mini: Incident) -> None:
    pins = [(1, "overload", "refutes"), (2, "bad-deploy", "refutes"), (3, "kv-pressure", "refutes"),
            (1, "throttle", "supports")]
    assert total(mini, ALL_OUT, [("throttle", 94.0), ("overload", 2.0), ("bad-deploy", 2.0),
                                 ("kv-pressure", 2.0)], pins) >= 85


def test_a_lucky_guess_earns_what_a_guess_is_worth(mini: Incident) -> None:
    lucky = [("throttle", 90.0), ("overload", 4.0), ("bad-deploy", 3.0), ("kv-pressure", 3.0)]
    assert total(mini, [()], lucky) <= 35
    assert total(mini, [(), (), ()], lucky) <= 35


def test_an_even_board_or_no_board_earns_nothing(mini: Incident) -> None:
    assert total(mini, [()], [("throttle", 25.0), ("overload", 25.0), ("bad-deploy", 25.0),
                              ("kv-pressure", 25.0)]) <= 30
    assert total(mini, [()], None) <= 30
    assert total(mini, [], None) == 0


def test_all_in_on_a_wrong_cause_scores_low_with_or_without_evidence(mini: Incident) -> None:
    wrong = [("overload", 100.0)]
    assert total(mini, ALL_OUT, wrong) <= 15
    assert total(mini, [()], wrong) <= 15
    assert total(mini, [("bad-deploy",)], wrong) <= 15


def test_confident_wrong_is_below_honest_uncertainty_and_a_correct_shotgun(mini: Incident) -> None:
    confident_wrong = total(mini, ALL_OUT, [("overload", 90.0), ("throttle", 10.0)])
    # honest: the evidence leaves throttle and overload open, and the player says so
    honest = total(mini, [("bad-deploy",), ("kv-pressure",)], [("throttle", 50.0), ("overload", 50.0)])
    shotgun = total(mini, ALL_OUT + [()] * 9, [("throttle", 90.0), ("overload", 4.0), ("bad-deploy", 3.0),
                                                ("kv-pressure", 3.0)])
    assert confident_wrong < honest
    assert confident_wrong < shotgun


def test_honest_fifty_fifty_beats_the_average_coin_flip_all_in(mini: Incident) -> None:
    ruled = [("bad-deploy",), ("kv-pressure",)]
    honest = total(mini, ruled, [("throttle", 50.0), ("overload", 50.0)])
    right = total(mini, ruled, [("throttle", 100.0)])
    wrong = total(mini, ruled, [("overload", 100.0)])
    assert honest > (right + wrong) / 2
    # luck earns nothing: both all-in players are scored on the same expectation
    assert right == pytest.approx(wrong)


@pytest.mark.parametrize("rival_share", [5.0, 20.0, 40.0, 50.0])
def test_hiding_the_open_rival_never_raises_the_score(mini: Incident, rival_share: float) -> None:
    ruled = [("bad-deploy",), ("kv-pressure",)]
    shown = total(mini, ruled, [("throttle", 100.0 - rival_share), ("overload", rival_share)])
    hidden = total(mini, ruled, [("throttle", 100.0)])
    hidden_elsewhere = total(mini, ruled, [("throttle", 100.0 - rival_share), ("bad-deploy", rival_share)])
    assert hidden <= shown
    assert hidden_elsewhere <= shown


def test_the_order_of_equal_confidences_does_not_matter(mini: Incident) -> None:
    a = total(mini, [("overload",)], [("throttle", 40.0), ("bad-deploy", 20.0), ("kv-pressure", 20.0),
                                      ("overload", 20.0)])
    b = total(mini, [("overload",)], [("throttle", 40.0), ("overload", 20.0), ("kv-pressure", 20.0),
                                      ("bad-deploy", 20.0)])
    assert a == b


def test_reversing_every_pin_lowers_the_score(mini: Incident) -> None:
    pins = [(1, "overload", "refutes"), (2, "bad-deploy", "refutes"), (1, "throttle", "supports")]
    flip = {"refutes": "supports", "supports": "refutes"}
    reversed_pins = [(q, h, flip[s]) for q, h, s in pins]
    assert total(mini, ALL_OUT, SPREAD, reversed_pins) < total(mini, ALL_OUT, SPREAD, pins)
    assert total(mini, ALL_OUT, SPREAD, reversed_pins) < total(mini, ALL_OUT, SPREAD, [])


def test_evidence_counts_rivals_ruled_out_not_queries(mini: Incident) -> None:
    unlimited = mini.model_copy(update={"query_budget": None})
    few = total(unlimited, ALL_OUT, SPREAD)
    many_idle = total(unlimited, [()] * 12 + ALL_OUT, SPREAD)
    assert many_idle < few
    events, evidence = play(mini, [("overload", "bad-deploy")], SPREAD)
    report = score(mini, events, evidence)
    assert report.ruled_out == {"overload": 1, "bad-deploy": 1}
    assert report.consistent == ["throttle", "kv-pressure"]
    # each rival held at 10% of 4 hypotheses is let go by 1 - 0.1 x 4 = 0.6
    assert report.component("evidence").points == pytest.approx(35.0 * 2 * 0.6 / 3, abs=0.01)


def test_evidence_is_credited_as_far_as_belief_used_it(mini: Incident) -> None:
    """A rival ruled out and let go earns its share; one ruled out and still held at the even share (a
    random or even board: the player did not use what the query showed) earns nothing."""
    def evidence_points(ranking: list[tuple[str, float]]) -> float:
        events, evidence = play(mini, ALL_OUT, ranking)
        return score(mini, events, evidence).component("evidence").points

    assert evidence_points([("throttle", 100.0)]) == pytest.approx(35.0)
    assert evidence_points([(h.id, 25.0) for h in mini.hypotheses]) == 0.0
    assert evidence_points([("throttle", 40.0), ("overload", 40.0), ("bad-deploy", 10.0),
                            ("kv-pressure", 10.0)]) == pytest.approx(35.0 * (0 + 0.6 + 0.6) / 3, abs=0.01)


def test_schema_browsing_is_never_idle(mini: Incident) -> None:
    unlimited = mini.model_copy(update={"query_budget": None})
    browse = total(unlimited, [()] * 12 + ALL_OUT, SPREAD, schema=set(range(1, 13)))
    idle = total(unlimited, [()] * 12 + ALL_OUT, SPREAD)
    assert browse == total(unlimited, ALL_OUT, SPREAD)
    assert idle < browse


def test_queries_beyond_the_budget_cost_points(mini: Incident) -> None:
    assert mini.query_budget == 12
    within = total(mini, [()] * 9 + ALL_OUT, SPREAD, schema=set(range(1, 10)))
    beyond = total(mini, [()] * 11 + ALL_OUT, SPREAD, schema=set(range(1, 12)))
    assert beyond == pytest.approx(within - 2 * 2.0)


def test_hints_cost_their_stated_points(mini: Incident) -> None:
    assert total(mini, ALL_OUT, SPREAD) - total(mini, ALL_OUT, SPREAD, hints=2) == pytest.approx(
        sum(h.cost for h in mini.hints[:2]), abs=0.11)


def test_components_stay_within_bounds_and_sum_to_the_total(mini: Incident) -> None:
    for ruled, ranking in [(ALL_OUT, SPREAD), ([()], [("overload", 100.0)]), ([("overload",)], None)]:
        events, evidence = play(mini, ruled, ranking)
        report = score(mini, events, evidence)
        for c in report.components:
            if c.group == "penalty":
                assert c.points <= 0
            else:
                assert -c.max <= c.points <= c.max
        assert report.total == pytest.approx(max(0.0, min(100.0, sum(c.points for c in report.components))),
                                             abs=0.06)
    assert CONCLUSION_POINTS >= 50


def test_scores_use_the_submission_else_the_latest_ranking(mini: Incident) -> None:
    events, evidence = play(mini, ALL_OUT, SPREAD, submit=False)
    report = score(mini, events, evidence)
    assert not report.submitted and report.ranking[0]["id"] == "throttle"


def test_ruled_out_is_only_what_the_evidence_says(mini: Incident) -> None:
    """A transcript's recorded rows or reads are not evidence: only `evidence` counts."""
    events, _ = play(mini, ALL_OUT, SPREAD)
    forged = [dict(e.to_dict()) for e in events]
    for e in forged:
        if e["kind"] == "query":
            e["data"] = {**e["data"], "reads": [{"table": "metrics", "columns": ["name", "value"]}]}
    assert score(mini, forged, {}).component("evidence").points == 0
    assert math.isclose(score(mini, forged, {}).total, score(mini, events, {}).total)


def test_pinning_everything_both_ways_earns_nothing(mini: Incident) -> None:
    hyps = [h.id for h in mini.hypotheses]
    spam = [(q, h, stance) for q in (1, 2, 3) for h in hyps for stance in ("supports", "refutes")]
    events, evidence = play(mini, ALL_OUT, SPREAD, spam)
    assert score(mini, events, evidence).component("pins").points <= 0
    assert total(mini, ALL_OUT, SPREAD, spam) <= total(mini, ALL_OUT, SPREAD)


def test_the_worked_example_in_docs_scoring(mini: Incident) -> None:
    """docs/scoring.md walks through this game: keep the two in step."""
    ruled = [("overload",), (), ("bad-deploy",)]
    pins = [(1, "overload", "refutes"), (3, "throttle", "supports")]
    ranking = [("throttle", 70.0), ("kv-pressure", 20.0), ("overload", 5.0), ("bad-deploy", 5.0)]
    events, evidence = play(mini, ruled, ranking, pins)
    report = score(mini, events, evidence)
    assert report.component("conclusion").points == pytest.approx(16.0, abs=0.05)
    assert report.component("evidence").points == pytest.approx(18.7, abs=0.05)
    assert report.component("pins").points == pytest.approx(5.0)
    assert report.total == pytest.approx(39.7, abs=0.05)
    assert total(mini, ruled, [("throttle", 50.0), ("kv-pressure", 50.0)], pins) == pytest.approx(55.8, abs=0.05)
    assert total(mini, ruled, [("throttle", 100.0)], pins) == 0.0
    text = (Path(__file__).parent.parent / "docs" / "scoring.md").read_text(encoding="utf-8")
    assert "**39.7**" in text and "**18.7**" in text and "55.8" in text
