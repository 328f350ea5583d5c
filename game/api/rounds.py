"""A player's side of a game-day round, and the clock every game shows: one rule for every front end (the
terminal, the browser, line mode). `game.api` re-exports these names.

- **What a round offers**: only the round's incident (`round_library`: the picker lists nothing else, so a
  player cannot open the wrong one); outside a round, the library as given.

- **Ordinary play**: the game clock counts the time a process held the session (`Session.elapsed`) against
  the incident's own time limit. Warnings at 5 minutes and 1 minute left, and "time is up" at the limit;
  the game goes on (a late hand-in is scored as usual; the clock shows the overtime in red).
- **A served game-day round** (`$SERVEDRILL_ROUND_SEAT`, `game.session.seat`): the ROUND's clock, not the
  incident's: the round's limit from the plan (`time_limit_min`, else the incident's) counted from the round's
  start as the facilitator's console recorded it (`RESULTS/gameday.json`: the server's clock); a round fixed
  with `serve --round N` and never started by the console counts from the player's own start. The same
  warnings, then **TIME UP submits the board as it stands** (`time_up`): a team lead expects a hand-in from
  everyone at the end of a round, never a zero for a player who did not press F8 in time, and a late hand-in
  is not possible. A round the facilitator ended early is TIME UP too.

Every call takes `now` (epoch seconds) from the caller, so a front end (and a test) drives the time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from game.rules.library import LibraryEntry
    from game.session import Event, Session
    from game.session.seat import Seat

__all__ = [
    "WARN_AT_S",
    "Clock",
    "DebriefHold",
    "TimeNotice",
    "TimeWarnings",
    "clock_text",
    "debrief_hold",
    "player_clock",
    "round_clock",
    "round_library",
    "round_limits_text",
    "time_up",
]

WARN_AT_S = (300.0, 60.0)
"""Seconds left at which the player is warned, once each: 5 minutes and 1 minute."""


def round_library(entries: Sequence[LibraryEntry]) -> list[LibraryEntry]:
    """The incidents a player may open now: in a served game-day round only the round's incident (its seat's),
    otherwise `entries` as they are."""
    from game.session.seat import current

    seat = current()
    return list(entries) if seat is None else [e for e in entries if e.id == seat.incident_id]


def clock_text(seconds: float) -> str:
    """M:SS (H:MM:SS from an hour), whole seconds, never negative."""
    s = max(0, int(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


@dataclass(frozen=True)
class Clock:
    """What a player's clock reads at one moment.

    `elapsed`: seconds counted so far; `limit`: seconds allowed (None: no limit); `round`: the game-day
    round's number (None: ordinary play); `ends_at`: epoch seconds the round ends (rounds only); `ended`: the
    facilitator ended the round; `submits`: TIME UP hands the board in (rounds)."""

    elapsed: float
    limit: float | None
    round: int | None = None
    ends_at: float | None = None
    ended: bool = False
    submits: bool = False

    @property
    def left(self) -> float | None:
        """Seconds left (negative: overtime); None without a limit."""
        return None if self.limit is None else self.limit - self.elapsed

    @property
    def time_up(self) -> bool:
        left = self.left
        return self.ended or (left is not None and left <= 0)

    def text(self) -> str:
        """The clock as a status line shows it: `round 2 · 11:58 left` or `time 03:10 / 25:00`."""
        if self.round is not None:
            if self.time_up:
                return f"round {self.round} · TIME UP"
            left = self.left
            return f"round {self.round} · " + ("no limit" if left is None else f"{clock_text(left)} left")
        limit = f" / {clock_text(self.limit)}" if self.limit else ""
        return f"time {clock_text(self.elapsed)}{limit}"

    @property
    def urgent(self) -> bool:
        """Shown in red: a minute or less left, or over the limit."""
        left = self.left
        return left is not None and left <= WARN_AT_S[-1]


def _round_start(seat: Seat, session: Session) -> tuple[float, float | None]:
    """(started, ended) of the seat's round: the console's record, else the player's own start."""
    from game.gameday.collect import read_state, round_times

    started, ended = round_times(read_state(Path(seat.state).parent), seat.round)
    if started is None:
        starts = [e.time for e in session.events if e.kind == "start"]
        started = starts[0] if starts else None
    return (started if started is not None else 0.0), ended


def player_clock(session: Session, now: float) -> Clock:
    """The clock of `session` at `now`: the round's in a served game-day round, else the incident's."""
    from game.session.seat import current

    seat = current()
    if seat is None or seat.incident_id != session.header.incident_id:
        limit = session.incident.time_limit_s
        return Clock(session.elapsed(now), float(limit) if limit else None)
    started, ended = _round_start(seat, session)
    limit = seat.time_limit_s if seat.time_limit_s is not None else session.incident.time_limit_s
    return _seat_clock(seat, started, ended, float(limit) if limit else None, now)


def round_clock(now: float) -> Clock | None:
    """The running round's clock at `now` before the player has a game (the briefing): None outside a served
    round. It counts from the console's start (0 elapsed, no end time, while there is none)."""
    from game.gameday.collect import read_state, round_times
    from game.session.seat import current

    seat = current()
    if seat is None:
        return None
    started, ended = round_times(read_state(Path(seat.state).parent), seat.round)
    return _seat_clock(seat, started or 0.0, ended, seat.time_limit_s, now)


