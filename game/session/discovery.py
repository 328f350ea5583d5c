"""Finding sessions on disk: by id or prefix, and listing them for the picker (without locking them or
loading their incidents: a listing must stay quick and must not disturb a game in progress)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from game.session import journal
from game.session.journal import MAX_JOURNAL_BYTES
from game.session.paths import sessions_dir
from game.session.records import (
    DEBRIEF_VIEWED,
    QUERY,
    START,
    SUBMIT,
    UNFINISHED,
    Event,
    Header,
    SessionError,
    SessionSummary,
    State,
)
from incidents.bounded_read import open_regular, read_text

# what a listing needs of the rules: the state each event kind leads to (the rest leave it as it is)
_STATE_AFTER: dict[str, State] = {START: State.INVESTIGATING, SUBMIT: State.SUBMITTED, DEBRIEF_VIEWED: State.DEBRIEFED}


def find_session(ref: str, root: Path | None = None) -> Path:
    """Path of a session given its id (or a unique prefix of it) or a path to its file."""
    candidate = Path(ref)
    if candidate.is_file():
        return candidate
    if os.sep in ref or (os.altsep and os.altsep in ref) or candidate.exists() or candidate.is_symlink():
        # a path, not an id: what is there (a FIFO, a device, a folder) or is missing, said plainly (a
        # path is never a glob pattern: an absolute one is not even a valid one)
        if candidate.exists() or candidate.is_symlink():
            try:
                open_regular(candidate, max_bytes=MAX_JOURNAL_BYTES, what="session journal").close()
            except OSError as exc:
                raise SessionError(f"{candidate}: {getattr(exc, 'strerror', None) or exc}") from None
        raise SessionError(f"no session file at {candidate}")
    folder = sessions_dir(root)
    exact = folder / f"{ref}.jsonl"
    if exact.is_file():
        return exact
    matches = sorted(folder.glob(f"{ref}*.jsonl")) if folder.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SessionError(f"'{ref}' matches {len(matches)} sessions; give more of the id")
    raise SessionError(f"no session '{ref}' in {folder}")


def summarize(path: Path) -> SessionSummary | None:
    """State of one session file without locking it or checking its incident; None if unreadable (or
    refused: not a regular file, over the journal cap)."""
    try:
        lines = read_text(path, max_bytes=MAX_JOURNAL_BYTES, what="session journal").split("\n")
        header = Header.from_dict(json.loads(lines[0]))
    except (OSError, ValueError, TypeError, IndexError):  # not a session file: the picker leaves it out
        return None
    state, queries, updated = State.BRIEFING, 0, 0.0
    for line in lines[1:]:
        try:
            event = Event.from_dict(json.loads(line))
        except (ValueError, TypeError):  # a damaged line: resume warns about it, a listing skips it
            continue
        updated = max(updated, event.time)
        if event.kind == QUERY:
            queries += 1
        state = _STATE_AFTER.get(event.kind, state)
    return SessionSummary(header.session_id, path, header.incident_id, header.player, header.created,
                          state, queries, updated, in_use=journal.in_use(path), seed=header.seed)


def session_in_use(path: Path) -> bool:
    """Whether a live Session holds the file's lock (it is being played right now, maybe in this very
    process); never blocks."""
    return journal.in_use(path)


def list_sessions(root: Path | None = None) -> list[SessionSummary]:
    """Every readable session, most recently active first."""
    folder = sessions_dir(root)
    found = [summarize(p) for p in folder.glob("*.jsonl")] if folder.is_dir() else []
    return sorted((s for s in found if s is not None), key=lambda s: (s.updated, s.created), reverse=True)


def list_unfinished(root: Path | None = None) -> list[SessionSummary]:
    """Sessions not yet debriefed (briefing, investigating or submitted), most recent first."""
    return [s for s in list_sessions(root) if s.state in UNFINISHED]
