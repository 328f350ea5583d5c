"""The facilitator's live room (issue 31): a game day's running round on a projector, and the keys to run it.

It shows the round and its incident's title (the symptom, as players were paged), the time left in big digits,
every roster player's status (not joined, investigating, handed in, timed out), queries used and time since
their last activity, and the standings. Everything shown is `game.api.room_state`'s snapshot, read in a worker
thread every REFRESH_S seconds (the clock itself ticks every second from the last snapshot); what the room may
show is decided there: no score and nothing of the answer while the round runs.

Keys (tui/actions.py, scope "room"): s start the next round, e end the running one, b broadcast to every
player, m a message to the highlighted player, h the incident's next hint to them, n end and start the next.
Each operation is a `game.api` call (start_round, end_round, broadcast, send_to_player), run in a worker;
the result is a notification. `servedrill gameday room PLAN` opens it (tui/room_app.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label

from tui.actions import bindings
from tui.text import literal, one_line, template
from tui.widgets.keybar import KeyBar
from tui.widgets.room import RoomClock, RoomHeader, RosterTable, StandingsTable

if TYPE_CHECKING:
    from game.api import RoomState
    from game.gameday.plan import GameDay

__all__ = ["COLLECT_S", "REFRESH_S", "RoomScreen", "RoomTextScreen"]

REFRESH_S = 2.0
"""Seconds between two reads of the players' games (the big clock ticks every second regardless)."""
COLLECT_S = 30.0
"""Seconds between two collections of a running round's hand-ins (as the console's), so that ending it is
quick; None in the screen's arguments: only at the end."""
MAX_MESSAGE_CHARS = 2000
"""What the text box takes; the game refuses longer items anyway (game.gameday.gm)."""


class RoomRead(Message):
    """A snapshot of the room (from the worker), or why it could not be read."""

    def __init__(self, state: RoomState | None, error: str | None = None) -> None:
        super().__init__()
        self.state = state
        self.error = error