def _seat_clock(seat: Seat, started: float, ended: float | None, limit_s: float | None, now: float) -> Clock:
    at = now if ended is None else min(now, ended)
    return Clock(max(0.0, at - started) if started else 0.0, limit_s, seat.round,
                 None if limit_s is None or not started else started + limit_s, ended is not None, submits=True)


def round_limits_text(c: Clock) -> str:
    """A round's limit as a briefing states it: `Round 1: 12:00 for the round, ends at 14:12`."""
    limit = "no time limit" if c.limit is None else f"{clock_text(c.limit)} for the round"
    ends = f", ends at {_hhmm(c.ends_at)}" if c.ends_at is not None else ""
    return f"Round {c.round}: {limit}{ends}"


@dataclass(frozen=True)
class TimeNotice:
    """A warning to show once: `kind` "warning" (5 min, 1 min) or "time_up"; `text` plain, one line."""

    kind: str
    text: str
    seconds_left: float


@dataclass
class TimeWarnings:
    """What a screen has warned about so far: `due` gives each warning once, the most urgent only when
    several came due together (a game resumed with 40 s left hears "1 minute left", not both)."""

    fired: set[str] = field(default_factory=set)

    def due(self, c: Clock) -> list[TimeNotice]:
        left = c.left
        if c.time_up:
            if "time_up" in self.fired:
                return []
            self.fired.update({"time_up", *(str(w) for w in WARN_AT_S)})
            if c.round is not None:
                why = "the facilitator ended the round" if c.ended and (left is None or left > 0) else \
                    "the round's time is over"
                what = "your board as it stands is handed in" if c.submits else "hand in now"
                return [TimeNotice("time_up", f"TIME UP: {why}; {what}.", left or 0.0)]
            return [TimeNotice("time_up", "Time is up: the incident's time limit has passed. You can still "
                                          "submit; the clock keeps counting.", left or 0.0)]
        if left is None:
            return []
        new = [w for w in WARN_AT_S if left <= w and str(w) not in self.fired]
        if not new:
            return []
        self.fired.update(str(w) for w in new)
        where = f"in round {c.round}" if c.round is not None else "on the clock"
        then = " At TIME UP your board as it stands is handed in." if c.submits else ""
        whole = max(1, math.ceil(left / 60))  # a game resumed with 3:20 left hears "4 minutes", not 5
        minutes = "1 minute" if whole == 1 else f"{whole} minutes"
        return [TimeNotice("warning", f"{minutes} left {where}.{then}", left)]


def time_up(session: Session, c: Clock,
            ranking: Sequence[tuple[str, float]] | Mapping[str, float] | None = None) -> Event | None:
    """At TIME UP of a round, hand in `ranking` (the board as the player's screen shows it; None: the last
    ranking saved, else an even split over the board). Returns the submit event, or None when nothing is
    to be done (no round, time left, already handed in)."""
    if not (c.submits and c.time_up):
        return None
    session.sync()  # a team's game: another member's tab may have handed it in already (one hand-in per team)
    if session.state != "investigating":
        return None
    if ranking is None:
        saved = session.ranking
        if saved:
            ranking = [(str(r["id"]), float(r["confidence"])) for r in saved]
        else:
            ids = [h.id for h in session.board]
            base, extra = divmod(100, len(ids)) if ids else (0, 0)
            ranking = [(hid, float(base + (1 if i < extra else 0))) for i, hid in enumerate(ids)]
    if session.team:
        from game.session import SessionError

        try:
            return session.submit(ranking)
        except SessionError:
            if session.submission is not None:
                return None  # every member's tab hands in at TIME UP: the first one's is the team's
            raise
    return session.submit(ranking)


@dataclass(frozen=True)
class DebriefHold:
    """A debrief held until the round ends: the round, when it is planned to end (epoch seconds, None when
    unknown or past: the facilitator ends it), and the sentence to show."""

    round: int
    ends_at: float | None
    text: str


def debrief_hold(session: Session, now: float) -> DebriefHold | None:
    """Why the debrief of `session` is not shown yet (None: it may be): in a served round whose plan holds
    debriefs, until the facilitator ends the round. A front end shows the hold and asks again (each call
    reads the round's state file; once a second is plenty)."""
    from game.session.seat import current, debrief_held

    if debrief_held() is None:
        return None
    seat = current()
    assert seat is not None  # only a seat holds a debrief
    c = player_clock(session, now)
    ends = c.ends_at if c.ends_at is not None and c.ends_at > now else None
    who = ""
    submission = session.submission
    if session.team and submission is not None:  # a team's game: which member handed the board in (from their seat)
        by = submission.data.get("by")
        if isinstance(by, str) and by:
            who = f" {by} handed in team {session.header.player}'s board."  # last: the sentence above keeps its lines
    return DebriefHold(seat.round, ends, "Handed in. The debrief opens when the round ends"
                       + (f" at {_hhmm(ends)}" if ends is not None else " (when the facilitator ends it)")
                       + ", so nobody learns the answer while others still play." + who)


def _hhmm(epoch: float) -> str:
    import time

    return time.strftime("%H:%M", time.localtime(epoch))
