"""The held debrief: a player who handed in during a game-day round whose plan holds debriefs until the round
ends sees "Handed in. The debrief opens when the round ends at HH:MM", and the debrief opens by itself once
the facilitator ends the round. Whether it is held, and the sentence, are the game's (`game.api.debrief_hold`);
this screen asks again once a second on the app's clock (`polls` counts the asks: tests wait on it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static

from game import api
from tui.app_api import GameApp, game_app
from tui.text import one_line

if TYPE_CHECKING:
    from game.api import DebriefHold

POLL_S = 1.0
"""How often the hold is asked again (one small state file read)."""


class HeldDebriefScreen(Screen[None]):
    """Handed in; the debrief waits for the end of the round."""

    DEFAULT_CSS = """
    HeldDebriefScreen { align: center middle; }
    HeldDebriefScreen #held-box { width: 72; max-width: 100%; height: auto; border: round $accent;
                                  padding: 1 2; }
    HeldDebriefScreen #held-box Static { width: 100%; }
    HeldDebriefScreen #held-title { text-style: bold; }
    HeldDebriefScreen #held-note { color: $text-muted; margin-top: 1; }
    """

    def __init__(self, hold: DebriefHold) -> None:
        super().__init__()
        self.hold = hold
        self.polls = 0

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    def compose(self) -> ComposeResult:
        with Vertical(id="held-box"):
            yield Static(f"Round {self.hold.round}: handed in", id="held-title", markup=False)
            yield Static(one_line(self.hold.text, 300), id="held-text", markup=False)
            yield Static("This screen opens the debrief by itself; you can leave it open.", id="held-note",
                         markup=False)

    def on_mount(self) -> None:
        self.set_interval(POLL_S, self.check)
        self.call_after_refresh(self.served.mark, "debrief-held")

    def check(self) -> None:
        """Ask again; open the debrief once it is no longer held."""
        play = self.served.play
        if play is None or play.session is None:
            return
        self.polls += 1
        hold = api.debrief_hold(play.session, self.served.clock())
        if hold is None:
            self.served.show_debrief()
        elif hold.text != self.hold.text:
            self.hold = hold
            self.query_one("#held-text", Static).update(one_line(hold.text, 300))
