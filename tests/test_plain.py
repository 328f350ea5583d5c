"""Line mode and the game commands, driven by scripted stdin through click's runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from game.cli.game_commands import COMMANDS
from game.frontends.line_mode import (
    PlainGame,
    format_table,
    help_text,
    is_sql,
    near_miss,
    parse_query_ref,
    parse_ranking,
)
from game.session import DEBRIEFED, INVESTIGATING, Session, SessionError, list_sessions
from game.session.hypotheses import shown_hypotheses
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

INCIDENT = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"
CLOCK = "SELECT replica, min(value) AS clock FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY 1"
SPLIT = "SELECT replica, avg(queue_s) AS q, avg(prefill_s) AS p FROM requests GROUP BY 1 ORDER BY 1"
RIVALS = {"overload", "bad-deploy", "kv-pressure"}
LABEL = {s.id: s.label for s in shown_hypotheses(load_incident(INCIDENT), 0)}
"""The board of a seed-0 session: what a line-mode player sees and types."""


@pytest.fixture(scope="module")
def cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        ensure_database(load_incident(INCIDENT), 0)
        yield library_cache


@pytest.fixture
def data(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def _cli(*args: str, stdin: str | None = None) -> Result:
    group = click.Group(commands=COMMANDS)
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


@pytest.mark.slow
def test_a_full_line_mode_game(data: Path) -> None:
    a, c, d = LABEL["throttle"], LABEL["bad-deploy"], LABEL["overload"]
    script = "\n".join([
        "help",
        SPLIT,
        CLOCK,
        "SELECT * FROM no_such_table",
        f"rank {a}=50 {d}=50 {LABEL['kv-pressure']}=10",  # sums to 110: refused, the game goes on
        f'rank {d}=10 "A GPU"=80 "the gateway"=10',  # a label, a title prefix, a title prefix in any case
        f"pin Q2 {a} supports",
        f"pin Q3 {a} supports",  # the failed statement got no Qn: there is no Q3
        f"note {d} queues are flat",
        "hypotheses",
        "hint foo",  # a slip: refused, spends no hint
        "hint",
        "submit Q2",  # the query word is still read (older scripts); the score reads pins
        "SELECT 1",  # never read: the game ended at submit
    ]) + "\n"
    result = _cli("play", "--plain", str(INCIDENT), "--player", "ada", stdin=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "First tokens of some chat answers" in out  # the briefing
    for hid, label in LABEL.items():
        title = next(h.title for h in load_incident(INCIDENT).hypotheses if h.id == hid)
        assert f"  {label}  {title}" in out
    before = out.split("# Debrief")[0]
    assert not any(hid in before for hid in LABEL), "the player sees labels and titles, never ids"
    assert "pin Q1 A supports" in out  # help, with this game's board
    assert "vllm-1" in out and "Q2: 2 rows" in out
    assert "error: Catalog Error" in out and "(not counted: a statement that fails costs no query)" in out
    assert "Q3:" not in out
    assert "error: confidences must sum to 100" in out
    assert f"ranked: {a} 80%, {d} 10%, {c} 10%" in out
    assert f"pinned Q2 as supports {a}" in out
    assert "error: no query Q3" in out
    assert "error: hint takes nothing after it (got 'foo')" in out
    assert out.count("hint (5 points)") == 1  # one hint taken, not two
    assert "# Debrief: One of two replicas answers slowly" in out and "## Mitigation" in out
    assert "## What each query ruled out" in out and "## Score" in out
    assert out.count("## Score") == 1 and out.count("What each query ruled out") == 1  # printed once
    [summary] = list_sessions(data)
    assert summary.state == DEBRIEFED and summary.player == "ada" and summary.queries == 2
    transcript = data / "transcripts" / f"{summary.session_id}.json"
    assert f"Transcript: {transcript}" in out
    doc = json.loads(transcript.read_text())
    assert doc["submission"]["discriminator"] == 2
    assert [r["id"] for r in doc["submission"]["ranking"]] == ["throttle", "overload", "bad-deploy"]
    assert [e["kind"] for e in doc["events"]].count("note") == 1
    assert [e["data"] for e in doc["events"] if e["kind"] == "pin"] == [
        {"query": 2, "hypothesis": "throttle", "stance": "supports"}]
    assert f"Score {doc['score']['total']:.1f} / 100" in out  # the score it printed is the one it recorded


def test_quit_then_resume_in_line_mode(data: Path) -> None:
    first = _cli("play", "--plain", str(INCIDENT),
                 stdin=f"{SPLIT}\nrank {LABEL['throttle']}=70 {LABEL['overload']}=30\nquit\n")
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


@pytest.mark.slow
def test_score_and_replay_a_transcript(data: Path) -> None:
    script = f"{SPLIT}\n{CLOCK}\nrank {LABEL['throttle']}=90 {LABEL['overload']}=10\nsubmit Q2\n"
    _cli("play", "--plain", str(INCIDENT), stdin=script)
    [transcript] = (data / "transcripts").glob("*.json")
    scored = _cli("score", str(transcript), "--json")
    assert scored.exit_code == 0, scored.output
    doc = json.loads(scored.stdout)
    assert doc["ok"] is True and doc["incident"] == "drill-slow-replica"
    assert set(doc["score"]["ruled_out"]) == RIVALS and doc["score"]["consistent"] == ["throttle"]
    assert set(doc["score"]["per_query"][1]["ruled_out"]) == RIVALS  # the clocks tell every rival apart
    assert doc["total"] == doc["score"]["total"] and doc["score"]["submitted"] is True
    assert doc["recorded_total"] == doc["total"] and doc["recorded_matches"] is True

    replayed = _cli("replay", str(transcript), "--json")
    assert replayed.exit_code == 0, replayed.output
    again = json.loads(replayed.stdout)
    assert again["results_match"] is True and again["differences"] == []
    assert again["telemetry_matches"] is True
    assert again["total"] == again["recorded_total"] == doc["total"]
    assert again["score_matches"] is True

    # a transcript whose recorded rows disagree with the database: replay says so, and the score (which
    # never reads recorded rows) stays what the SQL earns
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
    assert diff["total"] == doc["total"] and diff["score_matches"] is True


@pytest.mark.slow
def test_a_forged_score_is_reported_not_used(data: Path) -> None:
    _cli("play", "--plain", str(INCIDENT), stdin=f"SELECT 1\nrank {LABEL['throttle']}=100\nsubmit\n")
    [transcript] = (data / "transcripts").glob("*.json")
    honest = json.loads(_cli("score", str(transcript), "--json").stdout)
    assert honest["recorded_matches"] is True and honest["total"] < 50  # SELECT 1 rules nothing out
    doc = json.loads(transcript.read_text())
    doc["score"] = {"total": 100.0}
    transcript.write_text(json.dumps(doc))
    claimed = json.loads(_cli("score", str(transcript), "--json").stdout)
    assert claimed["total"] == honest["total"]
    assert claimed["recorded_total"] == 100.0 and claimed["recorded_matches"] is False
    text = _cli("score", str(transcript))
    assert text.exit_code == 0
    assert f"the transcript says 100.0; recomputed from its queries: {honest['total']:.1f}" in text.stdout
    replayed = json.loads(_cli("replay", str(transcript), "--json").stdout)
    assert replayed["recorded_total"] == 100.0 and replayed["score_matches"] is False
    assert replayed["total"] == honest["total"]
    assert "(DIFFERENT)" in _cli("replay", str(transcript)).stdout


@pytest.mark.slow
def test_score_refuses_an_unsubmitted_transcript_unless_revealed(data: Path) -> None:
    _cli("play", "--plain", str(INCIDENT), stdin=f"{CLOCK}\nrank {LABEL['throttle']}=60 {LABEL['overload']}=40\nquit\n")
    [summary] = list_sessions(data)
    session = Session.resume(summary.path)
    try:
        transcript = session.export_transcript(data / "unsubmitted.json")
    finally:
        session.close()
    refused = _cli("score", str(transcript))
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    [line] = [ln for ln in refused.stderr.splitlines() if ln.strip()]
    assert "not submitted" in line and "--reveal" in line
    assert "A GPU" not in refused.output and "throttle" not in refused.output  # nothing of the answer
    as_json = _cli("score", str(transcript), "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["ok"] is False
    revealed = _cli("score", str(transcript), "--json", "--reveal")
    assert revealed.exit_code == 0, revealed.output
    doc = json.loads(revealed.stdout)
    assert doc["score"]["submitted"] is False and doc["score"]["truth"] == ["throttle"]
    assert doc["score"]["ranking"][0] == {"id": "throttle", "confidence": 60.0}  # the latest ranking
    assert set(doc["score"]["ruled_out"]) == RIVALS
    # replay re-scores too: the same rule
    replay_refused = _cli("replay", str(transcript), "--json")
    assert replay_refused.exit_code == 1 and "not submitted" in json.loads(replay_refused.stdout)["error"]
    replayed = json.loads(_cli("replay", str(transcript), "--json", "--reveal").stdout)
    assert replayed["ok"] is True and replayed["score"]["submitted"] is False
    # a file that says it was submitted, with no submit among its events, was not
    forged = json.loads(transcript.read_text())
    forged["submission"] = {"seq": 99, "time": 0.0, "ranking": [{"id": "throttle", "confidence": 100.0}]}
    forged["state"] = "submitted"
    claimed = data / "claims-submitted.json"
    claimed.write_text(json.dumps(forged))
    still = _cli("score", str(claimed), "--json")
    assert still.exit_code == 1 and "not submitted" in json.loads(still.stdout)["error"]


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


def test_lines_that_are_neither_commands_nor_sql_run_nothing_and_cost_nothing(data: Path) -> None:
    script = "\n".join(["clear", "hlep", "selct replica from requests", "rnak A=100", "SELECT 1 AS one",
                         "quit"]) + "\n"
    result = _cli("play", "--plain", str(INCIDENT), stdin=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "error: 'clear' is not a command" in out and "(Nothing ran; nothing was counted.)" in out
    assert "Did you mean help?" in out and "Did you mean select?" in out and "Did you mean rank?" in out
    assert "Q1: 1 rows" in out  # the first statement that ran is Q1
    [summary] = list_sessions(data)
    assert summary.queries == 1


def test_sql_or_command() -> None:
    for line in ("SELECT 1", "  with x as (select 1) select * from x", "FROM requests", "describe requests",
                 "SHOW TABLES", "summarize requests", "EXPLAIN SELECT 1", "(SELECT 1)", "-- note\nSELECT 1",
                 "select(1)", "VALUES (1)"):
        assert is_sql(line), line
    for line in ("clear", "ls", "exit now", "drop table requests", "selct 1", ""):
        assert not is_sql(line), line
    assert near_miss("quti") == "quit" and near_miss("schme") == "schema" and near_miss("xyzzy") is None


def test_every_help_example_works_as_typed(data: Path) -> None:
    """Help writes its examples with the game's own labels and titles; each is accepted after one query."""
    from game.query.gateway import Gateway

    incident = load_incident(INCIDENT)
    session = Session.create(INCIDENT, 0, "ada", root=data)
    info = ensure_database(incident, 0)
    try:
        session.start(info.digest)
        text = help_text(session.board)
        examples = [line.strip().split("  ")[0] for line in text.splitlines()
                    if line.strip().startswith(("rank ", "pin ", "note "))]
        assert len(examples) == 4 and examples[1].startswith('rank "'), examples
        import io

        out = io.StringIO()
        with Gateway(Path(info.path)) as gateway:
            moves = "\n".join([SPLIT, *examples, "quit"]) + "\n"
            PlainGame(session, gateway, io.StringIO(moves), out).run()
        said = out.getvalue()
        assert "error:" not in said, said
        assert said.count("ranked:") == 2 and "pinned Q1" in said and "noted" in said
    finally:
        session.close()


def test_a_wide_result_is_cut_to_the_terminal_and_says_what_it_left_out() -> None:
    columns = [f"column_{i}" for i in range(12)]
    rows = [tuple("x" * 30 for _ in columns)]
    table = format_table(columns, rows, width=80)
    lines = table.splitlines()
    assert all(len(line) <= 80 for line in lines[:-1])
    assert lines[-1].startswith("... 10 more columns not shown (column_2, column_3")
    assert "select fewer columns" in lines[-1]
    assert "more columns" not in format_table(columns, rows)  # a script (no terminal) reads them all
    multi = format_table(["a"], [("one\ntwo",)])
    assert "one two" in multi  # a newline in a cell does not break the table
    flags = format_table(["slow", "n"], [(True, 1), (False, 2)])
    assert "true" in flags and "false" in flags and "True" not in flags  # as the grids print booleans
