"""Sessions: the state machine, the journal on disk, surviving a kill, resuming, and transcripts."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from game.query.gateway import QueryResult, TableRead
from game.session import (
    DEBRIEFED,
    INVESTIGATING,
    SUBMITTED,
    Event,
    Session,
    SessionError,
    SessionWarning,
    TranscriptError,
    data_dir,
    find_session,
    list_unfinished,
    load_transcript,
    query_event_data,
)
from game.session.hypotheses import shown_hypotheses

ROOT = Path(__file__).resolve().parents[1]
INCIDENT = ROOT / "tests" / "data" / "incidents" / "drill-slow-replica.yaml"
WITH_ALIASES = ROOT / "tests" / "data" / "incidents" / "good.yaml"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def session(root: Path) -> Session:
    s = Session.create(INCIDENT, 3, "ada")
    s.start("digest-of-telemetry")
    yield s
    s.close()


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


CLOCK_SQL = "SELECT min(value) AS clock FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' AND replica = 'vllm-1'"
CLOCK_READ = TableRead("metrics", ["name", "value"], ["replica = 'vllm-1'"], False)


class _Gateway:
    """Answers CLOCK_SQL as the real gateway would (one row, its reads); any other SQL fails. Sessions
    record what a gateway returns, so their mechanics need no database."""

    def run(self, sql: str) -> QueryResult:
        if sql != CLOCK_SQL:
            return QueryResult(sql, ok=False, error="Binder Error: no such column", error_kind="sql")
        return QueryResult(sql, ok=True, columns=["clock"], types=["DOUBLE"], rows=[(742.5,)], row_count=1,
                           duration_s=0.003, reads=[CLOCK_READ])


def _gateway() -> _Gateway:
    return _Gateway()


def _label(session: Session, hypothesis_id: str) -> str:
    return session.label_of(hypothesis_id)


# ------------------------------------------------------------------ data directory


def test_data_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert data_dir() == tmp_path / "a"
    monkeypatch.delenv("SERVEDRILL_DATA")
    assert data_dir() == tmp_path / "x" / "servedrill"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == tmp_path / "home" / ".local" / "share" / "servedrill"


# ------------------------------------------------------------------ journal and state machine


def test_every_event_is_on_disk_when_the_call_returns(session: Session) -> None:
    assert session.path is not None and session.path.parent.name == "sessions"
    header = _lines(session.path)[0]
    assert header["format_version"] == 1 and header["incident_id"] == "drill-slow-replica"
    assert header["seed"] == 3 and header["player"] == "ada"
    assert header["incident_digest"] == hashlib.sha256(INCIDENT.read_bytes()).hexdigest()
    gw = _gateway()
    calls = [
        lambda: session.run_query(gw, CLOCK_SQL)[0],
        lambda: session.rank([("throttle", 70), ("overload", 30)]),
        lambda: session.pin(1, "throttle", "supports"),
        lambda: session.note("overload", "queues look flat"),
        lambda: session.take_hint(),
        lambda: session.submit(None, 1),
        lambda: session.view_debrief(),
    ]
    for call in calls:
        event = call()
        last = _lines(session.path)[-1]
        assert last == json.loads(json.dumps(event.to_dict()))
    seqs = [e["seq"] for e in _lines(session.path)[1:]]
    times = [e["time"] for e in _lines(session.path)[1:]]
    assert seqs == sorted(set(seqs)) and times == sorted(times)
    assert session.state == DEBRIEFED


def test_a_query_event_keeps_what_review_and_scoring_need(session: Session) -> None:
    event, _ = session.run_query(_gateway(), CLOCK_SQL)
    data = event.data
    assert data["index"] == 1 and data["sql"] == CLOCK_SQL and data["ok"] is True
    assert data["reads"] == [{"table": "metrics", "columns": ["name", "value"],
                              "filters": ["replica = 'vllm-1'"], "counted": False}]
    assert (data["columns"], data["rows"], data["row_count"]) == (["clock"], [[742.5]], 1)
    for key in ("error", "row_count", "columns", "truncated", "duration_s", "rows"):
        assert key in data


def test_a_statement_that_fails_is_returned_not_recorded(session: Session) -> None:
    assert session.path is not None
    before = session.path.read_bytes()
    failed, result = session.run_query(_gateway(), "SELECT nothing")
    assert failed is None and result.ok is False and "Binder Error" in (result.error or "")
    assert session.path.read_bytes() == before and session.queries == []  # free: no Qn, no budget
    event, _ = session.run_query(_gateway(), CLOCK_SQL)
    assert event is not None and event.data["index"] == 1


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda s: s.rank([("nope", 100)]), "unknown hypothesis"),
        (lambda s: s.rank([("throttle", 60), ("overload", 39)]), "sum to 100"),
        (lambda s: s.rank([("throttle", 30), ("overload", 70)]), "most likely first"),
        (lambda s: s.rank([("throttle", 50), (s.label_of("throttle"), 50)]), "ranked twice"),
        (lambda s: s.rank([("A GPU runs at reduced clocks", 50), ("throttle", 50)]), "ranked twice"),
        (lambda s: s.rank([("throttle", 120), ("overload", -20)]), "0..100"),
        (lambda s: s.rank([]), "at least one"),
        (lambda s: s.pin(1, "throttle", "supports"), "no queries"),
        (lambda s: s.note("throttle", "   "), "needs some text"),
        (lambda s: s.note("ghost", "text"), "unknown hypothesis"),
        (lambda s: s.submit(None, None), "rank the hypotheses"),
        (lambda s: s.submit([("throttle", 100)], 4), "no queries"),
        (lambda s: s.view_debrief(), "still open"),
        (lambda s: s.start(), "still open"),
    ],
)
def test_illegal_actions_raise_and_write_nothing(session: Session, action, message: str) -> None:
    assert session.path is not None
    before = session.path.read_bytes()
    with pytest.raises(SessionError, match=message):
        action(session)
    assert session.path.read_bytes() == before
    assert session.state == INVESTIGATING


def test_confidences_may_miss_100_by_half_a_point(session: Session) -> None:
    event = session.rank([("throttle", 60.2), ("overload", 39.7)])
    assert [r["confidence"] for r in event.data["ranking"]] == [60.2, 39.7]
    with pytest.raises(SessionError):
        session.rank([("throttle", 60.3), ("overload", 39.1)])


def test_labels_titles_and_title_prefixes_are_recorded_as_ids(session: Session) -> None:
    event = session.rank({_label(session, "throttle"): 90, "KV cache pressure": 6, "the gateway": 4})
    assert [r["id"] for r in event.data["ranking"]] == ["throttle", "kv-pressure", "bad-deploy"]
    assert [s.label for s in session.board] == ["A", "B", "C", "D"]
    assert session.board == shown_hypotheses(session.incident, 3)  # the session's seed picks the order


def test_aliases_are_recorded_as_ids(root: Path) -> None:
    s = Session.create(WITH_ALIASES, 0, "ada")
    s.start()
    event = s.rank({"thermal": 90, "surge": 10})
    assert [r["id"] for r in event.data["ranking"]] == ["throttle", "overload"]
    s.close()


def test_nothing_but_the_debrief_after_submit(session: Session) -> None:
    gw = _gateway()
    session.run_query(gw, CLOCK_SQL)
    session.submit([("throttle", 100)], 1)
    assert session.state == SUBMITTED
    assert session.path is not None
    before = session.path.read_bytes()
    ran: list[str] = []

    class Spy:
        def run(self, sql: str):
            ran.append(sql)
            return gw.run(sql)

    for action in (lambda: session.run_query(Spy(), CLOCK_SQL), lambda: session.rank([("throttle", 100)]),
                   lambda: session.take_hint(), lambda: session.submit([("throttle", 100)], 1),
                   lambda: session.pin(1, "throttle", "refutes")):
        with pytest.raises(SessionError, match="already submitted"):
            action()
    assert ran == [], "a refused query must not reach the database"
    assert session.path.read_bytes() == before
    session.view_debrief()
    with pytest.raises(SessionError, match="over"):
        session.view_debrief()


def test_pins_need_a_query_that_ran(session: Session) -> None:
    gw = _gateway()
    session.run_query(gw, "SELECT nothing")  # not in the plan: fails, and gets no Qn
    session.run_query(gw, CLOCK_SQL)
    with pytest.raises(SessionError, match="no query Q2"):
        session.pin(2, "throttle", "supports")
    with pytest.raises(SessionError, match="stance"):
        session.pin(1, "throttle", "maybe")
    assert session.pin(1, _label(session, "throttle"), "supports").data == {
        "query": 1, "hypothesis": "throttle", "stance": "supports"}


def test_a_failed_query_from_an_older_journal_cannot_be_pinned(session: Session) -> None:
    # journals written before failed statements went free hold them as query events
    last = session.events[-1]
    session.replay(Event(last.seq + 1, last.time, "query", query_event_data(_gateway().run("SELECT nothing"), 1)))
    with pytest.raises(SessionError, match="failed"):
        session.pin(1, "throttle", "supports")


def test_hints_run_out(session: Session) -> None:
    costs = [session.take_hint().data["cost"] for _ in session.incident.hints]
    assert costs == [h.cost for h in session.incident.hints]
    with pytest.raises(SessionError, match="no hints left"):
        session.take_hint()


# ------------------------------------------------------------------ resume


def test_resume_restores_state_and_continues_the_sequence(session: Session) -> None:
    gw = _gateway()
    session.run_query(gw, CLOCK_SQL)
    session.rank([("throttle", 80), ("overload", 20)])
    session.take_hint()
    events = session.events
    session.close()
    assert session.path is not None
    again = Session.resume(session.path)
    try:
        assert again.events == events
        assert again.state == INVESTIGATING
        assert again.ranking == [{"id": "throttle", "confidence": 80.0},
                                 {"id": "overload", "confidence": 20.0}]
        assert again.hints_taken == 1
        assert again.warnings == []
        nxt = again.note("throttle", "after resume")
        assert nxt.seq == events[-1].seq + 1
    finally:
        again.close()


def test_a_session_cannot_be_open_twice(session: Session) -> None:
    assert session.path is not None
    with pytest.raises(SessionError, match="another"):
        Session.resume(session.path)


def test_a_torn_last_line_is_dropped_with_a_warning(session: Session) -> None:
    session.note("throttle", "one")
    session.note("throttle", "two")
    session.close()
    assert session.path is not None
    with session.path.open("ab") as fh:
        fh.write(b'{"seq": 4, "time": 17, "kind": "no')
    lines_before = len(session.path.read_text().split("\n"))
    with pytest.warns(SessionWarning, match=rf"{session.path.name}:{lines_before}:"):
        again = Session.resume(session.path)
    assert [e.data.get("text") for e in again.events if e.kind == "note"] == ["one", "two"]
    again.note("throttle", "three")
    again.close()
    third = Session.resume(session.path)  # the torn bytes are gone: no warning any more
    assert third.warnings == []
    assert [e.data.get("text") for e in third.events if e.kind == "note"] == ["one", "two", "three"]
    third.close()


def test_garbage_in_the_middle_is_skipped_with_a_warning(session: Session) -> None:
    for text in ("a", "b", "c"):
        session.note("throttle", text)
    session.close()
    assert session.path is not None
    lines = session.path.read_text().split("\n")
    lines[3] = "#### not json ####"  # the note "b"
    lines.insert(4, json.dumps({"seq": 99, "time": 1.0, "kind": "teleport", "data": {}}))
    session.path.write_text("\n".join(lines))
    with pytest.warns(SessionWarning) as caught:
        again = Session.resume(session.path)
    assert {str(w.message).split(": ")[0] for w in caught} == {f"{session.path}:4", f"{session.path}:5"}
    assert [e.data["text"] for e in again.events if e.kind == "note"] == ["a", "c"]
    again.close()


def test_resume_refuses_a_changed_incident(tmp_path: Path, root: Path) -> None:
    copy = tmp_path / "drill-slow-replica.yaml"
    shutil.copy(INCIDENT, copy)
    s = Session.create(copy, 0, "ada")
    s.close()
    copy.write_text(copy.read_text().replace("Drain vllm-1", "Reboot vllm-1"))
    assert s.path is not None
    with pytest.raises(SessionError, match="changed"):
        Session.resume(s.path)


def test_unfinished_sessions_are_listed_and_found(root: Path) -> None:
    states = {}
    for steps in (0, 1, 2, 3):
        s = Session.create(INCIDENT, 0, f"p{steps}")
        if steps >= 1:
            s.start()
        if steps >= 2:
            s.submit([("throttle", 100)])
        if steps >= 3:
            s.view_debrief()
        states[s.session_id] = s.state
        s.close()
    listed = {x.session_id: x.state for x in list_unfinished()}
    assert listed == {sid: st for sid, st in states.items() if st != DEBRIEFED}
    some = next(iter(listed))
    assert find_session(some) == root / "sessions" / f"{some}.jsonl"
    with pytest.raises(SessionError, match="no session"):
        find_session("nothing-like-this")


def test_a_session_open_in_a_live_process_is_listed_as_in_use(root: Path) -> None:
    live = Session.create(INCIDENT, 0, "tab-1")
    closed = Session.create(INCIDENT, 0, "tab-2")
    closed.close()
    in_use = {x.session_id: x.in_use for x in list_unfinished()}
    assert in_use == {live.session_id: True, closed.session_id: False}
    assert all(x.to_dict()["in_use"] is x.in_use for x in list_unfinished())
    live.close()
    assert not any(x.in_use for x in list_unfinished())
    Session.resume(root / "sessions" / f"{live.session_id}.jsonl").close()  # the probe left no lock behind


# ------------------------------------------------------------------ surviving a kill

CHILD = textwrap.dedent(
    """
    import sys
    from game.session import Session
    s = Session.create(sys.argv[1], 0, "crash-test")
    print("path", s.path, flush=True)
    print("ack", s.start().seq, flush=True)
    i = 0
    while True:
        i += 1
        if i % 2:
            event = s.note("throttle", "x" * (i % 500) + str(i))
        else:
            event = s.rank([("throttle", 50 + i % 50), ("overload", 50 - i % 50)])
        print("ack", event.seq, flush=True)
    """
)


@pytest.mark.slow
def test_acknowledged_events_survive_sigkill(root: Path) -> None:
    env = {**os.environ, "SERVEDRILL_DATA": str(root), "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(INCIDENT)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True, cwd=ROOT)
    assert child.stdout is not None
    path = None
    acked: list[int] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        word, value = line.split(" ", 1)
        if word == "path":
            path = Path(value.strip())
        else:
            acked.append(int(value))
        if len(acked) >= 200:
            break
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    # read the rest through the same file objects: readline() may already hold later acks in its buffer,
    # which communicate() (reading the raw pipes) would drop, and the test would see unacked events on disk
    rest, err = child.stdout.read(), child.stderr.read() if child.stderr is not None else ""
    acked += [int(v.split(" ", 1)[1]) for v in rest.splitlines() if v.startswith("ack ")]
    assert path is not None, err
    assert len(acked) >= 200, err
    resumed = Session.resume(path)
    try:
        on_disk = {e.seq for e in resumed.events}
        assert set(acked) <= on_disk
        assert max(on_disk) <= max(acked) + 1  # at most the one event in flight was written, not acked
        resumed.note("throttle", "after the crash")
    finally:
        resumed.close()


# ------------------------------------------------------------------ transcripts


def _finished(root: Path, incident: Path = INCIDENT) -> tuple[Session, Path]:
    s = Session.create(incident, 0, "ada")
    s.start("tele-digest")
    s.run_query(_gateway(), CLOCK_SQL)
    s.rank([("throttle", 90), ("overload", 10)])
    s.submit(None, 1)
    out = s.export_transcript(root / "t.json")
    s.close()
    return s, out


def test_transcript_round_trip(root: Path) -> None:
    s, out = _finished(root)
    t = load_transcript(out)
    doc = json.loads(out.read_text())
    assert doc["format_version"] == 1 and doc["telemetry_digest"] == "tele-digest"
    assert doc["submission"]["discriminator"] == 1 and doc["submission"]["ranking"][0]["id"] == "throttle"
    assert t.events == s.events
    assert t.header.incident_digest == s.header.incident_digest and t.header.player == "ada"
    assert t.incident.id == "drill-slow-replica"
    assert t.recorded_total is None and "score" not in doc  # exported without a score


@pytest.mark.parametrize(
    ("extra", "claimed"),
    [
        ({"score": {"total": 42.5}}, 42.5),
        ({"gameday": {"score": 1e9}}, 1e9),
        ({"score": {"total": 10.0}, "gameday": {"score": 20.0}}, 10.0),
        ({"score": {"total": True}}, None),
        ({"score": {"total": "100"}}, None),
        ({"score": 100}, None),
    ],
)
def test_a_transcript_keeps_the_score_it_claims_apart(root: Path, extra: dict, claimed: float | None) -> None:
    s, out = _finished(root)
    doc = json.loads(out.read_text())
    doc.update(extra)
    out.write_text(json.dumps(doc))
    t = load_transcript(out)
    assert t.recorded_total == claimed
    assert t.events == s.events  # the claim changes nothing that is scored


def test_export_records_the_score_it_is_given(root: Path) -> None:
    s = Session.create(INCIDENT, 0, "ada")
    s.start()
    s.submit([("throttle", 100)])
    out = s.export_transcript(root / "scored.json", score={"total": 61.2})
    s.close()
    assert json.loads(out.read_text())["score"] == {"total": 61.2}
    assert load_transcript(out).recorded_total == 61.2


def _broken(root: Path, how: str) -> Path:
    _, out = _finished(root)
    text = out.read_text()
    doc = json.loads(text)
    if how == "not json":
        out.write_text("this is not json at all")
    elif how == "truncated":
        out.write_text(text[: len(text) // 2])
    elif how == "cut in a literal":
        cut = text.index("true") + 2  # in the middle of `true`
        out.write_text(text[:cut])
    elif how == "version":
        doc["format_version"] = 2
        out.write_text(json.dumps(doc))
    elif how == "missing":
        del doc["seed"]
        out.write_text(json.dumps(doc))
    elif how == "bad event":
        doc["events"][1]["kind"] = "debrief_viewed"  # a debrief before the submission
        out.write_text(json.dumps(doc))
    elif how == "empty":
        out.write_text("")
    return out


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("not json", "not JSON"),
        ("truncated", "truncated"),
        ("cut in a literal", "truncated"),
        ("version", "format version 2 is not supported"),
        ("missing", "missing field 'seed'"),
        ("bad event", r"events\[1\] \(debrief_viewed\)"),
        ("empty", "empty"),
    ],
)
def test_bad_transcripts_give_one_clear_line(root: Path, how: str, message: str) -> None:
    path = _broken(root, how)
    with pytest.raises(TranscriptError, match=message) as info:
        load_transcript(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(path))


def test_a_changed_incident_invalidates_its_transcripts(root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "drill-slow-replica.yaml"
    shutil.copy(INCIDENT, copy)
    _, out = _finished(root, copy)
    assert load_transcript(out).incident_path == copy
    copy.write_text(copy.read_text() + "\n# an edit\n")
    with pytest.raises(TranscriptError, match="changed since"):
        load_transcript(out)
