"""Collecting a game day's transcripts: from the players' session journals into the results folder.

Players play with `servedrill play INCIDENT --seed N --player NAME`; each session is journalled in
`<SERVEDRILL_DATA>/sessions/*.jsonl` (game/session.py). Collection reads those journals without
locking them (a player may still have the game open on the debrief), rebuilds the transcript from
the documented journal format (first line the header, then one event per line), checks it with
`load_transcript`, scores it, and writes it atomically to
`<results>/round-NN-<incident>/<team>--<player>.json` with an extra `gameday` object (event, round,
team, late, score). Only submitted sessions of roster players, for the round's incident and seed,
submitted after the round started, are collected; a player's first submitted session counts.

Whose word counts. When the game day has a journal key (`servedrill gameday roster` made one beside the
plan; `servedrill serve --gameday` signs every journal its players' tabs write), collection reads only
journals whose chain verifies under that key (game.session.signing): the player, every event and every
time are the server's. An unsigned journal, or one whose chain breaks (a confidence, a time, a deleted
line), is refused with its reason (`Collected.refused`); with `trust_players` unsigned ones are taken
too, marked unverified. Without a key (a shared folder, no server) nothing can be verified: collection
trusts its players, says so (`TRUST_NOTICE`), and still refuses a signed journal it cannot check.

The results folder also holds `gameday.json` (format `servedrill-gameday`): the rounds with when
each started and ended (epoch seconds, UTC) and the teams, which the leaderboard reads for teams.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from game.gameday.plan import GameDay, Round
from incidents.bounded_read import read_text

STATE_FILE = "gameday.json"
STATE_FORMAT = "servedrill-gameday"
TRANSCRIPT_FORMAT = "servedrill-transcript"
SESSION_FORMAT = "servedrill-session"
TRUST_NOTICE = ("journals are not signed (no server key for this game day): these results trust the players; "
                "anyone who can write the data or results folder can change a result, a time or a name")
MAX_STATE_BYTES = 1024 * 1024
"""Largest `gameday.json` read, bytes: rounds and teams are a few KB (a game-day file is at most 1 MB of
YAML, incidents.yaml_reader.MAX_BYTES, and the state is its digest). A larger one is read as none."""


# ---------------------------------------------------------------- the state file


def read_state(results: Path) -> dict[str, Any]:
    """The results folder's state: {"rounds": {"1": {"started", "ended"}}, ...}; empty when there is none
    or it cannot be read."""
    try:
        doc = json.loads(read_text(results / STATE_FILE, max_bytes=MAX_STATE_BYTES, what="game-day state file"))
    except (OSError, ValueError):  # missing, unreadable or refused (a FIFO, a device, too large)
        return {}
    return doc if isinstance(doc, dict) and doc.get("format") == STATE_FORMAT else {}


def round_times(state: dict[str, Any], number: int) -> tuple[float | None, float | None]:
    """(started, ended) of round `number`, epoch seconds, or None."""
    entry = next((r for r in state.get("rounds", []) if isinstance(r, dict) and r.get("round") == number), {})
    started, ended = entry.get("started"), entry.get("ended")
    return (float(started) if isinstance(started, int | float) else None,
            float(ended) if isinstance(ended, int | float) else None)


def write_state(gameday: GameDay, times: dict[int, tuple[float | None, float | None]]) -> Path:
    """Write `gameday.json` into the results folder (atomically). `times`: round -> (started, ended)."""
    gameday.results.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": STATE_FORMAT, "format_version": 1, "event": gameday.event, "file": str(gameday.path),
        "rounds": [{**r.to_dict(), "started": times.get(r.number, (None, None))[0],
                    "ended": times.get(r.number, (None, None))[1]} for r in gameday.rounds],
        "teams": [{"name": t, "players": p} for t, p in gameday.teams.items()],
    }
    return _write_json(gameday.results / STATE_FILE, doc)


def _write_json(target: Path, doc: dict[str, Any]) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


# ---------------------------------------------------------------- journals


@dataclass(frozen=True)
class Journal:
    """A session journal read without locking it. Times are epoch seconds; `submitted` is the submit
    event's time or None."""

    path: Path
    header: dict[str, Any]
    events: list[dict[str, Any]]
    numbers: list[int] = field(default_factory=list)
    """Each event's line in the file."""
    damaged: int | None = None
    """The first line that is not an event (a signed journal with one does not verify)."""

    @property
    def player(self) -> str:
        return str(self.header.get("player", ""))

    @property
    def incident_id(self) -> str:
        return str(self.header.get("incident_id", ""))

    @property
    def seed(self) -> int | None:
        seed = self.header.get("seed")
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    @property
    def submitted(self) -> float | None:
        return next((float(e["time"]) for e in self.events if e.get("kind") == "submit"), None)

    @property
    def signed(self) -> bool:
        from game.session.signing import is_signed

        return is_signed(self.header)

    def verify(self, key: bytes) -> str | None:
        """None when the journal's chain verifies under `key`, else `file:line: why` (one line)."""
        from game.session.signing import ChainBroken, verify_chain

        if self.damaged is not None:
            return f"{self.path}:{self.damaged}: a line that is not a journal event (changed by hand)"
        try:
            verify_chain(key, self.header, self.events, self.numbers or None)
        except ChainBroken as exc:
            return f"{self.path}:{exc.line}: {exc.reason}"
        return None

    def transcript(self) -> dict[str, Any]:
        """The transcript document `Session.transcript` would write for this journal."""
        start = next((e for e in self.events if e.get("kind") == "start"), None)
        submit = next((e for e in self.events if e.get("kind") == "submit"), None)
        state = "briefing"
        for e in self.events:
            state = {"start": "investigating", "submit": "submitted", "debrief_viewed": "debriefed"}.get(
                str(e.get("kind")), state)
        doc = {k: v for k, v in self.header.items() if k not in ("format", "mac")}
        doc.update({
            "format": TRANSCRIPT_FORMAT,
            "format_version": self.header.get("format_version", 1),
            "telemetry_digest": (start or {}).get("data", {}).get("telemetry_digest"),
            "state": state,
            "exported": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "events": self.events,
            "submission": None if submit is None else {"seq": submit["seq"], "time": submit["time"],
                                                        **submit.get("data", {})},
        })
        return doc


