"""The facilitator's live room: what a projector may show of a game day's round at one moment, and the
facilitator's operations on the rounds (start, end, a word to one player). `game.api` re-exports these names;
the live room screen (`tui/screens/room.py`) and the line console (`game/frontends/gameday_console.py`) both
call them, so the rules below live once.

- **Which round**: the running one (started, not ended; `running_round`), else the last one played, else none.
  Times are the results folder's `gameday.json` (`game.api.round_times`): the server's clock.
- **A player's status** in the round, read from their journals (the round's incident and seed, begun since the
  round started, as a broadcast finds them): `not joined` (no game), `investigating`, `handed in` (submitted
  before the round's time was up), `timed out` (the time is up and they had not handed in by then: TIME UP
  handed their board in, or they are still in the game). Queries used and the last activity come from the same
  journal (the first one submitted, else the latest).
- **What the room never shows while players still play**: a score, or anything of the answer. The standings
  list who handed in, in the order they did; scores (recorded at collection) appear only once the round has
  ended, which is when a held debrief opens for the players (`game.api.rounds.debrief_hold`). The room never
  reads the answer at all: the truth is the players' debrief's, not the projector's.

In a **team round** (the plan's `team_play`) a team plays one shared game and hands in once, so the room shows
one row per team (`RoomPlayer.player` is the team, `members` its players) with the team game's status, and the
standings rank teams.

Every call takes `now` (epoch seconds) from the caller, so a screen (and a test) drives the time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from game.api.facilitator import RoundTimes, round_times, save_round_times

if TYPE_CHECKING:
    from game.api.interviewer import Sent
    from game.gameday.collect import Collected, Journal
    from game.gameday.plan import GameDay, Round

__all__ = ["STATUSES", "RoomError", "RoomPlayer", "RoomStanding", "RoomState", "end_round", "next_round",
           "room_state", "round_left", "running_round", "send_to_player", "start_round"]

NOT_JOINED, INVESTIGATING, HANDED_IN, TIMED_OUT = "not joined", "investigating", "handed in", "timed out"
STATUSES = (NOT_JOINED, INVESTIGATING, HANDED_IN, TIMED_OUT)
TIME_UP_SETTLE_S = 15.0
"""How long ending a round waits for the games still open to hand in at the TIME UP the end gives them, before
it collects those too (seconds): a served or joined game sees the end within a second; one whose tab was closed
never does, and costs the facilitator this once."""
SETTLE_POLL_S = 0.25
"""A player's status in a round, as the room shows it."""


class RoomError(Exception):
    """A round operation that cannot be done now; the message is one line for the facilitator."""


# ---------------------------------------------------------------- the rounds (the console's rules too)


def running_round(gameday: GameDay, times: RoundTimes) -> Round | None:
    """The round that started and has not ended (the last such, should the file hold several)."""
    running = [r for r in gameday.rounds if times[r.number][0] is not None and times[r.number][1] is None]
    return running[-1] if running else None


def next_round(gameday: GameDay, times: RoundTimes) -> Round | None:
    """The first round not started yet (None: every round was played)."""
    return next((r for r in gameday.rounds if times[r.number][0] is None), None)


def round_left(rnd: Round, times: RoundTimes, now: float) -> float:
    """Seconds left in `rnd` at `now` (negative: past its limit); counted to its end when it ended, and the
    whole limit when it has not started."""
    started, ended = times[rnd.number]
    if started is None:
        return rnd.time_limit_s
    return started + rnd.time_limit_s - (now if ended is None else min(now, ended))


def start_round(gameday: GameDay, number: int | None, now: float) -> tuple[Round, bool]:
    """Start round `number` (None: the next one not played) at `now`, recorded in the results folder.
    Returns (the round, whether it was played before: a replay keeps its earlier hand-ins). RoomError when a
    round is still running, there is no such round, or every round was played."""
    times = round_times(gameday)
    running = running_round(gameday, times)
    if running is not None:
        raise RoomError(f"round {running.number} is still running; `end` it first")
    if number is None:
        rnd = next_round(gameday, times)
        if rnd is None:
            raise RoomError("every round was played; `board` shows the leaderboard, `start N` replays round N")
    elif not 1 <= number <= len(gameday.rounds):
        raise RoomError(f"no round '{number}'; rounds are 1..{len(gameday.rounds)}")
    else:
        rnd = gameday.rounds[number - 1]
    replay = times[rnd.number][1] is not None
    times[rnd.number] = (now, None)
    save_round_times(gameday, times)
    return rnd, replay


