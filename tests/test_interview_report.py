"""The interviewer's commands and report: `watch --json` (one snapshot), `send`, and `report` in Markdown,
HTML and JSON: the timeline of queries and belief changes, what they looked at first, what each query ruled
out (recomputed on the hypothesis worlds), the pins' verdicts, the score breakdown and a blank notes
section. The answer and the score appear only once the candidate submitted, or with --reveal."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from game.query.gateway import Gateway
from game.rules.assess import score_session
from game.rules.scoring import score
from game.session import Session
from game.text import md_text
from telemetry_gen.cache import ensure_database
from tui import cli_watch

FIXTURE = Path(__file__).resolve().parent / "data" / "incidents" / "tui-mini.yaml"
SPLIT = "SELECT replica, avg(queue_s) AS queue, avg(prefill_s) AS prefill FROM requests GROUP BY replica"
CLOCK = "SELECT replica, min(value) FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica"
COUNT = "SELECT count(*) FROM requests"
RIVALS = {"overload", "bad-deploy", "kv-pressure"}
WATCH_ANSWER = {"truth", "debrief_summary", "evidence", "signals", "score"}
"""`watch --json` keys present only when revealed (docs/cli.md)."""
EXPLANATION = "Thermal or power capping"
"""Words of the true hypothesis's explanation: part of the answer."""


def _cli(*args: str) -> Result:
    group = click.Group(commands=cli_watch.COMMANDS)
    return CliRunner().invoke(group, list(args))


