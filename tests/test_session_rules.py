"""The session's rules: what one event does to the state, whoever sent it and however it arrives (played
now, resumed from a journal, or checked again from a transcript)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from game.session import DEBRIEFED, SUBMITTED, Session, SessionError, load_transcript

JOURNALS = Path(__file__).parent / "data" / "journals"
INCIDENT = JOURNALS / "slow-decode-injects.yaml"
JOURNAL = JOURNALS / "slow-decode-ada.jsonl"


def _journal(tmp_path: Path, *, upto_seq: int, gm_on: dict[int, str]) -> Path:
    """The fixture journal up to event `upto_seq`, with interviewer ids added to the events `gm_on` names."""
    header, *events = JOURNAL.read_text(encoding="utf-8").splitlines()
    raw_header = json.loads(header)
    raw_header["incident_path"] = str(INCIDENT.resolve())
    lines = [json.dumps(raw_header, separators=(",", ":"))]
    for line in events:
        event = json.loads(line)
        if event["seq"] > upto_seq:
            break
        if event["seq"] in gm_on:
            event["data"]["gm"] = gm_on[event["seq"]]
        lines.append(json.dumps(event, separators=(",", ":")))
    target = tmp_path / "sessions" / f"{raw_header['session_id']}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def _resume(path: Path) -> Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Session.resume(path)


def test_a_resumed_submit_that_carries_an_interviewer_id_still_submits(tmp_path: Path) -> None:
    """A submission is a submission whoever's id it carries: the round is over and the id is used up."""
    path = _journal(tmp_path, upto_seq=14, gm_on={14: "iv-submit"})
    session = _resume(path)
    try:
        assert session.warnings == []
        assert session.submission is not None
        assert session.state == SUBMITTED
        assert "iv-submit" in session.gm_delivered
        with pytest.raises(SessionError, match="already submitted"):
            session.rank({"throttle": 100})
        assert session.view_debrief().kind == "debrief_viewed"
        assert session.state == DEBRIEFED
    finally:
        session.close()


def test_a_transcript_whose_submit_carries_an_interviewer_id_is_submitted(tmp_path: Path) -> None:
    path = _journal(tmp_path, upto_seq=14, gm_on={14: "iv-submit"})
    session = _resume(path)
    try:
        exported = session.export_transcript(tmp_path / "t.json")
    finally:
        session.close()
    doc = json.loads(exported.read_text(encoding="utf-8"))
    assert doc["state"] == "submitted" and doc["submission"]["gm"] == "iv-submit"
    assert load_transcript(exported, incident_path=INCIDENT).submission is not None


def test_a_ranking_with_an_interviewer_id_still_sets_the_board(tmp_path: Path) -> None:
    path = _journal(tmp_path, upto_seq=7, gm_on={7: "iv-rank"})
    session = _resume(path)
    try:
        assert session.ranking is not None and session.ranking[0]["id"] == "throttle"
        assert session.gm_delivered == {"iv-rank"}
    finally:
        session.close()


def test_an_interviewer_id_is_used_once_whatever_event_carries_it(tmp_path: Path) -> None:
    """The second event with the same id is a damaged line: skipped with a warning, the rest resumes."""
    path = _journal(tmp_path, upto_seq=14, gm_on={11: "iv-1", 14: "iv-1"})
    session = _resume(path)
    try:
        assert session.state == "investigating" and session.submission is None
        assert any("iv-1 was already delivered" in w for w in session.warnings)
    finally:
        session.close()
