"""The facilitator's side of a game day: when each round started and ended (kept in the results folder, so a
console that was closed picks up where it was), collecting a round's hand-ins from the players' data
folders, and the standings. `game.api` re-exports these names. The plan is `game.gameday.plan`'s, the
collecting `game.gameday.collect`'s and the leaderboard `game.reports.leaderboard`'s.

Collecting scores each new hand-in (its queries re-run on every hypothesis's world): seconds per hand-in."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from game.gameday.broadcast import Broadcast
    from game.gameday.collect import Collected
    from game.gameday.gate import RoundGate
    from game.gameday.plan import GameDay, Round

__all__ = ["RoundTimes", "broadcast", "collect_round", "leaderboard_text", "round_gate", "round_standings",
           "round_times", "save_round_times"]

RoundTimes = dict[int, tuple[float | None, float | None]]
"""Round number -> (started, ended), epoch seconds or None."""


def round_times(gameday: GameDay) -> RoundTimes:
    """When each round of `gameday` started and ended, as its results folder recorded (none yet: Nones)."""
    from game.gameday.collect import read_state
    from game.gameday.collect import round_times as times_of

    state = read_state(gameday.results)
    return {r.number: times_of(state, r.number) for r in gameday.rounds}


def save_round_times(gameday: GameDay, times: RoundTimes) -> Path:
    """Record the rounds' times in the results folder (atomically); returns the state file."""
    from game.gameday.collect import write_state

    return write_state(gameday, times)


def collect_round(gameday: GameDay, rnd: Round, folders: Iterable[Path], *, started: float | None = None) -> Collected:
    """Collect (and score) round `rnd`'s hand-ins from the data folders `folders` into the results folder:
    sessions submitted before `started` are practice and left out, later than the time limit marked late.
    Idempotent: a hand-in collected already stays."""
    from game.gameday.collect import collect_round as collect

    return collect(gameday, rnd, folders, started=started)


def round_standings(gameday: GameDay, rnd: Round) -> list[dict[str, Any]]:
    """The teams' ranking in round `rnd` (rank, team, score, handed_in, size), best first; empty when nothing
    of the round was collected."""
    from game.reports.leaderboard import read_results

    board = read_results(gameday.results, gameday)
    mine = next((b for b in board.incidents if (b.incident_id, b.seed) == (rnd.incident_id, rnd.seed)), None)
    return [] if mine is None else list(mine.teams)


def leaderboard_text(gameday: GameDay) -> str:
    """The game day's leaderboard so far, as plain text for a terminal."""
    from game.reports.leaderboard import read_results
    from game.reports.leaderboard_report import format_text

    return format_text(read_results(gameday.results, gameday))


def round_gate(plan: Path, round_no: int | None = None) -> RoundGate:
    """The gate of a served game day (`serve --gameday PLAN`): tokens, the running round, one tab per player
    (game.gameday.gate). ValueError with one line when the plan, its roster or its key cannot be used."""
    from game.gameday.gate import load_gate

    return load_gate(plan, round_no)


def broadcast(gameday: GameDay, rnd: Round, folders: Iterable[Path], text: str, *, sender: str | None = None,
              started: float | None = None) -> Broadcast:
    """A message to every player in round `rnd`: delivered into each roster player's game of the round (found in
    the data folders `folders`, begun since `started`, not handed in yet), where it shows as an update on their
    screen. Refused per game without the credential that game takes (`game.gameday.gm.check_sender`); players
    with no game yet are listed, not reached. GMError (one line) for a text no game would take."""
    from game.gameday.broadcast import broadcast as deliver

    return deliver(gameday, rnd, folders, text, sender=sender, started=started)