class RoomDone(Message):
    """An operation finished: what to tell the facilitator, and how (notify's severity)."""

    def __init__(self, text: str, severity: str = "information") -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class RoomTextScreen(ModalScreen[str | None]):
    """One line of text to send (a broadcast, a message to one player); Enter sends, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="room-text-dialog", classes="dialog"):
            yield Label(literal(self.question, 300))
            yield Input(placeholder="the message (Enter sends)", id="room-text", max_length=MAX_MESSAGE_CHARS)
            yield Label("Enter sends · Escape cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _sent(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text:
            self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class RoomScreen(Screen[None]):
    """The live room of `gameday`, collecting from the data folders `folders`; `clock` gives epoch seconds
    (tests drive it); `collect_every` seconds between collections while a round runs (None: only at its end)."""

    DEFAULT_CSS = """
    RoomScreen #room-body {
        height: 1fr;
    }
    RoomScreen.-narrow #room-body {
        layout: vertical;
    }
    RoomScreen.-wide #room-body {
        layout: horizontal;
    }
    RoomScreen.-wide RosterTable {
        width: 3fr;
    }
    RoomScreen.-wide StandingsTable {
        width: 2fr;
    }
    RoomScreen #room-problem {
        height: auto;
        color: $error;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings("room")

    def __init__(self, gameday: GameDay, folders: Sequence[Path], *, clock: Callable[[], float] = time.time,
                 collect_every: float | None = COLLECT_S, refresh_every: float = REFRESH_S) -> None:
        super().__init__()
        self.gameday = gameday
        self.folders = list(folders)
        self.clock = clock
        self.collect_every = collect_every
        self.refresh_every = refresh_every
        self.state: RoomState | None = None
        self.reads = 0
        """Snapshots shown so far (tests wait on it)."""
        self.last_collect = 0.0
        self.operating = threading.Lock()

    def compose(self) -> ComposeResult:
        yield RoomHeader(literal(one_line(self.gameday.event, 60)), id="room-header")
        yield RoomClock(id="room-clock")
        yield Label("", id="room-problem")
        with Horizontal(id="room-body"):
            yield RosterTable(id="room-roster")
            yield StandingsTable(id="room-standings")
        yield KeyBar("room")

    def on_mount(self) -> None:
        self.query_one(RosterTable).focus()
        self.set_interval(1.0, self._tick)
        self.set_interval(self.refresh_every, self.action_refresh)
        self.action_refresh()

    # ------------------------------------------------------------ reading

    def action_refresh(self) -> None:
        self._read(self.clock())

    @work(thread=True, exclusive=True, group="room-read", exit_on_error=False)
    def _read(self, now: float) -> None:
        from game import api

        try:
            state = api.room_state(self.gameday, self.folders, now)
        except OSError as exc:
            self.post_message(RoomRead(None, f"cannot read the game day's files: {exc.strerror or exc}"))
            return
        self.post_message(RoomRead(state))

    def on_room_read(self, message: RoomRead) -> None:
        problem = self.query_one("#room-problem", Label)
        problem.update(template("$error", error=message.error) if message.error else "")
        if message.state is None:
            return
        self.state = message.state
        self.query_one(RoomHeader).show(message.state)
        self.query_one(RosterTable).show(message.state)
        self.query_one(StandingsTable).show(message.state)
        self._tick()
        self.reads += 1
        if (self.collect_every is not None and message.state.running
                and message.state.now - self.last_collect >= self.collect_every):
            self.last_collect = message.state.now
            self._collect()

    def left_s(self) -> float | None:
        """Seconds left now: the snapshot's, brought forward to the screen's clock while the round runs."""
        state = self.state
        if state is None or state.left_s is None:
            return None
        return state.left_s - (self.clock() - state.now) if state.running else state.left_s

    def _tick(self) -> None:
        if self.state is not None:
            self.query_one(RoomClock).show(self.state, self.left_s())

    @work(thread=True, exclusive=True, group="room-collect", exit_on_error=False)
    def _collect(self) -> None:
        from game import api

        times = api.round_times(self.gameday)
        rnd = api.running_round(self.gameday, times)
        if rnd is None:
            return
        try:
            api.collect_round(self.gameday, rnd, self.folders, started=times[rnd.number][0])
        except OSError as exc:
            self.post_message(RoomDone(f"collecting failed: {exc.strerror or exc}", "error"))

    def on_room_done(self, message: RoomDone) -> None:
        self.notify(message.text, severity=message.severity, markup=False)  # type: ignore[arg-type]
        self.action_refresh()

    # ------------------------------------------------------------ the facilitator's keys

    def action_start_round(self) -> None:
        self._operate("start")

    def action_end_round(self) -> None:
        state = self.state
        if state is None or not state.running:
            self.notify("No round is running.", severity="warning")
            return
        self._confirm(f"End round {state.round} now? Hand-ins are collected and the scores show.", "end")

    def action_next_round(self) -> None:
        state = self.state
        if state is not None and state.running:
            self._confirm(f"End round {state.round} and start round {state.next_number}?"
                          if state.next_number else f"End round {state.round}? (It is the last.)", "next")
            return
        self._operate("start")

    def _confirm(self, question: str, what: str) -> None:
        from tui.screens.dialogs import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.notify("Collecting and scoring the round's hand-ins…", markup=False)
                self._operate(what)

        self.app.push_screen(ConfirmScreen(question), answered)

    def action_broadcast(self) -> None:
        if not self._round_running():
            return

        def typed(text: str | None) -> None:
            if text:
                self._operate("broadcast", text=text)

        self.app.push_screen(RoomTextScreen("A message to every player in the round:"), typed)

    def action_message_player(self) -> None:
        player = self._player()
        if player is None:
            return

        def typed(text: str | None) -> None:
            if text:
                self._operate("message", text=text, player=player)

        self.app.push_screen(RoomTextScreen(f"A message to {one_line(player, 40)} only:"), typed)

    def action_hint_player(self) -> None:
        from tui.screens.dialogs import ConfirmScreen

        player = self._player()
        if player is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._operate("hint", player=player)

        self.app.push_screen(ConfirmScreen(f"Send {one_line(player, 40)} the incident's next hint? It costs them "
                                           "the points the incident says."), answered)

    def _round_running(self) -> bool:
        if self.state is None or not self.state.running:
            self.notify("No round is running: s starts the next one.", severity="warning")
            return False
        return True

    def _player(self) -> str | None:
        if not self._round_running():
            return None
        player = self.query_one(RosterTable).highlighted
        if player is None:
            self.notify("Choose a player in the list first (up and down).", severity="warning")
        return player

    @work(thread=True, group="room-operate", exit_on_error=False)
    def _operate(self, what: str, text: str = "", player: str = "") -> None:
        """One facilitator operation through the game API, one at a time (never two rounds started by two quick
        keys); its outcome is posted as RoomDone."""
        from game import api

        try:
            with self.operating:
                said = self._outcome(what, text, player)
            self.post_message(RoomDone(*said))
        except (api.RoomError, api.GMError) as exc:
            self.post_message(RoomDone(str(exc), "warning"))
        except OSError as exc:
            self.post_message(RoomDone(f"{exc.filename or ''} {exc.strerror or exc}".strip(), "error"))

    def _outcome(self, what: str, text: str, player: str) -> tuple[str, str]:
        from game import api as game_api

        gd, folders = self.gameday, self.folders
        if what == "start":
            rnd, replay = game_api.start_round(gd, None, self.clock())
            return f"Round {rnd.number} started{' again' if replay else ''}: {one_line(rnd.title, 80)}", "information"
        if what in ("end", "next"):
            rnd, got = game_api.end_round(gd, folders, self.clock())
            said = f"Round {rnd.number} ended: {len(got.files)}/{len(gd.hand_ins(rnd))} handed in"
            if what == "next" and game_api.next_round(gd, game_api.round_times(gd)) is not None:
                nxt, _ = game_api.start_round(gd, None, self.clock())
                said += f"; round {nxt.number} started"
            return said, "information"
        if what == "broadcast":
            times = game_api.round_times(gd)
            running = game_api.running_round(gd, times)
            if running is None:
                raise game_api.RoomError("no round is running")
            done = game_api.broadcast(gd, running, folders, text, started=times[running.number][0])
            said = f"Sent to {len(done.delivered)} player(s)"
            if done.not_playing:
                said += f"; no game yet: {', '.join(done.not_playing)}"
            if done.refused:
                said += f"; refused for {', '.join(sorted(done.refused))}"
            return said, "warning" if done.refused else "information"
        kind = "hint" if what == "hint" else "message"
        game_api.send_to_player(gd, folders, player, kind, text or None)
        return f"{'Hint' if kind == 'hint' else 'Message'} sent to {player}", "information"
