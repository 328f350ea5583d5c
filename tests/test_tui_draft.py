"""Resume keeps what was not recorded yet, and the game clock runs only while a process holds the session.

- The board's unsaved order and confidences and the SQL editor's text are written to the session's draft
  sidecar as they change (debounced) and when the game closes; a resumed workspace shows them again, the
  board marked as having unsaved changes. The journal gains nothing (scoring reads only the journal).
- A session held for 60 s, then closed for 15 minutes, resumes at about 1:00 on its clock, and a timed
  inject due at 5:00 of investigation is not delivered by the 15 minutes nobody played.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_tui_support import FIXTURE, make_app, open_workspace, run_async, screen_name, until

pytestmark = pytest.mark.slow  # drives the app and restarts it

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

TYPED = "SELECT replica, max(prefill_s) FROM requests GROUP BY replica -- not run yet"


def _journal_lines(data: Path) -> list[str]:
    [path] = list((data / "sessions").glob("*.jsonl"))
    return path.read_text(encoding="utf-8").splitlines()


def test_the_unsaved_board_and_the_editor_come_back_on_resume(tui_env: Path) -> None:
    data = tui_env
    seen: dict[str, object] = {}

    async def first() -> None:
        app = make_app(data)
        async with app.run_test(size=(120, 36)) as pilot:
            await open_workspace(app, pilot)
            screen = app.screen
            await pilot.press("ctrl+b", "down", "plus", "plus")  # B: 25 -> 35, not saved
            seen["board"] = [(i.id, i.confidence) for i in screen.query_one("#board").board.items]
            await until(pilot, lambda: screen.drafts_saved >= 1, what="the draft written (debounced)")
            # the editor: typed just before quitting, no time for the debounce: written on close
            editor = screen.query_one("#editor")
            editor.focus()
            await pilot.press(*TYPED)
            assert editor.text == TYPED
        seen["journal"] = _journal_lines(data)

    async def second() -> None:
        app = make_app(data)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen" and "ready" in app.marks
                        and app.screen.unfinished)
            await pilot.press("enter")  # continue
            await until(pilot, lambda: "workspace" in app.marks)
            board = app.screen.query_one("#board")
            assert [(i.id, i.confidence) for i in board.board.items] == seen["board"]
            assert "unsaved changes" in board.border_title or "not saved yet" in board.border_title
            assert app.screen.query_one("#editor").text == TYPED

    run_async(first())
    run_async(second())
    # the journal: only the start (a draft is no event), so scoring sees exactly what it saw before
    kinds = [json.loads(line)["kind"] for line in seen["journal"][1:]]  # type: ignore[index]
    assert kinds == ["start"]
    draft = json.loads(next((data / "sessions").glob("*.draft")).read_text())
    assert draft["editor"] == TYPED and len(draft["held"]) == 2 and all(h[2] for h in draft["held"])


def test_the_clock_and_timed_injects_count_only_time_the_session_was_held(tui_env: Path, tmp_path: Path) -> None:
    from game.session import FORMAT_VERSION, SESSION_FORMAT, file_digest

    incident = tmp_path / "tui-mini-inject.yaml"
    incident.write_text(FIXTURE.read_text(encoding="utf-8").replace(
        "\nbriefing:\n", "\ninjects:\n  - after_s: 300\n    from: On-call manager\n    text: Any ETA?\nbriefing:\n", 1),
        encoding="utf-8")
    now = time.time()
    start = now - 1000.0  # started 1000 s ago: held for 60 s, closed 940 s ago
    header = {"format": SESSION_FORMAT, "format_version": FORMAT_VERSION, "session_id": "held-1",
              "incident_id": "tui-mini", "incident_digest": file_digest(incident), "incident_path": str(incident),
              "seed": 0, "player": "tester", "created": "2026-01-01T00:00:00Z"}
    path = tui_env / "sessions" / "held-1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(header) + "\n" + json.dumps(
        {"seq": 1, "time": start, "kind": "start", "data": {"telemetry_digest": None}}) + "\n", encoding="utf-8")
    path.with_suffix(".draft").write_text(json.dumps({"format": "servedrill-draft", "format_version": 1,
                                            "held": [[start - 5, start + 60, True]]}), encoding="utf-8")

    async def go() -> None:
        resumed = time.time()
        app = make_app(tui_env, incidents=[incident], resume_session=path)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
            screen = app.screen
            polled = screen.polls
            await until(pilot, lambda: screen.polls >= polled + 2, what="two looks for due updates")
            status = str(screen.query_one("#status-line").render())
            session = app.play.session
            # held 60 s before, plus however long this resume has taken on a busy machine; never the 940 s
            # the session lay closed (16:40 in all)
            held = 60 + (time.time() - resumed) + 1
            assert 60 <= session.elapsed() < held
            minutes, seconds = status.removeprefix("time ").split(" ", 1)[0].split(":")
            assert 60 <= int(minutes) * 60 + int(seconds) < held, status
            assert not [e for e in session.events if e.kind == "inject"] or held >= 300  # due at 5:00 of play
            assert 300 - held < session.next_inject_in() <= 240

    run_async(go())
