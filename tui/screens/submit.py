"""Submit: confirm the ranking and confidences. Pins count towards the score, so the dialog says how
many there are and what they are worth."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Label, Static

from tui.actions import bindings
from tui.board import Board
from tui.text import literal, one_line, template

if TYPE_CHECKING:
    from tui.app import ServedrillApp


def pins_text(events: Iterable[Any]) -> str:
    """What the dialog says about pins: how many there are, and that they count both ways."""
    pins = {(e.data.get("query"), e.data.get("hypothesis"), e.data.get("stance"))
            for e in events if e.kind == "pin"}
    n = len(pins)
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
    def served(self) -> ServedrillApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        session = self.served.play.session  # type: ignore[union-attr]
        with Vertical(id="submit-dialog", classes="dialog"):
            yield Label("[b]Submit your diagnosis[/b]")
            table: DataTable[str] = DataTable(id="submit-ranking", cursor_type="none")
            yield table
            yield Static("", id="submit-total")
            yield Static(pins_text(session.events), id="submit-pins")
            yield Static("", id="submit-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit (ctrl+s)", id="submit-confirm", variant="primary")
                yield Button("Normalise (ctrl+n)", id="submit-normalise")
                yield Button("Back (esc)", id="submit-cancel")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("#", "", "Hypothesis", "Confidence")
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for i, item in enumerate(self.board.items, start=1):
            # Text cells: a DataTable reads a str cell as markup
            table.add_row(str(i), literal(item.label, 4), literal(one_line(item.title, 200)), f"{item.confidence}%")
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
        from game.session import SessionError

        try:
            self.served.play.session.submit(self.board.ranking())  # type: ignore[union-attr]
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
