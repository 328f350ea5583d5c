"""A player's seat in a served game-day round: the rules the server gives the app process it starts.

`servedrill serve --gameday PLAN` starts one app process per browser tab, for the player whose token the
tab's link carries, with `$SERVEDRILL_ROUND_SEAT` (JSON: the player, the round, its incident and seed,
the server's registry folder, the round state file, the debrief policy). In that process:

- a new session must be the round's incident and seed, for the seat's player (`check_new`), and is the
  player's only one in the round: the first session claims `<registry>/round-NN/<player>` (created
  exclusively, so two processes cannot both claim it); a second is refused (`SessionError`);
- a session of another player cannot be resumed (`check_resume`);
- the debrief is held until the round ends (`debrief_held`), unless the plan says `debrief: immediate`.

The server reads the same registry (`claimed`) to resume the player's session when the link is opened
again. Outside a served round (no `$SERVEDRILL_ROUND_SEAT`) nothing here applies.

**A team round** (the plan's `team_play`): the seat also names the player's team and its members. The game is
the team's: its header's `player` is the team and `members` its players, the claim is the team's
(`<registry>/round-NN-teams/<team>`), so every member's link opens the same session, and each process records
its own member (`team_member`: the seat's player, from the token) in every event it writes (`data.by`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from game.session.records import Header, SessionError
from incidents.bounded_read import read_text

SEAT_ENV = "SERVEDRILL_ROUND_SEAT"
HELD = "held"
IMMEDIATE = "immediate"
MAX_STATE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Seat:
    player: str
    round: int
    incident_id: str
    seed: int
    registry: str
    state: str
    debrief: str = HELD
    time_limit_s: float | None = None
    """The round's time limit, seconds (the plan's `time_limit_min`, else the incident's): the round's clock
    (game.api.clock)."""
    team: str | None = None
    """A team round: the player's team, whose one shared game this seat plays (None: the player's own game)."""
    members: tuple[str, ...] = ()
    """A team round: the team's players, in the plan's order."""

    def to_env(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_env(cls, text: str) -> Seat:
        try:
            raw = json.loads(text)
            return cls(str(raw["player"]), int(raw["round"]), str(raw["incident_id"]), int(raw["seed"]),
                       str(raw["registry"]), str(raw["state"]), str(raw.get("debrief", HELD)),
                       None if raw.get("time_limit_s") is None else float(raw["time_limit_s"]),
                       None if raw.get("team") is None else str(raw["team"]),
                       tuple(str(m) for m in raw.get("members") or ()))
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionError(f"${SEAT_ENV} is not a round seat ({exc}); the server that started this game "
                               "is misconfigured") from None


def current() -> Seat | None:
    """The seat this process plays in, or None outside a served round."""
    text = os.environ.get(SEAT_ENV)
    return Seat.from_env(text) if text else None


def claim_path(registry: Path, round_no: int, player: str) -> Path:
    return Path(registry) / f"round-{round_no:02d}" / player


def team_claim_path(registry: Path, round_no: int, team: str) -> Path:
    """Where a team round's shared game is claimed: a folder of its own, so a team and a player of the same
    name never share a claim."""
    return Path(registry) / f"round-{round_no:02d}-teams" / team


def claimed(registry: Path, round_no: int, player: str, *, team: bool = False) -> str | None:
    """The session id `player` (with `team`: the team of that name) plays round `round_no` in, or None before
    the first session."""
    path = team_claim_path(registry, round_no, player) if team else claim_path(registry, round_no, player)
    try:
        text = read_text(path, max_bytes=4096, what="round registry").strip()
    except OSError:
        return None
    return text or None


def team_members(player: str) -> tuple[str, ...]:
    """The members a new session's header names: in a team round, when `player` is the seat's team, its
    members; otherwise none (one player's game)."""
    seat = current()
    return seat.members if seat is not None and seat.team is not None and player == seat.team else ()


def team_member(header: Header) -> str | None:
    """The member this process plays a team's shared game for (the seat's player, whom the server knows by
    their token), or None: not a team's game, or not served."""
    seat = current()
    if seat is None or seat.team is None or not header.members or header.player != seat.team:
        return None
    return seat.player if seat.player in header.members else None


def shares_journals() -> bool:
    """Whether this process plays a team's shared game: its journal is not held locked between actions, since
    the other members' processes append to it too (game.session.journal.locked)."""
    seat = current()
    return seat is not None and seat.team is not None


def check_new(header: Header) -> None:
    """Refuse a session this seat may not start; otherwise claim the round for it (once, atomically)."""
    seat = current()
    if seat is None:
        return
    owner = seat.team if seat.team is not None else seat.player
    if header.player != owner:
        what = f"in team {seat.team}" if seat.team is not None else f"as {seat.player}"
        raise SessionError(f"you play round {seat.round} {what}, not as {header.player!r}")
    if seat.team is not None and header.members != seat.members:
        raise SessionError(f"team {seat.team}'s game names its members {', '.join(seat.members)}")
    if header.incident_id != seat.incident_id or header.seed != seat.seed:
        raise SessionError(f"round {seat.round} plays {seat.incident_id} (seed {seat.seed}); open that incident")
    if seat.team is not None:
        target = team_claim_path(Path(seat.registry), seat.round, seat.team)
    else:
        target = claim_path(Path(seat.registry), seat.round, seat.player)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        other = claimed(Path(seat.registry), seat.round, owner, team=seat.team is not None) or "?"
        if seat.team is not None:
            raise SessionError(f"one game per team per round: team {seat.team} already has its game in round "
                               f"{seat.round} (session {other}); open your link again to join it") from None
        raise SessionError(f"one game per player per round: you already have a game in round {seat.round} "
                           f"(session {other}); open your link again to continue it") from None
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(header.session_id + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def check_resume(header: Header) -> None:
    """Refuse to resume another player's session in a served round."""
    seat = current()
    if seat is None:
        return
    if seat.team is not None:
        if header.player != seat.team or seat.player not in header.members:
            raise SessionError(f"this session is {header.player}'s; you play round {seat.round} in team "
                               f"{seat.team}")
    elif header.player != seat.player or header.members:
        raise SessionError(f"this session is {header.player}'s; you play round {seat.round} as {seat.player}")


def round_ended(state_file: Path, round_no: int) -> bool:
    """Whether the game-day state file (results/gameday.json) says round `round_no` has ended."""
    try:
        doc: Any = json.loads(read_text(state_file, max_bytes=MAX_STATE_BYTES, what="game-day state file"))
    except (OSError, ValueError):
        return False
    rounds = doc.get("rounds", []) if isinstance(doc, dict) else []
    entry = next((r for r in rounds if isinstance(r, dict) and r.get("round") == round_no), {})
    return isinstance(entry.get("ended"), int | float)


def debrief_held() -> str | None:
    """Why the debrief may not be shown now (None: it may): in a served round, until the round ends."""
    seat = current()
    if seat is None or seat.debrief == IMMEDIATE or round_ended(Path(seat.state), seat.round):
        return None
    return (f"Handed in. The debrief of round {seat.round} is held until the round ends, so nobody learns "
            "the answer while others still play; open your link again after the facilitator ends the round")
