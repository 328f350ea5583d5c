"""The interviewer's channel: items written to a session's inbox by another process or thread reach the
candidate's session once (also across resume), are journalled as what they are (a GM hint's cost
counts in the score), and `Watch` follows the candidate's journal from outside, showing the answer and
the score only once the candidate submitted (or when the interviewer asks with reveal)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from game.gameday import gm
from game.query.gateway import Gateway, QueryResult
from game.rules.assess import score_session
from game.rules.scoring import score
from game.session import HINT, INJECT, MESSAGE, Session, SessionError, inbox_path, list_sessions, load_transcript
from game.session.gm_key import sign
from telemetry_gen.cache import ensure_database

DATA = Path(__file__).parent / "data" / "incidents"
MINI = DATA / "tui-mini.yaml"
INJECTS = """\
injects:
  - after_s: 300
    from: On-call manager
    text: Leadership asks for an ETA.
  - after_queries: 5
    from: Customer success
    text: A second customer reports slow answers.
"""
TEXT = (DATA / "good.yaml").read_text(encoding="utf-8").replace("briefing:\n", INJECTS + "briefing:\n", 1)
PREFILL = "SELECT replica, avg(prefill_s) FROM requests GROUP BY replica"
CLOCK = "SELECT replica, min(value) AS low FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica"
COUNT = "SELECT count(*) AS n FROM requests"
ANSWER = {"truth", "debrief_summary", "evidence", "signals", "score"}
"""Snapshot keys that give the answer away (docs/cli.md: present only when revealed)."""


class _Echo:
    """A gateway that answers every query with one row: for the channel's mechanics, which never score."""

    def run(self, sql: str) -> QueryResult:
        return QueryResult(sql, ok=True, columns=["replica", "x"], rows=[("vllm-0", 1.0)], row_count=1)


@pytest.fixture
def incident_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    path = tmp_path / "slow-decode.yaml"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _started(incident_file: Path) -> Session:
    session = Session.create(incident_file, 0, "ada")
    session.start()
    return session


@pytest.mark.slow
def test_an_item_from_another_process_is_delivered_once_and_not_again_after_resume(incident_file: Path) -> None:
    session = _started(incident_file)
    code = ("import sys; from game.gameday import gm; "
            "gm.send(sys.argv[1], 'message', text='Talk me through your plan.', sender='Grace')")
    subprocess.run([sys.executable, "-c", code, str(session.path)], check=True, cwd=Path(__file__).parents[1])
    assert inbox_path(session.path).name == f"{session.session_id}.gm"
    [update] = session.due_updates()
    assert (update.kind, update.sender, update.text, update.source) == (
        "message", "Grace", "Talk me through your plan.", "gm")
    assert session.due_updates() == [] and session.poll_gm() == []
    [event] = [e for e in session.events if e.kind == MESSAGE]
    assert event.data["gm"] == update.gm_id
    path = session.path
    session.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = Session.resume(path)
    assert again.poll_gm() == []  # the journal says it was delivered
    assert [u.text for u in again.updates] == ["Talk me through your plan."]
    gm.send(path, "message", text="Five minutes left.")
    assert [u.text for u in again.poll_gm()] == ["Five minutes left."]
    assert [e.kind for e in again.events].count(MESSAGE) == 2
    again.close()


def test_many_writers_at_once_lose_nothing(incident_file: Path) -> None:
    session = _started(incident_file)

    def write(who: int) -> None:
        for n in range(25):
            gm.append_item(session.path, gm.make_item("message", text=f"{who}-{n} " + "x" * 300))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    seen: list[str] = []
    while any(t.is_alive() for t in threads):
        seen += [u.text.split()[0] for u in session.poll_gm()]
    for t in threads:
        t.join()
    seen += [u.text.split()[0] for u in session.poll_gm()]
    assert sorted(seen) == sorted(f"{w}-{n}" for w in range(4) for n in range(25))
    session.close()


def test_gm_hints_cost_points_and_incident_hints_keep_their_order(incident_file: Path) -> None:
    session = _started(incident_file)
    gm.send(session.path, "hint")  # the incident's next hint, at its cost (5)
    gm.send(session.path, "hint", text="Look at the clocks.", cost=7)
    with pytest.raises(gm.GMError, match="no incident hints left"):
        gm.send(session.path, "hint")  # the one hint is already on its way
    updates = session.poll_gm()
    assert [(u.kind, u.text, u.cost, u.source) for u in updates] == [
        ("hint", "Compare replicas.", 5, "gm"), ("hint", "Look at the clocks.", 7, "gm")]
    assert session.hints_taken == 1
    with pytest.raises(SessionError, match="no hints left"):
        session.take_hint()
    report = score(session.incident, session.events, {})  # hints cost what they cost, whatever was queried
    assert report.hint_cost == 12
    assert report.component("hints").points == -12
    session.submit([("throttle", 100.0)])
    out = session.export_transcript(incident_file.parent / "t.json")
    session.close()
    assert [e.kind for e in load_transcript(out).events].count(HINT) == 2