def end_round(gameday: GameDay, folders: Iterable[Path], now: float,
              settle_s: float = TIME_UP_SETTLE_S) -> tuple[Round, Collected]:
    """End the running round at `now`: its hand-ins collected (and scored) first, then the end recorded, which
    opens the players' held debriefs and the room's scores and is TIME UP in the games still open; then, once
    those have handed in (or `settle_s` seconds have passed), theirs collected too. RoomError when no round is
    running."""
    from game.api.facilitator import collect_round

    folders = list(folders)
    times = round_times(gameday)
    rnd = running_round(gameday, times)
    if rnd is None:
        raise RoomError("no round is running")
    started = times[rnd.number][0]
    got = collect_round(gameday, rnd, folders, started=started)
    times[rnd.number] = (started, now)
    save_round_times(gameday, times)
    # the end is TIME UP in every game still open: each hands its board in as it stands, and those are
    # collected too (the first collection ran before they could)
    if _await_time_up(gameday, rnd, folders, started, settle_s):
        got = collect_round(gameday, rnd, folders, started=started)
    return rnd, got


def _open_games(gameday: GameDay, rnd: Round, folders: Sequence[Path], started: float | None) -> set[str]:
    """Players with a game in round `rnd` and no hand-in yet."""
    return {p for p, mine in _games(gameday, rnd, folders, started).items() if all(j.submitted is None for j in mine)}


def _await_time_up(gameday: GameDay, rnd: Round, folders: Sequence[Path], started: float | None,
                   settle_s: float) -> bool:
    """Wait (at most `settle_s` seconds) until every game open in round `rnd` has handed in; True if any did."""
    waiting = _open_games(gameday, rnd, folders, started)
    still = waiting
    deadline = time.monotonic() + settle_s
    while still and time.monotonic() < deadline:
        time.sleep(SETTLE_POLL_S)
        still = _open_games(gameday, rnd, folders, started) & waiting
    return still != waiting


def send_to_player(gameday: GameDay, folders: Iterable[Path], player: str, kind: str, text: str | None = None,
                   *, sender: str | None = None) -> Sent:
    """A message (`kind` "message", with `text`) or the incident's next hint ("hint", no text; it costs the
    player what the incident says) into `player`'s game of the running round. RoomError when no round is
    running or the player has no game in it (or handed in); GMError (one line) when the game refuses it."""
    from game.api.interviewer import send

    times = round_times(gameday)
    rnd = running_round(gameday, times)
    if rnd is None:
        raise RoomError("no round is running; a message goes to a player's game of the running round")
    if player not in gameday.players and not (rnd.team_play and player in gameday.teams):
        raise RoomError(f"{player!r} is on no team")
    # a team round: a word to a member (or to the team) goes into the team's one game
    owner = gameday.players.get(player, player) if rnd.team_play else player
    mine = _games(gameday, rnd, folders, times[rnd.number][0]).get(owner, [])
    playing = [j for j in mine if j.submitted is None]
    if not playing:
        raise RoomError(f"{player} has {'handed in already' if mine else 'no game in this round yet'}; not sent")
    journal = max(playing, key=_begun)
    who = (sender or "").strip() or (f"Facilitator {gameday.facilitator}" if gameday.facilitator else "Facilitator")
    return send(journal.path, kind, text=text if kind != "hint" else None, sender=who)


# ---------------------------------------------------------------- the room's snapshot


@dataclass(frozen=True)
class RoomPlayer:
    """One roster player in the round: `status` one of STATUSES; `queries` the queries that ran;
    `last_activity` epoch seconds of their game's last event (None: no game)."""

    player: str
    team: str
    status: str
    queries: int = 0
    last_activity: float | None = None
    handed_in_at: float | None = None
    members: tuple[str, ...] = ()
    """A team round: `player` is the team, playing one shared game, and these its players."""

    @property
    def label(self) -> str:
        """The name as the room shows it: the player, or a team with its members (`blue: ana, ben`)."""
        return f"{self.player}: {', '.join(self.members)}" if self.members else self.player

    def idle_s(self, now: float) -> float | None:
        """Seconds since the last activity (None without a game)."""
        return None if self.last_activity is None else max(0.0, now - self.last_activity)


