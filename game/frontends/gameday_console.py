"""The facilitator's console for a game day: a line-mode loop over the rounds.

Commands: `rounds`, `start [N]` (the next round by default), `status` (time left, who handed in),
`collect` (same, said explicitly), `broadcast TEXT` (a message to every player in the round), `end`
(final collection and the round's ranking), `board` (the leaderboard so far), `help`, `quit`. While a
round runs, the console wakes up every TICK_S seconds (when stdin is a terminal) to collect new hand-ins
and to call the time: 5 minutes left, 1 minute left, time up. Round start and end times are kept in the
results folder's gameday.json, so a console that was closed picks up where it was.

Input and the clock are injected (`read_line`, `clock`) so tests can drive it line by line. Every game-day
operation (the rounds' times, collecting, the standings) is the facilitator's part of `game.api`.
"""

from __future__ import annotations

import select
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from game import api

if TYPE_CHECKING:
    from game.gameday.collect import Collected
    from game.gameday.plan import GameDay, Round

TICK_S = 30.0
"""Seconds between automatic collections while a round runs."""
WARNINGS_S = (300.0, 60.0)
"""Time-left announcements, seconds."""

ReadLine = Callable[[str, float | None], str | None]
"""(prompt, timeout seconds or None) -> the line, None on timeout; "quit" at end of input."""


def stdin_line(prompt: str, timeout: float | None) -> str | None:
    """Read a line from stdin; with a terminal and a timeout, None when nothing was typed in time."""
    click.echo(prompt, nl=False)
    try:
        tty = sys.stdin.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty and timeout is not None:
        ready, _, _ = select.select([sys.stdin], [], [], max(timeout, 0.1))
        if not ready:
            click.echo("")
            return None
    line = sys.stdin.readline()
    return "quit" if line == "" else line.strip()


