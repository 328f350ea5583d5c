"""A served game-day round's gate, where a player is who their link says (`servedrill serve --gameday PLAN`).

The roster (`servedrill gameday roster PLAN`) gives each player a secret token; their browser link is
`http://HOST:PORT/?token=...`. `RoundGate` is what the server asks before it serves a page or starts a
tab's app:

- the page and the websocket need a token on the roster; anything else is refused with a message that
  says what to do (no typed names: the player's name is the roster's);
- a round must be running: the one the facilitator's console started and has not ended (the results
  folder's gameday.json), or the one `--round N` fixes;
- one tab per player at a time; the first tab of a player in a round starts their game, every later
  one continues that same game (`game.session.seat` claims one session per player per round, and
  refuses a second);
- the app runs with the player's seat (`$SERVEDRILL_ROUND_SEAT`: round, incident, seed, debrief policy)
  and the journal key (`$SERVEDRILL_JOURNAL_KEY_FILE`), so the journal it writes is signed with the
  server's key and its times are the server's clock; the key file never reaches a player.

The web side (pages, websockets) is `tui.serve_gameday`'s; front ends reach this through `game.api`.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from game.gameday.collect import read_state, round_times
from game.gameday.plan import GameDay, Round
from game.gameday.roster import Roster, RosterError, load_roster
from game.session import data_dir
from game.session.seat import SEAT_ENV, Seat, claimed
from game.session.signing import KEY_ENV, KeyError_, load_key


class Refused(Exception):
    """A request the game day does not serve: `status` (HTTP) and a message for the player."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass
class RoundGate:
    """The server's side of a served game day: tokens, the running round, one tab per player."""

    gameday: GameDay
    roster: Roster
    fixed_round: int | None = None
    python: str = field(default_factory=lambda: sys.executable)
    open_tabs: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, gameday: GameDay, fixed_round: int | None = None) -> RoundGate:
        """The gate of `gameday`; ValueError (one line) when its roster or key cannot be used."""
        try:
            roster = load_roster(gameday)
            load_key(roster.key_file)
        except (RosterError, KeyError_) as exc:
            raise ValueError(str(exc)) from None
        if not roster.tokens:
            raise ValueError(f"{roster.path}: no player has a token (hint: servedrill gameday roster {gameday.path})")
        if fixed_round is not None and not 1 <= fixed_round <= len(gameday.rounds):
            raise ValueError(f"{gameday.path}: no round {fixed_round} (hint: rounds are 1..{len(gameday.rounds)})")
        sessions = (gameday.data or data_dir()).resolve()
        for secret in (roster.key_file, roster.path, roster.server_dir):
            if secret.resolve().is_relative_to(sessions):
                raise ValueError(f"{secret}: inside the players' data folder {sessions} (hint: keep the plan "
                                 "and its secrets in a folder only the facilitator reads)")
        return cls(gameday, roster, fixed_round)

    # ------------------------------------------------------------ the round

    def current_round(self) -> Round | None:
        """The round being served: `--round N`, else the last one the console started and has not ended."""
        if self.fixed_round is not None:
            return self.gameday.rounds[self.fixed_round - 1]
        state = read_state(self.gameday.results)
        running = [r for r in self.gameday.rounds
                   if round_times(state, r.number)[0] is not None and round_times(state, r.number)[1] is None]
        return running[-1] if running else None

    # ------------------------------------------------------------ admission

    def player(self, token: str | None) -> str:
        """The player of `token`; Refused (403) without one or for one not on the roster."""
        if not token:
            raise Refused(403, "servedrill game day: this page needs your personal link (it ends in "
                               "?token=...). Ask the facilitator for yours; names are not typed in a round.")
        player = self.roster.player_of(token)
        if player is None:
            raise Refused(403, "servedrill game day: this link's token is not on the roster (mistyped, or "
                               "reissued). Ask the facilitator for your personal link.")
        return player

    def check_page(self, token: str | None) -> str:
        """The player a page is for; Refused when it may not be served now."""
        player = self.player(token)
        if self.current_round() is None:
            raise Refused(409, f"servedrill game day: hello {player}. No round is running yet; reload this page "
                               "when the facilitator starts one.")
        if player in self.open_tabs:
            raise Refused(409, f"servedrill game day: {player}, your game is already open in another tab or "
                               "browser. Close it, then reload this page to continue there.")
        return player

    def admit(self, token: str | None) -> tuple[str, str]:
        """(player, the app command) for a tab's websocket; the player counts as having a tab open until
        `release`. Refused as `check_page` does."""
        player = self.check_page(token)
        rnd = self.current_round()
        assert rnd is not None  # check_page refuses without a running round
        self.open_tabs.add(player)
        return player, self.command(player, rnd)

    def release(self, player: str) -> None:
        self.open_tabs.discard(player)

    # ------------------------------------------------------------ the facilitator's live room

    def check_room(self, token: str | None) -> None:
        """Refused (403) unless `token` is the facilitator's: the room shows every player's status, and its keys
        start and end rounds, so a player's token (or none) never opens it."""
        if self.roster.facilitator is None:
            raise Refused(403, "servedrill game day: this roster has no facilitator token yet. Run servedrill "
                               "gameday roster again (it keeps every player's link) and use the room link it prints.")
        if not self.roster.is_facilitator(token):
            raise Refused(403, "servedrill game day: this link is not the facilitator's room link.")

    def room_command(self) -> str:
        """The shell command of the room's tab: `servedrill gameday room PLAN` (its data folder the plan's)."""
        env = [f"SERVEDRILL_DATA={self.gameday.data}"] if self.gameday.data is not None else []
        return "exec " + shlex.join(["env", *env, self.python, "-m", "tui.cli", "gameday", "room",
                                     str(self.gameday.path)])

    def seat(self, player: str, rnd: Round) -> Seat:
        """`player`'s seat in `rnd`; in a team round it names their team and its members, whose one game every
        member's tab plays."""
        team = self.gameday.players.get(player) if rnd.team_play else None
        members = tuple(self.gameday.teams[team]) if team is not None else ()
        return Seat(player, rnd.number, rnd.incident_id, rnd.seed, str(self.roster.server_dir),
                    str(self.gameday.results / "gameday.json"), rnd.debrief, rnd.time_limit_s, team, members)

    def command(self, player: str, rnd: Round) -> str:
        """The shell command of `player`'s tab in `rnd`: their game, continued when they have one."""
        seat = self.seat(player, rnd)
        env = [f"{SEAT_ENV}={seat.to_env()}", f"{KEY_ENV}={self.roster.key_file}"]
        if self.gameday.data is not None:
            env.append(f"SERVEDRILL_DATA={self.gameday.data}")
        # a team round: the team's game (started by whichever member came first), played under the team's name
        owner = seat.team if seat.team is not None else player
        session = claimed(self.roster.server_dir, rnd.number, owner, team=seat.team is not None)
        if session is not None:
            play = ["resume", session]
        else:
            play = ["play", str(rnd.path), "--seed", str(rnd.seed), "--player", owner]
        return "exec " + shlex.join(["env", *env, self.python, "-m", "tui.cli", *play])


def load_gate(plan: Path, round_no: int | None = None) -> RoundGate:
    """The gate of the game-day plan at `plan`; ValueError with one line (file: what, hint) when the plan,
    its roster or its key cannot be used."""
    from game.gameday.plan import GameDayError, load_gameday

    try:
        return RoundGate.load(load_gameday(plan), round_no)
    except GameDayError as exc:
        raise ValueError(str(exc.diagnostics[0]) if exc.diagnostics else f"{plan}: invalid game day") from None