@pytest.fixture
def data(in_library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def _played(data: Path, *, split_first: bool = True, submit: bool = True) -> Session:
    """Q1 counts rows, Q2 splits latency, Q3 reads the clocks; ranked after Q2 (or after Q1) and after Q3."""
    session = Session.create(FIXTURE, 0, "ada", root=data)
    info = ensure_database(session.incident, 0)
    session.start(info.digest)
    with Gateway(Path(info.path)) as gateway:
        session.run_query(gateway, COUNT)
        if split_first:
            session.run_query(gateway, SPLIT)
            session.rank([("overload", 60.0), ("throttle", 40.0)])
        else:
            session.rank([("overload", 60.0), ("throttle", 40.0)])
            session.run_query(gateway, SPLIT)
        session.run_query(gateway, CLOCK)
    session.pin(3, "throttle", "supports")
    session.pin(3, "overload", "supports")  # Q3 rules overload out: read the wrong way
    session.rank([("throttle", 85.0), ("overload", 15.0)])
    if submit:
        session.submit(discriminator=3)
    return session


def _name(session: Session, hid: str) -> str:
    return f"{session.label_of(hid)} {next(h.title for h in session.incident.hypotheses if h.id == hid)}"


def test_watch_json_hides_the_answer_of_a_running_session(data: Path) -> None:
    session = _played(data, submit=False)
    result = _cli("watch", session.session_id, "--json")
    assert result.exit_code == 0, result.output
    snap = json.loads(result.output)
    assert set(snap) >= {"ok", "revealed", "session", "hypotheses", "queries", "board", "hints", "injects",
                         "updates", "pending", "submission", "warnings"}
    assert snap["revealed"] is False and not WATCH_ANSWER & set(snap)
    assert snap["session"]["player"] == "ada" and snap["session"]["state"] == "investigating"
    assert [q["index"] for q in snap["queries"]] == [1, 2, 3]
    assert all("ruled_out" not in q and "why" not in q for q in snap["queries"])
    assert [h["label"] for h in snap["hypotheses"]] == ["A", "B", "C", "D"]
    assert all(set(h) == {"id", "label", "title"} for h in snap["hypotheses"])
    assert snap["board"]["ranking"][0] == {"id": "throttle", "label": session.label_of("throttle"),
                                           "title": "A GPU runs at reduced clocks", "confidence": 85.0}
    assert len(snap["board"]["history"]) == 2 and len(snap["board"]["pins"]) == 2
    assert snap["submission"] is None
    assert EXPLANATION not in result.output
    session.close()


def test_watch_json_reveals_the_answer_with_reveal_and_after_the_submission(data: Path) -> None:
    session = _played(data, submit=False)
    result = _cli("watch", session.session_id, "--json", "--reveal")
    assert result.exit_code == 0, result.output
    snap = json.loads(result.output)
    assert snap["revealed"] is True and set(snap) >= WATCH_ANSWER
    assert snap["truth"] == [{"id": "throttle", "title": "A GPU runs at reduced clocks",
                              "explanation": next(h.explanation for h in session.incident.hypotheses if h.true)}]
    assert {h["id"]: h["true"] for h in snap["hypotheses"]} == {"throttle": True, **dict.fromkeys(RIVALS, False)}
    count, _, clock = snap["queries"]
    # how many requests came is a size, which rules out nobody; the clock shows the cause
    assert count["ruled_out"] == [] and set(clock["ruled_out"]) == RIVALS
    assert snap["evidence"]["still_open"] == []
    report = score_session(session.incident, 0, session.events)
    assert snap["score"]["total"] == report.total and snap["score"]["submitted"] is False
    assert [s["id"] for s in snap["signals"]] == ["prefill-by-replica", "clock-drop", "no-preemptions"]

    session.submit(discriminator=3)
    after = json.loads(_cli("watch", session.session_id, "--json").output)  # no --reveal needed now
    assert after["revealed"] is True and set(after) >= WATCH_ANSWER
    assert after["score"]["submitted"] is True and after["submission"]["discriminator"] == 3
    session.close()


def test_send_from_the_command_line_reaches_the_session(data: Path) -> None:
    session = _played(data, submit=False)
    result = _cli("send", session.session_id, "hint", "Compare the clocks.", "--cost", "4", "--json")
    assert result.exit_code == 0, result.output
    item = json.loads(result.output)["item"]
    assert (item["kind"], item["cost"]) == ("hint", 4)
    [update] = session.poll_gm()
    assert (update.text, update.cost) == ("Compare the clocks.", 4)
    report = score(session.incident, session.events, {})
    assert report.hint_cost == 4 and report.component("hints").points == -4
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
    assert set(doc) == {"ok", "revealed", "session_id", "player", "incident_id", "incident_title", "state",
                        "created", "duration_s", "generated", "truth", "final_ranking", "submitted",
                        "first_look", "evidence", "timeline", "belief_changes", "score", "notes", "written"}
    assert doc["written"] == {"markdown": str(md), "html": str(page)}
    assert doc["revealed"] is True and doc["submitted"] is True
    assert [t["id"] for t in doc["truth"]] == ["throttle"]
    first = doc["first_look"]
    assert first["queries_before_first_ranking"] == 2 and first["first_ranking_elapsed_s"] is not None
    assert [q["index"] for q in first["first_queries"]] == [1, 2, 3]
    assert first["first_queries"][0]["ruled_out"] == []  # a count of requests is a size: it rules out nobody
    assert [t["kind"] for t in doc["timeline"]] == ["query", "query", "rank", "query", "pin", "pin", "rank",
                                                    "submit"]
    assert doc["belief_changes"] == 3
    evidence = doc["evidence"]
    assert {x["hypothesis"] for x in evidence["ruled_out"]} == {_name(session, r) for r in RIVALS}
    assert evidence["still_open"] == []
    assert [(p["query"], p["stance"], p["verdict"]) for p in evidence["pins"]] == [
        (3, "supports", "right"), (3, "supports", "wrong")]
    assert doc["score"]["total"] == score_session(session.incident, 0, session.events).total
    assert {c["key"] for c in doc["score"]["components"]} >= {"conclusion", "evidence", "pins"}
    assert doc["final_ranking"][0] == {"id": "throttle", "label": session.label_of("throttle"),
                                       "title": "A GPU runs at reduced clocks", "confidence": 85.0}

    text = md.read_text(encoding="utf-8")
    for heading in ("# Interview report: ada on", "## What they looked at first", "## Evidence", "## Timeline",
                    "## Score", "## Interviewer's notes"):
        assert heading in text
    assert "- True cause: A GPU runs at reduced clocks" in text
    ranked = f"Ranked: {_name(session, 'overload')} 60%, {_name(session, 'throttle')} 40% (truth at 40%)"
    assert ranked in [t["detail"] for t in doc["timeline"]]
    assert md_text(ranked) in text  # literal Markdown
    assert f"Pin: Q3 supports {_name(session, 'overload')}: wrong" in text
    assert text.rstrip().endswith("_Recommendation:_")
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "<div class='notes'></div>" in html
    assert EXPLANATION not in html  # the report names the cause; the explanation stays in the debrief
    assert "&lt;" not in json.dumps(doc)
    session.close()


def test_report_hides_the_answer_until_the_candidate_submits(data: Path) -> None:
    session = _played(data, split_first=False, submit=False)
    doc = json.loads(_cli("report", session.session_id, "--json").output)
    assert doc["revealed"] is False and doc["submitted"] is False
    assert doc["truth"] == [] and doc["evidence"] is None and doc["score"] is None
    assert doc["first_look"]["queries_before_first_ranking"] == 1
    assert all(q["ruled_out"] == [] for q in doc["first_look"]["first_queries"])
    details = " ".join(t["detail"] for t in doc["timeline"])
    assert "truth at" not in details and "ruled out" not in details
    markdown = _cli("report", session.session_id).output
    assert "Score and answer: shown once the candidate submits (or with --reveal)" in markdown
    assert "True cause" not in markdown and "## Evidence" not in markdown and "## Score" not in markdown
    assert "(not submitted)" in markdown

    revealed = json.loads(_cli("report", session.session_id, "--json", "--reveal").output)
    assert revealed["revealed"] is True and revealed["submitted"] is False
    assert [t["id"] for t in revealed["truth"]] == ["throttle"] and revealed["score"] is not None
    assert revealed["score"]["total"] == score_session(session.incident, 0, session.events).total
    assert revealed["evidence"]["still_open"] == []
    assert "(truth at 40%)" in " ".join(t["detail"] for t in revealed["timeline"])
    assert "- True cause: A GPU runs at reduced clocks" in _cli("report", session.session_id, "--reveal").output
    session.close()


def test_report_timeline_lists_what_the_interviewer_sent(data: Path) -> None:
    from game.gameday import gm

    session = _played(data, submit=False)
    gm.send(session.path, "hint")
    gm.send(session.path, "message", text="Talk me through Q3.", sender="Grace")
    gm.send(session.path, "inject", text="Sales escalates.", sender="Sales")
    assert len(session.poll_gm()) == 3
    doc = json.loads(_cli("report", session.session_id, "--json", "--reveal").output)
    details = [t["detail"] for t in doc["timeline"] if t["kind"] in ("hint", "message", "inject")]
    assert details == ["Hint from the interviewer (-5 points): Compare the two replicas with each other.",
                       "Message sent by the interviewer, Grace: Talk me through Q3.",
                       "Update sent by the interviewer, Sales: Sales escalates."]
    assert doc["score"]["hint_cost"] == 5
    session.close()
