"""What a session is made of on disk: the event kinds and states, one journalled event, the header line,
and the read-only views (a listed session, a delivered update) that other modules show.

Nothing here reads a file or a clock; `Event.from_dict` and `Header.from_dict` are where a journal's or a
transcript's JSON is checked for shape (the rules check it for meaning)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
SESSION_FORMAT = "servedrill-session"
TRANSCRIPT_FORMAT = "servedrill-transcript"


class State(StrEnum):
    """Where a round is: briefing -> investigating -> submitted -> debriefed."""

    BRIEFING = "briefing"
    INVESTIGATING = "investigating"
    SUBMITTED = "submitted"
    DEBRIEFED = "debriefed"


class Kind(StrEnum):
    """What one journalled event records. The values are the journal's `kind` strings (never rename)."""

    START = "start"
    QUERY = "query"
    PIN = "pin"
    RANK = "rank"
    NOTE = "note"
    HINT = "hint"
    SUBMIT = "submit"
    DEBRIEF_VIEWED = "debrief_viewed"
    INJECT = "inject"
    MESSAGE = "message"
    UNPIN = "unpin"
    ACT = "act"  # the mitigation, after the diagnosis (docs/mitigation.md)


# The module-level names other modules have always imported; StrEnum members compare equal to the strings.
BRIEFING, INVESTIGATING, SUBMITTED, DEBRIEFED = State
STATES = tuple(State)
UNFINISHED = (State.BRIEFING, State.INVESTIGATING, State.SUBMITTED)
START, QUERY, PIN, RANK, NOTE, HINT, SUBMIT, DEBRIEF_VIEWED, INJECT, MESSAGE, UNPIN, ACT = Kind
KINDS = tuple(Kind)
STANCES = ("supports", "refutes")

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,159}$")
MEMBER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$")
"""A team member's name as a shared game's header and its events' `by` carry it: a roster name
(game.gameday.plan.NAME_RE)."""
MAX_MEMBERS = 64


class SessionError(Exception):
    """An action that is not allowed now, or a session file that cannot be used. One line for the player."""


class TranscriptError(Exception):
    """A transcript that cannot be used; the message names the file and the problem on one line."""


class SessionWarning(UserWarning):
    """A damaged journal line that resume skipped."""


def check_session_id(value: Any) -> str:
    """A session id that is safe as a file name: letters, digits, '.', '_' and '-', no leading dot, at
    most 160 characters. Files are named after session ids, so anything else (a '/' or '..') is refused."""
    if not isinstance(value, str) or not SESSION_ID_RE.match(value) or ".." in value:
        raise ValueError(f"session id {str(value)[:80]!r} is not a plain name (letters, digits, '.', '_', '-')")
    return value


def iso(epoch: float) -> str:
    """Epoch seconds as the journal writes times: ISO 8601 UTC to the second, with a Z."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Event:
    """One journalled action. `time` is wall-clock epoch seconds (UTC); `seq` increases strictly."""

    seq: int
    time: float
    kind: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # the key order is the journal's line format: keep it
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
        return cls(seq, float(when), Kind(kind), data)


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
    members: tuple[str, ...] = ()
    """A team's shared game (a game-day round with team play): the team's players, and `player` is the team's
    name; each event's `data.by` names the member who did it. Empty for one player's game (and then not
    written, so a solo header is what it always was)."""

    def to_dict(self) -> dict[str, Any]:
        # the key order is the journal's header format: keep it
        doc: dict[str, Any] = {
            "format": SESSION_FORMAT, "format_version": self.format_version, "session_id": self.session_id,
            "incident_id": self.incident_id, "incident_digest": self.incident_digest,
            "incident_path": self.incident_path, "seed": self.seed, "player": self.player,
            "created": self.created,
        }
        if self.members:
            doc["members"] = list(self.members)
        return doc

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
        members = raw.get("members", [])
        if not isinstance(members, list) or not all(isinstance(m, str) and MEMBER_RE.match(m) for m in members) \
                or len(members) > MAX_MEMBERS:
            raise ValueError(f"'members' must be a list of at most {MAX_MEMBERS} player names")
        return cls(check_session_id(raw["session_id"]), str(raw["incident_id"]), str(raw["incident_digest"]),
                   str(raw.get("incident_path") or ""), seed, str(raw["player"]), str(raw["created"]),
                   members=tuple(members))


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
    seed: int = 0  # the variant it plays

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "path": str(self.path), "incident_id": self.incident_id,
                "player": self.player, "created": self.created, "state": self.state,
                "queries": self.queries, "updated": self.updated, "in_use": self.in_use, "seed": self.seed}


@dataclass(frozen=True)
class Update:
    """Something delivered to the player during the round, as a feed shows it: an incident inject, a
    game master's message, inject or hint, or a hint the player took. `source` is "incident", "gm" or
    "player"; `cost` is a hint's score points (0 otherwise); `elapsed_s` is on the game clock (time the
    session was held) from the start."""

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
