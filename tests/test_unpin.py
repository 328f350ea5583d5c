"""Taking a pin off: the session refuses an unpin of a pin not in force, a withdrawn pin counts neither
way in the score, a repeated pin counts once, and a resumed journal keeps the withdrawal."""

from __future__ import annotations

from pathlib import Path

import pytest

from game.rules.scoring import QueryEvidence, score
from game.session import Session, SessionError, active_pins
from incidents.loader import load_incident
from incidents.spec import Incident

DATA = Path(__file__).parent / "data" / "incidents"


@pytest.fixture(scope="module")
def mini() -> Incident:
    return load_incident(DATA / "tui-mini.yaml")


class OneRow:
    def run(self, sql: str):
        from game.query.gateway import QueryResult

        return QueryResult(sql, ok=True, columns=["x"], rows=[(1,)], row_count=1)


def _session(incident: Incident) -> tuple[Session, dict[int, QueryEvidence]]:
    """Two queries: Q1 rules out `overload`, Q2 rules out nothing."""
    session = Session.in_memory(incident, 0, "test")
    session.start()
    session.run_query(OneRow(), "SELECT 1")
    session.run_query(OneRow(), "SELECT 2")
    evidence = {1: QueryEvidence(1, "SELECT 1", True, 1, False, ("overload",), {"overload": "median of x"}),
                2: QueryEvidence(2, "SELECT 2", True, 1, False, (), {})}
    return session, evidence


def _pins_points(incident: Incident, session: Session, evidence: dict[int, QueryEvidence]) -> float:
    return score(incident, session.events, evidence).component("pins").points


def test_a_withdrawn_wrong_pin_stops_costing_points(mini: Incident) -> None:
    session, evidence = _session(mini)
    before = _pins_points(mini, session, evidence)
    session.pin(1, "overload", "supports")  # Q1 ruled overload out: this pin points the wrong way
    wrong = _pins_points(mini, session, evidence)
    assert wrong < before
    session.unpin(1, "overload", "supports")
    assert _pins_points(mini, session, evidence) == before
    assert active_pins(session.events) == []


def test_a_withdrawn_right_pin_stops_earning_and_a_new_pin_puts_it_back(mini: Incident) -> None:
    session, evidence = _session(mini)
    session.pin(1, "overload", "refutes")
    right = _pins_points(mini, session, evidence)
    session.unpin(1, "overload", "refutes")
    assert _pins_points(mini, session, evidence) < right
    session.pin(1, "overload", "refutes")
    assert _pins_points(mini, session, evidence) == right


def test_a_repeated_pin_counts_once(mini: Incident) -> None:
    session, evidence = _session(mini)
    session.pin(1, "overload", "supports")
    once = _pins_points(mini, session, evidence)
    session.pin(1, "overload", "supports")
    session.pin(1, "overload", "supports")
    assert _pins_points(mini, session, evidence) == once
    assert len(active_pins(session.events)) == 1


def test_unpin_needs_a_pin_in_force(mini: Incident) -> None:
    session, _ = _session(mini)
    with pytest.raises(SessionError, match="not pinned"):
        session.unpin(1, "overload", "refutes")
    session.pin(1, "overload", "refutes")
    with pytest.raises(SessionError, match="not pinned"):
        session.unpin(1, "overload", "supports")  # same query, other stance
    with pytest.raises(SessionError, match="stance"):
        session.unpin(1, "overload", "maybe")
    session.unpin(1, "overload", "refutes")
    with pytest.raises(SessionError, match="not pinned"):
        session.unpin(1, "overload", "refutes")  # already withdrawn


def test_a_resumed_session_keeps_the_withdrawal(mini: Incident, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path))
    session = Session.create(DATA / "tui-mini.yaml", 0, "test", root=tmp_path)
    try:
        session.start()
        session.run_query(OneRow(), "SELECT 1")
        session.pin(1, "overload", "refutes")
        session.pin(1, "throttle", "supports")
        session.unpin(1, "overload", "refutes")
        path = session.path
    finally:
        session.close()
    again = Session.resume(path)
    try:
        assert [(e.data["query"], e.data["hypothesis"]) for e in active_pins(again.events)] == [(1, "throttle")]
        with pytest.raises(SessionError, match="not pinned"):
            again.unpin(1, "overload", "refutes")
    finally:
        again.close()
