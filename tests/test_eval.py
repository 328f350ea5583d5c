"""`servedrill eval`: agents play episodes over MCP, each on its own server session, scored from their journals.
The scripted agents (builtin:expert, builtin:random) are the baselines: the table must separate them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from game.cli.agent_commands import parse_seeds
from game.cli.commands import main as cli
from game.cli.core import CommandError
from game.frontends.eval_runner import Episode, EpisodeResult, mean_ci, summarize

INCIDENT = "one-slow-replica"

# an agent of one's own: an MCP client that starts the server it is given, queries once and leaves unsubmitted
QUITTER = '''
import json, os, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    argv = json.loads(os.environ["SERVEDRILL_MCP_SERVER"])
    async with stdio_client(StdioServerParameters(command=argv[0], args=argv[1:])) as (r, w), \\
            ClientSession(r, w) as session:
        await session.initialize()
        await session.call_tool("start_session", {})
        await session.call_tool("query", {"sql": "SELECT count(*) FROM requests"})

anyio.run(main)
'''


def run(args: list[str]) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


@pytest.mark.slow  # plays 4 episodes of a library incident, each agent and server a process
def test_builtin_agents_over_mcp_separate_expert_from_random(library_cache: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    out = tmp_path / "eval"
    report = run(["--agent", "builtin:expert", "--agent", "builtin:random", "--incidents", INCIDENT,
                  "--seeds", "0,1", "--parallel", "2", "--out", str(out)])
    episodes = report["episodes"]
    assert isinstance(episodes, list) and len(episodes) == 4
    assert all(e["status"] == "submitted" and not e["timed_out"] for e in episodes), episodes
    overall = {r["agent"]: r for r in report["summary"] if r["incident"] == "(all)"}  # type: ignore[union-attr]
    assert overall["builtin:expert"]["total"] >= 80
    assert overall["builtin:expert"]["total"] - overall["builtin:random"]["total"] >= 40
    assert overall["builtin:expert"]["episodes"] == 2 and overall["builtin:expert"]["ci95"] is not None
    table = (out / "results.md").read_text(encoding="utf-8")
    assert "| builtin:expert | one-slow-replica | 2 | 2 |" in table
    assert (out / "episodes.parquet").is_file() or (out / "episodes.csv").is_file()
    transcripts = sorted((out / "transcripts").glob("*.json"))
    assert len(transcripts) == 4
    # what eval recorded is what `servedrill score` recomputes from the transcript
    expert0 = next(e for e in episodes if e["agent"] == "builtin:expert" and e["seed"] == 0)
    scored = CliRunner().invoke(cli, ["score", str(expert0["transcript"]), "--json"])
    assert json.loads(scored.output)["total"] == pytest.approx(expert0["total"], abs=0.01)
    assert json.loads(scored.output)["player"] == "eval:builtin:expert"


@pytest.mark.slow  # an agent of one's own starts the server and leaves a session unsubmitted
def test_an_unsubmitted_session_scores_zero_and_a_stuck_agent_is_stopped(library_cache: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    script = tmp_path / "quitter.py"
    script.write_text(QUITTER, encoding="utf-8")
    report = run(["--agent", f"{sys.executable} {script}", "--agent", "sleep 30", "--incidents", INCIDENT,
                  "--seeds", "0", "--timeout", "12", "--out", str(tmp_path / "eval")])
    quitter, sleeper = report["episodes"]  # type: ignore[misc]
    assert quitter["status"] == "unsubmitted" and quitter["queries"] == 1 and quitter["total"] == 0
    assert Path(quitter["transcript"]).is_file()
    assert sleeper["status"] == "no-session" and sleeper["timed_out"] and sleeper["wall_s"] < 25


def test_bad_agents_and_seeds_are_refused_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["eval", "--agent", "builtin:genius", "--incidents", INCIDENT,
                                      "--out", str(tmp_path / "x"), "--json"])
    assert result.exit_code == 1 and "unknown builtin agent 'builtin:genius'" in json.loads(result.output)["error"]
    assert not (tmp_path / "x").exists()
    assert parse_seeds("0-2,5,1") == [0, 1, 2, 5]
    with pytest.raises(CommandError):
        parse_seeds("a,b")


def test_the_confidence_interval_is_over_seeds() -> None:
    mean, ci = mean_ci([80.0, 90.0])
    assert mean == 85.0 and ci == pytest.approx(12.706 * 5.0, rel=1e-3)
    assert mean_ci([70.0]) == (70.0, None)
    results = [EpisodeResult("a", inc, seed, "submitted", total)
               for inc, seed, total in (("x", 0, 10.0), ("y", 0, 30.0), ("x", 1, 50.0), ("y", 1, 70.0))]
    overall = next(r for r in summarize(results) if r["incident"] == "(all)")
    assert overall["total"] == 40.0 and overall["ci95"] == pytest.approx(12.706 * 20.0, rel=1e-3)  # seeds: 20, 60
    assert Episode("builtin:expert", "a/b.yaml", 3).name == "builtin-expert--b--s3"
