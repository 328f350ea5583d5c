"""The workspace's keys at 80x24 and on a roomy terminal, with Textual's Pilot: a key per pane, maximise,
focus that stays where the player put it, history only on its key, the board's Home/End and unpin, a
cell in full, help for where you are, the submit key always in the bar, failed statements not counted.

Each test resumes the hand-written investigation (tests/test_tui_support.py) and waits for states (the
focus, the pane shown, a screen on top, a result), never for time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_support import (
    START,
    investigating_events,
    journal,
    make_app,
    run_async,
    run_sql,
    screen_name,
    until,
)

pytestmark = pytest.mark.slow  # drives the app key by key on a built incident

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

SPLIT_SQL = ("SELECT time_bucket(INTERVAL '30 seconds', ts) AS t, replica, avg(prefill_s) AS prefill "
             "FROM requests WHERE status = 'ok' GROUP BY ALL ORDER BY t, replica")
SMALL, ROOMY = (80, 24), (160, 48)


def _app(data: Path, **kwargs: Any) -> Any:
    path = journal(data / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    return make_app(data, resume_session=path, steady=True, clock=lambda: START + 125.0, **kwargs)


async def _ready(app: Any, pilot: Any) -> Any:
    await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
    await until(pilot, lambda: len(app.screen.query_one("#schema").root.children) > 0, what="the schema")
    await app.workers.wait_for_complete()
    return app.screen


def _shown(app: Any, selector: str) -> bool:
    region = app.screen.query_one(selector).region
    return region.width > 0 and region.height > 0


def _focused_id(app: Any) -> str | None:
    return app.focused.id if app.focused is not None else None


@pytest.mark.parametrize("size", [SMALL, ROOMY], ids=["80x24", "160x48"])
def test_one_key_per_pane_moves_the_focus_there(tui_env: Path, size: tuple[int, int]) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=size) as pilot:
            screen = await _ready(app, pilot)
            assert screen.compact == (size == SMALL)
            await run_sql(app, pilot, SPLIT_SQL)  # something to plot
            steps = [("ctrl+o", "results", "results-table"), ("ctrl+g", "plot", "plot-widget"),
                     ("ctrl+b", "board", "board"), ("ctrl+t", "schema", "schema"),
                     ("ctrl+l", "queries", "query-log"), ("f4", "updates", "updates-feed"),
                     ("ctrl+e", None, "editor")]
            for key, pane, widget in steps:
                await pilot.press(key)
                await until(pilot, lambda w=widget: _focused_id(app) == w, what=f"{key} to focus #{widget}")
                assert _shown(app, f"#{widget}"), key
                if pane is not None:
                    assert screen.pane == pane
                    if screen.compact:
                        assert pane in str(screen.query_one("#pane-bar").render()).lower() or pane == "schema"
            if screen.compact:
                # the board's pane hides the editor; ctrl+e brings it back
                await pilot.press("ctrl+b")
                await until(pilot, lambda: _focused_id(app) == "board")
                assert not _shown(app, "#editor") and screen.query_one("#board").region.height >= 7
                await pilot.press("ctrl+e")
                await until(pilot, lambda: _focused_id(app) == "editor")
                assert _shown(app, "#editor") and screen.pane == "results"

    run_async(go())


def test_a_click_on_the_pane_bar_shows_that_pane(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            screen = await _ready(app, pilot)
            await screen.run_action("show_pane('board')")  # what a click on "Board" runs
            await until(pilot, lambda: _focused_id(app) == "board")
            assert screen.pane == "board" and _shown(app, "#board")

    run_async(go())


@pytest.mark.parametrize("size", [SMALL, ROOMY], ids=["80x24", "160x48"])
def test_ctrl_f_maximises_the_focused_pane_and_puts_it_back(tui_env: Path, size: tuple[int, int]) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=size) as pilot:
            screen = await _ready(app, pilot)
            await pilot.press("ctrl+o")
            await until(pilot, lambda: _focused_id(app) == "results-table")
            before = screen.query_one("#results").region.height
            await pilot.press("ctrl+f")
            await until(pilot, lambda: screen.maximized is not None)
            assert screen.maximized.id == "results"
            await pilot.pause()
            assert screen.query_one("#results").region.height > before
            assert _shown(app, "KeyBar") and _shown(app, "#status-line")  # the bar and the status stay
            await pilot.press("ctrl+f")
            await until(pilot, lambda: screen.maximized is None)
            # the board, then Escape puts it back too
            await pilot.press("ctrl+b", "ctrl+f")
            await until(pilot, lambda: screen.maximized is not None and screen.maximized.id == "board")
            await pilot.press("escape")
            await until(pilot, lambda: screen.maximized is None)
            assert _focused_id(app) == "board"

    run_async(go())


def test_recalling_a_past_query_keeps_the_focus_in_the_list_and_arrows_never_recall(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            screen = await _ready(app, pilot)
            editor = screen.query_one("#editor")
            await run_sql(app, pilot, "SELECT 2 AS two")
            await pilot.press("ctrl+l")
            await until(pilot, lambda: _focused_id(app) == "query-log")
            log = screen.query_one("#query-log")
            assert log.option_count == 2 and log.highlighted == 1
            await pilot.press("up", "enter")  # Q1
            await until(pilot, lambda: screen.current.index == 1, what="Q1 recalled")
            assert _focused_id(app) == "query-log"  # the focus stayed where the player put it
            assert editor.text.startswith("SELECT replica, avg(prefill_s)")
            # in the editor the arrows move the cursor and nothing else
            await pilot.press("ctrl+e")
            await until(pilot, lambda: _focused_id(app) == "editor")
            recalled = editor.text
            await pilot.press("down", "down", "up", "up", "up")
            assert editor.text == recalled
            await pilot.press("ctrl+up")
            assert editor.text == "SELECT 2 AS two"  # history only on its key

    run_async(go())


def test_the_schema_inserts_names_and_keeps_the_focus(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            screen = await _ready(app, pilot)
            editor = screen.query_one("#editor")
            editor.load_text("SELECT ")
            editor.move_cursor(editor.document.end)
            await pilot.press("ctrl+t")
            await until(pilot, lambda: _focused_id(app) == "schema")
            assert _shown(app, "#editor")  # beside the tables: the player sees what Enter writes
            tree = screen.query_one("#schema")
            requests = next(n for n in tree.root.children if str(n.label) == "requests")
            requests.expand()
            await until(pilot, lambda: requests.children[0].line >= 0, what="the columns")
            tree.move_cursor(requests.children[0])
            await pilot.press("enter")
            assert editor.text == "SELECT " + requests.children[0].data[1]
            assert _focused_id(app) == "schema"

    run_async(go())


def test_board_home_end_and_unpin(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            screen = await _ready(app, pilot)
            await pilot.press("ctrl+b")
            await until(pilot, lambda: _focused_id(app) == "board")
            board = screen.query_one("#board")
            await pilot.press("end")
            assert board.cursor_row == len(board.board.items) - 1
            await pilot.press("home")
            assert board.cursor_row == 0
            assert board.evidence["throttle"].supports == [1]  # the hand-written pin, on the top row

            await pilot.press("u")  # the only pin on this row goes at once
            await until(pilot, lambda: not board.evidence["throttle"].supports, what="the unpin")
            assert [e.kind for e in app.play.session.events][-1] == "unpin"
            assert "Unpinned Q1" in board.flashed

    run_async(go())


def test_a_pin_says_what_it_did_on_the_board_not_in_a_toast(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            screen = await _ready(app, pilot)
            await pilot.press("ctrl+b", "down", "x")
            board = screen.query_one("#board")
            await until(pilot, lambda: "Pinned Q1 as refutes" in board.flashed, what="the flash")
            assert "Pinned" in str(board.border_subtitle)
            assert not [n for n in app._notifications if "Pinned" in n.message]

    run_async(go())


def test_v_shows_a_cell_in_full_and_enter_the_row(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            await _ready(app, pilot)
            long = "x" * 300
            await run_sql(app, pilot, f"SELECT 'vllm-0' AS replica, '{long}' AS note")
            await pilot.press("ctrl+o")
            await until(pilot, lambda: _focused_id(app) == "results-table")
            await pilot.press("right", "v")
            await until(pilot, lambda: screen_name(app) == "RowDetailScreen")
            text = app.screen.query_one("#detail-text").text
            assert long in text and "vllm-0" not in text  # that cell alone, whole
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "RowDetailScreen")
            text = app.screen.query_one("#detail-text").text
            assert long in text and "vllm-0" in text  # the whole row
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            assert _focused_id(app) == "results-table"

    run_async(go())


def test_help_opens_for_the_focused_pane_with_keys_as_typed(tui_env: Path) -> None:
    from tui.actions import SCOPE_TITLES

    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            await _ready(app, pilot)
            await pilot.press("ctrl+b", "f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            help_screen = app.screen
            assert help_screen.scopes[:2] == ["board", "workspace"]
            assert not help_screen.query("Markdown")  # plain text: drawn at once
            text = help_screen.text
            assert text.index(SCOPE_TITLES["board"]) < text.index(SCOPE_TITLES["workspace"])
            assert SCOPE_TITLES["picker"] not in text
            assert "question_mark" not in text and "equals_sign" not in text and "+ / =" in text
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            assert _focused_id(app) == "board"

    run_async(go())


def test_help_on_the_picker_lists_the_pickers_keys(tui_env: Path) -> None:
    async def go() -> None:
        app = make_app(tui_env, steady=True)
        async with app.run_test(size=SMALL) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await pilot.press("f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            assert app.screen.scopes == ["picker"]
            assert "Type to narrow the list" in app.screen.text and "Run the SQL" not in app.screen.text

    run_async(go())


@pytest.mark.parametrize("size", [SMALL, (140, 40)], ids=["80x24", "140x40"])
def test_the_submit_key_is_in_the_bar_whatever_has_focus(tui_env: Path, size: tuple[int, int]) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=size) as pilot:
            screen = await _ready(app, pilot)
            for key, widget in (("ctrl+e", "editor"), ("ctrl+o", "results-table"), ("ctrl+b", "board"),
                                ("ctrl+t", "schema"), ("ctrl+l", "query-log")):
                await pilot.press(key)
                await until(pilot, lambda w=widget: _focused_id(app) == w)
                await pilot.pause()
                bar = screen.query_one("KeyBar")
                pinned = screen.query_one("#keybar-pinned")
                assert "F8 Submit" in bar.text and "F5 Run" in bar.text and "F1 Help" in bar.text, key
                assert pinned.region.right <= size[0] and pinned.region.width > 0, key

    run_async(go())


def test_a_failed_statement_is_shown_and_costs_no_query(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=SMALL) as pilot:
            screen = await _ready(app, pilot)
            view = await run_sql(app, pilot, "SELECT * FROM no_such_table")
            assert not view.ok and not view.counted
            assert "not counted" in str(screen.query_one("#results-info").render())
            assert "queries 1 / 12" in str(screen.query_one("#status-line").render())  # still the one
            assert len(app.play.session.queries) == 1
            assert screen.query_one("#query-log").option_count == 1
            assert screen.query_one("#editor").query_history[-1] == "SELECT * FROM no_such_table"
            # and there is nothing to pin
            await pilot.press("ctrl+b", "s")
            board = screen.query_one("#board")
            await until(pilot, lambda: "Nothing to pin" in board.flashed)
            view = await run_sql(app, pilot, "SELECT 1 AS one")
            assert view.ok and view.index == 2  # the next statement that ran is Q2, no gap

    run_async(go())
