"""Progress in the terminal (issue 34): the history screen (F4 from the picker) lists past sessions and
reopens a debrief after a restart; a newcomer lands on the tutorial and completes it; the picker's "new"
marks. Every check waits for a state the app reaches (marks, screens, rows), never for a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_support import (
    START,
    journal,
    make_app,
    run_async,
    run_sql,
    screen_name,
    submitted_events,
    until,
)

pytestmark = pytest.mark.slow  # drives the app; the tutorial test simulates its worlds

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env


def finished_session(data: Path, total: float = 82.5, session_id: str = "tui-mini-fixed") -> Path:
    """A submitted hand-written session of tui-mini and its transcript (as the debrief writes it, with
    `total`), through game.api; returns the transcript."""
    from game import api

    path = journal(data / "sessions" / f"{session_id}.jsonl", submitted_events(), session_id=session_id)
    session = api.resume_session(path)
    try:
        return api.export_transcript(session, None, {"total": total}, root=data)
    finally:
        session.close()


def test_history_lists_past_sessions_and_reopens_a_debrief_after_a_restart(tui_env: Path) -> None:
    from game import api

    transcript = finished_session(tui_env)
    [past] = api.history("tester", tui_env)
    assert (past.incident_id, past.score, past.solved, past.taken_s, past.queries) == ("tui-mini", 82.5, True,
                                                                                         90.0, 1)
    assert api.history("someone-else", tui_env) == []

    app = make_app(tui_env)  # a fresh app: nothing of the game that wrote the transcript is in memory

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            assert "F4 History" in app.screen.query_one("KeyBar").text
            await pilot.press("f4")
            await until(pilot, lambda: "history" in app.marks, what="the history")
            assert screen_name(app) == "HistoryScreen"
            table = app.screen.query_one("#history-table")
            assert table.row_count == 1
            row = [str(c) for c in table.get_row_at(0)]
            assert row[1:] == ["82.5 ✓", "2023-11-14 22:14", "1:30", "1"]
            assert "tui-mini" in str(app.screen.query_one("#history-detail").render())
            await pilot.press("enter")
            await until(pilot, lambda: "debrief" in app.marks, timeout=120, what="the reopened debrief")
            assert screen_name(app) == "PastDebriefScreen" and app.screen.past == transcript
            assert "Esc History" in app.screen.query_one("KeyBar").text
            assert "Score" in str(app.screen.query_one("#debrief-score").render())
            assert "What each query ruled out" in app.screen.markdown
            assert "Reopened from your history" in str(app.screen.query_one("#debrief-status").render())
            assert "Score details" in [c.title for c in app.get_system_commands(app.screen)]
            await pilot.press("f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            assert "Past debrief" in app.screen.text and "Back to your past sessions." in app.screen.text
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PastDebriefScreen")
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "HistoryScreen")
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PickerScreen")

    run_async(go())
    assert sorted(p.name for p in (tui_env / "transcripts").iterdir()) == [transcript.name]  # nothing written


def test_history_is_in_help_and_the_palette_and_says_when_it_is_empty(tui_env: Path) -> None:
    app = make_app(tui_env)

    async def go() -> None:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "History" in titles
            await pilot.press("f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            assert "Your past sessions" in app.screen.text
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PickerScreen")
            await pilot.press("f4")
            await until(pilot, lambda: "history" in app.marks)
            assert app.screen.query_one("#history-table").row_count == 0
            assert "No finished sessions yet" in str(app.screen.query_one("#history-detail").render())
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Debrief" in titles
            await pilot.press("enter")  # nothing to open: stays, no error
            await pilot.pause()
            assert screen_name(app) == "HistoryScreen"
            await pilot.press("f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            assert "Past sessions" in app.screen.text and "Reopen the highlighted" in app.screen.text

    run_async(go())


def test_time_taken_counts_only_the_time_the_session_was_held(tui_env: Path) -> None:
    """Closed for 25 s between two sittings (the draft sidecar's held intervals): the history's time taken
    is the game clock, 90 s less the gap."""
    import json

    from game import api
    from game.session import DRAFT_FORMAT

    draft = tui_env / "sessions" / "tui-mini-fixed.draft"
    draft.parent.mkdir(parents=True)
    draft.write_text(json.dumps({"format": DRAFT_FORMAT, "format_version": 1, "session_id": "tui-mini-fixed",
                                 "held": [[START - 5, START + 60, True], [START + 85, START + 95, True]]}))
    finished_session(tui_env)
    [past] = api.history("tester", tui_env)
    assert past.taken_s == 65.0


def test_a_damaged_transcript_is_left_out(tui_env: Path) -> None:
    from game import api

    finished_session(tui_env)
    (tui_env / "transcripts" / "broken.json").write_text("{not json", encoding="utf-8")
    assert [p.session_id for p in api.history("tester", tui_env)] == ["tui-mini-fixed"]
    assert api.solved(api.SOLVED_SCORE) and not api.solved(api.SOLVED_SCORE - 0.1) and not api.solved(None)


def test_the_picker_marks_what_is_new_to_the_player(tui_env: Path) -> None:
    from game import api

    entries = api.library()
    nothing = api.met(entries, {})
    tutorial = next(e for e in entries if e.id == "first-shift-one-replica-lags")
    assert api.new_to_player(tutorial, nothing)[0] == "difficulty 0"
    after = api.met(entries, {tutorial.id: 90.0})
    assert api.new_to_player(tutorial, after) == []
    others = [e for e in entries if e.id != tutorial.id and e.difficulty == 0]
    assert all(not api.new_to_player(e, after) or set(e.shown_tags) - set(tutorial.shown_tags) for e in others)

    finished_session(tui_env, total=40.0)
    app = make_app(tui_env, steady=True)

    async def go() -> None:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await until(pilot, lambda: app.screen.scanned)
            await pilot.pause()
            table = app.screen.query_one("#picker-table")
            assert str(table.get_row_at(0)[2]) == "40"  # played, not solved: its best, no ✓ and no "new"

    run_async(go())


def _board_row(app: Any, hypothesis: str) -> int:
    return [i.id for i in app.screen.query_one("#board").board.items].index(hypothesis)


TUTORIAL = "first-shift-one-replica-lags"
SPLIT = ("SELECT replica, quantile_cont(prefill_s, 0.9) AS p90_prefill_s, count(*) AS n FROM requests "
         "WHERE status = 'ok' GROUP BY replica")
"""The tutorial's first update's query: the page's number split by replica (one replica stands out)."""
CLOCKS = "SELECT replica, min(value), max(value) FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica"
"""Its third update's query: the slow replica's GPU clock dropped."""
CHANGES = "SELECT kind, component, count(*) AS events FROM events GROUP BY ALL ORDER BY kind"
"""The change log (its first update's pointer, the incident's `nothing-restarted` signal): no restart, no
changed setting, so not a replica restarted with a small prefill budget."""


@pytest.fixture
def newcomer(library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data folder (a player with no history) on the run's shared build cache (the tutorial's
    database and worlds are built once per run, or kept with SERVEDRILL_TEST_CACHE)."""
    data = tmp_path / "data"
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(data))
    return data


async def _pin_to(app: Any, pilot: Any, hypothesis: str, key: str) -> None:
    await pilot.press("ctrl+b")
    board = app.screen.query_one("#board")
    await until(pilot, lambda: board.has_focus, what="the board")
    board.move_cursor(row=_board_row(app, hypothesis))
    await pilot.press(key)


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_a_newcomer_lands_on_the_tutorial_completes_it_and_reopens_its_debrief(newcomer: Path,
                                                                              size: tuple[int, int]) -> None:
    from game import api

    data = newcomer
    seen: dict[str, Any] = {}

    async def play() -> None:
        app = make_app(data, incidents=api.library_files(), preselect=None)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await until(pilot, lambda: app.screen.scanned, what="the player's record")
            await pilot.pause()
            assert app.screen.highlighted.id == TUTORIAL  # no history: the tutorial is selected
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen")
            await until(pilot, lambda: "ready" in app.marks, timeout=300, what="the tutorial's telemetry")
            await pilot.press("enter")
            await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
            await until(pilot, lambda: len(app.screen.query_one("#schema").root.children) > 0)

            # the decomposing query: one replica's prefill stands out
            view = await run_sql(app, pilot, SPLIT)
            assert view.ok and view.row_count == 2
            await _pin_to(app, pilot, "gpu-throttled", "s")
            await pilot.press("ctrl+e")
            view = await run_sql(app, pilot, CLOCKS)
            assert view.ok and view.row_count == 2
            await _pin_to(app, pilot, "gpu-throttled", "s")
            await pilot.press("ctrl+e")
            view = await run_sql(app, pilot, CHANGES)
            assert view.ok and "config_change" not in str(view.cells)
            await _pin_to(app, pilot, "small-prefill-chunks", "x")
            pins = api.active_pins(app.play.session)
            assert [(p["query"], p["hypothesis"], p["stance"]) for p in pins] == [
                (1, "gpu-throttled", "supports"), (2, "gpu-throttled", "supports"),
                (3, "small-prefill-chunks", "refutes")]

            # confidence: 95 on the throttled GPU, 5 on one rival, none on the others; then saved
            board = app.screen.query_one("#board")
            rivals = [i.id for i in board.board.items if i.id != "gpu-throttled"]
            board.move_cursor(row=_board_row(app, "gpu-throttled"))
            await pilot.press(*["plus"] * 14)
            for rival in rivals:
                board.move_cursor(row=_board_row(app, rival))
                await pilot.press(*["minus"] * 5)
            await pilot.press("plus")
            assert sorted(i.confidence for i in board.board.items) == [0, 0, 5, 95]
            await pilot.press("N", "ctrl+s")
            await until(pilot, lambda: app.play.session.ranking is not None, what="the saved ranking")
            assert app.play.session.ranking[0]["id"] == "gpu-throttled"

            # submit and read the debrief
            await pilot.press("f8")
            await until(pilot, lambda: screen_name(app) == "SubmitScreen")
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "debrief" in app.marks, timeout=600, what="the debrief (scoring)")
            report = app.screen.report
            assert report.submitted and report.total >= api.SOLVED_SCORE
            assert set(report.ruled_out) == set(report.rivals)  # both queries together rule every rival out
            assert "What each query ruled out" in app.screen.markdown
            seen["total"], seen["markdown"] = report.total, app.screen.markdown

    run_async(play())

    async def reopen() -> None:
        app = make_app(data, incidents=api.library_files(), preselect=None)  # after a restart
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await until(pilot, lambda: app.screen.scanned)
            assert app.screen.best[TUTORIAL] == seen["total"]
            await pilot.press("f4")
            await until(pilot, lambda: "history" in app.marks)
            table = app.screen.query_one("#history-table")
            assert table.row_count == 1 and str(table.get_row_at(0)[1]).endswith("✓")
            await pilot.press("enter")
            await until(pilot, lambda: "debrief" in app.marks, timeout=300, what="the reopened debrief")
            assert app.screen.report.total == pytest.approx(seen["total"], abs=0.05)
            assert app.screen.markdown == seen["markdown"]

    run_async(reopen())
