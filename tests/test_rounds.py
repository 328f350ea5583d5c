"""Rounds on every screen, through the game API (game.api.rounds): the clock a player sees (the round's in a
game-day round, the incident's otherwise), its warnings at 5 and 1 minute left, TIME UP that hands the board in,
and the debrief held until the round ends. Time is driven by the tests (`now`), never waited for."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import START, investigating_events, journal

from game import api
from game.session import Session
from game.session import seat as seat_module

pytest_plugins = ("test_tui_support",)


def enter_round(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, limit_s: float | None = 600.0,
                started: float | None = START + 1000, ended: float | None = None, debrief: str = "held",
                player: str = "tester") -> Path:
    """What the game-day server gives a tab's app: the seat (round 1 of tui-mini, seed 0) and the round's
    state file as the facilitator's console writes it. Returns the state file."""
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    state = results / "gameday.json"
    write_round_state(state, started, ended)
    seat = seat_module.Seat(player, 1, "tui-mini", 0, str(tmp_path / "registry"), str(state), debrief, limit_s)
    monkeypatch.setenv(seat_module.SEAT_ENV, seat.to_env())
    return state


def write_round_state(state: Path, started: float | None, ended: float | None) -> None:
    state.write_text(json.dumps({"format": "servedrill-gameday", "format_version": 1,
                                 "rounds": [{"round": 1, "started": started, "ended": ended}]}), encoding="utf-8")


def investigating(tmp_path: Path) -> Session:
    return api.resume_session(journal(tmp_path / "data" / "sessions" / "tui-mini-fixed.jsonl",
                                      investigating_events()))


def test_ordinary_play_counts_against_the_incidents_limit_and_warns_once_each(tmp_path: Path) -> None:
    session = investigating(tmp_path)
    try:
        limit = float(session.incident.time_limit_s or 0)
        clock = api.player_clock(session, START + 125)
        assert (clock.round, clock.limit, clock.elapsed, clock.submits) == (None, limit, 125.0, False)
        assert clock.text() == "time 2:05 / 15:00" and not clock.urgent
        warnings = api.TimeWarnings()
        assert warnings.due(clock) == []
        five = warnings.due(api.player_clock(session, START + limit - 299))
        assert [(n.kind, n.text) for n in five] == [("warning", "5 minutes left on the clock.")]
        assert warnings.due(api.player_clock(session, START + limit - 200)) == []  # once
        one = warnings.due(api.player_clock(session, START + limit - 59))
        assert [n.text for n in one] == ["1 minute left on the clock."]
        assert api.player_clock(session, START + limit - 59).urgent
        up = warnings.due(api.player_clock(session, START + limit + 1))
        assert up[0].kind == "time_up" and "You can still submit" in up[0].text
        assert warnings.due(api.player_clock(session, START + limit + 5)) == []
        # ordinary play never hands in by itself
        assert api.time_up(session, api.player_clock(session, START + limit + 5)) is None
        assert session.state == "investigating"
    finally:
        session.close()


def test_a_game_resumed_late_hears_only_the_most_urgent_warning(tmp_path: Path) -> None:
    session = investigating(tmp_path)
    try:
        limit = float(session.incident.time_limit_s or 0)
        late = api.TimeWarnings().due(api.player_clock(session, START + limit - 40))
        assert [n.text for n in late] == ["1 minute left on the clock."]
        resumed = api.TimeWarnings().due(api.player_clock(session, START + limit - 200))
        assert [n.text for n in resumed] == ["4 minutes left on the clock."]  # what is left, not "5"
    finally:
        session.close()


def test_a_round_shows_the_rounds_clock_not_the_incidents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = START + 1000  # the facilitator started the round after the player's own start: the round's start counts
    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=t0)
    session = investigating(tmp_path)
    try:
        clock = api.player_clock(session, t0 + 60)
        assert (clock.round, clock.limit, clock.elapsed, clock.ends_at, clock.submits) == (1, 600.0, 60.0,
                                                                                          t0 + 600, True)
        assert clock.text() == "round 1 · 9:00 left"
        warnings = api.TimeWarnings()
        five = warnings.due(api.player_clock(session, t0 + 301))
        assert five[0].text == "5 minutes left in round 1. At TIME UP your board as it stands is handed in."
        one = warnings.due(api.player_clock(session, t0 + 541))
        assert one[0].text.startswith("1 minute left in round 1.")
        assert api.time_up(session, api.player_clock(session, t0 + 599)) is None  # not yet
        end = api.player_clock(session, t0 + 600)
        assert end.time_up and end.text() == "round 1 · TIME UP"
        assert [n.kind for n in warnings.due(end)] == ["time_up"]
        event = api.time_up(session, end, [("throttle", 60.0), ("overload", 40.0)])
        assert event is not None and event.kind == "submit"
        assert session.state == "submitted"
        assert [r["id"] for r in event.data["ranking"]] == ["throttle", "overload"]
        assert api.time_up(session, end) is None  # one hand-in
    finally:
        session.close()