@dataclass(frozen=True)
class RoomStanding:
    """A handed-in player in the standings: `taken_s` from their start to their hand-in; `score` None while
    the round runs (never shown to the room before it ends) or when not collected yet."""

    rank: int
    player: str
    team: str
    taken_s: float | None
    queries: int
    score: float | None = None
    members: tuple[str, ...] = ()
    """A team round: the team's players (`player` is the team)."""

    @property
    def label(self) -> str:
        return f"{self.player}: {', '.join(self.members)}" if self.members else self.player


@dataclass(frozen=True)
class RoomState:
    """What the live room shows at `now`. `round`: the round shown (None: none started yet); `running`: it is
    running; `left_s`: seconds left (negative past the limit); `scores_shown`: the standings carry scores (the
    round ended); `next_number`: the round `start` would begin."""

    event: str
    now: float
    rounds: int
    round: int | None = None
    title: str | None = None
    time_limit_s: float | None = None
    started: float | None = None
    ended: float | None = None
    left_s: float | None = None
    players: tuple[RoomPlayer, ...] = ()
    standings: tuple[RoomStanding, ...] = ()
    scores_shown: bool = False
    next_number: int | None = None

    @property
    def running(self) -> bool:
        return self.round is not None and self.started is not None and self.ended is None

    @property
    def time_up(self) -> bool:
        return self.round is not None and (self.ended is not None or (self.left_s is not None and self.left_s <= 0))

    def count(self, status: str) -> int:
        return sum(1 for p in self.players if p.status == status)


def room_state(gameday: GameDay, folders: Iterable[Path], now: float) -> RoomState:
    """The live room of `gameday` at `now`: the running round (else the last played), every roster player's
    status, queries and last activity from the journals in `folders`, and the standings (scores only once the
    round ended). Reads files only; collecting (which scores) is `collect_round`'s, `end_round`'s."""
    times = round_times(gameday)
    nxt = next_round(gameday, times)
    rnd = running_round(gameday, times)
    if rnd is None:
        played = [r for r in gameday.rounds if times[r.number][0] is not None]
        rnd = max(played, key=lambda r: times[r.number][0] or 0.0) if played else None
    if rnd is None:
        nobody = tuple(RoomPlayer(p, t, NOT_JOINED) for p, t in gameday.players.items())
        return RoomState(gameday.event, now, len(gameday.rounds), players=nobody,
                         next_number=None if nxt is None else nxt.number)
    started, ended = times[rnd.number]
    left = round_left(rnd, times, now)
    deadline = None if started is None else started + rnd.time_limit_s
    cutoff = deadline if ended is None else ended if deadline is None else min(deadline, ended)
    time_is_up = ended is not None or left <= 0
    games = _games(gameday, rnd, folders, started)
    players = []
    for player, members in gameday.hand_ins(rnd).items():
        team = player if rnd.team_play else gameday.players[player]
        shown = tuple(members) if rnd.team_play else ()
        mine = games.get(player, [])
        if not mine:
            players.append(RoomPlayer(player, team, NOT_JOINED, members=shown))
            continue
        handed = [j for j in mine if j.submitted is not None]
        journal = min(handed, key=lambda j: j.submitted or 0.0) if handed else max(mine, key=_begun)
        submitted = journal.submitted
        if submitted is not None and (cutoff is None or submitted < cutoff):
            status = HANDED_IN
        elif time_is_up:
            status = TIMED_OUT
        else:
            status = INVESTIGATING if submitted is None else HANDED_IN
        queries = sum(1 for e in journal.events if e.get("kind") == "query")
        last = max((float(e["time"]) for e in journal.events if isinstance(e.get("time"), int | float)),
                   default=None)
        players.append(RoomPlayer(player, team, status, queries, last, submitted, shown))
    scores_shown = ended is not None
    scores = _recorded_scores(gameday, rnd) if scores_shown else {}
    standings = _standings(players, games, scores)
    return RoomState(gameday.event, now, len(gameday.rounds), rnd.number, rnd.title, rnd.time_limit_s, started,
                     ended, left, tuple(players), standings, scores_shown, None if nxt is None else nxt.number)


