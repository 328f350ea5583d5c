"""A play session: a state machine over the player's actions, journalled so that it survives a crash.

States: briefing -> investigating -> submitted -> debriefed. Every action is an event with a sequence
number (strictly increasing) and a wall-clock time (epoch seconds, UTC). An event is appended to
``<data dir>/sessions/<session_id>.jsonl`` as one JSON line and flushed and fsync'ed before the call
returns, so whatever the UI acknowledged is on disk. An illegal action raises `SessionError` and
writes nothing. The first line of the file is a header (format version, incident id and the sha256
of the incident file's bytes, seed, player, creation time). The seed picks both the simulated
telemetry and, for an incident with variables, its variant: every load of the incident here
resolves it with the header's seed.

Injects (timed updates from the incident file) are delivered by `due_injects`, which journals an
`inject` event for each, so a resumed session never repeats one.

The interviewer (game master) reaches a session from another process through its inbox, an
append-only JSON-lines sidecar ``<session_id>.gm`` next to the journal (see `game.gm`, which writes
it under a file lock). `poll_gm` reads the inbox's new complete lines and journals each item in this
session as what it is: a `message` event, a `hint` (its cost counts in the score like any hint) or an
`inject`, each carrying the item's id under ``gm``. Delivery is decided by the journal, so an item is
delivered once, also across resume. `due_updates` combines timed injects and the inbox for a UI's
poll; `updates` lists everything delivered so far (injects, messages, hints) for a feed.

`Session.resume` reads the journal back through the same checks; a line that cannot be read (a
torn last line after a kill, garbage in the middle) becomes a warning naming the file and line, and
the rest resumes. A torn last line was never acknowledged, so resume cuts it off before appending.

A transcript (`export_transcript`, `load_transcript`) is the finished session as one JSON document.

Drafts and the time held. A file session keeps a small sidecar ``<session_id>.draft`` next to the journal
(JSON, rewritten whole and atomically; never read by scoring, never part of a transcript): what the UI has
not recorded yet (the board's unsaved order and confidences, the SQL editor's text: `save_draft`, `draft`)
and when a process held the session (`held`: one [opened, last seen, closed] interval per process that
opened it; `heartbeat` moves "last seen" on, `close` closes it). The game clock (`elapsed`, and with it the
timed injects) counts only time a process held the session: a gap between one holder's last sign of life
and the next one's opening is left out. Journals without a sidecar (older sessions) count wall-clock time
as before; the journal format is unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import secrets
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from game.gateway import QueryResult, json_safe
from game.gm_key import key_path as gm_key_path
from game.gm_key import verify as verify_gm
from game.hypotheses import Shown as ShownHypothesis
from game.hypotheses import resolve as resolve_hypothesis
from game.hypotheses import shown_hypotheses
from incidents.spec import Incident, Inject

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: sessions are not locked against a second process
    fcntl = None  # type: ignore[assignment]

FORMAT_VERSION = 1
SESSION_FORMAT = "servedrill-session"
TRANSCRIPT_FORMAT = "servedrill-transcript"

BRIEFING, INVESTIGATING, SUBMITTED, DEBRIEFED = "briefing", "investigating", "submitted", "debriefed"
STATES = (BRIEFING, INVESTIGATING, SUBMITTED, DEBRIEFED)
UNFINISHED = (BRIEFING, INVESTIGATING, SUBMITTED)

START, QUERY, PIN, RANK, NOTE, HINT, SUBMIT, DEBRIEF_VIEWED, INJECT, MESSAGE = (
    "start", "query", "pin", "rank", "note", "hint", "submit", "debrief_viewed", "inject", "message",
)
KINDS = (START, QUERY, PIN, RANK, NOTE, HINT, SUBMIT, DEBRIEF_VIEWED, INJECT, MESSAGE)
STANCES = ("supports", "refutes")

ROWS_KEPT = 20
KEPT_CELL_CHARS = 1000
KEPT_BYTES = 64 * 1024
"""Result rows kept per query event, for review and replay checks."""
CONFIDENCE_TOLERANCE = 0.5
"""Percent: a ranking's confidences must sum to 100 within this."""
MAX_NOTE_CHARS = 4000
MAX_GM_TEXT_CHARS = 4000
GM_SENDER = "Interviewer"
"""Who a game-master item is from when it names nobody."""
GM_SUFFIX = ".gm"
"""The inbox of `<session_id>.jsonl` is `<session_id>.gm` (not .jsonl: session listings glob *.jsonl)."""
DRAFT_SUFFIX = ".draft"
"""The draft sidecar of `<session_id>.jsonl` is `<session_id>.draft` (not .json/.jsonl: listings glob those)."""
DRAFT_FORMAT = "servedrill-draft"
MAX_DRAFT_EDITOR_CHARS = 100_000
"""Editor text longer than this is not kept in the draft (a draft is a convenience, not a store)."""
MIN_GAP_S = 5.0
"""A gap shorter than this between one holder and the next (a relaunch) still counts as held time."""


class SessionError(Exception):
    """An action that is not allowed now, or a session file that cannot be used. One line for the player."""


class TranscriptError(Exception):
    """A transcript that cannot be used; the message names the file and the problem on one line."""


class SessionWarning(UserWarning):
    """A damaged journal line that resume skipped."""


class _Runs(Protocol):
    def run(self, sql: str) -> QueryResult: ...


SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,159}$")


def check_session_id(value: Any) -> str:
    """A session id that is safe as a file name: letters, digits, '.', '_' and '-', no leading dot, at
    most 160 characters. Files are named after session ids, so anything else (a '/' or '..') is refused."""
    if not isinstance(value, str) or not SESSION_ID_RE.match(value) or ".." in value:
        raise ValueError(f"session id {str(value)[:80]!r} is not a plain name (letters, digits, '.', '_', '-')")
    return value


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


