"""Journals, drafts and transcripts written before `game.session` became a package still resume, load
and summarise the same, and what the new code writes for them is byte-for-byte what the old code wrote.

The fixtures in tests/data/journals were written by the single-module `game/session.py` (commit
6a115e2): a whole round on the incident next to them, with every event kind, three interviewer items
and a draft sidecar. Their header names the incident by a repository-relative path; the tests point it
at the file (only the header line changes, the event lines are kept as written)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from game.session import (
    DEBRIEFED,
    Event,
    Header,
    Session,
    find_session,
    list_sessions,
    load_transcript,
)

JOURNALS = Path(__file__).parent / "data" / "journals"
INCIDENT = JOURNALS / "slow-decode-injects.yaml"
JOURNAL = JOURNALS / "slow-decode-ada.jsonl"
DRAFT = JOURNALS / "slow-decode-ada.draft"
TRANSCRIPT = JOURNALS / "slow-decode-ada.transcript.json"
SESSION_ID = json.loads(JOURNAL.read_text(encoding="utf-8").split("\n", 1)[0])["session_id"]


def _dump(raw: dict) -> str:
    return json.dumps(raw, separators=(",", ":"), allow_nan=False)


def old_journal(root: Path, *, lines: slice = slice(None)) -> Path:
    """The old journal (and its draft) in `root`/sessions, its header pointing at the fixture incident.
    `lines` keeps a slice of the event lines (the header is always kept)."""
    folder = root / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    header, *events = JOURNAL.read_text(encoding="utf-8").splitlines()
    raw = json.loads(header)
    raw["incident_path"] = str(INCIDENT.resolve())
    target = folder / f"{SESSION_ID}.jsonl"  # a journal is named after its session
    target.write_text("\n".join([_dump(raw), *events[lines]]) + "\n", encoding="utf-8")
    shutil.copy(DRAFT, target.with_suffix(".draft"))
    return target


def test_the_new_code_writes_each_old_line_back_byte_for_byte() -> None:
    header, *events = JOURNAL.read_text(encoding="utf-8").splitlines()
    assert _dump(Header.from_dict(json.loads(header)).to_dict()) == header
    for line in events:
        assert _dump(Event.from_dict(json.loads(line)).to_dict()) == line


def test_an_old_journal_resumes_with_everything_it_recorded(tmp_path: Path) -> None:
    path = old_journal(tmp_path)
    before = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an old journal is not damaged: no warning
        session = Session.resume(path)
    try:
        assert session.warnings == []
        assert session.state == DEBRIEFED
        assert [e.seq for e in session.events] == list(range(1, 16))
        assert [e.data["index"] for e in session.queries] == [1, 2, 3]
        assert session.ranking == [{"id": "throttle", "confidence": 60.0}, {"id": "overload", "confidence": 30.0},
                                   {"id": "bad-deploy", "confidence": 10.0}]
        assert session.submission is not None and session.submission.data["discriminator"] == 1
        # the interviewer's own hint costs points but is not one of the incident's hints
        assert session.hints_taken == 1
        assert len(session.gm_delivered) == 3
        assert [(i.sender, i.text) for i in session.delivered_injects] == [
            ("On-call manager", "Leadership asks for an ETA."), ("Facilities", "Pager: vllm-1 fan alarm.")]
        assert [(u.kind, u.source, u.cost) for u in session.updates] == [
            ("hint", "player", 5), ("inject", "incident", 0), ("message", "gm", 0), ("hint", "gm", 12),
            ("inject", "gm", 0)]
        # the old draft's hold is read, and this process adds its own
        assert session.held[0] == (1700000014.5, 1700000195.75, True)
        assert len(session.held) == 2
        # the draft's board is older than the submission (seq 14 > 9): not offered again; its editor is
        assert session.draft == {"editor": "SELECT 1 -- draft"}
    finally:
        session.close()
    assert path.read_bytes() == before  # resuming and closing appends nothing to the journal


def test_an_old_journal_cut_before_the_submission_plays_on(tmp_path: Path) -> None:
    path = old_journal(tmp_path, lines=slice(0, 13))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session = Session.resume(path)
    try:
        assert session.state == "investigating"
        event = session.submit(None, discriminator=3)
        assert (event.seq, event.data["discriminator"]) == (14, 3)
    finally:
        session.close()
    last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert set(last) == {"seq", "time", "kind", "data"} and last["kind"] == "submit"
    assert last["data"] == {"ranking": [{"id": "throttle", "confidence": 60.0},
                                        {"id": "overload", "confidence": 30.0},
                                        {"id": "bad-deploy", "confidence": 10.0}], "discriminator": 3}


def test_an_old_journal_is_listed_and_found(tmp_path: Path) -> None:
    path = old_journal(tmp_path)
    [summary] = list_sessions(tmp_path)
    assert (summary.session_id, summary.state, summary.queries, summary.updated) == (
        SESSION_ID, "debriefed", 3, 1700000188.5)
    assert summary.player == "ada <b>&</b>" and not summary.in_use
    assert find_session(SESSION_ID[:20], tmp_path) == path


def test_an_old_transcript_loads_and_checks(tmp_path: Path) -> None:
    transcript = load_transcript(TRANSCRIPT, incident_path=INCIDENT)
    assert transcript.header.session_id == SESSION_ID
    assert transcript.recorded_total == 42.5
    assert [e.kind for e in transcript.events] == [
        "start", "query", "query", "query", "pin", "pin", "rank", "note", "hint", "inject", "message", "hint",
        "inject", "submit"]
    assert transcript.submission is not None and transcript.submission["discriminator"] == 1
    assert transcript.telemetry_digest == "f" * 64


def test_an_old_journal_exports_the_transcript_the_old_code_exported(tmp_path: Path) -> None:
    """Same events, same keys, same order: only the export time and the incident path may differ."""
    path = old_journal(tmp_path, lines=slice(0, 14))  # up to the submission, as the old export was
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session.resume(path)
    try:
        doc = session.transcript(score={"total": 42.5})
    finally:
        session.close()
    old = json.loads(TRANSCRIPT.read_text(encoding="utf-8"))
    assert list(doc) == list(old)
    for key in set(old) - {"exported", "incident_path"}:
        assert json.dumps(doc[key]) == json.dumps(old[key]), key


@pytest.mark.parametrize("torn", [b'{"seq":16,"time":17', b"\x00\x00garbage"])
def test_an_old_journal_with_a_torn_last_line_resumes_without_it(tmp_path: Path, torn: bytes) -> None:
    path = old_journal(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good + torn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session.resume(path)
    try:
        assert session.state == DEBRIEFED and len(session.events) == 15
        assert any("incomplete last line" in w for w in session.warnings)
    finally:
        session.close()
    assert path.read_bytes() == good