_CACHE: dict[Path, tuple[tuple[int, int], Journal | None]] = {}
_CACHE_LOCK = threading.Lock()
MAX_CACHED = 4096
"""Journals kept read between two looks of the room (a data folder also holds every older game)."""


def _journals(folders: Iterable[Path]) -> list[Journal]:
    """Every readable journal in the data folders, as `game.gameday.collect.journals` finds them, each read again
    only when its size or modification time changed since the last look (the room looks every 2 seconds)."""
    from game.gameday.collect import journal_paths, read_journal

    found: list[Journal] = []
    with _CACHE_LOCK:
        for path, real in journal_paths(folders):
            try:
                st = real.stat()
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_size)
            cached = _CACHE.get(real)
            if cached is None or cached[0] != stamp:
                cached = (stamp, read_journal(path))
                if len(_CACHE) >= MAX_CACHED:
                    _CACHE.clear()
                _CACHE[real] = cached
            if cached[1] is not None:
                found.append(cached[1])
    return found


def _games(gameday: GameDay, rnd: Round, folders: Iterable[Path], started: float | None) -> dict[str, list[Journal]]:
    """Each roster player's (a team round: each team's) journals of round `rnd` (its incident and seed, begun
    since `started`)."""
    games: dict[str, list[Journal]] = {}
    hand_ins = gameday.hand_ins(rnd)
    for journal in _journals(folders):
        if (journal.player not in hand_ins or journal.incident_id != rnd.incident_id
                or journal.seed != rnd.seed):
            continue
        begun = _begun(journal)
        if started is not None and begun is not None and begun < started:
            continue  # practice before the round
        if started is not None and journal.submitted is not None and journal.submitted < started:
            continue
        games.setdefault(journal.player, []).append(journal)
    return games


def _begun(journal: Journal) -> float:
    return next((float(e["time"]) for e in journal.events if e.get("kind") == "start"), 0.0)


def _standings(players: Sequence[RoomPlayer], games: dict[str, list[Journal]],
               scores: dict[str, float]) -> tuple[RoomStanding, ...]:
    """Handed-in players (and those TIME UP handed in): by score then time once scores are known, else in
    the order they handed in."""
    rows = []
    for p in players:
        if p.handed_in_at is None:
            continue
        journal = next(j for j in games[p.player] if j.submitted == p.handed_in_at)
        begun = _begun(journal)
        taken = p.handed_in_at - begun if begun else None
        rows.append((p, taken, scores.get(p.player)))
    if scores:
        rows.sort(key=lambda r: (-(r[2] if r[2] is not None else -1.0), r[1] if r[1] is not None else 1e18,
                                 r[0].player))
    else:
        rows.sort(key=lambda r: (r[0].handed_in_at or 0.0, r[0].player))
    return tuple(RoomStanding(i, p.player, p.team, taken, p.queries, score, p.members)
                 for i, (p, taken, score) in enumerate(rows, start=1))


def _recorded_scores(gameday: GameDay, rnd: Round) -> dict[str, float]:
    """The scores collection recorded for round `rnd` (player -> total), read from the results folder."""
    from game.gameday.collect import round_folder
    from game.session.transcripts import MAX_TRANSCRIPT_BYTES
    from incidents.bounded_read import read_text

    out: dict[str, float] = {}
    folder = round_folder(gameday, rnd)
    if not folder.is_dir():
        return out
    hand_ins = gameday.hand_ins(rnd)
    for path in sorted([*folder.glob("*--*.json"), *folder.glob("*.team.json")]):
        try:
            doc: Any = json.loads(read_text(path, max_bytes=MAX_TRANSCRIPT_BYTES, what="transcript"))
        except (OSError, ValueError):
            continue
        meta = doc.get("gameday") if isinstance(doc, dict) else None
        if not isinstance(meta, dict):
            continue
        player, score = meta.get("player"), meta.get("score")
        if player in hand_ins and isinstance(score, int | float) and not isinstance(score, bool):
            out[str(player)] = float(score)
    return out
