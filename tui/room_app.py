"""The live room as its own app (`servedrill gameday room PLAN`): tui/screens/room.py on a terminal of its own,
the facilitator's (a projector's). It shares the game's stylesheet (the dialogs), the key table's "app" keys
(help, quit, palette) and puts the room's keys in the command palette."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual.app import App, SystemCommand
from textual.screen import Screen

from tui.actions import bindings, commands

if TYPE_CHECKING:
    from game.gameday.plan import GameDay

CSS_FILE = Path(__file__).with_name("servedrill.tcss")


class RoomApp(App[None]):
    """The live room of `gameday`, reading the data folders `folders`; `clock` and `collect_every` as
    RoomScreen takes them; `steady`: the plain dark theme (snapshots)."""

    CSS_PATH = CSS_FILE
    TITLE = "servedrill live room"
    BINDINGS = bindings("app")
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (110, "-wide")]  # type: ignore[misc]

    def __init__(self, gameday: GameDay, folders: Sequence[Path], *, clock: Callable[[], float] = time.time,
                 collect_every: float | None = 30.0, refresh_every: float = 2.0, steady: bool = False) -> None:
        super().__init__()
        self.gameday = gameday
        self.folders = list(folders)
        self.clock = clock
        self.collect_every = collect_every
        self.refresh_every = refresh_every
        self.steady = steady

    def on_mount(self) -> None:
        from tui.screens.room import RoomScreen

        if self.steady:
            self.theme = "textual-dark"
        self.push_screen(RoomScreen(self.gameday, self.folders, clock=self.clock, collect_every=self.collect_every,
                                    refresh_every=self.refresh_every))

    def action_help(self) -> None:
        from tui.screens.dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(["room"]))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        from tui.screens.room import RoomScreen

        if isinstance(screen, RoomScreen):
            for command in commands("room"):
                if command.palette:
                    yield SystemCommand(command.title, command.help, _runner(screen, command.action))
        yield SystemCommand("Help", "Every key of the live room", self.action_help)


def _runner(target: Any, action: str) -> Callable[[], Any]:
    async def run() -> None:
        await target.run_action(action)

    return run


def run(gameday: GameDay, folders: Sequence[Path]) -> None:
    """Open the live room in this terminal until the facilitator quits (ctrl+q)."""
    RoomApp(gameday, folders).run()
