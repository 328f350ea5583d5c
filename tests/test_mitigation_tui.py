"""The mitigation phase in the terminal, with Textual's Pilot: diagnose, submit, then act on the fleet from
the debrief (a refused action first), and the debrief is written again with the mitigation's own section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import FIXTURE, make_app, open_workspace, run_async, run_sql, screen_name, until

pytestmark = pytest.mark.slow  # drives the app through a whole game and a mitigation

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

MITIGATION = """
mitigation:
  horizon_s: 300
  recovery:
    - id: prefill-back
      claim: "Once the slow replica is out of rotation, prompt processing is as fast as before the slowdown."
      metric: {table: requests, column: prefill_s, where: "status = 'ok'"}
      aggregate: p90
      a: {window: [420, 600]}
      b: {window: [0, 120]}
      compare: ratio_at_most
      value: 1.3
  right:
    - [drain vllm-1]
  wrong:
    - [restart vllm-1]
"""


@pytest.fixture
def incident(tmp_path: Path) -> Path:
    """tui-mini with a mitigation phase (same id, in a folder of its own)."""
    text = FIXTURE.read_text()
    folder = tmp_path / "incidents"
    folder.mkdir()
    path = folder / "tui-mini.yaml"
    path.write_text(text.replace("\nhypotheses:", MITIGATION + "\nhypotheses:", 1))
    return path


def _events(data: Path) -> list[dict[str, Any]]:
    [path] = list((data / "sessions").glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]


def test_diagnose_then_mitigate_in_the_terminal(tui_env: Path, incident: Path) -> None:
    data = tui_env
    app = make_app(data, incidents=[incident])

    async def go() -> None:
        async with app.run_test(size=(120, 36)) as pilot:
            await open_workspace(app, pilot)
            view = await run_sql(app, pilot, "SELECT replica, avg(prefill_s) FROM requests GROUP BY 1 ORDER BY 1")
            assert view.ok
            await pilot.press("f8")
            await until(pilot, lambda: screen_name(app) == "SubmitScreen")
            await pilot.press("ctrl+s")
            await until(pilot, lambda: screen_name(app) == "DebriefScreen")
            status = app.screen.query_one("#debrief-status")
            await until(pilot, lambda: "Transcript" in str(status.render()), timeout=120, what="the debrief")
            assert "m mitigate: act on the fleet" in str(status.render())
            assert "## Mitigation" in app.screen.markdown and "At t=" not in app.screen.markdown
            box = app.screen.query_one("#debrief-act")
            assert not box.display
            await pilot.press("m")
            await until(pilot, lambda: box.display and box.has_focus, what="the action box")
            # a replica the fleet does not have: refused on the status line, nothing journalled
            await pilot.press(*"drain vllm-9", "enter")
            await until(pilot, lambda: "Not applied" in str(status.render()), what="the refusal")
            assert "no vllm-9" in str(status.render())
            assert not [e for e in _events(data) if e["kind"] == "act"]
            box.value = ""
            await pilot.press(*"drain vllm-1", "enter")
            await until(pilot, lambda: app.screen.mitigated, timeout=120, what="the mitigated debrief")
            markdown = app.screen.markdown
            section = markdown.split("## Mitigation", 1)[1]
            assert "`drain vllm-1`" in section and "Recovered: **yes**" in section
            assert "addressed the cause" in section
            assert not box.display and "mitigate" not in str(status.render())  # once only

    run_async(go())
    acts = [e["data"] for e in _events(data) if e["kind"] == "act"]
    assert acts == [{"actions": ["drain vllm-1"], "decision_s": 300.0}]