def read_journal(path: Path) -> Journal | None:
    """A session journal, skipping lines that do not parse; None when the header cannot be read or the
    file is refused (not a regular file, over the journal cap)."""
    from game.session.journal import MAX_JOURNAL_BYTES  # here: the session package is slow to import

    try:
        lines = read_text(path, max_bytes=MAX_JOURNAL_BYTES, what="session journal").split("\n")
        header = json.loads(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    if not isinstance(header, dict) or header.get("format") != SESSION_FORMAT:
        return None
    events, numbers, damaged = [], [], None
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict) and {"seq", "time", "kind", "data"} <= event.keys():
            events.append(event)
            numbers.append(number)
        elif number < len(lines) and damaged is None:  # not the torn tail of a write cut short
            damaged = number
    return Journal(path, header, events, numbers, damaged)


def journal_paths(folders: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(path, resolved path) of every journal file in `<folder>/sessions` (or `folder` itself when it holds
    the .jsonl files), each file once however many folders reach it."""
    found: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for folder in folders:
        where = folder / "sessions" if (folder / "sessions").is_dir() else folder
        if not where.is_dir():
            continue
        for path in sorted(where.glob("*.jsonl")):
            real = path.resolve()
            if real not in seen:
                seen.add(real)
                found.append((path, real))
    return found


def journals(folders: Iterable[Path]) -> list[Journal]:
    """Every readable journal in `<folder>/sessions` (or `folder` itself when it holds the .jsonl files)."""
    found: list[Journal] = []
    for path, _ in journal_paths(folders):
        journal = read_journal(path)
        if journal is not None:
            found.append(journal)
    return found


# ---------------------------------------------------------------- collecting


@dataclass
class Collected:
    """What one collection pass did for one round. `files`: transcripts written or already there,
    player -> path; `problems`: one line each (a journal that does not check, an unknown player)."""

    round: int
    files: dict[str, Path] = field(default_factory=dict)
    new: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    refused: list[dict[str, str]] = field(default_factory=list)
    """Journals not collected because their word cannot be taken: {"file", "player", "reason"}."""
    trusted: bool = False
    """Whether unsigned journals were taken on the players' word."""

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "handed_in": sorted(self.files), "new": self.new, "waiting": self.waiting,
                "files": {p: str(f) for p, f in sorted(self.files.items())}, "problems": self.problems,
                "refused": self.refused, "trusted": self.trusted}


