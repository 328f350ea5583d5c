"""Playing through the interface with Textual's Pilot: the whole game, resume, cancelling a query, and
the editor's helpers. Every check reads what the session recorded or what the screen shows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import (
    FIXTURE,
    investigating_events,
    journal,
    make_app,
    open_workspace,
    run_async,
    run_sql,
    screen_name,
    until,
)
from textual import events

from game.query.limits import PLAYER_LIMITS
from game.session.hypotheses import Shown

pytestmark = pytest.mark.slow  # drives the app through whole games

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

BOARD = [  # tui-mini's hypotheses as a session at seed 0 shows them (game.session.hypotheses.shown_hypotheses)
    Shown("A", "bad-deploy", "The gateway release added latency"),
    Shown("B", "throttle", "A GPU runs at reduced clocks"),
    Shown("C", "kv-pressure", "KV cache pressure"),
    Shown("D", "overload", "More traffic than the fleet can take"),
]

SPLIT_SQL = ("SELECT time_bucket(INTERVAL '30 seconds', ts) AS t, replica, avg(prefill_s) AS prefill "
             "FROM requests WHERE status = 'ok' GROUP BY ALL ORDER BY t, replica")


def _session_events(data: Path) -> list[dict]:
    [path] = list((data / "sessions").glob("*.jsonl"))
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines[1:] if line.strip()]


def _visible(app: Any, selector: str) -> bool:
    """Whether a widget is on screen, whole: inside the terminal, and not zero-sized."""
    region = app.screen.query_one(selector).region
    width, height = app.size
    return region.width > 0 and region.height > 0 and region.right <= width and region.bottom <= height


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_play_a_whole_incident(tui_env: Path, size: tuple[int, int]) -> None:
    data = tui_env
    seen: dict[str, Any] = {}

    def submit_key_shown() -> bool:
        bar = app.screen.query_one("KeyBar")
        return "F8 Submit" in bar.text and _visible(app, "#keybar-pinned")

    app = make_app(data)

    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            # pick: the fixture is listed and preselected
            await until(pilot, lambda: "picker" in app.marks)
            table = app.screen.query_one("#picker-table")
            assert table.row_count == 1 and table.cursor_row == 0
            await pilot.press("enter")
            # briefing: the page, then the telemetry
            await until(pilot, lambda: screen_name(app) == "BriefingScreen")
            card = str(app.screen.query_one("#alert-card").render())
            assert "Chat team" in card and "first token" in card
            await until(pilot, lambda: "ready" in app.marks)
            # the hypotheses, once the incident has loaded: by label, in the session's board order
            card = str(app.screen.query_one("#alert-card").render())
            board_titles = [s.title for s in BOARD]
            assert [card.index(t) for t in board_titles] == sorted(card.index(t) for t in board_titles)
            assert f"A  {BOARD[0].title}" in card and "throttle" not in card
            assert "budget 12" in str(app.screen.query_one("#briefing-limits").render())
            await pilot.press("enter")
            await until(pilot, lambda: "workspace" in app.marks)
            await until(pilot, lambda: len(app.screen.query_one("#schema").root.children) > 0)
            tables = {str(n.label) for n in app.screen.query_one("#schema").root.children}
            assert {"requests", "metrics", "events"} <= tables

            # a query: rows on screen, counted in the status line and the query list
            view = await run_sql(app, pilot, SPLIT_SQL)
            assert view.ok and view.row_count == 20
            assert app.screen.query_one("#results-table").row_count == 20
            assert "queries 1 / 12" in str(app.screen.query_one("#status-line").render())
            assert app.screen.query_one("#query-log").option_count == 1
            assert submit_key_shown()

            # plot it: one line per replica, the api-gateway deploy marked from the events table
            await pilot.press("f2")
            plot = app.screen.query_one("#results-plot")
            await until(pilot, lambda: plot.drawn_series == 2)
            assert [m.label for m in plot.drawn_markers] == ["deploy api-gateway"]
            await pilot.press("f2")

            # the board: the session's shuffled order, labelled, an even spread; the world build started
            assert app.play.session.board == BOARD
            await pilot.press("ctrl+b")
            board = app.screen.query_one("#board")
            assert [(i.label, i.id, i.confidence) for i in board.board.items] == [
                (s.label, s.id, 25) for s in BOARD]
            assert [str(board.get_row_at(r)[1]) for r in range(4)] == ["A", "B", "C", "D"]
            await until(pilot, lambda: app.world_builds, what="the world build to start")
            assert _visible(app, "#board") and submit_key_shown()  # F8 stays in the bar with the board focused
            # move "throttle" (B) to the top, back down, up again; confidences; pin; save
            await pilot.press("down", "shift+up")
            assert [i.id for i in board.board.items][:2] == ["throttle", "bad-deploy"]
            await pilot.press("shift+down")
            assert [i.id for i in board.board.items][:2] == ["bad-deploy", "throttle"]
            await pilot.press("shift+up")
            assert [i.id for i in board.board.items][:2] == ["throttle", "bad-deploy"]
            await pilot.press("plus", "plus", "plus", "plus")  # throttle 25 -> 45
            await pilot.press("down", "minus", "minus", "minus")  # bad-deploy 25 -> 10
            assert [i.confidence for i in board.board.items] == [45, 10, 25, 25]
            await pilot.press("up", "s")  # Q1 supports throttle
            await pilot.press("ctrl+s")  # refused: 105% and out of order
            assert not [e for e in _session_events(data) if e["kind"] == "rank"]
            await pilot.press("N", "ctrl+s")
            ranks = [e for e in _session_events(data) if e["kind"] == "rank"]
            assert len(ranks) == 1
            saved = ranks[0]["data"]["ranking"]
            assert sum(r["confidence"] for r in saved) == 100 and saved[0]["id"] == "throttle"
            pins = [e["data"] for e in _session_events(data) if e["kind"] == "pin"]
            assert pins == [{"query": 1, "hypothesis": "throttle", "stance": "supports"}]

            # submit: the dialog says pins count both ways; no query to name any more
            await pilot.press("f8")
            await until(pilot, lambda: screen_name(app) == "SubmitScreen")
            pins_said = str(app.screen.query_one("#submit-pins").render())
            assert "You pinned 1 result." in pins_said and "costs points" in pins_said
            assert not app.screen.query("Select")
            for button in ("#submit-confirm", "#submit-normalise", "#submit-cancel"):
                assert _visible(app, button), button
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "debrief" in app.marks, timeout=120, what="the debrief (scoring)")
            score_line = str(app.screen.query_one("#debrief-score").render())
            assert "Score" in score_line and "/ 100" in score_line and "conclusion" in score_line
            report = app.screen.report
            assert report.submitted and report.per_query[0]["ok"]
            # the split by replica tells the throttled replica apart from every rival world
            assert report.ruled_out == {r: 1 for r in report.rivals}
            assert report.pins == [{"query": 1, "hypothesis": "throttle", "stance": "supports", "verdict": "right"}]
            assert "Your queries against the fault timeline" in app.screen.markdown
            assert "What each query ruled out" in app.screen.markdown

            # export the debrief next to the transcript
            await pilot.press("e")
            transcript = app.screen.transcript
            assert transcript.is_file() and transcript.with_suffix(".md").is_file()
            assert transcript.with_suffix(".md").read_text().startswith("# Debrief")

            # back to the list: the best score shows once the rescan lands (an earlier scan may have
            # finished before the game began, so `scanned` alone says nothing about this score)
            [picker] = [s for s in app.screen_stack if type(s).__name__ == "PickerScreen"]
            scans = picker.scans
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PickerScreen")
            await until(pilot, lambda: app.screen.scans > scans, timeout=10, what="the rescan")
            assert app.screen.best["tui-mini"] == report.total
            seen["total"] = report.total
            seen["builds"] = [p for p in app.world_builds.values() if p is not None]

    run_async(go())
    kinds = [e["kind"] for e in _session_events(data)]
    assert kinds[0] == "start" and kinds[-2:] == ["submit", "debrief_viewed"]
    [transcript] = list((data / "transcripts").glob("*.json"))
    assert json.loads(transcript.read_text())["score"] == {"total": seen["total"]}
    # stopped (or done) on exit; none was started when the worlds were all in the (shared) test cache already
    assert all(p.poll() is not None for p in seen["builds"])


def test_resume_after_closing_mid_investigation(tui_env: Path) -> None:
    data = tui_env

    async def first() -> None:
        app = make_app(data)
        async with app.run_test(size=(120, 36)) as pilot:
            await open_workspace(app, pilot)
            await run_sql(app, pilot, "SELECT replica, count(*) AS n FROM requests GROUP BY replica")
            await run_sql(app, pilot, SPLIT_SQL)
            await pilot.press("ctrl+b", "s")  # pin Q2 on the top hypothesis

    async def second() -> None:
        app = make_app(data)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await until(pilot, lambda: app.screen.scanned, timeout=10)
            assert "1 open" in str(app.screen.query_one("#picker-table").get_row_at(0)[3])  # the Session column
            await pilot.press("enter")
            await until(pilot, lambda: "ready" in app.marks and app.screen.unfinished)
            assert "unfinished session" in str(app.screen.query_one("#briefing-action").render())
            await pilot.press("enter")
            await until(pilot, lambda: "workspace" in app.marks)
            log = app.screen.query_one("#query-log")
            assert log.option_count == 2
            editor = app.screen.query_one("#editor")
            assert editor.text == SPLIT_SQL  # the last query is back in the editor
            assert editor.query_history[-1] == SPLIT_SQL
            view = app.screen.query_one("#results").view
            assert view.from_journal and view.index == 2 and view.row_count == 20
            board = app.screen.query_one("#board")
            assert board.board.items[0].id == BOARD[0].id  # no ranking saved: the board order
            assert board.evidence[BOARD[0].id].supports == [2]
            # and the game goes on: the next query is Q3
            assert (await run_sql(app, pilot, "SELECT 1 AS one")).index == 3

    run_async(first())
    run_async(second())
    assert len(list((data / "sessions").glob("*.jsonl"))) == 1


def test_resume_from_the_command_line_path_opens_the_workspace(tui_env: Path) -> None:
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())

    async def go() -> None:
        app = make_app(tui_env, resume_session=path)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks)
            board = app.screen.query_one("#board")
            assert (board.board.items[0].id, board.board.items[0].confidence) == ("throttle", 70)
            assert "saved" in board.border_title and "unsaved" not in board.border_title

    run_async(go())


def test_escape_cancels_a_running_query_and_the_ui_stays_live(tui_env: Path) -> None:
    slow = "SELECT sum(a.range * b.range) FROM range(400000) a, range(400000) b"

    async def go() -> None:
        app = make_app(tui_env, limits=dataclasses.replace(PLAYER_LIMITS, timeout_s=120.0))
        async with app.run_test(size=(120, 36)) as pilot:
            await open_workspace(app, pilot)
            app.screen.query_one("#editor").load_text(slow)
            await pilot.press("f5")
            await until(pilot, lambda: app.play.gateway.busy, what="the query to start")
            assert app.screen.running
            # the board still answers while DuckDB works
            await pilot.press("ctrl+b", "plus")
            assert app.screen.query_one("#board").board.items[0].confidence == 30
            await pilot.press("escape")
            await until(pilot, lambda: "rows" in app.marks, timeout=20, what="the cancelled result")
            view = app.screen.query_one("#results").view
            assert not view.ok and view.error == "cancelled" and not view.counted
            assert "not counted" in str(app.screen.query_one("#results-info").render())
            assert "queries 0 / 12" in str(app.screen.query_one("#status-line").render())
            assert not app.screen.running
            # Escape with nothing running goes back to moving focus, not cancelling
            assert not app.screen.check_action("cancel_query", ())

    run_async(go())
    # a cancelled statement costs nothing: it is not journalled, so it is not counted against the budget
    assert not [e for e in _session_events(tui_env) if e["kind"] == "query"]


def test_editor_history_completion_schema_and_snippets(tui_env: Path) -> None:
    async def go() -> None:
        app = make_app(tui_env)
        async with app.run_test(size=(120, 36)) as pilot:
            await open_workspace(app, pilot)
            editor = app.screen.query_one("#editor")
            await run_sql(app, pilot, "SELECT 1 AS one")
            await run_sql(app, pilot, "SELECT 2 AS two")
            editor.load_text("SELECT 3")
            editor.focus()
            await pilot.press("up", "down", "down")  # the arrows only move the cursor: never the history
            assert editor.text == "SELECT 3"
            await pilot.press("ctrl+up")
            assert editor.text == "SELECT 2 AS two"
            await pilot.press("ctrl+up")
            assert editor.text == "SELECT 1 AS one"
            await pilot.press("down")
            assert editor.text == "SELECT 1 AS one"
            await pilot.press("ctrl+down", "ctrl+down")
            assert editor.text == "SELECT 3"  # back to the draft

            # completion: one candidate completes in place, several open a menu
            editor.load_text("SELECT prefi")
            editor.move_cursor(editor.document.end)
            await pilot.press("tab")
            assert editor.text == "SELECT prefill_s"
            editor.load_text("SELECT * FROM re")
            editor.move_cursor(editor.document.end)
            await pilot.press("tab")
            assert editor.text == "SELECT * FROM requests"
            editor.load_text("SELECT replica, ts FROM requests WHERE ")
            editor.move_cursor(editor.document.end)
            await pilot.press("t", "tab")
            menu = app.screen.query_one("#completion")
            assert menu.display and menu.option_count >= 3  # table_description, task, tenant, ...
            await pilot.press("down", "enter")
            assert not menu.display and editor.text.startswith("SELECT replica, ts FROM requests WHERE t")
            assert editor.text != "SELECT replica, ts FROM requests WHERE t"

            # schema: Enter on a column inserts its name at the cursor
            editor.load_text("SELECT ")
            editor.move_cursor(editor.document.end)
            tree = app.screen.query_one("#schema")
            requests = next(n for n in tree.root.children if str(n.label) == "requests")
            requests.expand()
            await until(pilot, lambda: requests.children[0].line >= 0, what="the expanded table's columns")
            tree.focus()
            tree.move_cursor(requests.children[0])
            await pilot.press("enter")
            assert editor.text == "SELECT " + requests.children[0].data[1]

            # snippets: the first one replaces the editor's text
            await pilot.press("f3")
            await until(pilot, lambda: screen_name(app) == "SnippetScreen")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            assert "queue_s" in editor.text and "prefill_s" in editor.text

    run_async(go())


def test_hint_note_help_and_a_small_terminal(tui_env: Path) -> None:
    async def go() -> None:
        app = make_app(tui_env)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_workspace(app, pilot)
            # 80x24 is compact: the editor over one pane (the results first), the board a key away
            assert app.screen.compact
            for selector in ("#editor", "#results", "#status-line", "#pane-bar"):
                region = app.screen.query_one(selector).region
                assert region.width > 0 and region.height > 0, selector
            assert app.screen.query_one("#results-table").region.height >= 12
            assert app.screen.query_one("#board").region.height == 0
            # a hint is confirmed first, then recorded and counted
            await pilot.press("f6")
            await until(pilot, lambda: screen_name(app) == "ConfirmScreen")
            await pilot.press("n")
            assert app.play.session.hints_taken == 0
            await pilot.press("f6")
            await until(pilot, lambda: screen_name(app) == "ConfirmScreen")
            await pilot.press("y")
            assert app.play.session.hints_taken == 1
            assert "hints 1 / 2" in str(app.screen.query_one("#status-line").render())
            # a note on the selected hypothesis
            await pilot.press("ctrl+b", "n")
            await until(pilot, lambda: screen_name(app) == "NoteScreen")
            await pilot.press(*"clock?", "ctrl+s")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            assert app.screen.query_one("#board").notes == {BOARD[0].id: "clock?"}
            assert app.screen.query_one("#board").region.height >= 7  # the board's pane: every row and the note
            # help lists the keys; the light theme renders too
            await pilot.press("f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            await pilot.press("escape")
            app.theme = "textual-light"
            editor = app.screen.query_one("#editor")
            await until(pilot, lambda: editor.theme == "github_light", what="the editor in the light theme")
            assert screen_name(app) == "WorkspaceScreen"

    run_async(go())
    notes = [e["data"] for e in _session_events(tui_env) if e["kind"] == "note"]
    assert notes == [{"hypothesis": BOARD[0].id, "text": "clock?"}]


def test_a_broken_incident_shows_its_diagnostics(tui_env: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad-one.yaml"
    bad.write_text(FIXTURE.read_text().replace("difficulty: 1", "difficulty: 9"))

    async def go() -> None:
        app = make_app(tui_env, incidents=[bad], preselect=None)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen" and app.screen.failed)
            assert "difficulty" in str(app.screen.query_one("#briefing-action").render())
            await pilot.press("enter")  # nothing to start
            assert screen_name(app) == "BriefingScreen"
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PickerScreen")

    run_async(go())


def test_a_tab_that_asks_for_the_players_name_records_it(tui_env: Path) -> None:
    app = make_app(tui_env, ask_player=True, player="server-user")

    async def go() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: screen_name(app) == "PlayerNameScreen", what="the name dialog")
            await pilot.press("ctrl+u")  # select-all is not needed: clear the suggestion
            await pilot.press(*"   ")
            await pilot.press("enter")  # blank: refused, the dialog stays
            assert screen_name(app) == "PlayerNameScreen" and app.player == "server-user"
            await pilot.press("ctrl+u", *"Ada  Lovelace", "enter")
            await until(pilot, lambda: screen_name(app) == "PickerScreen", what="the picker")
            assert app.player == "Ada Lovelace"

    run_async(go())


def _key_name(character: str) -> str:
    from textual.keys import _character_to_key

    return _character_to_key(character)


def test_keys_typed_while_the_investigation_opens_reach_the_editor(tui_env: Path) -> None:
    """Type-ahead: what the player types right after starting (while the session opens and the workspace
    mounts) lands in the SQL editor, in order, F5 included; a repeated start key opens no second session,
    and "n" (the briefing's "new session" key) is just a letter of the query."""
    sql = "SELECT count(*) AS n FROM requests"

    async def go() -> None:
        app = make_app(tui_env)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen" and "ready" in app.marks)
            # everything in one go, as a terminal delivers fast typing: posted without waiting between
            # keys (Pilot.press waits for the app to settle after each), so it arrives before the
            # workspace exists
            keys = [("enter", "\r"), ("enter", "\r")] + [(_key_name(c), c) for c in sql] + [("f5", None)]
            for key, character in keys:
                app.post_message(events.Key(key, character))
            await until(pilot, lambda: "rows" in app.marks, what="the typed query's rows")
            editor = app.screen.query_one("#editor")
            assert app.screen.focused is editor
            assert editor.text == sql
            assert app.screen.query_one("#results").view.row_count == 1

    run_async(go())
    assert len(list((tui_env / "sessions").glob("*.jsonl"))) == 1
    [query] = [e for e in _session_events(tui_env) if e["kind"] == "query"]
    assert query["data"]["sql"] == sql


def test_a_newcomer_lands_on_the_tutorial_and_a_returning_player_on_the_default(tui_env: Path) -> None:
    """With no score and no session of theirs, the picker highlights the tutorial once it has read the
    player's record; a player with a session keeps the default incident highlighted."""
    from game import api
    from game.rules.library import DEFAULT_INCIDENT, TUTORIAL_INCIDENT


    files = [api.find_incident(i) for i in (DEFAULT_INCIDENT, TUTORIAL_INCIDENT, "oom-at-peak")]

    async def highlighted(data: Path) -> str:
        app = make_app(data, incidents=files, preselect=None)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await until(pilot, lambda: app.screen.scanned, timeout=30)
            await pilot.pause()
            table = app.screen.query_one("#picker-table")
            return str(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value)

    assert Path(run_async(highlighted(tui_env))).stem == TUTORIAL_INCIDENT
    returning = tui_env.parent / "returning"
    journal(returning / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    assert Path(run_async(highlighted(returning))).stem == DEFAULT_INCIDENT
