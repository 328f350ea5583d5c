"""Screens that never hide what you read: what the game tells the player goes to the notice strip under the
status line (a line of its own), not to toasts over the results, the plot or the submit dialog; a warning
goes when its cause is fixed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_support import START, investigating_events, journal, make_app, run_async, screen_name, until

from game import api

pytestmark = pytest.mark.slow  # drives the app

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env


def _strip(app: Any) -> Any:
    return app.screen.query_one("#notices")


def test_an_inject_shows_on_the_strip_not_in_a_toast(tui_env: Path) -> None:
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 125.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks)
            api.send(path, "inject", text="The EU cluster pages: p99 doubled.", sender="SRE on call")
            await until(pilot, lambda: "update-inject" in app.marks, what="the inject")
            strip = _strip(app)
            assert strip.display and strip.current.title == "Update from SRE on call"
            assert "EU cluster" in str(strip.render())
            assert not app._notifications  # nothing floats over the content
            # the submit dialog opens over the workspace, and nothing covers it either
            await pilot.press("f8")
            await until(pilot, lambda: screen_name(app) == "SubmitScreen")
            assert not app._notifications

    run_async(go())


def test_a_not_saved_warning_goes_when_the_board_is_fixed(tui_env: Path) -> None:
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: START + 125.0)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks)
            await pilot.press("ctrl+b", "plus", "ctrl+s")  # 105 %: cannot be saved
            strip = _strip(app)
            assert strip.current is not None and strip.current.text.startswith("Not saved")
            assert strip.current.severity == "error" and not app._notifications
            await pilot.press("minus")  # back to 100 %: the cause is gone, and so is the warning
            await until(pilot, lambda: not strip.has("ranking"), what="the warning withdrawn")
            assert not strip.display
            await pilot.press("ctrl+s")
            assert strip.current is not None and strip.current.text == "Ranking saved."

    run_async(go())