def test_gm_injects_named_or_written_and_timed_injects_in_one_feed(incident_file: Path) -> None:
    session = _started(incident_file)
    t0 = session.events[0].time
    gm.send(session.path, "inject", index=1)
    gm.send(session.path, "inject", text="The CEO is on the call.", sender="Incident commander")
    with pytest.raises(gm.GMError, match="already delivered or sent"):
        gm.send(session.path, "inject", index=1)
    updates = session.due_updates(t0 + 10)
    assert [(u.kind, u.sender, u.source) for u in updates] == [
        ("inject", "Customer success", "gm"), ("inject", "Incident commander", "gm")]
    # the named inject is not delivered again when its query count comes
    gateway = _Echo()
    for _ in range(5):
        session.run_query(gateway, PREFILL)
    assert session.due_updates(t0 + 10) == []
    [timed] = session.due_updates(t0 + 300)
    assert (timed.sender, timed.source) == ("On-call manager", "incident")
    assert [i.sender for i in session.delivered_injects] == ["Customer success", "Incident commander",
                                                             "On-call manager"]
    assert [e.data["index"] for e in session.events if e.kind == INJECT] == [1, None, 0]
    session.close()


def test_hints_wait_for_the_start_and_are_refused_after_the_submission(incident_file: Path) -> None:
    session = Session.create(incident_file, 0, "ada")
    gm.send(session.path, "hint", check=False)
    gm.send(session.path, "message", text="Welcome.")
    assert [u.kind for u in session.poll_gm()] == ["message"]  # a message can come in the briefing
    session.start()
    assert [u.kind for u in session.poll_gm()] == ["hint"]
    session.submit([("throttle", 100.0)])
    with pytest.raises(gm.GMError, match="only messages"):
        gm.send(session.path, "hint", text="too late")
    late = gm.send(session.path, "inject", text="too late", check=False)
    gm.send(session.path, "message", text="Thanks, let's debrief.")
    assert [u.text for u in session.poll_gm()] == ["Thanks, let's debrief."]
    assert late["id"] in session.gm_refused
    [refused] = gm.Watch(session.path).pending()  # the watcher says why it will not arrive
    assert refused["id"] == late["id"] and "already submitted" in refused["problem"]
    session.close()


def test_bad_items_are_one_line_errors() -> None:
    with pytest.raises(gm.GMError, match="needs some text"):
        gm.make_item("message", text="  ")
    with pytest.raises(gm.GMError, match="send one of"):
        gm.make_item("page")
    with pytest.raises(gm.GMError, match="cost"):
        gm.make_item("hint", text="x", cost=500)
    with pytest.raises(gm.GMError, match="not both"):
        gm.make_item("inject", text="x", index=0)


def test_a_garbled_inbox_line_is_skipped(incident_file: Path) -> None:
    session = _started(incident_file)
    inbox = inbox_path(session.path)
    inbox.write_text('not json\n{"kind": "message"}\n', encoding="utf-8")
    gm.send(session.path, "message", text="still here")
    line = json.dumps(sign({"id": "half", "time": 1.0, "kind": "message", "from": "I", "text": "done now"}))
    with inbox.open("a", encoding="utf-8") as fh:
        fh.write(line[:20])  # a write in progress: no newline yet
    assert [u.text for u in session.poll_gm()] == ["still here"]
    with inbox.open("a", encoding="utf-8") as fh:
        fh.write(line[20:] + "\n")
    assert [u.text for u in session.poll_gm()] == ["done now"]
    session.close()


