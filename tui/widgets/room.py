"""The live room's widgets (tui/screens/room.py), made for a projector: the round and its incident's title, the
time left in big digits, the roster with each player's status, and the standings. Each renders a
`game.api.RoomState` snapshot; names and titles are data, shown literally (tui/text.py) and bounded.

Nothing here decides what may be shown: the snapshot carries no score while the round runs
(`game.api.room_state`), and these widgets show what it carries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Digits, Static

from tui.formatting import clock_text
from tui.text import literal, one_line

if TYPE_CHECKING:
    from game.api import RoomPlayer, RoomState

__all__ = ["STATUS_STYLES", "RoomClock", "RoomHeader", "RosterTable", "StandingsTable", "idle_text", "left_text"]

MAX_NAME = 24
"""A player's or team's name is cut here (the plan allows 32 characters; a projector's column is narrow)."""
MAX_TITLE = 160

STATUS_STYLES = {"not joined": "dim", "investigating": "bold cyan", "handed in": "bold green",
                 "timed out": "bold yellow"}


def left_text(left_s: float | None) -> str:
    """The time left as the big clock shows it: M:SS, or TIME UP."""
    if left_s is None:
        return "--:--"
    return "TIME UP" if left_s <= 0 else clock_text(left_s)


def idle_text(player: RoomPlayer, now: float) -> str:
    """Time since the player's last activity: "-" without a game, else m:ss (h:mm:ss from an hour)."""
    idle = player.idle_s(now)
    return "-" if idle is None else clock_text(idle)


class RoomHeader(Static):
    """The event, the round (n of N) and the incident's title: the symptom the players were paged with."""

    DEFAULT_CSS = """
    RoomHeader {
        height: auto;
        max-height: 3;
        padding: 0 1;
        background: $primary-background;
        text-style: bold;
    }
    """

    def show(self, state: RoomState) -> None:
        text = Text()
        text.append(one_line(state.event, 60), style="bold")
        if state.round is None:
            text.append("  ·  no round started yet", style="dim")
        else:
            text.append(f"  ·  Round {state.round} of {state.rounds}", style="bold")
            text.append("  ·  ")
            text.append_text(literal(one_line(state.title or "", MAX_TITLE)))
        self.update(text)


class RoomClock(Horizontal):
    """Time left in the round in big digits, and a line saying what state the round is in."""

    DEFAULT_CSS = """
    RoomClock {
        height: auto;
        padding: 0 1;
    }
    RoomClock > Digits {
        width: auto;
        text-style: bold;
        color: $success;
    }
    RoomClock.-urgent > Digits {
        color: $warning;
    }
    RoomClock.-up > Digits {
        color: $error;
    }
    RoomClock > #room-clock-status {
        width: 1fr;
        height: 3;
        padding: 0 2;
        content-align: left middle;
        text-style: bold;
    }
    """

    def compose(self) -> ComposeResult:
        yield Digits("--:--", id="room-clock-digits")
        yield Static("", id="room-clock-status")

    def show(self, state: RoomState, left_s: float | None) -> None:
        """`left_s`: the seconds left now (the snapshot's, brought to the screen's clock)."""
        digits = self.query_one(Digits)
        status = self.query_one("#room-clock-status", Static)
        up = state.round is not None and (state.ended is not None or (left_s is not None and left_s <= 0))
        self.set_class(up, "-up")
        self.set_class(not up and left_s is not None and left_s <= 60, "-urgent")
        if state.round is None:
            digits.update("--:--")
            status.update(Text("Press s to start round 1.", style="bold"))
            return
        digits.update("0:00" if up else left_text(left_s))
        handed = sum(1 for p in state.players if p.handed_in_at is not None)
        counts = f"{handed}/{len(state.players)} handed in"
        if state.ended is not None:
            after = f" · s starts round {state.next_number}" if state.next_number else " · every round was played"
            status.update(Text(f"Round {state.round} ended · {counts}{after}"))
            return
        counts += f" · {state.count('investigating')} investigating"
        if up:
            status.update(Text(f"TIME UP · {counts} · e ends the round", style="bold"))
        else:
            status.update(Text(f"left of {clock_text(state.time_limit_s or 0)} · {counts}"))


class RosterTable(DataTable[Any]):
    """Every roster player: team, status, queries used, time since their last activity."""

    DEFAULT_CSS = """
    RosterTable {
        height: 1fr;
        border: round $primary;
        border-title-style: bold;
        text-style: bold;
    }
    """

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.border_title = "Players"
        self.add_column("Player", key="player")
        self.add_column("Team", key="team")
        self.add_column("Status", key="status")
        self.add_column("Queries", key="queries")
        self.add_column("Idle", key="idle")

    def show(self, state: RoomState) -> None:
        row = self.cursor_row
        self.clear()
        for p in state.players:
            self.add_row(literal(one_line(p.label, MAX_NAME)), literal(one_line(p.team, MAX_NAME)),
                         Text(p.status, style=STATUS_STYLES.get(p.status, "")), str(p.queries) if p.last_activity
                         else "-", idle_text(p, state.now), key=p.player)
        if state.players:
            self.move_cursor(row=max(0, min(row, len(state.players) - 1)))

    @property
    def highlighted(self) -> str | None:
        """The player on the highlighted row."""
        if self.row_count == 0 or self.cursor_row < 0:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return None if key is None else str(key)


class StandingsTable(Vertical):
    """Who handed in: in the order they did while the round runs (no scores: nobody learns from the room how
    anyone did while others still play), ranked by score once the round has ended."""

    DEFAULT_CSS = """
    StandingsTable {
        height: 1fr;
        border: round $secondary;
        border-title-style: bold;
    }
    StandingsTable > DataTable {
        height: 1fr;
        text-style: bold;
    }
    StandingsTable > #standings-note {
        height: auto;
        color: $text-muted;
        padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        table: DataTable[Any] = DataTable(id="standings-table", cursor_type="none", zebra_stripes=True)
        yield table
        yield Static("", id="standings-note")

    def on_mount(self) -> None:
        self.border_title = "Standings"

    def show(self, state: RoomState) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column("#", key="rank")
        table.add_column("Player", key="player")
        table.add_column("Team", key="team")
        table.add_column("Time", key="time")
        table.add_column("Queries", key="queries")
        table.add_column("Score" if state.scores_shown else "Handed in", key="score")
        for s in state.standings:
            if state.scores_shown:
                last = "-" if s.score is None else f"{s.score:.1f}"
            else:
                at = next((p.handed_in_at for p in state.players if p.player == s.player), None)
                last = "-" if at is None or state.started is None else "+" + clock_text(max(0.0, at - state.started))
            table.add_row(str(s.rank), literal(one_line(s.label, MAX_NAME)), literal(one_line(s.team, MAX_NAME)),
                          "-" if s.taken_s is None else clock_text(s.taken_s), str(s.queries), last)
        note = self.query_one("#standings-note", Static)
        if state.round is None:
            note.update("Hand-ins show here as players submit.")
        elif state.scores_shown:
            note.update("Scores as collected when the round ended; the leaderboard re-scores and ranks teams.")
        else:
            note.update("Scores show here when the round ends, as the players' debriefs open.")
