"""The interviewer's commands and report: `watch --json` (one snapshot), `send`, and `report` in Markdown,
HTML and JSON: timeline of queries and belief changes, whether latency was split before the first
guess, the separating signal named at submit, the score breakdown and a blank notes section."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from game.autoplay import PlannedGateway, PlannedQuery
from game.observe import Read
from game.scoring import score
from game.session import Session
from tui import cli_watch

FIXTURE = Path(__file__).resolve().parent / "data" / "incidents" / "tui-mini.yaml"
SPLIT = PlannedQuery("SELECT replica, avg(queue_s) AS queue, avg(prefill_s) AS prefill FROM requests GROUP BY replica",
                     (Read("requests", ("replica", "queue_s", "prefill_s")),))
CLOCK = PlannedQuery("SELECT replica, min(value) FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica",
                     (Read("metrics", ("replica", "name", "value"), ("name = 'DCGM_FI_DEV_SM_CLOCK'",)),))
COUNT = PlannedQuery("SELECT count(*) FROM requests", (Read("requests", ()),))


def _cli(*args: str) -> Result:
    group = click.Group()
    cli_watch.register(group)
    return CliRunner().invoke(group, list(args))


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def _played(data: Path, *, split_first: bool = True, submit: bool = True) -> Session:
    session = Session.create(FIXTURE, 0, "ada", root=data)
    session.start()
    gateway = PlannedGateway([COUNT, SPLIT, CLOCK])
    session.run_query(gateway, COUNT.sql)
    if split_first:
        session.run_query(gateway, SPLIT.sql)
        session.rank([("overload", 60.0), ("throttle", 40.0)])
    else:
        session.rank([("overload", 60.0), ("throttle", 40.0)])
        session.run_query(gateway, SPLIT.sql)
    session.run_query(gateway, CLOCK.sql)
    session.rank([("throttle", 85.0), ("overload", 15.0)])
    if submit:
        session.submit(discriminator=3)
    return session


def test_watch_json_is_one_snapshot_of_the_running_session(data: Path) -> None:
    session = _played(data, submit=False)
    result = _cli("watch", session.session_id, "--json")
    assert result.exit_code == 0, result.output
    snap = json.loads(result.output)
    assert set(snap) >= {"ok", "session", "truth", "queries", "board", "signals", "score", "hints", "injects",
                         "updates", "pending", "submission"}
    assert snap["session"]["player"] == "ada" and snap["session"]["state"] == "investigating"
    assert [q["index"] for q in snap["queries"]] == [1, 2, 3]
    assert snap["queries"][2]["signals"] == ["clock-drop"]
    assert snap["board"]["ranking"][0] == {"id": "throttle", "confidence": 85.0}
    assert len(snap["board"]["history"]) == 2
    assert snap["score"]["total"] == score(session.incident, session.events).total
    assert {s["id"]: s["seen"] for s in snap["signals"]} == {
        "prefill-by-replica": True, "clock-drop": True, "no-preemptions": False}
    session.close()


def test_send_from_the_command_line_reaches_the_session(data: Path) -> None:
    session = _played(data, submit=False)
    result = _cli("send", session.session_id, "hint", "Compare the clocks.", "--cost", "4", "--json")
    assert result.exit_code == 0, result.output
    item = json.loads(result.output)["item"]
    assert (item["kind"], item["cost"]) == ("hint", 4)
    [update] = session.poll_gm()
    assert (update.text, update.cost) == ("Compare the clocks.", 4)
    assert score(session.incident, session.events).hint_cost == 4
    bad = _cli("send", session.session_id, "inject", "--json")
    assert bad.exit_code == 1 and json.loads(bad.output)["ok"] is False
    assert "Traceback" not in bad.output
    session.close()


def test_bad_session_references_are_one_line_errors(data: Path) -> None:
    result = _cli("watch", "no-such-session", "--json")
    assert result.exit_code == 1
    assert json.loads(result.output) == {"ok": False, "error": f"no session 'no-such-session' in {data / 'sessions'}"}
    result = _cli("report", "no-such-session")
    assert result.exit_code == 1 and result.output.startswith("servedrill: no session")


def test_report_markdown_html_and_json(data: Path, tmp_path: Path) -> None:
    session = _played(data)
    md, page = tmp_path / "out" / "r.md", tmp_path / "out" / "r.html"
    result = _cli("report", session.session_id, "--markdown", str(md), "--html", str(page), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["written"] == {"markdown": str(md), "html": str(page)}
    first = doc["first_look"]
    assert first["decomposed_latency_first"] is True and first["decomposing_query"] == 2
    assert first["verdict"].startswith("Yes: Q2")
    assert [t["kind"] for t in doc["timeline"]] == ["query", "query", "rank", "query", "rank", "submit"]
    assert doc["belief_changes"] == 3
    sep = doc["separating"]
    assert sep["query"] == 3 and sep["separating_signals"] == ["clock-drop"]
    assert sep["top_two"] == ["throttle", "overload"]
    assert doc["score"]["total"] == score(session.incident, session.events).total

    text = md.read_text(encoding="utf-8")
    for heading in ("# Interview report: ada on", "## What they looked at first",
                    "## The signal they named as separating their top two", "## Timeline", "## Score",
                    "## Interviewer's notes"):
        assert heading in text
    assert "Ranked: More traffic than the fleet can take 60%, A GPU runs at reduced clocks 40% (truth at 40%)" in text
    assert "clock-drop: The SM clock of vllm-1 falls well below nominal. (separates the top two)" in text
    assert text.rstrip().endswith("_Recommendation:_")
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<div class='notes'></div>" in html
    assert "Thermal" not in html  # the report names the cause; the explanation stays in the debrief
    assert "&lt;" not in json.dumps(doc)
    session.close()


def test_report_says_when_the_candidate_guessed_before_splitting_latency(data: Path) -> None:
    session = _played(data, split_first=False, submit=False)
    result = _cli("report", session.session_id, "--json")
    doc = json.loads(result.output)
    assert doc["first_look"]["decomposed_latency_first"] is False
    assert doc["first_look"]["verdict"].startswith("No: they ranked first")
    assert doc["separating"] is None and doc["submitted"] is False
    result = _cli("report", session.session_id)
    assert "Not submitted." in result.output and "| Total |" not in result.output.split("## Score")[0]
    session.close()


def test_report_timeline_lists_what_the_interviewer_sent(data: Path) -> None:
    from game import gm

    session = _played(data, submit=False)
    gm.send(session.path, "hint")
    gm.send(session.path, "message", text="Talk me through Q3.", sender="Grace")
    gm.send(session.path, "inject", text="Sales escalates.", sender="Sales")
    assert len(session.poll_gm()) == 3
    doc = json.loads(_cli("report", session.session_id, "--json").output)
    details = [t["detail"] for t in doc["timeline"] if t["kind"] in ("hint", "message", "inject")]
    assert details == ["Hint from the interviewer (-5 points): Compare the two replicas with each other.",
                       "Message sent by the interviewer, Grace: Talk me through Q3.",
                       "Update sent by the interviewer, Sales: Sales escalates."]
    assert doc["score"]["hint_cost"] == 5
    session.close()
