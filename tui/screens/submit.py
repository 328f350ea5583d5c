"""Submit: confirm the ranking and confidences. Pins count towards the score, so the dialog says how
many there are and what they are worth."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui.actions import bindings
from tui.app_api import GameApp, game_app
from tui.board import Board
from tui.text import literal, one_line, template


def ranking_table(board: Board) -> Table:
    """The ranking, confidence before the title so it is never cut off; titles wrap to the width."""
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True, header_style="bold")
    table.add_column("#", width=2, no_wrap=True)
    table.add_column("", width=2, no_wrap=True)
    table.add_column("Conf", width=4, justify="right", no_wrap=True)
    table.add_column("Hypothesis", ratio=1)
    for i, item in enumerate(board.items, start=1):
        # Text cells: the titles are the incident file's words (never markup)
        table.add_row(str(i), literal(item.label, 4, style="bold"), f"{item.confidence}%",
                      literal(one_line(item.title, 200)))
    return table


def pins_text(events: Iterable[Any]) -> str:
    """What the dialog says about pins: how many there are, and that they count both ways."""
    from game import api

    n = api.pin_count(events)
    have = (f"You pinned {n} result{'s' if n != 1 else ''}." if n
            else "You pinned no results (on the board, s or x pins the result on screen to a hypothesis).")
    return (f"{have} Pins count: a pin earns points when its query's result really points that way "
            "(supports or refutes that hypothesis), and costs points when it points the other way.")


class SubmitScreen(ModalScreen[bool]):
    """Dismisses with True once the session accepted the submission."""

    BINDINGS = bindings("submit")

    def __init__(self, board: Board) -> None:
        super().__init__()
        self.board = board

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    def compose(self) -> ComposeResult:
        play = self.served.play
        assert play is not None and play.session is not None  # submitting is from the workspace
        session = play.session
        with Vertical(id="submit-dialog", classes="dialog"):
            yield Label("[b]Submit your diagnosis[/b]")
            with VerticalScroll(id="submit-scroll"):
                yield Static("", id="submit-ranking")
                yield Static("", id="submit-total")
                yield Static(pins_text(session.events), id="submit-pins")
                yield Static("", id="submit-error")
            # one-line buttons: at 80x24 bordered ones fell off the dialog
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit ^s", id="submit-confirm", variant="primary", compact=True)
                yield Button("Normalise ^n", id="submit-normalise", compact=True)
                yield Button("Back Esc", id="submit-cancel", compact=True)

    def on_mount(self) -> None:
        self._fill()

    @property
    def ranking_text(self) -> str:
        """The ranking as shown, in plain text (for tests)."""
        import io

        from rich.console import Console

        console = Console(width=100, record=True, file=io.StringIO())
        console.print(ranking_table(self.board))
        return console.export_text()

    def _fill(self) -> None:
        self.query_one("#submit-ranking", Static).update(ranking_table(self.board))
        problems = self.board.problems()
        total = self.query_one("#submit-total", Static)
        if problems:
            total.update(template("[b red]$problems[/]\nctrl+n normalises: sum to 100 and order by confidence.",
                                  problems=one_line("; ".join(problems), 400)))
        else:
            total.update(f"Sum {self.board.total}%, ordered by confidence ✓")

    def action_normalise(self) -> None:
        self.board = self.board.normalised()
        self._fill()

    def action_confirm(self) -> None:
        from game.api import SessionError

        try:
            assert self.served.play is not None
            self.served.play.game.submit(self.board.ranking())
        except SessionError as exc:
            self.query_one("#submit-error", Static).update(template("[b red]$error[/]", error=one_line(str(exc), 400)))
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        {"submit-confirm": self.action_confirm, "submit-normalise": self.action_normalise,
         "submit-cancel": self.action_cancel}[str(event.button.id)]()