def _clock_text(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def _mmss(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 60}:{s % 60:02d}"


class Console:
    """One facilitator's console over a game day. `folders`: SERVEDRILL_DATA folders to collect from."""

    def __init__(self, gameday: GameDay, folders: list[Path], *, read_line: ReadLine = stdin_line,
                 echo: Callable[[str], None] = click.echo, clock: Callable[[], float] = time.time) -> None:
        self.gameday = gameday
        self.folders = folders
        self.read_line = read_line
        self.echo = echo
        self.clock = clock
        self.times: api.RoundTimes = api.round_times(gameday)
        self.announced: set[tuple[int, float]] = set()
        self.seen: dict[int, set[str]] = {}

    # ------------------------------------------------------------ state

    @property
    def running(self) -> Round | None:
        """The round that started and has not ended (game.api.running_round), as the results folder says now:
        the live room (`gameday room`) may have started or ended one meanwhile."""
        self.times = api.round_times(self.gameday)
        return api.running_round(self.gameday, self.times)

    def left_s(self, rnd: Round) -> float:
        return api.round_left(rnd, self.times, self.clock())

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        self.echo(f"Game day: {self.gameday.event} - {len(self.gameday.teams)} teams, "
                  f"{len(self.gameday.players)} players, {len(self.gameday.rounds)} rounds")
        self.echo(f"Results go to {self.gameday.results}")
        self.echo("Collecting from: " + ", ".join(str(f) for f in self.folders))
        self.do_rounds("")
        self.echo("Type `help` for the commands.")
        while True:
            rnd = self.running
            timeout = None
            if rnd is not None:
                left = self.left_s(rnd)
                marks = [left - w for w in WARNINGS_S if left > w] + ([left] if left > 0 else [])
                timeout = min([TICK_S, *marks]) if marks else TICK_S
            line = self.read_line(self._prompt(), timeout)
            if line is None:
                self.tick()
                continue
            verb, _, arg = line.strip().partition(" ")
            if verb in ("quit", "exit", "q"):
                if self.running is not None:
                    self.echo(f"Round {self.running.number} keeps running; `servedrill gameday run` again "
                              "picks it up.")
                return
            handler = getattr(self, f"do_{verb}", None) if verb else None
            if verb and handler is None:
                self.echo(f"unknown command {verb!r}; type `help`")
                continue
            if handler is not None:
                try:
                    handler(arg.strip())
                except Exception as exc:  # the console stays up whatever a command hits
                    self.echo(f"error: {type(exc).__name__}: {exc}")
            self.tick(quiet=True)

    def _prompt(self) -> str:
        rnd = self.running
        if rnd is None:
            return "gameday> "
        left = self.left_s(rnd)
        clock = _mmss(left) + " left" if left > 0 else "TIME UP"
        return f"gameday [round {rnd.number}, {clock}]> "

    def tick(self, quiet: bool = False) -> None:
        """Collect the running round and call the time."""
        rnd = self.running
        if rnd is None:
            return
        got = self.collect(rnd)
        seen = self.seen.setdefault(rnd.number, set())
        new = [p for p in got.files if p not in seen]
        seen.update(got.files)
        if new and not quiet:
            for p in sorted(new):  # a player (their team), or in a team round a team (its members)
                self.echo(f"  handed in: {p} ({_of(self.gameday, rnd, p)})")
            self.echo(f"  {len(got.files)}/{len(self.gameday.hand_ins(rnd))} handed in")
        left = self.left_s(rnd)
        marks = [m for m in WARNINGS_S if m < rnd.time_limit_s] + [0.0]
        crossed = [m for m in marks if left <= m and (rnd.number, m) not in self.announced]
        if crossed:  # only the latest one: a console started late does not read out stale warnings
            self.announced.update((rnd.number, m) for m in crossed)
            mark = min(crossed)
            self.echo("TIME UP - games served by `serve --gameday` hand in their boards by themselves; ask "
                      "everyone else to submit now, then `end`" if mark == 0.0
                      else f"{_mmss(mark)} left in round {rnd.number}")

    def collect(self, rnd: Round) -> Collected:
        return api.collect_round(self.gameday, rnd, self.folders, started=self.times[rnd.number][0])

    # ------------------------------------------------------------ commands

    def do_help(self, _arg: str) -> None:
        self.echo("rounds      the rounds and their state\n"
                  "start [N]   start round N (default: the next one) and show the join commands\n"
                  "status      time left, who handed in, who is still playing\n"
                  "collect     collect hand-ins now (the console also does it every 30 s)\n"
                  "broadcast TEXT  a message to every player in the running round (shown on their screen)\n"
                  "end         end the running round: collect and show its ranking\n"
                  "board       the leaderboard so far\n"
                  "quit        leave (a running round keeps running; run the console again to go on)")

    def do_rounds(self, _arg: str) -> None:
        for r in self.gameday.rounds:
            started, ended = self.times[r.number]
            state = ("ended" if ended else "RUNNING" if started else "not started")
            self.echo(f"  {r.number}. {r.incident_id:<28} seed {r.seed:<6} {r.time_limit_s / 60:>5g} min  {state}")

    def do_start(self, arg: str) -> None:
        if arg and not arg.isdigit():
            self.echo(f"no round {arg!r}; rounds are 1..{len(self.gameday.rounds)}")
            return
        try:
            rnd, replay = api.start_round(self.gameday, int(arg) if arg else None, self.clock())
        except api.RoomError as exc:
            self.echo(str(exc))
            return
        self.times = api.round_times(self.gameday)
        now = self.times[rnd.number][0] or self.clock()
        if replay:
            self.echo(f"round {rnd.number} was played already; starting it again (earlier hand-ins stay)")
        self.announced = {a for a in self.announced if a[0] != rnd.number}
        self.echo(f"Round {rnd.number}: {rnd.title}")
        self.echo(f"  incident {rnd.incident_id}, seed {rnd.seed}; {rnd.time_limit_s / 60:g} min from "
                  f"{_clock_text(now)} to {_clock_text(now + rnd.time_limit_s)}")
        if rnd.team_play:
            self.echo("Team play: each team plays one shared game and hands in once. Members open their personal "
                      "links from `servedrill gameday roster` (the game-day server, `servedrill serve --gameday`); "
                      "the commands below play alone and do not count in this round.")
        self.echo("Each player runs:")
        for team, players in self.gameday.teams.items():
            for p in players:
                self.echo(f"  {team:<10} {p:<12} {self.gameday.join_command(rnd, p)}")
        self.echo("To hand in: submit the diagnosis in the game (F8 in the terminal UI, `submit` in --plain);")
        self.echo("  this console collects it from the sessions folder. Playing on another machine? After")
        self.echo(f"  submitting, run: {self.gameday.submit_command('NAME')}")

    def do_status(self, _arg: str) -> None:
        rnd = self.running
        if rnd is None:
            self.echo("no round is running; `start` the next one")
            return
        got = self.collect(rnd)
        self.seen.setdefault(rnd.number, set()).update(got.files)
        left = self.left_s(rnd)
        self.echo(f"Round {rnd.number} ({rnd.incident_id}): {_mmss(left) + ' left' if left > 0 else 'TIME UP'}; "
                  f"{len(got.files)}/{len(self.gameday.hand_ins(rnd))} handed in")
        for team, players in self.gameday.teams.items():
            if rnd.team_play:  # one shared game per team
                state = "handed in" if team in got.files else "playing"
                self.echo(f"  {team:<10} {state} ({', '.join(players)})")
                continue
            done = [p for p in players if p in got.files]
            playing = [p for p in players if p not in got.files]
            self.echo(f"  {team:<10} handed in: {', '.join(done) or '-'}; playing: {', '.join(playing) or '-'}")
        for problem in got.problems:
            self.echo(f"  note: {problem}")

    do_collect = do_status

    def do_end(self, _arg: str) -> None:
        if self.running is not None:  # ending waits for the games it times out: say so before the pause
            self.echo(f"Ending the round: collecting, then waiting (at most {api.TIME_UP_SETTLE_S:.0f} s) for the "
                      "games still open to hand in at TIME UP...")
        try:
            rnd, got = api.end_round(self.gameday, self.folders, self.clock())
        except api.RoomError as exc:
            self.echo(str(exc))
            return
        self.times = api.round_times(self.gameday)
        self.echo(f"Round {rnd.number} ended: {len(got.files)}/{len(self.gameday.hand_ins(rnd))} handed in"
                  + (f"; no transcript from {', '.join(got.waiting)}" if got.waiting else ""))
        for problem in got.problems:
            self.echo(f"  note: {problem}")
        self._show_round(rnd)

    def do_broadcast(self, arg: str) -> None:
        rnd = self.running
        if rnd is None:
            self.echo("no round is running; a broadcast goes to the players of the running round")
            return
        if not arg:
            self.echo("usage: broadcast TEXT (e.g. broadcast Ten minutes left, pin your evidence)")
            return
        try:
            done = api.broadcast(self.gameday, rnd, self.folders, arg, started=self.times[rnd.number][0])
        except api.GMError as exc:
            self.echo(f"not sent: {exc}")
            return
        for line in done.lines():
            self.echo(line)

    do_say = do_broadcast

    def _show_round(self, rnd: Round) -> None:
        for t in api.round_standings(self.gameday, rnd):
            self.echo(f"  {t['rank']:>2}. {t['team']:<12} {t['score']:5.1f}  ({t['handed_in']}/{t['size']} handed in)")

    def do_board(self, _arg: str) -> None:
        self.echo(api.leaderboard_text(self.gameday))


def _of(gameday: GameDay, rnd: Round, name: str) -> str:
    """What the console says beside a hand-in: a player's team, or a team round's members."""
    return ", ".join(gameday.hand_ins(rnd).get(name, [])) if rnd.team_play else gameday.players.get(name, "-")