def test_time_up_without_a_board_hands_in_the_last_saved_ranking(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=START)
    session = investigating(tmp_path)
    try:
        event = api.time_up(session, api.player_clock(session, START + 700))
        assert event is not None and event.data["ranking"][0] == {"id": "throttle", "confidence": 70.0}
    finally:
        session.close()


def test_a_round_ended_early_is_time_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=START, ended=START + 200)
    session = investigating(tmp_path)
    try:
        clock = api.player_clock(session, START + 250)
        assert clock.time_up and clock.elapsed == 200.0
        assert "the facilitator ended the round" in api.TimeWarnings().due(clock)[0].text
    finally:
        session.close()


def test_a_round_the_console_never_started_counts_from_the_players_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enter_round(monkeypatch, tmp_path, limit_s=300.0, started=None)  # serve --round N, no console
    session = investigating(tmp_path)
    try:
        assert api.player_clock(session, START + 100).text() == "round 1 · 3:20 left"
    finally:
        session.close()


def test_the_debrief_is_held_until_the_round_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = START + 1000
    state = enter_round(monkeypatch, tmp_path, limit_s=600.0, started=t0)
    session = investigating(tmp_path)
    try:
        api.submit(session, [("throttle", 70.0), ("overload", 30.0)])
        hold = api.debrief_hold(session, t0 + 100)
        ends = time.strftime("%H:%M", time.localtime(t0 + 600))
        assert hold is not None and hold.round == 1 and hold.ends_at == t0 + 600
        assert hold.text.startswith(f"Handed in. The debrief opens when the round ends at {ends}")
        late = api.debrief_hold(session, t0 + 700)  # over time, the facilitator has not ended it yet
        assert late is not None and "when the facilitator ends it" in late.text
        # acting on the fleet would tell whether a fix works, so the cause: held as the debrief is
        with pytest.raises(api.SessionError, match="mitigation phase waits for the round to end"):
            api.act(session, ["restart all"])
        write_round_state(state, t0, t0 + 650)
        assert api.debrief_hold(session, t0 + 700) is None
        with pytest.raises(api.SessionError) as after:  # the round is over: only the incident's own rule is left
            api.act(session, ["restart all"])
        assert "round" not in str(after.value)
    finally:
        session.close()