AUTO: Any = object()
"""`collect_round(key=AUTO)`: the game day's own journal key, when it has one."""


def journal_key(gameday: GameDay) -> bytes | None:
    """The game day's journal key (beside the plan), or None when it has none; KeyError_ (one line) when
    the file is there but cannot be used (readable by others, not a key)."""
    from game.session.signing import key_file_for, load_key

    path = key_file_for(gameday.path)
    return load_key(path) if path.exists() else None


def round_folder(gameday: GameDay, rnd: Round) -> Path:
    return gameday.results / f"round-{rnd.number:02d}-{rnd.incident_id}"


def transcript_target(gameday: GameDay, rnd: Round, player: str) -> Path:
    """Where `player`'s result of `rnd` goes; in a team round `player` is the team, whose one result is
    `TEAM.team.json` (a player's is `TEAM--PLAYER.json`)."""
    if rnd.team_play:
        return round_folder(gameday, rnd) / f"{player}.team.json"
    return round_folder(gameday, rnd) / f"{gameday.players.get(player, 'no-team')}--{player}.json"


def collect_round(gameday: GameDay, rnd: Round, folders: Iterable[Path], *, started: float | None = None,
                  only: str | None = None, found: list[Journal] | None = None, key: Any = AUTO,
                  trust_players: bool = False) -> Collected:
    """Collect round `rnd`'s submitted sessions from the journals in `folders` into the results folder.

    `started` (epoch seconds): sessions submitted before it are ignored (practice runs); the deadline
    is started + the time limit, and a later submission is collected with `late: true`. `only`: one
    player (what `gameday submit` does). `key`: the journal key to verify with (default: the game
    day's, see the module's notes); `trust_players`: with a key, take unsigned journals too. Idempotent:
    a transcript already collected stays."""
    from game.rules.assess import score_session
    from game.session import TranscriptError, load_transcript
    from game.session.seat import claimed
    from game.session.signing import KeyError_

    result = Collected(rnd.number)
    if key is AUTO:
        try:
            key = journal_key(gameday)
        except KeyError_ as exc:
            result.problems.append(f"{exc}; nothing collected")
            return result
    result.trusted = key is None or trust_players
    registry = gameday.path.with_name(f"{gameday.path.stem}.server")
    roster = gameday.players
    # who hands in: each player, or in a team round each team (one shared game, handed in once)
    hand_ins = gameday.hand_ins(rnd)
    if only is not None and rnd.team_play:
        only = roster.get(only, only)  # a player hands in their team's game
    deadline = None if started is None else started + rnd.time_limit_s
    candidates: dict[str, Journal] = {}
    verified: dict[Path, bool] = {}
    for j in journals(folders) if found is None else found:
        if j.incident_id != rnd.incident_id or j.seed != rnd.seed or j.submitted is None:
            continue
        if only is not None and j.player != only:
            continue
        why = _refusal(j, key, trust_players)
        if why is not None:
            result.refused.append({"file": str(j.path), "player": j.player, "reason": why})
            continue
        verified[j.path] = key is not None and j.signed
        if verified[j.path]:
            mine = claimed(registry, rnd.number, j.player, team=rnd.team_play)
            if mine is not None and mine != j.header.get("session_id"):
                result.refused.append({"file": str(j.path), "player": j.player,
                                       "reason": f"not {j.player}'s game of round {rnd.number} (the server "
                                                 f"registered {mine}): a second game is not collected"})
                continue
        if started is not None and j.submitted < started:
            continue
        why_not = _not_a_hand_in(j, rnd, hand_ins)
        if why_not is not None:
            result.problems.append(f"{j.path}: {why_not}; not collected")
            continue
        best = candidates.get(j.player)
        if best is None or (j.submitted, str(j.path)) < (best.submitted or 0.0, str(best.path)):
            candidates[j.player] = j
    for player, j in sorted(candidates.items()):
        target = transcript_target(gameday, rnd, player)
        if _already(target, j):
            result.files[player] = target
            continue
        doc = j.transcript()
        tmp = target.with_name(f".{target.name}.{os.getpid()}.check.tmp")
        try:
            _write_json(tmp, doc)
            checked = load_transcript(tmp, incident_path=rnd.path)
            report = score_session(checked.incident, checked.header.seed, checked.events)
        except TranscriptError as exc:
            result.problems.append(f"{j.path}: not collected: {str(exc).split(': ', 1)[-1]}")
            continue
        finally:
            tmp.unlink(missing_ok=True)
        submitted = j.submitted or 0.0
        doc["gameday"] = {
            "event": gameday.event, "round": rnd.number, "team": player if rnd.team_play else roster[player],
            "player": player, "members": hand_ins[player] if rnd.team_play else [],
            "incident": rnd.incident_id, "seed": rnd.seed, "late": deadline is not None and submitted > deadline,
            "deadline": deadline, "score": report.total, "collected": time.time(), "session_file": str(j.path),
            "verified": verified.get(j.path, False),
            # the signed header as the server wrote it: the leaderboard verifies the events against it
            "journal_header": j.header if verified.get(j.path) else None,
        }
        _write_json(target, doc)
        result.files[player] = target
        result.new.append(player)
    wanted = [only] if only is not None else list(hand_ins)
    result.waiting = [p for p in wanted if p not in result.files]
    return result


