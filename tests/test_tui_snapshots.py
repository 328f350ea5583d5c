"""Screenshots of the picker, the workspace and the debrief at 120x36 (and of every screen of a game at
80x24 and 200x60: test_screen_at_size), compared with the SVGs under
tests/__snapshots__/test_tui_snapshots/ (regenerate on purpose with `pytest --snapshot-update`).

Everything time-dependent is frozen: the sessions are written by hand with fixed times, the app's
clock is fixed, cursors do not blink and query timings are hidden (`steady`). Query rows come from the
hand-written session, not from the simulator. The debrief's score does come from the simulator: it
re-runs the session's query on every hypothesis's world."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_support import (
    START,
    investigating_events,
    journal,
    make_app,
    screen_name,
    submitted_events,
    until,
)

pytestmark = pytest.mark.slow  # renders the app at several sizes and compares SVG snapshots

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

SIZE = (120, 36)


def test_picker(tui_env: Path, snap_compare: Any) -> None:
    app = make_app(tui_env, steady=True)

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: "picker" in pilot.app.marks)
        await until(pilot, lambda: pilot.app.screen.scanned)

    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def _workspace_app(tui_env: Path) -> Any:
    """The TUI resumed on the hand-written investigation, its clock fixed 125 s in."""
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    return make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 125.0)


async def _workspace_settled(pilot: Any) -> None:
    await until(pilot, lambda: "workspace" in pilot.app.marks)
    await until(pilot, lambda: len(pilot.app.screen.query_one("#schema").root.children) > 0)
    await pilot.app.workers.wait_for_complete()


def test_workspace(tui_env: Path, snap_compare: Any) -> None:
    assert snap_compare(_workspace_app(tui_env), terminal_size=SIZE, run_before=_workspace_settled)


def test_debrief(tui_env: Path, snap_compare: Any) -> None:
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", submitted_events())
    app = make_app(tui_env, resume_session=path, steady=True)

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: "debrief" in pilot.app.marks, timeout=120)  # scoring builds the worlds
        assert screen_name(pilot.app) == "DebriefScreen"

    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_workspace_light_theme(tui_env: Path, snap_compare: Any) -> None:
    """The same workspace in Textual's light theme: the styles use theme variables only."""
    app = _workspace_app(tui_env)

    async def settle(pilot: Any) -> None:
        from textual.color import Color

        await _workspace_settled(pilot)
        app = pilot.app
        app.theme = "textual-light"
        editor = app.screen.query_one("#editor")
        light = Color.parse(app.get_theme("textual-light").background)
        # the theme is applied once the editor has followed it (its own highlighting theme) and the
        # screen's styles were recomputed from the light theme's variables
        await until(pilot, lambda: editor.theme == "github_light" and app.screen.styles.background == light,
                    what="the light theme")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_interviewer_screen(tui_env: Path, snap_compare: Any) -> None:
    """The game master's view of a candidate mid-investigation: queries and the labelled board, the answer
    hidden until the candidate submits."""
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    app = make_app(tui_env, watch_session=path, steady=True, clock=lambda: START + 125.0)

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: screen_name(pilot.app) == "GMScreen")
        await until(pilot, lambda: "gm" in pilot.app.marks, what="the first snapshot laid out")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


# ---------------------------------------------------------------- 80x24 first, and a big terminal

SIZES = {"80x24": (80, 24), "120x36": (120, 36), "200x60": (200, 60)}
PLOT_SQL = ("SELECT time_bucket(INTERVAL '30 seconds', ts) AS t, replica, avg(prefill_s) AS prefill "
            "FROM requests WHERE status = 'ok' GROUP BY ALL ORDER BY t, replica")


async def _run_plot_query(pilot: Any) -> None:
    from test_tui_support import run_sql

    await run_sql(pilot.app, pilot, PLOT_SQL)
    await pilot.press("f2")
    plot = pilot.app.screen.query_one("#results-plot")
    await until(pilot, lambda: plot.drawn_series == 2, what="the plot")
    await pilot.pause()


async def _press_and_wait(pilot: Any, keys: tuple[str, ...], screen: str) -> None:
    await pilot.press(*keys)
    await until(pilot, lambda: screen_name(pilot.app) == screen, what=screen)
    await pilot.pause()


SCENES = ("picker", "workspace-table", "workspace-plot", "board", "submit", "debrief")


@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
@pytest.mark.parametrize("scene", SCENES)
def test_screen_at_size(tui_env: Path, snap_compare: Any, scene: str, size: str) -> None:
    """Every screen of a game at 80x24 (what the layout is designed for), 120x36 and 200x60."""
    if scene == "picker":
        app = make_app(tui_env, steady=True)

        async def settle(pilot: Any) -> None:
            await until(pilot, lambda: "picker" in pilot.app.marks)
            await until(pilot, lambda: pilot.app.screen.scanned)
    elif scene == "debrief":
        path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", submitted_events())
        app = make_app(tui_env, resume_session=path, steady=True)

        async def settle(pilot: Any) -> None:
            await until(pilot, lambda: "debrief" in pilot.app.marks, timeout=120)
            await pilot.pause()
    else:
        app = _workspace_app(tui_env)

        async def settle(pilot: Any) -> None:
            await _workspace_settled(pilot)
            if scene == "workspace-plot":
                await _run_plot_query(pilot)
            elif scene == "board":
                await pilot.press("ctrl+b")
                await until(pilot, lambda: pilot.app.focused is not None and pilot.app.focused.id == "board")
            elif scene == "submit":
                await _press_and_wait(pilot, ("f8",), "SubmitScreen")
            await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=settle)


# ---------------------------------------------------------------- a notice on its own strip, over nothing

NOTICE_SIZES = {"80x24": (80, 24), "120x36": (120, 36), "200x60": (200, 60)}


@pytest.mark.parametrize("size", list(NOTICE_SIZES), ids=list(NOTICE_SIZES))
def test_workspace_with_a_notice(tui_env: Path, snap_compare: Any, size: str) -> None:
    """An inject arrives: one line on the notice strip under the status line; the editor, the result and
    the key bar stay in full view (no toast over them)."""
    from game import api

    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    api.send(path, "inject", text="Customers in the EU cluster report slow first tokens since 09:00; "
                                  "the dashboards show the p99 doubling on one replica.", sender="SRE on call")
    app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 125.0)

    async def settle(pilot: Any) -> None:
        await _workspace_settled(pilot)
        await until(pilot, lambda: "update-inject" in pilot.app.marks, what="the inject")
        await pilot.pause()

    assert snap_compare(app, terminal_size=NOTICE_SIZES[size], run_before=settle)