def test_watch_follows_the_candidate_live(incident_file: Path) -> None:
    session = _started(incident_file)
    watch = gm.Watch(session.path)  # the candidate holds the journal's lock; watching needs none
    snap = watch.snapshot()
    assert snap["session"]["state"] == "investigating" and snap["queries"] == []
    assert snap["revealed"] is False and not ANSWER & set(snap)
    session.run_query(_Echo(), PREFILL)
    session.rank([("overload", 60.0), ("throttle", 40.0)])
    gm.send(session.path, "message", text="Why that one?")
    assert watch.refresh()
    snap = watch.snapshot()
    [query] = snap["queries"]
    assert query["sql"] == PREFILL and query["ok"] is True and query["rows"] == [["vllm-0", 1.0]]
    assert "ruled_out" not in query and "why" not in query
    assert [h["label"] for h in snap["hypotheses"]] == [s.label for s in session.board]
    assert all("true" not in h for h in snap["hypotheses"])
    top = snap["board"]["ranking"][0]
    assert top == {"id": "overload", "label": session.label_of("overload"), "title": "Too much traffic",
                   "confidence": 60.0}
    assert [h["kind"] for h in snap["board"]["history"]] == ["rank"]
    assert [p["text"] for p in snap["pending"]] == ["Why that one?"]
    session.poll_gm()
    watch.refresh()
    snap = watch.snapshot()
    assert snap["pending"] == [] and [u["text"] for u in snap["updates"]] == ["Why that one?"]
    assert not watch.refresh()
    json.dumps(snap)  # JSON-ready
    session.close()


@pytest.mark.usefixtures("in_library_cache")
def test_watch_shows_the_answer_only_after_submission_or_with_reveal(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    session = Session.create(MINI, 0, "ada")
    info = ensure_database(session.incident, 0)
    session.start(info.digest)
    with Gateway(Path(info.path)) as gateway:
        session.run_query(gateway, CLOCK)
        session.run_query(gateway, COUNT)
    session.rank([("throttle", 70.0), ("overload", 30.0)])
    watch = gm.Watch(session.path)

    hidden = watch.snapshot()
    assert hidden["revealed"] is False and not ANSWER & set(hidden)
    assert all("ruled_out" not in q for q in hidden["queries"])
    assert all("true" not in h for h in hidden["hypotheses"])
    text = json.dumps(hidden)
    assert "Thermal or power capping" not in text and "was throttled" not in text  # explanation, debrief

    shown = gm.Watch(session.path, reveal=True).snapshot()
    assert shown["revealed"] is True and set(shown) >= ANSWER
    assert [t["id"] for t in shown["truth"]] == ["throttle"]
    assert {h["id"] for h in shown["hypotheses"] if h["true"]} == {"throttle"}
    clock, count = shown["queries"]
    assert set(clock["ruled_out"]) == {"overload", "bad-deploy", "kv-pressure"} and set(clock["why"]) == set(
        clock["ruled_out"])
    assert count["ruled_out"] == []  # how many requests came is a size: nobody knows how big a surge would be
    assert shown["evidence"]["still_open"] == []
    assert {r["id"]: r["query"] for r in shown["evidence"]["ruled_out"]} == {
        "overload": 1, "bad-deploy": 1, "kv-pressure": 1}
    assert [s["id"] for s in shown["signals"]] == [s.id for s in session.incident.signals]
    report = score_session(session.incident, 0, session.events)
    assert shown["score"]["total"] == report.total and shown["score"]["submitted"] is False

    session.submit()
    assert watch.refresh()
    after = watch.snapshot()  # the same watcher, opened without reveal: the submission reveals
    assert after["revealed"] is True and set(after) >= ANSWER
    assert after["score"]["submitted"] is True
    assert after["score"]["total"] == score_session(session.incident, 0, session.events).total
    assert after["submission"]["ranking"][0] == {"id": "throttle", "confidence": 70.0}
    json.dumps(after)
    session.close()


def test_the_inbox_is_not_listed_as_a_session(incident_file: Path) -> None:
    session = _started(incident_file)
    gm.send(session.path, "message", text="hello")
    assert [s.session_id for s in list_sessions()] == [session.session_id]
    session.close()


def test_watch_json_shows_an_untaken_hint_by_number_and_cost_never_its_text(incident_file: Path) -> None:
    from click.testing import CliRunner

    from tui.cli_watch import watch as watch_cmd

    session = _started(incident_file)
    [hint] = session.incident.hints

    def look() -> dict:
        result = CliRunner().invoke(watch_cmd, [str(session.path), "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    before = look()
    assert before["hints"]["next"] == {"index": 0, "cost": hint.cost}
    assert hint.text not in json.dumps(before)  # not taken: its text stays hidden
    session.take_hint()
    after = look()
    assert after["hints"]["next"] is None and after["hints"]["taken"] == 1
    assert [u["text"] for u in after["updates"] if u["kind"] == "hint"] == [hint.text]  # taken: shown
    session.close()
