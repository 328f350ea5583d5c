"""Where a session's files live, and the incident file a session was played on.

``<data dir>/sessions/<session_id>.jsonl`` is the journal; next to it ``<session_id>.gm`` is the
interviewer's inbox and ``<session_id>.draft`` the draft sidecar (neither ends in .json/.jsonl, which
listings glob). ``<data dir>/transcripts/`` holds exported transcripts."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from game.session.records import SessionError
from incidents.spec import Incident

GM_SUFFIX = ".gm"
"""The inbox of `<session_id>.jsonl` is `<session_id>.gm` (not .jsonl: session listings glob *.jsonl)."""
DRAFT_SUFFIX = ".draft"
"""The draft sidecar of `<session_id>.jsonl` is `<session_id>.draft` (not .json/.jsonl: listings glob those)."""


def data_dir() -> Path:
    """The user's data directory: $SERVEDRILL_DATA, else $XDG_DATA_HOME/servedrill, else
    ~/.local/share/servedrill."""
    env = os.environ.get("SERVEDRILL_DATA")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "servedrill"


def sessions_dir(root: Path | None = None) -> Path:
    return (root or data_dir()) / "sessions"


def transcripts_dir(root: Path | None = None) -> Path:
    return (root or data_dir()) / "transcripts"


def inbox_path(session_path: Path | str) -> Path:
    """The game master's inbox of a session file: `<session_id>.gm` in the same folder."""
    path = Path(session_path)
    return path.with_name(path.stem + GM_SUFFIX)


def draft_path(session_path: Path | str, member: str | None = None) -> Path:
    """The draft sidecar of a session file: `<session_id>.draft` in the same folder; in a team's shared game each
    member's own, `<session_id>.<member>.draft` (a member is a roster name: one plain word)."""
    path = Path(session_path)
    return path.with_name(path.stem + (f".{member}" if member else "") + DRAFT_SUFFIX)


def file_digest(path: Path | str) -> str:
    """sha256 of an incident file's bytes, hex. The file is read bounded (a regular file of at most the
    incident size cap): ReadRefused, an OSError, for anything else."""
    from incidents.bounded_read import read_bytes
    from incidents.yaml_reader import MAX_BYTES

    return hashlib.sha256(read_bytes(path, max_bytes=MAX_BYTES, what="incident file")).hexdigest()


def open_incident(path: Path, seed: int) -> Incident:
    """The incident at `path` as the variant of `seed` (the session's one seed for variant and telemetry).
    Raises SessionError (one line) when it does not load."""
    # imported here: the loader pulls in YAML and pydantic, which listing sessions does not need
    from incidents.loader import IncidentError, load_incident

    try:
        return load_incident(path, seed=seed)
    except IncidentError as exc:
        first = exc.diagnostics[0] if exc.diagnostics else f"{path}: could not load"
        raise SessionError(f"incident {path} does not load: {first}") from None
    except OSError as exc:
        raise SessionError(f"incident {path} cannot be read: {exc.strerror or exc}") from None


def locate_incident(incident_id: str, stored_path: str) -> Path:
    """The stored path when it still exists, else the library file with that id."""
    if stored_path and Path(stored_path).is_file():
        return Path(stored_path)
    from incidents.loader import IncidentError, find_incident

    try:
        return find_incident(incident_id)
    except IncidentError:
        raise SessionError(f"incident '{incident_id}' is no longer at {stored_path or '?'} "
                           "nor in the library") from None

