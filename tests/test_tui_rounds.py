"""Rounds on the terminal's (and so the browser's) screen: the clock on the status line (the round's in a
game-day round), warnings at 5 and 1 minute left on the notice strip (never a toast), TIME UP that hands the
board in, and the held debrief that opens by itself when the round ends. The app's clock is the test's: the
tests move it and wait for what the screen shows, never for wall time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_rounds import enter_round, write_round_state
from test_tui_support import START, investigating_events, journal, make_app, run_async, screen_name, until

pytestmark = pytest.mark.slow  # drives the app

pytest_plugins = ("test_tui_support",)


def _status(app: Any) -> str:
    return str(app.screen.query_one("#status-line").render())


def _strip(app: Any) -> Any:
    return app.screen.query_one("#notices")


def test_ordinary_play_warns_at_5_and_1_minute_on_the_strip(tui_env: Path) -> None:
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    now = [START + 125.0]

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: now[0])
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks)
            await until(pilot, lambda: "time 2:05 / 15:00" in _status(app), what="the incident's clock")
            strip = _strip(app)
            now[0] = START + 900 - 299
            await until(pilot, lambda: strip.has("clock"), what="the 5-minute warning")
            assert strip.current.text == "5 minutes left on the clock." and strip.current.severity == "warning"
            assert not app._notifications  # on the strip, not a toast over the content
            now[0] = START + 900 - 59
            await until(pilot, lambda: strip.current is not None and strip.current.text.startswith("1 minute"),
                        what="the 1-minute warning")
            now[0] = START + 901
            await until(pilot, lambda: strip.current is not None and strip.current.text.startswith("Time is up"),
                        what="time is up")
            assert screen_name(app) == "WorkspaceScreen"  # ordinary play goes on
            assert app.play.session.state == "investigating"

    run_async(go())


def test_a_round_shows_its_clock_hands_in_at_time_up_and_holds_the_debrief(
        tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = START + 30.0  # the facilitator's start, not the player's
    state = enter_round(monkeypatch, tmp_path, limit_s=600.0, started=t0)
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    now = [t0 + 60.0]

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: now[0])
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks)
            await until(pilot, lambda: "round 1 · 9:00 left" in _status(app), what="the round's clock")
            assert "15:00" not in _status(app)  # not the incident's own limit
            strip = _strip(app)
            now[0] = t0 + 301
            await until(pilot, lambda: strip.has("clock"), what="the 5-minute warning")
            assert strip.current.text.startswith("5 minutes left in round 1.")
            now[0] = t0 + 541
            await until(pilot, lambda: strip.current.text.startswith("1 minute left in round 1"))
            await pilot.press("f8")  # the submit dialog is open when the time runs out
            await until(pilot, lambda: screen_name(app) == "SubmitScreen")
            now[0] = t0 + 600
            await until(pilot, lambda: "debrief-held" in app.marks, what="TIME UP")
            session = app.play.session
            assert session.state == "submitted"
            submitted = [e for e in session.events if e.kind == "submit"][-1]
            assert submitted.data["ranking"][0] == {"id": "throttle", "confidence": 70.0}  # the board on screen
            held = str(app.screen.query_one("#held-text").render())
            # the planned end has come: the facilitator's `end` opens the debriefs
            assert held.startswith("Handed in. The debrief opens when the round ends (when the facilitator ends it)")
            assert "SessionError" not in held
            screen = app.screen
            polls = screen.polls
            await until(pilot, lambda: screen.polls > polls, what="the hold asked again")
            assert screen_name(app) == "HeldDebriefScreen"
            write_round_state(state, t0, t0 + 620)  # the facilitator ends the round
            await until(pilot, lambda: screen_name(app) == "DebriefScreen", what="the debrief")

    run_async(go())


def test_a_submitted_game_resumed_in_a_running_round_shows_the_hold(
        tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_tui_support import submitted_events

    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=START)
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", submitted_events())

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 100.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "debrief-held" in app.marks, what="the hold")
            held = str(app.screen.query_one("#held-text").render())
            ends = time.strftime("%H:%M", time.localtime(START + 600))
            assert held.startswith(f"Handed in. The debrief opens when the round ends at {ends}")
            assert "Could not build" not in held

    run_async(go())


def test_the_picker_of_a_round_lists_only_the_rounds_incident_and_no_other_players_games(
        tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_tui_support import FIXTURE

    from game import api

    journal(tui_env / "sessions" / "ben-game.jsonl", investigating_events(), session_id="ben-game", player="ben")
    enter_round(monkeypatch, tmp_path)

    async def go() -> None:
        app = make_app(tui_env, incidents=[FIXTURE, api.find_incident("one-slow-replica")], steady=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            picker = app.screen
            assert [e.id for e in picker.entries] == ["tui-mini"]
            await until(pilot, lambda: picker.scanned, what="the sessions scanned")
            assert picker.unfinished == {}  # ben's open game is not shown on tester's picker

    run_async(go())


# ---------------------------------------------------------------- what it looks like (snapshots)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """HH:MM on screen in UTC, whatever the machine's zone (the snapshots are compared byte for byte)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_snapshot_round_workspace_with_a_minute_left(tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     snap_compare: Any) -> None:
    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=START)
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 545.0)

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: "workspace" in pilot.app.marks)
        await until(pilot, lambda: _strip(pilot.app).has("clock"))
        await until(pilot, lambda: len(pilot.app.screen.query_one("#schema").root.children) > 0)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)


def test_snapshot_held_debrief(tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, utc: None,
                               snap_compare: Any) -> None:
    from test_tui_support import submitted_events

    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=START)
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", submitted_events())
    app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 100.0)

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: "debrief-held" in pilot.app.marks)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)


def test_a_game_opened_after_the_round_ended_is_handed_in_at_once(
        tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    enter_round(monkeypatch, tmp_path, limit_s=600.0, started=START, ended=START + 400)
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 900.0)
        async with app.run_test(size=(80, 24)) as pilot:
            # the round is over and its debriefs are open: handed in, then straight to the debrief
            await until(pilot, lambda: screen_name(app) == "DebriefScreen", what="the debrief")
            assert app.play.session.state in ("submitted", "debriefed")
            assert "time-up" in app.marks

    run_async(go())


def test_the_briefing_of_a_round_states_the_rounds_limit(tui_env: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    enter_round(monkeypatch, tmp_path, limit_s=720.0, started=START)

    async def go() -> None:
        app = make_app(tui_env, steady=True, clock=lambda: START + 60.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await pilot.press("enter")
            await until(pilot, lambda: "ready" in app.marks, what="the telemetry")
            limits = str(app.screen.query_one("#briefing-limits").render())
            ends = time.strftime("%H:%M", time.localtime(START + 720))
            assert limits.startswith(f"Round 1: 12:00 for the round, ends at {ends}")
            assert "15:00" not in limits  # not the incident's own limit

    run_async(go())
