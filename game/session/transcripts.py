"""A transcript: the finished session as one JSON document (see docs/cli.md for the keys).

`transcript_doc` builds one from a session's header and events; `load_transcript` reads one back and
passes its events through the session rules again, against the incident file it was played on (which
must still have the recorded digest). A score the file claims is kept for display, never trusted."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from game.session.paths import file_digest, locate_incident, open_incident
from game.session.records import (
    FORMAT_VERSION,
    MAX_MEMBERS,
    MEMBER_RE,
    START,
    SUBMIT,
    TRANSCRIPT_FORMAT,
    Event,
    Header,
    SessionError,
    TranscriptError,
    check_session_id,
    iso,
)
from game.session.rules import Rules
from incidents.bounded_read import ReadRefused, read_bytes
from incidents.spec import Incident

MAX_TRANSCRIPT_BYTES = 32 * 1024 * 1024
"""A transcript larger than this is refused unread (a long game's transcript is well under 1 MB)."""

_TRANSCRIPT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "session_id": str, "incident_id": str, "incident_digest": str, "seed": int, "player": str,
    "created": str, "events": list,
}


@dataclass(frozen=True)
class Transcript:
    """A loaded, checked transcript. `events` passed the session rules again on load."""

    path: Path
    header: Header
    telemetry_digest: str | None
    events: list[Event]
    submission: dict[str, Any] | None
    incident: Incident
    incident_path: Path
    recorded_total: float | None = None
    """A score the file claims (its `score.total`, or a game day's `gameday.score`): shown beside the
    recomputed score, never used in its place."""


def transcript_doc(header: Header, events: Sequence[Event], state: str, *, exported: float,
                   telemetry_digest: str | None = None, score: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The transcript of a session with `events` now in `state`, exported at epoch `exported`. Without
    `telemetry_digest`, the one the start event recorded. `score` is recorded for reading only."""
    if telemetry_digest is None:
        telemetry_digest = next((e.data.get("telemetry_digest") for e in events if e.kind == START), None)
    submit = next((e for e in events if e.kind == SUBMIT), None)
    # the key order is the transcript format: the header's keys (less its format), then these
    doc = {k: v for k, v in header.to_dict().items() if k != "format"}
    doc.update({
        "format": TRANSCRIPT_FORMAT,
        "format_version": FORMAT_VERSION,
        "telemetry_digest": telemetry_digest,
        "state": state,
        "exported": iso(exported),
        "events": [e.to_dict() for e in events],
        "submission": None if submit is None else {"seq": submit.seq, "time": submit.time, **submit.data},
    })
    if score is not None:
        doc["score"] = dict(score)
    return doc


def write_transcript(path: Path | str, doc: Mapping[str, Any]) -> Path:
    """Write a transcript atomically (a temporary file, then rename). Returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def _claimed_total(doc: Mapping[str, Any]) -> float | None:
    for holder, key in ((doc.get("score"), "total"), (doc.get("gameday"), "score")):
        if isinstance(holder, Mapping):
            value = holder.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
    return None


def _ends_early(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether a JSON error comes from text cut short (rather than text that is wrong): the error is at
    the end, in an unterminated string, or in a last token that is the start of a literal or number."""
    if exc.msg.startswith("Unterminated"):
        return True
    tail = text[exc.pos:].strip()
    return (not tail or any(word.startswith(tail) for word in ("true", "false", "null"))
            or all(c in "0123456789+-.eE" for c in tail))


def _read_doc(path: Path) -> dict[str, Any]:
    """The transcript file as a JSON object, bounded in size; TranscriptError (the file named) if not."""

    def bad(problem: str) -> TranscriptError:
        return TranscriptError(f"{path}: {problem}")

    try:
        raw = read_bytes(path, max_bytes=MAX_TRANSCRIPT_BYTES, what="transcript")
    except ReadRefused as exc:  # a FIFO, a device, a directory, over the cap
        raise bad(exc.problem) from None
    except OSError as exc:
        raise bad(f"cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("not a transcript (not UTF-8 text)") from None
    if not text.strip():
        raise bad("the file is empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        if _ends_early(text, exc):
            raise bad("the JSON ends early: the file is truncated") from None
        raise bad(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(doc, dict):
        raise bad("not a transcript (expected a JSON object)")
    return doc


def _header_of(doc: Mapping[str, Any]) -> Header:
    """The transcript's identity, checked for shape; ValueError names the first problem."""
    if doc.get("format") not in (None, TRANSCRIPT_FORMAT):
        raise ValueError(f"not a transcript (format {doc.get('format')!r})")
    if "format_version" not in doc:
        raise ValueError("missing field 'format_version'")
    if doc["format_version"] != FORMAT_VERSION:
        raise ValueError(f"format version {doc['format_version']!r} is not supported (this servedrill reads "
                         f"{FORMAT_VERSION})")
    for key, kind in _TRANSCRIPT_FIELDS.items():
        if key not in doc:
            raise ValueError(f"missing field '{key}'")
        value = doc[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"field '{key}' has the wrong type ({type(value).__name__})")
    members = doc.get("members", [])
    if not isinstance(members, list) or len(members) > MAX_MEMBERS or \
            not all(isinstance(m, str) and MEMBER_RE.match(m) for m in members):
        raise ValueError(f"field 'members' must be a list of at most {MAX_MEMBERS} player names")
    return Header(check_session_id(doc["session_id"]), doc["incident_id"], doc["incident_digest"],
                  str(doc.get("incident_path") or ""), doc["seed"], doc["player"], doc["created"],
                  members=tuple(members))


def load_transcript(path: Path | str, *, incident_path: Path | str | None = None) -> Transcript:
    """Read and check a transcript. The incident is `incident_path`, else the path stored in the
    transcript, else the library incident with its id; its file must still have the recorded digest.

    Raises TranscriptError with one line naming the file and the problem."""
    path = Path(path)

    def bad(problem: str) -> TranscriptError:
        return TranscriptError(f"{path}: {problem}")

    doc = _read_doc(path)
    try:
        header = _header_of(doc)
    except ValueError as exc:
        raise bad(str(exc)) from None
    events: list[Event] = []
    for i, raw in enumerate(doc["events"]):
        try:
            events.append(Event.from_dict(raw))
        except ValueError as exc:
            raise bad(f"events[{i}]: {exc}") from None
    try:
        where = Path(incident_path) if incident_path is not None else locate_incident(
            header.incident_id, header.incident_path)
    except SessionError as exc:
        raise bad(str(exc)) from None
    try:
        digest = file_digest(where)
    except OSError as exc:
        raise bad(f"cannot read incident {where} ({exc.strerror or exc})") from None
    if digest != header.incident_digest:
        raise bad(f"incident '{header.incident_id}' changed since this transcript was recorded "
                  f"({where} has a different content digest)")
    try:
        incident = open_incident(where, header.seed)
    except SessionError as exc:
        raise bad(str(exc)) from None
    rules = Rules(incident, header.seed)
    for i, event in enumerate(events):
        try:
            rules.replay(event)
        except SessionError as exc:
            raise bad(f"events[{i}] ({event.kind}): {exc}") from None
    submission = doc.get("submission")
    if submission is not None and not isinstance(submission, dict):
        raise bad("field 'submission' has the wrong type")
    telemetry = doc.get("telemetry_digest")
    return Transcript(path, header, telemetry if isinstance(telemetry, str) else None, list(rules.events),
                      submission, incident, where, _claimed_total(doc))
