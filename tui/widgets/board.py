"""The hypothesis board: the player's draft ranking with confidences, pinned evidence and notes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tui.actions import bindings
from tui.board import STEP, Board, Evidence
from tui.text import literal, one_line

NOTE_CHARS = 29
"""A note is cut to this on the board; n opens it in full."""


class HypothesisBoard(DataTable[Any]):
    """A row per hypothesis, best first. Keys change the draft (`board`); pins and notes are
    requests the screen records through the session."""

    BINDINGS = bindings("board")

    class Changed(Message):
        """The draft order or confidences changed."""

    class PinRequested(Message):
        def __init__(self, hypothesis: str, stance: str) -> None:
            super().__init__()
            self.hypothesis = hypothesis
            self.stance = stance

    class NoteRequested(Message):
        """`hypothesis` is the internal id (for the session); `title` what the dialog shows."""

        def __init__(self, hypothesis: str, title: str) -> None:
            super().__init__()
            self.hypothesis = hypothesis
            self.title = title

    def __init__(self, board: Board, evidence: Mapping[str, Evidence], notes: Mapping[str, str],
                 **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.board = board
        self.evidence = dict(evidence)
        self.notes = dict(notes)

    def on_mount(self) -> None:
        self.add_column("#", key="rank", width=2)
        self.add_column("", key="label", width=2)
        self.add_column("Hypothesis", key="title")
        self.add_column("Conf", key="conf", width=5)
        self.add_column("", key="bar", width=10)
        self.add_column("Evidence", key="evidence")
        self.add_column("Note", key="note")
        self.redraw()

    def load(self, board: Board, evidence: Mapping[str, Evidence], notes: Mapping[str, str]) -> None:
        self.board = board
        self.evidence = dict(evidence)
        self.notes = dict(notes)
        self.redraw()

    @property
    def selected(self) -> int:
        return max(0, min(self.cursor_row, len(self.board.items) - 1))

    def redraw(self, cursor: int | None = None) -> None:
        keep = self.cursor_row if cursor is None else cursor
        self.clear()
        for rank, item in enumerate(self.board.items, start=1):
            ev = self.evidence.get(item.id, Evidence())
            marks = Text()
            for q in ev.supports:
                marks.append(f"+Q{q} ", style="bold green")
            for q in ev.refutes:
                marks.append(f"−Q{q} ", style="bold red")
            bar = "█" * (item.confidence // 10) + ("▌" if item.confidence % 10 >= 5 else "")
            note = self.notes.get(item.id, "")
            # Text, never str: a DataTable reads str cells as markup
            self.add_row(str(rank), literal(item.label, 4, style="bold"), literal(one_line(item.title, 200)),
                         f"{item.confidence:>3}%", bar, marks, literal(one_line(note, NOTE_CHARS)), key=item.id)
        if self.board.items:
            self.move_cursor(row=max(0, min(keep, len(self.board.items) - 1)))

    def _move(self, delta: int) -> None:
        if not self.board.items:
            return
        target = self.board.move(self.selected, delta)
        self.redraw(cursor=target)
        self.post_message(self.Changed())

    def action_move_up(self) -> None:
        self._move(-1)

    def action_move_down(self) -> None:
        self._move(+1)

    def _adjust(self, delta: int) -> None:
        if not self.board.items:
            return
        self.board.adjust(self.selected, delta)
        self.redraw()
        self.post_message(self.Changed())

    def action_more(self) -> None:
        self._adjust(+STEP)

    def action_less(self) -> None:
        self._adjust(-STEP)

    def action_normalise(self) -> None:
        current = self.board.items[self.selected].id if self.board.items else None
        self.board = self.board.normalised()
        index = next((i for i, item in enumerate(self.board.items) if item.id == current), 0)
        self.redraw(cursor=index)
        self.post_message(self.Changed())

    def _request_pin(self, stance: str) -> None:
        if self.board.items:
            self.post_message(self.PinRequested(self.board.items[self.selected].id, stance))

    def action_pin_supports(self) -> None:
        self._request_pin("supports")

    def action_pin_refutes(self) -> None:
        self._request_pin("refutes")

    def action_note(self) -> None:
        if self.board.items:
            item = self.board.items[self.selected]
            self.post_message(self.NoteRequested(item.id, item.name))
