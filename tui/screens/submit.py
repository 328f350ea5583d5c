"""Submit: confirm the ranking and confidences, name the query that separates the top two."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Label, Select, Static

from tui.actions import bindings
from tui.board import Board, evidence_by_hypothesis
from tui.formatting import one_line

if TYPE_CHECKING:
    from tui.app import ServedrillApp


def discriminator_choices(queries: list[Any]) -> list[tuple[str, int]]:
    """(label, Qn) for each query that ran, newest first."""
    ok = [q.data for q in queries if q.data.get("ok")]
    return [(f"Q{d['index']}: {one_line(str(d.get('sql', '')), 70)}", int(d["index"])) for d in reversed(ok)]


def default_discriminator(board: Board, events: list[Any], choices: list[tuple[str, int]]) -> int | None:
    """The newest query pinned as supporting the top hypothesis, if it is a choice."""
    if not board.items:
        return None
    pinned = evidence_by_hypothesis(events).get(board.items[0].id)
    valid = {n for _, n in choices}
    return next((q for q in reversed(pinned.supports) if q in valid), None) if pinned else None


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
        choices = discriminator_choices(session.queries)
        chosen = default_discriminator(self.board, session.events, choices)
        with Vertical(id="submit-dialog", classes="dialog"):
            yield Label("[b]Submit your diagnosis[/b]")
            table: DataTable[str] = DataTable(id="submit-ranking", cursor_type="none")
            yield table
            yield Static("", id="submit-total")
            yield Label("Which query separates your top two hypotheses?")
            yield Select(choices, prompt="(none named)", allow_blank=True, id="submit-discriminator",
                         value=chosen if chosen is not None else Select.NULL)
            yield Static("", id="submit-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Submit (ctrl+s)", id="submit-confirm", variant="primary")
                yield Button("Normalise (ctrl+n)", id="submit-normalise")
                yield Button("Back (esc)", id="submit-cancel")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("#", "Hypothesis", "Confidence")
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for i, item in enumerate(self.board.items, start=1):
            table.add_row(str(i), item.title, f"{item.confidence}%")
        problems = self.board.problems()
        total = self.query_one("#submit-total", Static)
        if problems:
            total.update(f"[b red]{'; '.join(problems)}[/]\n"
                         "ctrl+n normalises: sum to 100 and order by confidence.")
        else:
            total.update(f"Sum {self.board.total}%, ordered by confidence ✓")

    def action_normalise(self) -> None:
        self.board = self.board.normalised()
        self._fill()

    def action_confirm(self) -> None:
        from game.session import SessionError

        value = self.query_one(Select).value
        discriminator = value if isinstance(value, int) else None
        try:
            self.served.play.session.submit(self.board.ranking(), discriminator)  # type: ignore[union-attr]
        except SessionError as exc:
            self.query_one("#submit-error", Static).update(f"[b red]{exc}[/]")
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        {"submit-confirm": self.action_confirm, "submit-normalise": self.action_normalise,
         "submit-cancel": self.action_cancel}[str(event.button.id)]()