def file_digest(path: Path | str) -> str:
    """sha256 of a file's bytes, hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    """One journalled action. `time` is wall-clock epoch seconds (UTC); `seq` increases strictly."""

    seq: int
    time: float
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": self.time, "kind": self.kind, "data": self.data}

    @classmethod
    def from_dict(cls, raw: Any) -> Event:
        """Parse one event; raises ValueError naming the first problem."""
        if isinstance(raw, Event):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError("an event must be a JSON object")
        for key in ("seq", "time", "kind", "data"):
            if key not in raw:
                raise ValueError(f"event has no '{key}'")
        seq, when, kind, data = raw["seq"], raw["time"], raw["kind"], raw["data"]
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise ValueError(f"'seq' must be an integer, got {seq!r}")
        if isinstance(when, bool) or not isinstance(when, int | float) or not math.isfinite(when):
            raise ValueError(f"'time' must be epoch seconds, got {when!r}")
        if kind not in KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        if not isinstance(data, dict):
            raise ValueError("'data' must be a JSON object")
        return cls(seq, float(when), str(kind), data)


@dataclass(frozen=True)
class Header:
    """First line of a session file and the identity part of a transcript."""

    session_id: str
    incident_id: str
    incident_digest: str
    incident_path: str
    seed: int
    player: str
    created: str
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SESSION_FORMAT, "format_version": self.format_version, "session_id": self.session_id,
            "incident_id": self.incident_id, "incident_digest": self.incident_digest,
            "incident_path": self.incident_path, "seed": self.seed, "player": self.player,
            "created": self.created,
        }

    @classmethod
    def from_dict(cls, raw: Any) -> Header:
        if not isinstance(raw, Mapping):
            raise ValueError("the header is not a JSON object")
        version = raw.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"format version {version!r} is not supported "
                             f"(this servedrill reads {FORMAT_VERSION})")
        missing = [k for k in ("session_id", "incident_id", "incident_digest", "seed", "player", "created")
                   if k not in raw]
        if missing:
            raise ValueError(f"missing field '{missing[0]}'")
        seed = raw["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"'seed' must be an integer, got {seed!r}")
        return cls(check_session_id(raw["session_id"]), str(raw["incident_id"]), str(raw["incident_digest"]),
                   str(raw.get("incident_path") or ""), seed, str(raw["player"]), str(raw["created"]))


@dataclass(frozen=True)
class SessionSummary:
    """One session file as the picker lists it. `updated` is epoch seconds of the last event."""

    session_id: str
    path: Path
    incident_id: str
    player: str
    created: str
    state: str
    queries: int
    updated: float
    in_use: bool = False  # open in a live servedrill process (another terminal or browser tab)

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "path": str(self.path), "incident_id": self.incident_id,
                "player": self.player, "created": self.created, "state": self.state,
                "queries": self.queries, "updated": self.updated, "in_use": self.in_use}


@dataclass(frozen=True)
class Update:
    """Something delivered to the player during the round, as a feed shows it: an incident inject, a
    game master's message, inject or hint, or a hint the player took. `source` is "incident", "gm" or
    "player"; `cost` is a hint's score points (0 otherwise); `elapsed_s` counts from the start."""

    seq: int
    time: float
    kind: str
    sender: str
    text: str
    source: str
    cost: int = 0
    elapsed_s: float = 0.0
    gm_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": self.time, "elapsed_s": round(self.elapsed_s, 3), "kind": self.kind,
                "from": self.sender, "text": self.text, "source": self.source, "cost": self.cost,
                "gm_id": self.gm_id}


def inbox_path(session_path: Path | str) -> Path:
    """The game master's inbox of a session file: `<session_id>.gm` in the same folder."""
    path = Path(session_path)
    return path.with_name(path.stem + GM_SUFFIX)


def draft_path(session_path: Path | str) -> Path:
    """The draft sidecar of a session file: `<session_id>.draft` in the same folder."""
    path = Path(session_path)
    return path.with_name(path.stem + DRAFT_SUFFIX)


def held_gaps(held: Sequence[Sequence[Any]], event_times: Sequence[float], start: float, until: float) -> float:
    """Seconds between `start` and `until` when no process held the session: the gaps between one held
    interval's end (its last sign of life: "last seen", or its last journalled event if later) and the
    next one's opening, each clipped to [start, until]; gaps under MIN_GAP_S count as held."""
    intervals = sorted((float(h[0]), float(h[1])) for h in held)
    total = 0.0
    for (_, seen), (opened_next, _) in itertools.pairwise(intervals):
        end = max([seen, *(t for t in event_times if seen <= t < opened_next)])
        lo, hi = max(end, start), min(opened_next, until)
        if hi - lo >= MIN_GAP_S:
            total += hi - lo
    return total