def _not_a_hand_in(journal: Journal, rnd: Round, hand_ins: dict[str, list[str]]) -> str | None:
    """Why `journal` is no hand-in of `rnd` (None: it is): a player on no team, or a team's shared game in a
    round each player plays alone (or the other way round), or one that names other members than the plan."""
    members = journal.header.get("members") or []
    name = journal.player
    if not rnd.team_play:
        if members:
            return f"team {name}'s shared game, but round {rnd.number} is played by each player alone"
        if name not in hand_ins:
            return f"player '{name}' is on no team (a typo in --player?)"
        return None
    if name not in hand_ins:
        return (f"'{name}' is no team of the plan: round {rnd.number} is team play, one shared game per team"
                if not members else f"team '{name}' is not in the plan")
    if list(members) != hand_ins[name]:
        return f"team {name}'s game names members {', '.join(map(str, members)) or 'none'}, the plan " \
               f"{', '.join(hand_ins[name])}"
    return None


def _refusal(journal: Journal, key: bytes | None, trust_players: bool) -> str | None:
    """Why `journal` may not be collected (None: it may)."""
    if key is None:
        if journal.signed:
            return "signed by a game-day server, but this game day has no journal key to check it with"
        return None  # a shared folder: the players' word (TRUST_NOTICE)
    if not journal.signed:
        return None if trust_players else ("not written by the game-day server (unsigned): collected only with "
                                           "--trust-players")
    return journal.verify(key)


def _already(target: Path, journal: Journal) -> bool:
    """Whether `target` already holds this journal's session."""
    from game.session.transcripts import MAX_TRANSCRIPT_BYTES

    try:
        doc = json.loads(read_text(target, max_bytes=MAX_TRANSCRIPT_BYTES, what="transcript"))
    except (OSError, ValueError):  # missing or refused: collected again (and written over atomically)
        return False
    return isinstance(doc, dict) and doc.get("session_id") == journal.header.get("session_id")
