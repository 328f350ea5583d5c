"""An editor that edits: select all (alt+a), clear (alt+n), duplicate line (alt+d), comment line (ctrl+/),
each in F1 and the palette; a recalled or inserted query replaces the text (one undoable edit); a resumed
session opens with the cursor after the text, so a stray Enter never starts it with a blank line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_support import START, investigating_events, journal, make_app, run_async, screen_name, until

pytestmark = pytest.mark.slow  # drives the app

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env


def _app(data: Path) -> Any:
    path = journal(data / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    return make_app(data, resume_session=path, steady=True, clock=lambda: START + 125.0)


async def _editor(app: Any, pilot: Any) -> Any:
    await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
    editor = app.screen.query_one("#editor")
    await until(pilot, lambda: app.focused is editor, what="the editor's focus")
    return editor


def test_a_resumed_session_opens_with_the_cursor_after_the_text(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=(80, 24)) as pilot:
            editor = await _editor(app, pilot)
            before = editor.text
            assert before and editor.cursor_location == editor.document.end
            await pilot.press("enter")  # the briefing's Enter pressed once more
            assert not editor.text.startswith("\n") and editor.text.startswith(before)

    run_async(go())


def test_select_all_then_typing_replaces_and_clear_is_undoable(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=(80, 24)) as pilot:
            editor = await _editor(app, pilot)
            old = editor.text
            await pilot.press("ctrl+a")  # still line start, as in a shell: selects nothing
            assert editor.selection.is_empty
            await pilot.press("alt+a")
            assert editor.selected_text == old
            await pilot.press("s", "e", "l")
            assert editor.text == "sel"
            await pilot.press("alt+n")
            assert editor.text == "" and app.focused is editor
            await pilot.press("ctrl+z")
            assert editor.text == "sel"

    run_async(go())


def test_duplicate_and_comment_lines(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=(80, 24)) as pilot:
            editor = await _editor(app, pilot)
            editor.load_text("SELECT 1\nFROM requests")
            editor.move_cursor((0, 3))
            await pilot.press("alt+d")
            assert editor.text == "SELECT 1\nSELECT 1\nFROM requests"
            assert editor.cursor_location == (1, 3)
            await pilot.press("ctrl+underscore")  # what a terminal sends for ctrl+/
            assert editor.text == "SELECT 1\n-- SELECT 1\nFROM requests"
            assert editor.cursor_location == (1, 6)
            await pilot.press("ctrl+slash")  # the same key under kitty's protocol: back in
            assert editor.text == "SELECT 1\nSELECT 1\nFROM requests"
            editor.select_all()
            await pilot.press("ctrl+underscore")
            assert editor.text == "-- SELECT 1\n-- SELECT 1\n-- FROM requests"
            editor.select_all()
            await pilot.press("alt+d")  # the selected lines, copied below themselves
            assert editor.text.count("-- FROM requests") == 2

    run_async(go())


def test_a_recalled_or_snippet_query_replaces_the_text(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=(80, 24)) as pilot:
            editor = await _editor(app, pilot)
            editor.load_text("half a new query")
            await pilot.press("ctrl+l", "enter")  # recall Q1 from the queries list
            recalled = app.screen.session.queries[-1].data["sql"]
            await until(pilot, lambda: editor.text == recalled, what="the recalled query")
            await pilot.press("ctrl+e", "ctrl+z")
            assert editor.text == "half a new query"  # one undoable edit
            await pilot.press("f3")
            await until(pilot, lambda: screen_name(app) == "SnippetScreen")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            assert "half a new query" not in editor.text and editor.text.strip()

    run_async(go())


def test_the_editor_keys_are_in_the_help_and_the_palette(tui_env: Path) -> None:
    async def go() -> None:
        app = _app(tui_env)
        async with app.run_test(size=(80, 24)) as pilot:
            editor = await _editor(app, pilot)
            titles = {c.title: c for c in app.get_system_commands(app.screen)}
            assert {"Select all", "Clear", "Duplicate line", "Comment"} <= set(titles)
            editor.load_text("SELECT 2")
            await titles["Clear"].callback()
            assert editor.text == ""
            await pilot.press("f1")
            await until(pilot, lambda: screen_name(app) == "HelpScreen")
            text = app.screen.text
            for key in ("alt+a", "alt+n", "alt+d", "ctrl+/"):
                assert key in text
            assert "ctrl+_" not in text  # one key, named once

    run_async(go())
