"""The candidate's workspace shows updates as they arrive: the incident's injects and what the
interviewer sends from another thread through the session's inbox (within about a second), in a
notification and in the Updates tab; a resumed session shows those delivered before."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_tui_support import (
    FIXTURE,
    START,
    investigating_events,
    journal,
    make_app,
    open_workspace,
    run_async,
    run_sql,
    until,
)

from game.gameday import gm

pytestmark = pytest.mark.slow  # drives the app and the interviewer screen together

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

INJECTS = """\
injects:
  - after_queries: 1
    from: Chat team
    text: Customers on the EU cluster now see it too.
"""


def _fixture_with_injects(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tui-mini.yaml"
    path.write_text(FIXTURE.read_text(encoding="utf-8").replace("briefing:\n", INJECTS + "briefing:\n", 1),
                    encoding="utf-8")
    return path


def _feed_texts(app: object) -> list[str]:
    feed = app.screen.query_one("#updates-feed")  # type: ignore[attr-defined]
    return [str(feed.get_option_at_index(i).prompt) for i in range(feed.option_count)]


def _titles(app: object) -> list[str]:
    """The titles of the notices in force on the workspace's notice strip (not toasts over the content)."""
    return [n.title for n in app.screen.query_one("#notices").notices]  # type: ignore[attr-defined]


def test_workspace_shows_an_inject_and_a_message_from_the_interviewer(tui_env: Path, tmp_path: Path) -> None:
    incident = _fixture_with_injects(tmp_path / "incidents")

    async def go() -> None:
        app = make_app(tui_env, incidents=[incident])
        async with app.run_test(size=(120, 36)) as pilot:
            await open_workspace(app, pilot)
            assert str(app.screen.query_one("#tab-updates").label) == "Updates"
            await run_sql(app, pilot, "SELECT count(*) FROM requests")
            # the inject falls due with the first query and shows at once
            await until(pilot, lambda: "update-inject" in app.marks, what="the inject")
            assert "Update from Chat team" in _titles(app)
            assert any("EU cluster" in t for t in _feed_texts(app))
            assert str(app.screen.query_one("#tab-updates").label) == "Updates 1"

            # the interviewer writes from another thread; the screen shows it within about a second
            path = app.play.session.path
            writer = threading.Thread(target=gm.send, args=(path, "message"),
                                      kwargs={"text": "Walk me through that last query.", "sender": "Grace"})
            writer.start()
            await until(pilot, lambda: "update-message" in app.marks, what="the message")
            writer.join()
            assert "Message from Grace" in _titles(app)
            assert any("Walk me through" in t for t in _feed_texts(app))

            # a hint from the interviewer: counted in the status line, its cost in the title
            gm.send(path, "hint", text="Compare the replicas' clocks.", cost=8)
            await until(pilot, lambda: "update-hint" in app.marks, what="the hint")
            assert "Hint from Interviewer (-8 points)" in _titles(app)

            # F4 opens the feed; every delivery is journalled once
            await pilot.press("f4")
            assert app.screen.query_one("#side-switcher").current == "pane-updates"
            assert app.focused is app.screen.query_one("#updates-feed")
            kinds = [e.kind for e in app.play.session.events]
            assert (kinds.count("inject"), kinds.count("message"), kinds.count("hint")) == (1, 1, 1)

    run_async(go())


def test_a_resumed_workspace_shows_the_updates_delivered_before(tui_env: Path) -> None:
    events = [*investigating_events(),
              (START + 70, "message", {"from": "Grace", "text": "How sure are you?", "gm": "abc123"})]
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", events)

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, clock=lambda: START + 125.0)
        async with app.run_test(size=(120, 36)) as pilot:
            # mid-investigation, the workspace opens by itself once the telemetry is ready: the briefing
            # may be gone before a busy machine lets the test look, so wait on the marks it leaves
            await until(pilot, lambda: "briefing" in app.marks, what="the briefing")
            await until(pilot, lambda: "workspace" in app.marks, what="the workspace, opened by itself")
            assert str(app.screen.query_one("#tab-updates").label) == "Updates 1"
            assert any("How sure are you?" in t for t in _feed_texts(app))
            assert "Message from Grace" not in _titles(app)  # shown, not announced again
            polled = app.screen.polls
            await until(pilot, lambda: app.screen.polls >= polled + 2, what="two more looks for updates")
            assert [e.kind for e in app.play.session.events].count("message") == 1

    run_async(go())
