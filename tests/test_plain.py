"""Line mode and the game commands, driven by scripted stdin through click's runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from game.cli_game import register
from game.plain import parse_query_ref, parse_ranking
from game.session import DEBRIEFED, INVESTIGATING, Session, SessionError, list_sessions
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

INCIDENT = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"
CLOCK = "SELECT replica, min(value) AS clock FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY 1"
SPLIT = "SELECT replica, avg(queue_s) AS q, avg(prefill_s) AS p FROM requests GROUP BY 1 ORDER BY 1"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(folder))
        ensure_database(load_incident(INCIDENT), 0)
        yield folder


@pytest.fixture
def data(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def _cli(*args: str, stdin: str | None = None) -> Result:
    group = click.Group()
    register(group)
    return CliRunner().invoke(group, list(args), input=stdin)


def test_parse_ranking_and_query_refs() -> None:
    assert parse_ranking(["b=30", "a:60", "c=10%"]) == [("a", 60.0), ("b", 30.0), ("c", 10.0)]
    assert parse_ranking(["x=50", "y=50"]) == [("x", 50.0), ("y", 50.0)]  # ties keep the typed order
    with pytest.raises(SessionError):
        parse_ranking(["a60"])
    with pytest.raises(SessionError):
        parse_ranking([])
    assert parse_query_ref("Q12") == 12 and parse_query_ref("q3") == 3 and parse_query_ref("7") == 7
    with pytest.raises(SessionError):
        parse_query_ref("last")


def test_a_full_line_mode_game(data: Path) -> None:
    script = "\n".join([
        "help",
        SPLIT,
        CLOCK,
        "SELECT * FROM no_such_table",
        "rank throttle=50 overload=50 kv-pressure=10",  # sums to 110: refused, the game goes on
        "rank overload=10 thermal=80 bad-deploy=10",
        "pin Q2 throttle supports",
        "pin Q3 throttle supports",  # Q3 failed
        "note overload queues are flat",
        "hypotheses",
        "hint",
        "submit Q2",
        "SELECT 1",  # never read: the game ended at submit
    ]) + "\n"
    result = _cli("play", "--plain", str(INCIDENT), "--player", "ada", stdin=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "First tokens of some chat answers" in out  # the briefing
    assert "pin Q3 h1 supports" in out  # help
    assert "vllm-1" in out and "Q2: 2 rows" in out
    assert "Q3: error:" in out
    assert "error: confidences must sum to 100" in out
    assert "ranked: throttle 80%, overload 10%, bad-deploy 10%" in out
    assert "error: Q3 failed" in out
    assert "hint (5 points)" in out
    assert "# Debrief: One of two replicas answers slowly" in out and "## Mitigation" in out
    assert "Q4:" not in out
    [summary] = list_sessions(data)
    assert summary.state == DEBRIEFED and summary.player == "ada" and summary.queries == 3
    transcript = data / "transcripts" / f"{summary.session_id}.json"
    assert f"Transcript: {transcript}" in out
    doc = json.loads(transcript.read_text())
    assert doc["submission"]["discriminator"] == 2
    assert [r["id"] for r in doc["submission"]["ranking"]] == ["throttle", "overload", "bad-deploy"]
    assert [e["kind"] for e in doc["events"]].count("note") == 1


def test_quit_then_resume_in_line_mode(data: Path) -> None:
    first = _cli("play", "--plain", str(INCIDENT), stdin=f"{SPLIT}\nrank throttle=70 overload=30\nquit\n")
    assert first.exit_code == 0, first.output
    [summary] = list_sessions(data)
    assert summary.state == INVESTIGATING
    assert f"servedrill resume {summary.session_id}" in first.stdout

    listed = _cli("resume", "--json")
    assert listed.exit_code == 0
    assert [s["session_id"] for s in json.loads(listed.stdout)["sessions"]] == [summary.session_id]

    second = _cli("resume", summary.session_id, "--plain", stdin=f"{CLOCK}\nsubmit Q2\n")
    assert second.exit_code == 0, second.output
    assert "Resumed" in second.stdout and "70.0%" in second.stdout
    assert "# Debrief" in second.stdout
    session = Session.resume(summary.path)
    try:
        assert session.state == DEBRIEFED
        assert [q.data["index"] for q in session.queries] == [1, 2]
        assert session.submission is not None and session.submission.data["discriminator"] == 2
    finally:
        session.close()
    assert _cli("resume").stdout.strip() == "No unfinished sessions."


def test_end_of_input_leaves_the_session_resumable(data: Path) -> None:
    result = _cli("play", "--plain", str(INCIDENT), stdin=f"{SPLIT}\n")
    assert result.exit_code == 0
    [summary] = list_sessions(data)
    assert summary.state == INVESTIGATING and summary.queries == 1


def test_score_and_replay_a_transcript(data: Path) -> None:
    script = f"{SPLIT}\n{CLOCK}\nrank throttle=90 overload=10\nsubmit Q2\n"
    _cli("play", "--plain", str(INCIDENT), stdin=script)
    [transcript] = (data / "transcripts").glob("*.json")
    scored = _cli("score", str(transcript), "--json")
    assert scored.exit_code == 0, scored.output
    doc = json.loads(scored.stdout)
    assert doc["ok"] is True and doc["incident"] == "drill-slow-replica"
    assert doc["score"]["observed_signals"] == ["prefill-by-replica", "clock-drop"]
    assert doc["total"] == doc["score"]["total"]

    replayed = _cli("replay", str(transcript), "--json")
    assert replayed.exit_code == 0, replayed.output
    again = json.loads(replayed.stdout)
    assert again["results_match"] is True and again["differences"] == []
    assert again["telemetry_matches"] is True
    assert again["total"] == again["recorded_total"] == doc["total"]

    # a transcript whose recorded rows disagree with the database: replay says so
    edited = json.loads(transcript.read_text())
    query = next(e for e in edited["events"] if e["kind"] == "query" and e["data"]["index"] == 2)
    query["data"]["rows"][0][1] = -1.0
    query["data"]["row_count"] = 99
    forged = transcript.with_name("forged.json")
    forged.write_text(json.dumps(edited))
    diff = json.loads(_cli("replay", str(forged), "--json").stdout)
    assert diff["results_match"] is False
    [entry] = diff["differences"]
    assert entry["query"] == 2 and "rows differ" in entry["changes"]
    assert any(c.startswith("row_count: 99 -> 2") for c in entry["changes"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["play", "--plain", "no-such-incident"], "no-such-incident"),
        (["score", "/nonexistent/t.json"], "cannot read"),
        (["replay", "/nonexistent/t.json", "--json"], "cannot read"),
        (["resume", "nobody-123"], "no session"),
    ],
)
def test_bad_input_gets_one_line_and_exit_code_1(data: Path, args: list[str], needle: str) -> None:
    result = _cli(*args)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    text = result.stdout if "--json" in args else result.stderr
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0]
    if "--json" in args:
        assert json.loads(lines[0])["ok"] is False


def test_score_reports_a_corrupt_transcript_in_one_line(data: Path, tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"format_version": 1, "events": [')
    result = _cli("score", str(bad))
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0 and "truncated" in result.stderr
