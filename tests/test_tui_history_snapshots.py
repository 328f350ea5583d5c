"""Screenshots of the history screen (issue 34) at 80x24, 120x36 and 200x60, compared with the SVGs under
tests/__snapshots__/test_tui_history_snapshots/ (regenerate on purpose with `pytest --snapshot-update`).

The past sessions are written by hand with fixed times (test_tui_support.journal) and their transcripts
through game.api with a fixed recorded score, so nothing in the picture depends on the clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_history import finished_session
from test_tui_support import make_app, screen_name, until

pytestmark = pytest.mark.slow  # renders the app at three sizes and compares SVG snapshots

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

SIZES = {"80x24": (80, 24), "120x36": (120, 36), "200x60": (200, 60)}


@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
def test_history(tui_env: Path, snap_compare: Any, size: str) -> None:
    finished_session(tui_env, total=82.5, session_id="tui-mini-fixed")
    finished_session(tui_env, total=41.0, session_id="tui-mini-again")
    app = make_app(tui_env, steady=True)

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: "picker" in pilot.app.marks)
        await pilot.press("f4")
        await until(pilot, lambda: "history" in pilot.app.marks, what="the history")
        assert screen_name(pilot.app) == "HistoryScreen"
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=settle)