def test_a_practice_round_does_not_hold_the_debrief(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enter_round(monkeypatch, tmp_path, debrief="immediate")
    session = investigating(tmp_path)
    try:
        assert api.debrief_hold(session, START) is None
    finally:
        session.close()


def test_the_seat_carries_the_rounds_limit() -> None:
    seat = seat_module.Seat("ana", 2, "x", 3, "/r", "/s", "held", 720.0)
    assert seat_module.Seat.from_env(seat.to_env()) == seat
    old = json.dumps({"player": "ana", "round": 2, "incident_id": "x", "seed": 3, "registry": "/r", "state": "/s"})
    assert seat_module.Seat.from_env(old).time_limit_s is None  # a server before round clocks


# ---------------------------------------------------------------- line mode


class _Echo:
    """A gateway that answers every query with one row."""

    def run(self, sql: str) -> Any:
        from game.query.gateway import QueryResult

        return QueryResult(sql, ok=True, columns=["x"], rows=[(1,)], row_count=1)


class _Timed(io.StringIO):
    """Input lines, each read at its own moment: reading a line moves the test's clock to the next one's."""

    def __init__(self, lines: list[tuple[float, str]], now: list[float]) -> None:
        super().__init__("")
        self.lines, self.now = list(lines), now

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        if not self.lines:
            return ""
        at, line = self.lines.pop(0)
        self.now[0] = at
        return line + "\n"


def _plain(session: Session, lines: list[tuple[float, str]], start: float) -> str:
    from game.frontends.line_mode import PlainGame

    now = [start]
    out = io.StringIO()
    game = PlainGame(session, _Echo(), _Timed(lines, now), out, clock=lambda: now[0])  # type: ignore[arg-type]
    game.run()
    return out.getvalue()


def test_line_mode_shows_the_clock_and_warns_at_the_next_prompt(tmp_path: Path) -> None:
    session = investigating(tmp_path)
    try:
        text = _plain(session, [(START + 100, "time"), (START + 650, "SELECT 1"), (START + 850, "hypotheses"),
                                (START + 901, "time"), (START + 902, "quit")], START + 10)
    finally:
        session.close()
    lines = text.splitlines()
    assert "time 1:40 / 15:00" in text
    assert text.count("*** 5 minutes left on the clock.") == 1 and text.count("*** 1 minute left") == 1
    assert lines.index("*** 5 minutes left on the clock.") > next(i for i, x in enumerate(lines) if "1:40" in x)
    assert "*** Time is up" in text and "time 15:01 / 15:00" in text
    assert session.state == "investigating"  # ordinary play goes on


def test_line_mode_hands_in_at_time_up_of_a_round_and_holds_the_debrief(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = START + 1000
    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=t0)
    session = investigating(tmp_path)
    try:
        text = _plain(session, [(t0 + 10, "time"), (t0 + 301, "SELECT 1"), (t0 + 610, "hypotheses"),
                                (t0 + 620, "quit")], t0 + 5)
        assert session.state == "submitted"
    finally:
        session.close()
    assert "round 1 · 9:50 left" in text
    assert "*** 5 minutes left in round 1. At TIME UP your board as it stands is handed in." in text
    assert "*** TIME UP: the round's time is over; your board as it stands is handed in." in text
    assert "Handed in. The debrief opens when the round ends (when the facilitator ends it)" in text
    assert "Traceback" not in text and "Score" not in text


# ---------------------------------------------------------------- what a round offers


def test_a_round_offers_only_its_incident(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_tui_support import FIXTURE

    library = api.library([FIXTURE, api.find_incident("one-slow-replica")])
    assert [e.id for e in api.round_library(library)] == [e.id for e in library]  # outside a round: all
    enter_round(monkeypatch, tmp_path)
    assert [e.id for e in api.round_library(library)] == ["tui-mini"]


def test_the_picker_counts_only_the_players_own_open_sessions(tmp_path: Path) -> None:
    root = tmp_path / "data"
    journal(root / "sessions" / "ben-game.jsonl", investigating_events(), session_id="ben-game", player="ben")
    journal(root / "sessions" / "mine.jsonl", investigating_events(), session_id="mine", player="tester")
    record = api.player_record("tester", root)
    assert [s.session_id for s in record.unfinished.get("tui-mini", [])] == ["mine"]
    assert api.player_record("dara", root).unfinished == {}  # nobody else's "● 2 open"


def test_before_a_game_the_round_states_its_own_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert api.round_clock(START) is None  # outside a round
    state = enter_round(monkeypatch, tmp_path, limit_s=720.0, started=START)
    clock = api.round_clock(START + 60)
    assert clock is not None and clock.text() == "round 1 · 11:00 left"
    ends = time.strftime("%H:%M", time.localtime(START + 720))
    assert api.round_limits_text(clock) == f"Round 1: 12:00 for the round, ends at {ends}"
    write_round_state(state, None, None)  # `serve --round N`, not started by the console
    not_started = api.round_clock(START)
    assert not_started is not None and api.round_limits_text(not_started) == "Round 1: 12:00 for the round"


def test_line_mode_briefing_in_a_round_states_the_rounds_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_tui_support import FIXTURE

    enter_round(monkeypatch, tmp_path, limit_s=720.0, started=START)
    session = Session.create(FIXTURE, 0, "tester", root=tmp_path / "data")
    try:
        text = _plain(session, [(START + 30, "quit")], START + 10)
    finally:
        session.close()
    ends = time.strftime("%H:%M", time.localtime(START + 720))
    assert f"Round 1: 12:00 for the round, ends at {ends}." in text