def read_held(session_path: Path | str) -> list[list[Any]]:
    """The held intervals in a session's draft sidecar ([] without one): for a reader in another process
    (the interviewer's screen) that wants the game clock as the player sees it (`held_gaps`)."""
    try:
        raw = json.loads(draft_path(session_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    held = raw.get("held") if isinstance(raw, dict) else None
    return [h for h in held if isinstance(h, list) and len(h) == 3] if isinstance(held, list) else []


def _board_rows_ok(rows: list[Any], names: Mapping[str, str]) -> bool:
    return all(isinstance(r, Mapping) and str(r.get("id")) in names and isinstance(r.get("confidence"), int | float)
               and not isinstance(r.get("confidence"), bool) and math.isfinite(r["confidence"]) for r in rows)


def read_inbox(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete lines of an inbox from byte `offset`: (items, the offset after the last complete line).

    A line still being written (no newline yet) is left for the next read; a line that is not a JSON
    object with a string id is skipped. A missing inbox has no items."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            raw = fh.read()
    except FileNotFoundError:
        return [], offset
    except OSError:
        return [], offset
    end = raw.rfind(b"\n")
    if end < 0:
        return [], offset
    items = []
    for line in raw[:end].split(b"\n"):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            items.append(item)
    return items, offset + end + 1


def _load_incident(path: Path, seed: int) -> Incident:
    """The incident at `path` as the variant of `seed` (the session's one seed for variant and telemetry)."""
    from incidents.loader import IncidentError, load_incident

    try:
        return load_incident(path, seed=seed)
    except IncidentError as exc:
        first = exc.diagnostics[0] if exc.diagnostics else f"{path}: could not load"
        raise SessionError(f"incident {path} does not load: {first}") from None
    except OSError as exc:
        raise SessionError(f"incident {path} cannot be read: {exc.strerror or exc}") from None


def _locate_incident(incident_id: str, stored_path: str) -> Path:
    """The stored path when it still exists, else the library file with that id."""
    if stored_path and Path(stored_path).is_file():
        return Path(stored_path)
    from incidents.loader import IncidentError, find_incident

    try:
        return find_incident(incident_id)
    except IncidentError:
        raise SessionError(f"incident '{incident_id}' is no longer at {stored_path or '?'} "
                           "nor in the library") from None


class Session:
    """One player's investigation of one incident. Thread-safe: one action at a time.

    Use `create`, `resume` or `in_memory`; the constructor is for those."""

    def __init__(self, header: Header, incident: Incident, path: Path | None) -> None:
        self.header = header
        self.incident = incident
        self.path = path
        self.warnings: list[str] = []
        self._events: list[Event] = []
        self._state = BRIEFING
        self._ranking: list[dict[str, Any]] | None = None
        self._hints_taken = 0
        self._delivered: list[int] = []
        self._delivered_injects: list[Inject] = []
        self._gm_done: set[str] = set()
        self._gm_refused: dict[str, str] = {}
        self._gm_offset = 0
        self._gm_size = -1
        self._gm_waiting: list[dict[str, Any]] = []
        self.gm_inbox: Path | None = inbox_path(path) if path is not None else None
        self._lock = threading.RLock()
        self._fh: Any = None
        self._names = incident.hypothesis_ids()
        self._draft: dict[str, Any] = {}
        self._held: list[list[Any]] = []  # [opened, last seen, closed] per process that held it
        self.draft_path: Path | None = draft_path(path) if path is not None else None
        self._replaying = False

    # ---------------------------------------------------------------- opening

    @classmethod
    def create(cls, incident_path: Path | str, seed: int, player: str, *,
               root: Path | None = None) -> Session:
        """Start a new journalled session for the incident file at `incident_path`.

        The journal goes to `root`/sessions (default: `data_dir()`). Raises SessionError when the
        incident does not load or the file cannot be created."""
        path = Path(incident_path).resolve()
        incident = _load_incident(path, int(seed))
        header = cls._new_header(incident, file_digest(path), str(path), seed, player)
        folder = sessions_dir(root)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{header.session_id}.jsonl"
            fh = open(target, "xb")  # noqa: SIM115 - kept open for the session's life
        except OSError as exc:
            raise SessionError(f"cannot create a session file in {folder}: {exc.strerror or exc}") from None
        session = cls(header, incident, target)
        session._fh = fh
        session._lock_file()
        session._write_line(json.dumps(header.to_dict(), separators=(",", ":")))
        _fsync_dir(folder)
        session._hold()
        return session

    @classmethod
    def in_memory(cls, incident: Incident, seed: int, player: str, *, incident_digest: str = "",
                  incident_path: str = "") -> Session:
        """A session that journals nothing (scripted players, replays). Same rules as a file session.

        Without `incident_digest`, the digest is the sha256 of the incident's canonical JSON."""
        digest = incident_digest or hashlib.sha256(
            json.dumps(incident.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
        return cls(cls._new_header(incident, digest, incident_path, seed, player), incident, None)

    @staticmethod
    def _new_header(incident: Incident, digest: str, path: str, seed: int, player: str) -> Header:
        now = time.time()
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d-%H%M%S")
        session_id = f"{incident.id}-{stamp}-{secrets.token_hex(3)}"
        return Header(session_id, incident.id, digest, path, int(seed), player or "player", _iso(now))

    @classmethod
    def resume(cls, path: Path | str) -> Session:
        """Reopen a journalled session to continue it. Damaged lines become `warnings` (and
        SessionWarning); a damaged header, a missing or changed incident raise SessionError."""
        path = Path(path)
        try:
            fh = open(path, "rb+")  # noqa: SIM115 - kept open for the session's life
        except OSError as exc:
            raise SessionError(f"cannot open session {path}: {exc.strerror or exc}") from None
        try:
            session = cls._from_journal(path, fh)
        except BaseException:
            fh.close()
            raise
        session._read_draft()
        session._hold()
        for message in session.warnings:
            warnings.warn(message, SessionWarning, stacklevel=2)
        return session

    @classmethod
    def _from_journal(cls, path: Path, fh: Any) -> Session:
        if fcntl is not None:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise SessionError(f"session {path.name} is open in another servedrill process") from None
        raw = fh.read()
        lines = raw.split(b"\n")
        torn = lines.pop() if lines else b""  # bytes after the last newline: a write cut short
        if not lines:
            raise SessionError(f"{path}:1: the session file has no complete header line")
        try:
            header = Header.from_dict(json.loads(lines[0]))
        except (ValueError, TypeError) as exc:
            raise SessionError(f"{path}:1: bad session header: {exc}") from None
        incident_path = _locate_incident(header.incident_id, header.incident_path)
        if file_digest(incident_path) != header.incident_digest:
            raise SessionError(f"{path}: incident {header.incident_id} changed since this session started "
                               f"({incident_path}); it cannot be resumed")
        session = cls(header, _load_incident(incident_path, header.seed), path)
        session._fh = fh
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                session._replay(Event.from_dict(json.loads(line)))
            except (ValueError, SessionError) as exc:
                session.warnings.append(f"{path}:{number}: skipped a damaged line ({exc})")
        numbers = [int(e.data["index"]) for e in session._events if e.kind == QUERY]
        lost = sorted(set(range(1, max(numbers, default=0) + 1)) - set(numbers))
        if lost:
            session.warnings.append(f"{path}: {', '.join(f'Q{n}' for n in lost)} went with the damaged "
                                    "line(s); the other queries are kept")
        if torn.strip():
            number = len(lines) + 1
            try:
                session._replay(Event.from_dict(json.loads(torn)))
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
            except (ValueError, SessionError):
                session.warnings.append(f"{path}:{number}: dropped an incomplete last line "
                                        "(a write cut short)")
                fh.truncate(len(raw) - len(torn))
            fh.flush()
            os.fsync(fh.fileno())
        fh.seek(0, os.SEEK_END)
        return session

    def _lock_file(self) -> None:
        if fcntl is not None and self._fh is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def close(self) -> None:
        """Release the journal file (and close this process's hold in the draft sidecar). The session
        stays resumable. Idempotent."""
        with self._lock:
            if self._fh is not None:
                if self._held and not self._held[-1][2]:
                    self._held[-1][1] = max(self._held[-1][1], time.time())
                    self._held[-1][2] = True
                    self._write_draft()
                self._fh.close()
                self._fh = None

    # ---------------------------------------------------------------- draft and time held

    @property
    def draft(self) -> dict[str, Any]:
        """What was not recorded when the session was last held: {"board": [{"id", "confidence"}] (the
        board's order and confidences, saved or not), "editor": the SQL editor's text}, each only when it
        is newer than what the journal says (a ranking or query recorded after the draft was written wins).
        Empty when there is none."""
        with self._lock:
            out: dict[str, Any] = {}
            seq = self._draft.get("seq")
            if not isinstance(seq, int):
                return out
            newer_rank = any(e.seq > seq for e in self._events if e.kind in (RANK, SUBMIT))
            newer_query = any(e.seq > seq for e in self._events if e.kind == QUERY)
            board = self._draft.get("board")
            if isinstance(board, list) and not newer_rank and _board_rows_ok(board, self._names):
                out["board"] = [{"id": str(r["id"]), "confidence": float(r["confidence"])} for r in board]
            editor = self._draft.get("editor")
            if isinstance(editor, str) and not newer_query:
                out["editor"] = editor
            return out

    def save_draft(self, *, board: Sequence[Mapping[str, Any]] | None = None, editor: str | None = None) -> None:
        """Keep the board's current order and confidences ([{"id", "confidence"}], best first) and/or the
        editor's text in the draft sidecar (rewritten at once, atomically; call it debounced). Also a sign
        of life (`heartbeat`). Never raises for the file: a draft is best effort."""
        with self._lock:
            if board is not None:
                self._draft["board"] = [{"id": str(r["id"]), "confidence": float(r["confidence"])} for r in board]
            if editor is not None:
                self._draft["editor"] = editor if len(editor) <= MAX_DRAFT_EDITOR_CHARS else None
            self._draft["seq"] = self._events[-1].seq if self._events else 0
            self._draft["saved"] = time.time()
            self._seen()
            self._write_draft()

    def heartbeat(self) -> None:
        """Note that this process still holds the session (a crash then loses at most the time since)."""
        with self._lock:
            self._seen()
            self._write_draft()

    @property
    def held(self) -> list[tuple[float, float, bool]]:
        """(opened, last seen, closed) of every process that held this session, oldest first."""
        with self._lock:
            return [(float(a), float(b), bool(c)) for a, b, c in self._held]

    def elapsed(self, now: float | None = None) -> float:
        """Seconds of investigation at `now` (epoch seconds, default the current time): since the start,
        less the gaps when no process held the session (see the module's notes). 0 before the start."""
        with self._lock:
            return max(0.0, self._clock(now)) if any(e.kind == START for e in self._events) else 0.0

    def _clock(self, now: float | None) -> float:
        """`elapsed` unclamped (negative for a `now` before the start); the investigation has started."""
        start = self._started_at()
        when = time.time() if now is None else now
        return when - start - held_gaps(self._held, [e.time for e in self._events], start, when)

    def _seen(self) -> None:
        if self._held and self._fh is not None:
            self._held[-1][1] = max(self._held[-1][1], time.time())

    def _hold(self) -> None:
        """This process opens the session: a new held interval, written at once."""
        now = time.time()
        self._held.append([now, now, False])
        self._write_draft()

    def _read_draft(self) -> None:
        if self.draft_path is None:
            return
        try:
            raw = json.loads(self.draft_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.warnings.append(f"{self.draft_path}: ignored an unreadable draft ({exc})")
            return
        if not isinstance(raw, dict) or raw.get("format") != DRAFT_FORMAT:
            self.warnings.append(f"{self.draft_path}: ignored: not a servedrill draft")
            return
        held = raw.get("held")
        if isinstance(held, list):
            self._held = [[float(h[0]), float(h[1]), bool(h[2])] for h in held
                          if isinstance(h, list) and len(h) == 3 and all(isinstance(x, int | float) for x in h[:2])
                          and math.isfinite(h[0]) and math.isfinite(h[1])]
        self._draft = {k: raw[k] for k in ("board", "editor", "seq", "saved") if k in raw}

    def _write_draft(self) -> None:
        if self.draft_path is None:
            return
        doc = {"format": DRAFT_FORMAT, "format_version": 1, "session_id": self.header.session_id,
               **{k: v for k, v in self._draft.items() if v is not None}, "held": self._held}
        tmp = self.draft_path.with_name(f"{self.draft_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(doc, separators=(",", ":"), allow_nan=False), encoding="utf-8")
            tmp.replace(self.draft_path)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                tmp.unlink()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- reading

    @property
    def session_id(self) -> str:
        return self.header.session_id

    @property
    def state(self) -> str:
        return self._state

    @property
    def events(self) -> list[Event]:
        """A copy of the events so far, in order."""
        with self._lock:
            return list(self._events)

    @property
    def queries(self) -> list[Event]:
        """Query events; the player's Qn is ``queries[n - 1]`` (``data["index"] == n``)."""
        return [e for e in self.events if e.kind == QUERY]

    @property
    def ranking(self) -> list[dict[str, Any]] | None:
        """The latest ranking: [{"id", "confidence" (percent)}], best first; None before the first."""
        with self._lock:
            return None if self._ranking is None else [dict(r) for r in self._ranking]

    @property
    def hints_taken(self) -> int:
        return self._hints_taken

    @property
    def submission(self) -> Event | None:
        return next((e for e in self.events if e.kind == SUBMIT), None)

    # ---------------------------------------------------------------- actions

    def start(self, telemetry_digest: str | None = None) -> Event:
        """Leave the briefing. `telemetry_digest` (the incident database's) goes into the transcript."""
        return self._record(START, {"telemetry_digest": telemetry_digest})

    def run_query(self, gateway: _Runs, sql: str) -> tuple[Event, QueryResult]:
        """Run `sql` through the gateway and record it. Refused before the gateway runs anything when
        the session is not investigating. Blocks while the query runs (call from a worker thread)."""
        with self._lock:
            self._require(INVESTIGATING, "run a query")
        # not under the lock: the board stays usable while a slow query runs
        result = gateway.run(sql)
        return self.record_query(result), result

    def record_query(self, result: QueryResult) -> Event:
        """Record a query the caller ran through the gateway itself."""
        with self._lock:
            return self._record(QUERY, query_event_data(result, self._next_query()))

    def pin(self, query_index: int, hypothesis: str, stance: str) -> Event:
        """Pin query Q`query_index` (1-based) to a hypothesis as evidence that supports or refutes it."""
        return self._record(PIN, {"query": query_index, "hypothesis": hypothesis, "stance": stance})

    def rank(self, ranking: Sequence[tuple[str, float]] | Mapping[str, float]) -> Event:
        """Set the board: hypothesis ids (or aliases), best first, with confidences in percent that
        sum to 100 (within 0.5) and do not increase down the list."""
        return self._record(RANK, {"ranking": _ranking_rows(ranking)})

    def note(self, hypothesis: str, text: str) -> Event:
        return self._record(NOTE, {"hypothesis": hypothesis, "text": text})

    def take_hint(self) -> Event:
        """Reveal the next hint; its text and cost (score points) are in the event's data."""
        with self._lock:
            return self._record(HINT, {"index": self._hints_taken})

    def submit(self, ranking: Sequence[tuple[str, float]] | Mapping[str, float] | None = None,
               discriminator: int | None = None) -> Event:
        """Submit the final ranking (default: the current board) and the index of the query that
        separates the top two hypotheses (None: none named)."""
        with self._lock:
            if ranking is None:
                if self._ranking is None and self._state == INVESTIGATING:
                    raise SessionError("rank the hypotheses before submitting (e.g. rank A=70 B=30)")
                rows = self._ranking or []
            else:
                rows = _ranking_rows(ranking)
            return self._record(SUBMIT, {"ranking": rows, "discriminator": discriminator})

    def view_debrief(self) -> Event:
        return self._record(DEBRIEF_VIEWED, {})

    # ---------------------------------------------------------------- injects

    def due_injects(self, now: float | None = None) -> list[Inject]:
        """Deliver the injects that are due and not delivered yet; returns them in file order.

        An inject is due `after_s` wall-clock seconds after the investigation started (`now`:
        epoch seconds, default the current time) or once `after_queries` queries are recorded.
        Each one is journalled as an `inject` event before this returns, so it is delivered
        once, also across resume. Returns [] unless the investigation is open. A UI polls
        this (on a timer and after each query) and shows what it returns.
        """
        with self._lock:
            return [self.incident.injects[e.data["index"]] for e in self._deliver_due(now)]

    def _deliver_due(self, now: float | None) -> list[Event]:
        if self._state != INVESTIGATING:
            return []
        elapsed = self._clock(now)
        queries = self._count(QUERY)
        out = []
        for index, inject in enumerate(self.incident.injects):
            if index in self._delivered:
                continue
            by_time = inject.after_s is not None and elapsed >= inject.after_s
            by_queries = inject.after_queries is not None and queries >= inject.after_queries
            if by_time or by_queries:
                out.append(self._record(INJECT, {"index": index}))
        return out

    def due_updates(self, now: float | None = None) -> list[Update]:
        """What a UI's poll shows now: the timed injects that fell due (`due_injects`), then the game
        master's new inbox items (`poll_gm`), each journalled before this returns."""
        with self._lock:
            return [self._update_of(e) for e in self._deliver_due(now)] + self.poll_gm()

    @property
    def delivered_injects(self) -> list[Inject]:
        """Injects delivered so far, in delivery order (what a resumed UI shows again). An inject the
        game master wrote himself appears with `after_s` = when it arrived."""
        with self._lock:
            return list(self._delivered_injects)

    @property
    def updates(self) -> list[Update]:
        """Everything delivered so far, oldest first: injects, game-master messages, hints."""
        with self._lock:
            return [self._update_of(e) for e in self._events if e.kind in (INJECT, MESSAGE, HINT)]

    def next_inject_in(self, now: float | None = None) -> float | None:
        """Seconds until the next undelivered timed inject is due (0 when one is due now), or None
        when no timed inject is left or the investigation is not open; for a UI's timer."""
        with self._lock:
            if self._state != INVESTIGATING:
                return None
            elapsed = self._clock(now)
            waits = [inj.after_s - elapsed for i, inj in enumerate(self.incident.injects)
                     if inj.after_s is not None and i not in self._delivered]
            return max(0.0, min(waits)) if waits else None

    def _started_at(self) -> float:
        return next(e.time for e in self._events if e.kind == START)

    # ---------------------------------------------------------------- game master

    def poll_gm(self) -> list[Update]:
        """Deliver the game master's inbox items not delivered yet; returns them in inbox order.

        Reads only the inbox's new complete lines (nothing when its size has not changed). Each item
        is journalled (`message`, `hint` or `inject`, with its id under ``gm``) before this returns.
        A hint or inject sent before the investigation started waits for it; an item this session
        cannot take (no hints left, an inject already delivered, the round already submitted) is
        refused once and listed in `gm_refused`. Journal-only sessions (in memory) have no inbox."""
        with self._lock:
            if self.gm_inbox is None or self._fh is None:
                return []
            try:
                size = self.gm_inbox.stat().st_size
            except OSError:
                size = -1
            if size != self._gm_size and size >= 0:
                items, self._gm_offset = read_inbox(self.gm_inbox, self._gm_offset)
                self._gm_size = size
                self._gm_waiting.extend(items)
            out: list[Update] = []
            waiting, self._gm_waiting = self._gm_waiting, []
            for item in waiting:
                gid = item["id"]
                if gid in self._gm_done or gid in self._gm_refused:
                    continue
                if not verify_gm(item):
                    self._gm_refused[gid] = ("not signed with this machine's interviewer key "
                                             f"({gm_key_path()}); only `servedrill send` there can send")
                    continue
                try:
                    kind, data = self._gm_event(item)
                    event = self._record(kind, data)
                except SessionError as exc:
                    if self._state == BRIEFING and item.get("kind") in (HINT, INJECT):
                        self._gm_waiting.append(item)
                    else:
                        self._gm_refused[gid] = str(exc)
                    continue
                out.append(self._update_of(event))
            return out

    @property
    def gm_refused(self) -> dict[str, str]:
        """Inbox item ids this process refused, with the reason (one line each)."""
        with self._lock:
            return dict(self._gm_refused)

    @property
    def gm_delivered(self) -> set[str]:
        """Ids of the game master's items journalled in this session."""
        with self._lock:
            return set(self._gm_done)

    def _gm_event(self, item: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The journal event (kind, data) that delivers one inbox item."""
        kind, gid = item.get("kind"), item["id"]
        sender = item.get("from") or GM_SENDER
        if kind == MESSAGE:
            return MESSAGE, {"from": sender, "text": item.get("text"), "gm": gid}
        if kind == HINT:
            if item.get("text") is None:
                return HINT, {"index": self._hints_taken, "gm": gid}
            return HINT, {"index": None, "text": item.get("text"), "cost": item.get("cost", 0), "from": sender,
                          "gm": gid}
        if kind == INJECT:
            if item.get("index") is not None:
                return INJECT, {"index": item.get("index"), "gm": gid}
            return INJECT, {"index": None, "from": sender, "text": item.get("text"), "gm": gid}
        raise SessionError(f"unknown game-master item kind {kind!r}")

    def _update_of(self, event: Event) -> Update:
        data = event.data
        start = next((e.time for e in self._events if e.kind == START), event.time)
        gm = data.get("gm") if isinstance(data.get("gm"), str) else None
        if event.kind == HINT:
            number = data.get("index")
            sender = data.get("from") or (f"Hint {number + 1}" if isinstance(number, int) else "Hint")
            source = "gm" if gm else "player"
            return Update(event.seq, event.time, HINT, str(sender), str(data.get("text", "")), source,
                          int(data.get("cost", 0)), event.time - start, gm)
        source = "gm" if gm or event.kind == MESSAGE else "incident"
        return Update(event.seq, event.time, event.kind, str(data.get("from", "")), str(data.get("text", "")),
                      source, 0, event.time - start, gm)

    # ---------------------------------------------------------------- transcript

    def transcript(self, telemetry_digest: str | None = None,
                   score: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The session as one JSON-ready document (see docs/cli.md for the keys). `score` (a score
        report's dict) is recorded for reading; scoring never trusts it."""
        events = self.events
        if telemetry_digest is None:
            telemetry_digest = next((e.data.get("telemetry_digest") for e in events if e.kind == START), None)
        submit = next((e for e in events if e.kind == SUBMIT), None)
        doc = {k: v for k, v in self.header.to_dict().items() if k != "format"}
        doc.update({
            "format": TRANSCRIPT_FORMAT,
            "format_version": FORMAT_VERSION,
            "telemetry_digest": telemetry_digest,
            "state": self._state,
            "exported": _iso(time.time()),
            "events": [e.to_dict() for e in events],
            "submission": None if submit is None else {
                "seq": submit.seq, "time": submit.time, **submit.data,
            },
        })
        if score is not None:
            doc["score"] = dict(score)
        return doc

    def export_transcript(self, path: Path | str, telemetry_digest: str | None = None,
                          score: Mapping[str, Any] | None = None) -> Path:
        """Write the transcript atomically (a temporary file, then rename). Returns the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.transcript(telemetry_digest, score), indent=1, allow_nan=False) + "\n",
                       encoding="utf-8")
        tmp.replace(target)
        return target

    # ---------------------------------------------------------------- machinery

    def _count(self, kind: str) -> int:
        return sum(1 for e in self._events if e.kind == kind)

    def _require(self, state: str, what: str) -> None:
        if self._state != state:
            why = {
                BRIEFING: "the investigation has not started",
                INVESTIGATING: "the investigation is still open",
                SUBMITTED: "the diagnosis was already submitted",
                DEBRIEFED: "the session is over",
            }[self._state]
            raise SessionError(f"cannot {what}: {why}")

    @property
    def board(self) -> list[ShownHypothesis]:
        """The hypotheses in this session's shuffled order, labelled A, B, ... (what the player sees)."""
        return shown_hypotheses(self.incident, self.header.seed)

    def label_of(self, hypothesis_id: str) -> str:
        """The board label (A, B, ...) of a hypothesis id."""
        return next((s.label for s in self.board if s.id == hypothesis_id), hypothesis_id)

    def _canonical(self, name: Any) -> str:
        """A hypothesis id from an id (or alias), a board label or a title (or a unique title prefix)."""
        if isinstance(name, str) and name in self._names:
            return self._names[name]
        found = resolve_hypothesis(name, self.board) if isinstance(name, str) else None
        if found is None:
            known = ", ".join(f"{s.label} ({s.title})" for s in self.board)
            raise SessionError(f"unknown hypothesis {str(name)[:80]!r}; hypotheses: {known}")
        return found

    def _check(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """Validate an action against the current state; returns the data to record (ids canonical)."""
        if kind == START:
            self._require(BRIEFING, "start")
            return data
        if kind == DEBRIEF_VIEWED:
            self._require(SUBMITTED, "view the debrief")
            return data
        gm = self._check_gm_id(data)
        if kind == INJECT:
            return {**self._check_inject(data), **gm}
        if kind == MESSAGE:
            return {**self._check_message(data), **gm}
        verb = {QUERY: "run a query", PIN: "pin evidence", RANK: "rank hypotheses", NOTE: "write a note",
                HINT: "take a hint", SUBMIT: "submit"}[kind]
        self._require(INVESTIGATING, verb)
        if kind == QUERY:
            return _check_query(data, self._next_query(), gap_ok=self._replaying)
        if kind == PIN:
            return self._check_pin(data)
        if kind in (RANK, SUBMIT):
            out = dict(data)
            out["ranking"] = self._check_ranking(data.get("ranking"))
            if kind == SUBMIT:
                out["discriminator"] = self._check_discriminator(data.get("discriminator"))
            return out
        if kind == NOTE:
            text = data.get("text")
            if not isinstance(text, str) or not text.strip():
                raise SessionError("a note needs some text")
            if len(text) > MAX_NOTE_CHARS:
                raise SessionError(f"a note holds at most {MAX_NOTE_CHARS} characters")
            return {"hypothesis": self._canonical(data.get("hypothesis")), "text": text}
        # HINT
        index = data.get("index")
        if index is None and data.get("text") is not None:
            return {**self._check_own_hint(data), **gm}
        return {**self._check_incident_hint(index), **gm}

    def _check_incident_hint(self, index: Any) -> dict[str, Any]:
        if not self.incident.hints:
            raise SessionError("this incident has no hints")
        if self._hints_taken >= len(self.incident.hints):
            raise SessionError("no hints left")
        if index != self._hints_taken:
            raise SessionError(f"hint {index!r} is out of order (next is {self._hints_taken})")
        hint = self.incident.hints[index]
        return {"index": index, "cost": hint.cost, "text": hint.text}

    def _check_gm_id(self, data: dict[str, Any]) -> dict[str, Any]:
        """{"gm": id} for an item from the game master's inbox (each delivered once), else {}."""
        if "gm" not in data:
            return {}
        gid = data["gm"]
        if not isinstance(gid, str) or not gid:
            raise SessionError(f"a game-master item id must be text, got {gid!r}")
        if gid in self._gm_done:
            raise SessionError(f"game-master item {gid} was already delivered")
        return {"gm": gid}

    @staticmethod
    def _gm_text(data: dict[str, Any], what: str) -> tuple[str, str]:
        """(sender, text) of a game master's message, hint or inject."""
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise SessionError(f"{what} needs some text")
        if len(text) > MAX_GM_TEXT_CHARS:
            raise SessionError(f"{what} holds at most {MAX_GM_TEXT_CHARS} characters")
        sender = data.get("from", GM_SENDER)
        if not isinstance(sender, str) or not sender.strip():
            raise SessionError(f"{what} needs a sender (from)")
        return sender.strip(), text

    def _check_message(self, data: dict[str, Any]) -> dict[str, Any]:
        # a message may come at any point of the round, also before the start and after the submission
        sender, text = self._gm_text(data, "a message")
        return {"from": sender, "text": text}

    def _check_own_hint(self, data: dict[str, Any]) -> dict[str, Any]:
        """A hint the game master wrote himself (not one of the incident's): text and cost in points."""
        sender, text = self._gm_text(data, "a hint")
        cost = data.get("cost", 0)
        if isinstance(cost, bool) or not isinstance(cost, int) or not 0 <= cost <= 100:
            raise SessionError(f"a hint's cost must be whole points within 0..100, got {cost!r}")
        return {"index": None, "cost": cost, "text": text, "from": sender}

    def _check_inject(self, data: dict[str, Any]) -> dict[str, Any]:
        self._require(INVESTIGATING, "deliver an update")
        index = data.get("index")
        if index is None and data.get("text") is not None:
            sender, text = self._gm_text(data, "an update")
            return {"index": None, "from": sender, "text": text}
        injects = self.incident.injects
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(injects):
            raise SessionError(f"no inject {index!r}; the incident has {len(injects)}")
        if index in self._delivered:
            raise SessionError(f"inject {index} was already delivered")
        inject = injects[index]
        return {"index": index, "from": inject.sender, "text": inject.text}

    def _next_query(self) -> int:
        """Qn of the next query: one past the last (a query lost with a damaged journal line leaves a gap)."""
        return max((int(e.data["index"]) for e in self._events if e.kind == QUERY), default=0) + 1

    def _query(self, index: Any) -> Event | None:
        if isinstance(index, bool) or not isinstance(index, int):
            return None
        return next((e for e in self._events if e.kind == QUERY and e.data.get("index") == index), None)

    def _check_pin(self, data: dict[str, Any]) -> dict[str, Any]:
        index = data.get("query")
        query = self._query(index)
        if query is None:
            last = self._next_query() - 1
            raise SessionError(f"no query Q{index}; queries so far: Q1..Q{last}" if last
                               else "no queries yet to pin")
        if not query.data.get("ok"):
            raise SessionError(f"Q{index} failed; pin a query that ran")
        stance = data.get("stance")
        if stance not in STANCES:
            raise SessionError(f"stance must be 'supports' or 'refutes', got {stance!r}")
        return {"query": index, "hypothesis": self._canonical(data.get("hypothesis")), "stance": stance}

    def _check_ranking(self, rows: Any) -> list[dict[str, Any]]:
        if not isinstance(rows, list) or not rows:
            raise SessionError("a ranking needs at least one hypothesis with a confidence")
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for row in rows:
            if not isinstance(row, Mapping):
                raise SessionError("each ranking entry needs an id and a confidence")
            hid = self._canonical(row.get("id"))
            if hid in seen:
                raise SessionError(f"hypothesis {hid!r} is ranked twice")
            seen.add(hid)
            conf = row.get("confidence")
            if isinstance(conf, bool) or not isinstance(conf, int | float) or not math.isfinite(conf):
                raise SessionError(f"confidence for {hid!r} must be a number of percent, got {conf!r}")
            if not 0 <= conf <= 100:
                raise SessionError(f"confidence for {hid!r} must be within 0..100 percent, got {conf:g}")
            out.append({"id": hid, "confidence": float(conf)})
        total = sum(r["confidence"] for r in out)
        if abs(total - 100.0) > CONFIDENCE_TOLERANCE:
            raise SessionError(f"confidences must sum to 100 percent; these sum to {total:g}")
        for a, b in itertools.pairwise(out):
            if b["confidence"] > a["confidence"]:
                raise SessionError(f"ranking order: {b['id']} ({b['confidence']:g}%) is listed below "
                                   f"{a['id']} ({a['confidence']:g}%); list the most likely first")
        return out

    def _check_discriminator(self, index: Any) -> int | None:
        if index is None:
            return None
        n = self._next_query() - 1
        if self._query(index) is None:
            raise SessionError(f"discriminator Q{index} is not one of your queries (Q1..Q{n})" if n
                               else "no queries yet to name as the discriminator")
        return index

    def _apply(self, event: Event) -> None:
        self._events.append(event)
        if event.kind == START:
            self._state = INVESTIGATING
        elif event.kind == RANK:
            self._ranking = [dict(r) for r in event.data["ranking"]]
        elif event.kind == HINT:
            if event.data.get("index") is not None:
                self._hints_taken += 1
        elif event.kind == INJECT:
            index = event.data["index"]
            if index is None:
                arrived = max(0.0, event.time - self._started_at())
                self._delivered_injects.append(Inject.model_validate(
                    {"after_s": arrived, "from": event.data["from"], "text": event.data["text"]}))
            else:
                self._delivered.append(index)
                self._delivered_injects.append(self.incident.injects[index])
        if isinstance(event.data.get("gm"), str):
            self._gm_done.add(event.data["gm"])
        if event.kind == SUBMIT:
            self._ranking = [dict(r) for r in event.data["ranking"]]
            self._state = SUBMITTED
        elif event.kind == DEBRIEF_VIEWED:
            self._state = DEBRIEFED

    def _record(self, kind: str, data: dict[str, Any]) -> Event:
        with self._lock:
            checked = self._check(kind, data)
            last = self._events[-1] if self._events else None
            seq = last.seq + 1 if last else 1
            # wall clocks can step back; the journal's times must not
            now = max(time.time(), last.time if last else 0.0)
            event = Event(seq, now, kind, checked)
            if self.path is not None:
                self._write_line(json.dumps(event.to_dict(), separators=(",", ":"), allow_nan=False))
            self._apply(event)
            return event

    def _replay(self, event: Event) -> None:
        last = self._events[-1] if self._events else None
        if last is not None and event.seq <= last.seq:
            raise SessionError(f"sequence number {event.seq} does not follow {last.seq}")
        self._replaying = True
        try:
            checked = self._check(event.kind, event.data)
        finally:
            self._replaying = False
        self._apply(Event(event.seq, event.time, event.kind, checked))

    def _write_line(self, line: str) -> None:
        if self._fh is None:
            raise SessionError("the session is closed; resume it to continue")
        fh = self._fh
        start = fh.seek(0, os.SEEK_END)
        try:
            fh.write((line + "\n").encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        except OSError as exc:
            # leave no half line behind: the next append would glue onto it
            with contextlib.suppress(OSError):
                fh.truncate(start)
            raise SessionError(f"could not save to {self.path}: {exc.strerror or exc}") from None


def _ranking_rows(ranking: Sequence[tuple[str, float]] | Mapping[str, float]) -> list[dict[str, Any]]:
    pairs: Iterable[Any] = ranking.items() if isinstance(ranking, Mapping) else ranking
    rows = []
    for pair in pairs:
        if isinstance(pair, Mapping):
            rows.append({"id": pair.get("id"), "confidence": pair.get("confidence")})
            continue
        try:
            hid, conf = pair
        except (TypeError, ValueError):
            raise SessionError(f"ranking entries are (hypothesis, confidence) pairs, got {pair!r}") from None
        rows.append({"id": hid, "confidence": conf})
    return rows


def query_event_data(result: QueryResult, index: int) -> dict[str, Any]:
    """The data of a query event for query Q`index`: the result's outcome, reads and first ROWS_KEPT rows."""
    return {
        "index": index,
        "sql": result.sql,
        "ok": bool(result.ok),
        "error": result.error,
        "error_kind": result.error_kind,
        "row_count": int(result.row_count),
        "columns": list(result.columns),
        "truncated": bool(result.truncated),
        "duration_s": round(float(result.duration_s), 6),
        "reads": [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in result.reads],
        "rows": _kept_rows(result.rows),
    }


def _kept_rows(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The first ROWS_KEPT rows as the journal keeps them: each cell at most KEPT_CELL_CHARS of text and
    all of them at most KEPT_BYTES, so one query cannot bloat the journal (the query can be re-run)."""
    kept: list[list[Any]] = []
    size = 0
    for row in rows[:ROWS_KEPT]:
        cells = []
        for v in row:
            cell = json_safe(v)
            if isinstance(cell, str | list | dict) and len(text := json.dumps(cell)) > KEPT_CELL_CHARS:
                cell = text[:KEPT_CELL_CHARS] + "..."
            cells.append(cell)
        size += len(json.dumps(cells, default=str))
        if size > KEPT_BYTES:
            break
        kept.append(cells)
    return kept


def _check_query(data: dict[str, Any], index: int, *, gap_ok: bool = False) -> dict[str, Any]:
    """A query event's data as recorded, numbered `index` (the next Qn). Replaying a journal (`gap_ok`),
    a later Qn is accepted: the queries in between were lost with a damaged line, the rest still count."""
    sql = data.get("sql")
    if not isinstance(sql, str):
        raise SessionError("a query event needs its SQL text")
    recorded = data.get("index")
    if gap_ok and isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > index:
        index = recorded
    elif recorded not in (None, index):
        raise SessionError(f"query index {recorded!r} should be {index}")
    reads = data.get("reads") or []
    if not isinstance(reads, list) or not all(isinstance(r, Mapping) and "table" in r for r in reads):
        raise SessionError("a query's reads must be a list of {table, columns, filters}")
    return {**data, "index": index, "ok": bool(data.get("ok")), "reads": reads}


def _fsync_dir(folder: Path) -> None:
    # a new file's directory entry is durable only once the directory itself is synced
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -------------------------------------------------------------------- finding sessions


def find_session(ref: str, root: Path | None = None) -> Path:
    """Path of a session given its id (or a unique prefix of it) or a path to its file."""
    candidate = Path(ref)
    if candidate.is_file():
        return candidate
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
    """State of one session file without locking it or checking its incident; None if unreadable."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
        header = Header.from_dict(json.loads(lines[0]))
    except (OSError, ValueError, TypeError, IndexError):
        return None
    state, queries, updated = BRIEFING, 0, 0.0
    for line in lines[1:]:
        try:
            event = Event.from_dict(json.loads(line))
        except (ValueError, TypeError):
            continue
        updated = max(updated, event.time)
        if event.kind == QUERY:
            queries += 1
        state = {START: INVESTIGATING, SUBMIT: SUBMITTED, DEBRIEF_VIEWED: DEBRIEFED}.get(event.kind, state)
    return SessionSummary(header.session_id, path, header.incident_id, header.player, header.created,
                          state, queries, updated, in_use=session_in_use(path))


def session_in_use(path: Path) -> bool:
    """Whether a live Session holds the file's lock (it is being played right now, maybe in this very
    process). Probes with a shared, non-blocking lock that is released at once; never blocks."""
    if fcntl is None:
        return False
    try:
        with open(path, "rb") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def list_sessions(root: Path | None = None) -> list[SessionSummary]:
    """Every readable session, most recently active first."""
    folder = sessions_dir(root)
    found = [summarize(p) for p in folder.glob("*.jsonl")] if folder.is_dir() else []
    return sorted((s for s in found if s is not None), key=lambda s: (s.updated, s.created), reverse=True)


def list_unfinished(root: Path | None = None) -> list[SessionSummary]:
    """Sessions not yet debriefed (briefing, investigating or submitted), most recent first."""
    return [s for s in list_sessions(root) if s.state in UNFINISHED]


# -------------------------------------------------------------------- transcripts


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


MAX_TRANSCRIPT_BYTES = 32 * 1024 * 1024
"""A transcript larger than this is refused unread (a long game's transcript is well under 1 MB)."""


def _claimed_total(doc: Mapping[str, Any]) -> float | None:
    for holder, key in ((doc.get("score"), "total"), (doc.get("gameday"), "score")):
        if isinstance(holder, Mapping):
            value = holder.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                return float(value)
    return None


_TRANSCRIPT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "session_id": str, "incident_id": str, "incident_digest": str, "seed": int, "player": str,
    "created": str, "events": list,
}


def _ends_early(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether a JSON error comes from text cut short (rather than text that is wrong): the error is at
    the end, in an unterminated string, or in a last token that is the start of a literal or number."""
    if exc.msg.startswith("Unterminated"):
        return True
    tail = text[exc.pos:].strip()
    return (not tail or any(word.startswith(tail) for word in ("true", "false", "null"))
            or all(c in "0123456789+-.eE" for c in tail))


def load_transcript(path: Path | str, *, incident_path: Path | str | None = None) -> Transcript:
    """Read and check a transcript. The incident is `incident_path`, else the path stored in the
    transcript, else the library incident with its id; its file must still have the recorded digest.

    Raises TranscriptError with one line naming the file and the problem."""
    path = Path(path)

    def bad(problem: str) -> TranscriptError:
        return TranscriptError(f"{path}: {problem}")

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TRANSCRIPT_BYTES + 1)
    except OSError as exc:
        raise bad(f"cannot read it ({exc.strerror or exc})") from None
    if len(raw) > MAX_TRANSCRIPT_BYTES:
        raise bad(f"too large for a transcript (over {MAX_TRANSCRIPT_BYTES // (1024 * 1024)} MB)")
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
    if doc.get("format") not in (None, TRANSCRIPT_FORMAT):
        raise bad(f"not a transcript (format {doc.get('format')!r})")
    if "format_version" not in doc:
        raise bad("missing field 'format_version'")
    if doc["format_version"] != FORMAT_VERSION:
        raise bad(f"format version {doc['format_version']!r} is not supported (this servedrill reads "
                  f"{FORMAT_VERSION})")
    for key, kind in _TRANSCRIPT_FIELDS.items():
        if key not in doc:
            raise bad(f"missing field '{key}'")
        value = doc[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise bad(f"field '{key}' has the wrong type ({type(value).__name__})")
    try:
        session_id = check_session_id(doc["session_id"])
    except ValueError as exc:
        raise bad(str(exc)) from None
    header = Header(session_id, doc["incident_id"], doc["incident_digest"],
                    str(doc.get("incident_path") or ""), doc["seed"], doc["player"], doc["created"])
    events: list[Event] = []
    for i, raw in enumerate(doc["events"]):
        try:
            events.append(Event.from_dict(raw))
        except ValueError as exc:
            raise bad(f"events[{i}]: {exc}") from None
    try:
        where = Path(incident_path) if incident_path is not None else _locate_incident(
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
        incident = _load_incident(where, header.seed)
    except SessionError as exc:
        raise bad(str(exc)) from None
    check = Session(header, incident, None)
    for i, event in enumerate(events):
        try:
            check._replay(event)
        except SessionError as exc:
            raise bad(f"events[{i}] ({event.kind}): {exc}") from None
    submission = doc.get("submission")
    if submission is not None and not isinstance(submission, dict):
        raise bad("field 'submission' has the wrong type")
    telemetry = doc.get("telemetry_digest")
    return Transcript(path, header, telemetry if isinstance(telemetry, str) else None, check.events,
                      submission, incident, where, _claimed_total(doc))
