"""The interviewer's clock is the candidate's: `watch` counts only the time a process held the session
(the draft sidecar's held intervals), as the candidate's own screen and the timed injects do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from game.gameday import gm
from game.session import Session, held_gaps, read_held

JOURNALS = Path(__file__).parent / "data" / "journals"
INCIDENT = JOURNALS / "slow-decode-injects.yaml"
JOURNAL = JOURNALS / "slow-decode-ada.jsonl"
START = 1700000021.75  # the fixture's start event
LAST_BEFORE_GAP = 1700000152.25  # its last event before the submission (seq 13)
REOPENED = 1700000990.0
GAP = REOPENED - LAST_BEFORE_GAP  # nobody held the session from its last event until it was reopened


def _session(tmp_path: Path, *, submit: bool, late_note: bool = False) -> Path:
    """The fixture journal up to seq 13 (or the submission), held by one process until 90 s in (with events
    after its last heartbeat) and by another from REOPENED on; with `late_note`, a note at 1700001000 and
    an interviewer's message at 1700001050."""
    header, *events = JOURNAL.read_text(encoding="utf-8").splitlines()
    raw = json.loads(header)
    raw["incident_path"] = str(INCIDENT.resolve())
    kept = events[:14] if submit else events[:13]
    if late_note:
        kept.append(json.dumps({"seq": 14, "time": 1700001000.0, "kind": "note",
                                "data": {"hypothesis": "throttle", "text": "after the break"}}))
        kept.append(json.dumps({"seq": 15, "time": 1700001050.0, "kind": "message",
                                "data": {"from": "Grace", "text": "Welcome back.", "gm": "iv-late"}}))
    path = tmp_path / f"{raw['session_id']}.jsonl"
    path.write_text("\n".join([json.dumps(raw), *kept]) + "\n", encoding="utf-8")
    held = [[1700000014.5, 1700000090.0, True], [REOPENED, 1700001100.0, False]]
    path.with_suffix(".draft").write_text(json.dumps({"format": "servedrill-draft", "format_version": 1,
                                                       "session_id": raw["session_id"], "held": held}))
    return path


def test_watch_counts_only_the_time_the_session_was_held(tmp_path: Path) -> None:
    path = _session(tmp_path, submit=False, late_note=True)
    now = 1700001100.0
    snap = gm.watch_snapshot(path, now)
    wall = now - START
    assert snap["session"]["elapsed_s"] == round(wall - GAP, 3) != round(wall, 3)
    # the candidate's own clock says the same (a session with the same events and held intervals)
    assert snap["session"]["elapsed_s"] == round(wall - held_gaps(read_held(path), [START, LAST_BEFORE_GAP],
                                                                  START, now), 3)
    # events before the gap keep their times; one after it is on the held clock too
    assert snap["queries"][0]["elapsed_s"] == round(1700000029.0 - START, 3)
    [note] = [n for n in snap["board"]["notes"] if n["text"] == "after the break"]
    assert note["elapsed_s"] == round(1700001000.0 - START - GAP, 3)
    # and so is an update delivered after it, in the interviewer's feed and in the candidate's
    assert snap["updates"][-1]["text"] == "Welcome back."
    assert snap["updates"][-1]["elapsed_s"] == round(1700001050.0 - START - GAP, 3)
    session = Session.resume(path)
    try:
        assert round(session.updates[-1].elapsed_s, 3) == round(1700001050.0 - START - GAP, 3)
    finally:
        session.close()


@pytest.mark.slow
def test_a_submitted_round_is_timed_up_to_the_submission_on_the_held_clock(tmp_path: Path) -> None:
    path = _session(tmp_path, submit=True)
    snap = gm.watch_snapshot(path, now=1700009999.0)
    submitted = 1700000166.75  # before the gap: the gap does not count against it
    assert snap["session"]["elapsed_s"] == round(submitted - START, 3)
    assert snap["submission"]["elapsed_s"] == round(submitted - START, 3)


def test_without_a_draft_sidecar_the_clock_is_wall_time_as_before(tmp_path: Path) -> None:
    path = _session(tmp_path, submit=False)
    path.with_suffix(".draft").unlink()
    snap = gm.watch_snapshot(path, now=1700001100.0)
    assert snap["session"]["elapsed_s"] == round(1700001100.0 - START, 3)


def test_the_watch_clock_agrees_with_the_session_clock(tmp_path: Path) -> None:
    """`Session.elapsed` of the candidate's process and the interviewer's snapshot, same instant."""
    path = _session(tmp_path, submit=False, late_note=True)
    session = Session.resume(path)
    try:
        now = 1700001100.0
        # the resumed session holds it from the real now (long after): the fixture's gap is what differs
        assert abs(session.elapsed(now) - gm.watch_snapshot(path, now)["session"]["elapsed_s"]) < 1e-3
    finally:
        session.close()
