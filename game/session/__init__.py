"""A play session: a state machine over the player's actions, journalled so that it survives a crash.

States: briefing -> investigating -> submitted -> debriefed. Every action is an event with a sequence
number (strictly increasing) and a wall-clock time (epoch seconds, UTC). An event is appended to
``<data dir>/sessions/<session_id>.jsonl`` as one JSON line and flushed and fsync'ed before the call
returns, so whatever the UI acknowledged is on disk. An illegal action raises `SessionError` and
writes nothing. The first line of the file is a header (format version, incident id and the sha256
of the incident file's bytes, seed, player, creation time). The seed picks both the simulated
telemetry and, for an incident with variables, its variant: every load of the incident here
resolves it with the header's seed.

Injects (timed updates from the incident file) are delivered by `Session.due_injects`, which journals
an `inject` event for each, so a resumed session never repeats one. The interviewer reaches a session
from another process through its inbox ``<session_id>.gm`` (`game.gameday.gm` writes it); `Session.poll_gm`
journals each item once as a `message`, `hint` or `inject` carrying the item's id under ``gm``.

`Session.resume` reads the journal back through the same rules; a line that cannot be read becomes a
warning naming the file and line, and the rest resumes. A torn last line was never acknowledged, so
resume cuts it off before appending. A transcript (`load_transcript`) is the finished session as one
JSON document. The draft sidecar ``<session_id>.draft`` keeps what the UI has not recorded yet and
when a process held the session; the game clock counts only held time.

The package, one job a module (each imports only those above it):

- `records`: event kinds and states (`Kind`, `State`), `Event`, `Header`, the views, the errors;
- `paths`: the data folder and each session's files, and the incident file a session was played on;
- `journal`: appending (fsync'ed), locking, reading back and repairing a torn last line;
- `draft`: the draft sidecar and the held-time game clock;
- `inbox`: reading the interviewer's inbox and the event each item becomes;
- `rules`: the state machine (`Rules.check`, `Rules.apply`): what may happen now and what it changes;
- `transcripts`: building, writing, reading and re-checking transcripts;
- `discovery`: finding and listing sessions on disk;
- `core`: `Session`, which ties them together.

Import from `game.session` (this module): the names below are the public API.
"""

from game.session.core import Session
from game.session.discovery import find_session, list_sessions, list_unfinished, session_in_use, summarize
from game.session.draft import (
    DRAFT_FORMAT,
    MAX_DRAFT_EDITOR_CHARS,
    MIN_GAP_S,
    held_clock,
    held_gaps,
    read_held,
)
from game.session.inbox import GM_SENDER, gm_event, read_inbox
from game.session.journal import fsync_dir
from game.session.paths import (
    DRAFT_SUFFIX,
    GM_SUFFIX,
    data_dir,
    draft_path,
    file_digest,
    inbox_path,
    locate_incident,
    open_incident,
    sessions_dir,
    transcripts_dir,
)
from game.session.records import (
    ACT,
    BRIEFING,
    DEBRIEF_VIEWED,
    DEBRIEFED,
    FORMAT_VERSION,
    HINT,
    INJECT,
    INVESTIGATING,
    KINDS,
    MESSAGE,
    NOTE,
    PIN,
    QUERY,
    RANK,
    SESSION_FORMAT,
    SESSION_ID_RE,
    STANCES,
    START,
    STATES,
    SUBMIT,
    SUBMITTED,
    TRANSCRIPT_FORMAT,
    UNFINISHED,
    UNPIN,
    Event,
    Header,
    Kind,
    SessionError,
    SessionSummary,
    SessionWarning,
    State,
    TranscriptError,
    Update,
    check_session_id,
)
from game.session.rules import (
    CONFIDENCE_TOLERANCE,
    KEPT_BYTES,
    KEPT_CELL_CHARS,
    MAX_GM_TEXT_CHARS,
    MAX_NOTE_CHARS,
    ROWS_KEPT,
    Rules,
    active_pins,
    query_event_data,
)
from game.session.transcripts import MAX_TRANSCRIPT_BYTES, Transcript, load_transcript

__all__ = [
    "ACT",
    "BRIEFING", "CONFIDENCE_TOLERANCE", "DEBRIEFED", "DEBRIEF_VIEWED", "DRAFT_FORMAT", "DRAFT_SUFFIX",
    "FORMAT_VERSION", "GM_SENDER", "GM_SUFFIX", "HINT", "INJECT", "INVESTIGATING", "KEPT_BYTES",
    "KEPT_CELL_CHARS", "KINDS", "MAX_DRAFT_EDITOR_CHARS", "MAX_GM_TEXT_CHARS", "MAX_NOTE_CHARS",
    "MAX_TRANSCRIPT_BYTES", "MESSAGE", "MIN_GAP_S", "NOTE", "PIN", "QUERY", "RANK", "ROWS_KEPT",
    "SESSION_FORMAT", "SESSION_ID_RE", "STANCES", "START", "STATES", "SUBMIT", "SUBMITTED",
    "TRANSCRIPT_FORMAT", "UNFINISHED", "UNPIN", "Event", "Header", "Kind", "Rules", "Session", "SessionError",
    "SessionSummary", "SessionWarning", "State", "Transcript", "TranscriptError", "Update",
    "active_pins", "check_session_id", "data_dir", "draft_path", "file_digest", "find_session", "fsync_dir", "gm_event",
    "held_clock", "held_gaps", "inbox_path", "list_sessions", "list_unfinished", "load_transcript",
    "locate_incident", "open_incident", "query_event_data", "read_held", "read_inbox", "session_in_use",
    "sessions_dir", "summarize", "transcripts_dir",
]
