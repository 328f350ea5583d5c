"""The board a player sees: hypotheses shuffled per session, labelled, and named by label or title."""

from __future__ import annotations

from pathlib import Path

import pytest

from game.session import Session, SessionError
from game.session.hypotheses import board_order, resolve, shown_hypotheses
from incidents.loader import iter_library, load_incident

DATA = Path(__file__).parent / "data" / "incidents"


def test_the_truth_is_not_always_first_across_the_library() -> None:
    firsts = []
    for path in iter_library():
        incident = load_incident(path, 0)
        firsts.append(board_order(incident, 0)[0].true)
    assert not all(firsts)
    assert sum(firsts) <= len(firsts) / 2


def test_the_order_is_deterministic_per_seed_and_changes_between_seeds() -> None:
    incident = load_incident(DATA / "tui-mini.yaml")
    orders = {tuple(h.id for h in board_order(incident, seed)) for seed in range(12)}
    assert tuple(h.id for h in board_order(incident, 3)) == tuple(h.id for h in board_order(incident, 3))
    assert len(orders) > 3
    truth_places = {[h.id for h in board_order(incident, s)].index("throttle") for s in range(24)}
    assert len(truth_places) == len(incident.hypotheses)


def test_labels_and_titles_name_hypotheses() -> None:
    incident = load_incident(DATA / "tui-mini.yaml")
    shown = shown_hypotheses(incident, 5)
    assert [s.label for s in shown] == ["A", "B", "C", "D"]
    first = shown[0]
    assert resolve("a", shown) == first.id
    assert resolve(first.title.upper(), shown) == first.id
    assert resolve("KV cache", shown) == "kv-pressure"
    assert resolve("The", shown) == "bad-deploy"
    assert resolve("Z", shown) is None
    assert resolve("", shown) is None


def test_sessions_take_labels_and_show_no_ids() -> None:
    incident = load_incident(DATA / "tui-mini.yaml")
    session = Session.in_memory(incident, 7, "p")
    session.start()
    board = session.board
    session.rank([(board[0].label, 60.0), (board[1].title, 40.0)])
    assert [r["id"] for r in session.ranking] == [board[0].id, board[1].id]
    with pytest.raises(SessionError) as err:
        session.rank([("nonsense", 100.0)])
    assert "A (" in str(err.value)
    for s in board:
        assert s.id not in str(err.value)
