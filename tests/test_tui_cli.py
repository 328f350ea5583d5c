"""The entry point: `python -m tui.cli`, play/resume wiring to the TUI and to line mode, and the bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_tui_support import FIXTURE, investigating_events, journal

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_module_entry_point_lists_the_commands() -> None:
    out = subprocess.run([sys.executable, "-m", "tui.cli", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    for command in ("play", "resume", "bench", "generate", "query"):
        assert f"  {command} " in out.stdout
    play = subprocess.run([sys.executable, "-m", "tui.cli", "play", "--help"], capture_output=True, text=True,
                          cwd=ROOT, check=False, timeout=60)
    assert all(flag in play.stdout for flag in ("--plain", "--random", "--player", "--seed"))


def _cli() -> Any:
    from tui.cli import main

    return main


def test_play_opens_the_tui_with_the_incident_seed_and_player(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.app

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tui.app, "run",
                        lambda incident, seed=0, player=None, **_: calls.append((incident, seed, player)))
    result = CliRunner().invoke(_cli(), ["play", str(FIXTURE), "--seed", "3", "--player", "bob"])
    assert result.exit_code == 0, result.output
    assert calls == [(str(FIXTURE), 3, "bob")]


def test_play_refuses_an_unknown_incident_with_a_suggestion() -> None:
    result = CliRunner().invoke(_cli(), ["play", "one-slow-replic"])
    assert result.exit_code == 1 and "did you mean one-slow-replica" in result.output
    assert "Traceback" not in result.output


def test_play_random_picks_from_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.app
    from game.rules.library import library_paths

    calls: list[Any] = []
    monkeypatch.setattr(tui.app, "run", lambda incident, seed=0, player=None, **_: calls.append(incident))
    result = CliRunner().invoke(_cli(), ["play", "--random"])
    assert result.exit_code == 0, result.output
    assert calls and Path(calls[0]).stem in {p.stem for p in library_paths()}
    assert f"Dealt incident {Path(calls[0]).stem} seed" in result.output


def test_play_plain_runs_the_line_mode_game(tui_env: Path) -> None:
    result = CliRunner().invoke(_cli(), ["play", str(FIXTURE), "--plain", "--player", "ann"],
                                input="SELECT count(*) AS n FROM requests\nquit\n")
    assert result.exit_code == 0, result.output
    assert "Q1" in result.output
    [session] = list((tui_env / "sessions").glob("*.jsonl"))
    header = json.loads(session.read_text().splitlines()[0])
    assert header["player"] == "ann" and header["incident_id"] == "tui-mini"


def test_resume_opens_the_tui_on_the_session_file(tui_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.app

    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
    calls: list[Path] = []
    monkeypatch.setattr(tui.app, "resume", lambda p: calls.append(Path(p)))
    result = CliRunner().invoke(_cli(), ["resume", "tui-mini-fix"])
    assert result.exit_code == 0, result.output
    assert calls == [path]
    missing = CliRunner().invoke(_cli(), ["resume", "nothing-like-this"])
    assert missing.exit_code == 1 and "no session" in missing.output


def test_bench_knows_the_tui_target(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.bench

    def fake(incident: str, runs: int = 20) -> dict[str, Any]:
        return {"target": "tui", "ok": True, "incident": incident, "runs": runs}

    monkeypatch.setattr(tui.bench, "run_tui_bench", fake)
    result = CliRunner().invoke(_cli(), ["bench", "tui", "--json", "--runs", "3"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    expected = {"target": "tui", "ok": True, "incident": "one-slow-replica", "runs": 3}
    assert doc == {"ok": True, "results": {"tui": expected}}
    bad = CliRunner().invoke(_cli(), ["bench", "nope", "--json"])
    assert bad.exit_code == 1 and json.loads(bad.output)["ok"] is False


@pytest.mark.slow
def test_tui_bench_times_the_briefing_in_a_fresh_process(tui_env: Path) -> None:
    from tui.bench import run_tui_bench

    result = run_tui_bench(str(FIXTURE), runs=0, spawns=1)
    assert result["ok"], result.get("error")
    assert result["incident"] == "tui-mini" and result["query_runs"] == 0
    assert 0 < result["picker_s"] <= result["briefing_s"] < 60
    assert result["meets_target"] == (result["briefing_s"] <= 0.8 and result["query_ms"] <= 100)


@pytest.mark.slow
def test_tui_bench_times_queries_through_the_interface(tui_env: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tui.bench import QUERY, _child_queries

    _child_queries(str(FIXTURE), 0, str(tui_env), 3)
    times = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["query_s"]
    assert len(times) == 3 and all(0 < t < 60 for t in times)
    [session] = list((tui_env / "sessions").glob("*.jsonl"))
    recorded = [json.loads(line) for line in session.read_text().splitlines()[1:]]
    assert [e["data"]["sql"] for e in recorded if e["kind"] == "query"] == [QUERY] * 3
