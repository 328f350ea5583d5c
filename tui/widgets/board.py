"""The hypothesis board: the player's draft ranking with confidences, pinned evidence and notes.

Columns are fitted to the width it has (no horizontal scrolling): the short ones first (rank, label,
confidence, bar), then the title and the note share what is left, each cut with an ellipsis only when
it must be (n opens the note in full). What a key did (a pin, a refusal) is said in the board's own
bottom border for a few seconds rather than in a toast, which would cover these columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from tui.actions import bindings
from tui.board import STEP, Board, Evidence
from tui.text import literal, one_line

FLASH_S = 4.0
"""How long the board's bottom border shows what a key did before the key hints come back."""

FIXED_WIDTHS = {"rank": 2, "label": 2, "conf": 4, "bar": 10}
NARROW_BAR_BELOW = 100
"""Below this many columns the confidence bar is 5 wide (a block per 20%) to leave the title room."""
MIN_TITLE, MIN_NOTE = 12, 4
MAX_TITLE_LINES = 3
"""A title that does not fit its column wraps onto up to this many lines, when the board has the rows."""


class HypothesisBoard(DataTable[Any]):
    """A row per hypothesis, best first. Keys change the draft (`board`); pins and notes are
    requests the screen records through the session."""

    BINDINGS = bindings("board")
    ALLOW_MAXIMIZE = True

    class Changed(Message):
        """The draft order or confidences changed."""

    class PinRequested(Message):
        def __init__(self, hypothesis: str, stance: str) -> None:
            super().__init__()
            self.hypothesis = hypothesis
            self.stance = stance

    class UnpinRequested(Message):
        def __init__(self, hypothesis: str) -> None:
            super().__init__()
            self.hypothesis = hypothesis

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
        self.hint = ""
        """The bottom border's key hints, shown when no flash is."""
        self.flashed = ""
        self._flash_timer: Any = None
        self._widths: tuple[int, int, int, int] | None = None
        self._height = -1
        self._drawn: tuple[Any, ...] | None = None
        """What the table shows (HypothesisBoard._drawing), to leave it be when a redraw would not change it."""

    def on_mount(self) -> None:
        self.redraw()

    def on_resize(self) -> None:
        height = self.scrollable_content_region.height
        if self._fit() != self._widths or height != self._height:
            self._height = height
            self.redraw()

    def _marks(self, item_id: str) -> Text:
        ev = self.evidence.get(item_id, Evidence())
        marks = Text(end="")
        for q in ev.supports:
            marks.append(f"+Q{q} ", style="bold green")
        for q in ev.refutes:
            marks.append(f"−Q{q} ", style="bold red")
        marks.rstrip()
        return marks

    def _fit(self) -> tuple[int, int, int, int]:
        """(title, evidence, note, bar) widths that fill the board's width without scrolling."""
        # before its first layout (on_mount) the board has no size: it spans the screen's width in every
        # layout (servedrill.tcss), so fitting to that draws at once what the layout will keep (a first
        # drawing for another width was redrawn on the first Resize, and resized every pane around it)
        width = (self.scrollable_content_region.width or self.size.width
                 or self.app.size.width - self.styles.gutter.width or 80)
        bar = FIXED_WIDTHS["bar"] if width >= NARROW_BAR_BELOW else FIXED_WIDTHS["bar"] // 2
        evidence = max([8] + [len(self._marks(i.id)) for i in self.board.items])
        spare = width - sum(FIXED_WIDTHS.values()) - (bar - FIXED_WIDTHS["bar"]) - evidence \
            - 2 * (len(FIXED_WIDTHS) + 3)
        titles = max([10] + [len(one_line(i.title, 200)) for i in self.board.items])
        notes = max([0] + [len(one_line(self.notes.get(i.id, ""), 500)) for i in self.board.items])
        if notes == 0:
            title = max(MIN_TITLE, min(titles, spare - MIN_NOTE))
        else:
            # the title first, but never more than leaves a useful note; the note gets all the rest
            title = max(MIN_TITLE, min(titles, spare - min(notes, max(MIN_NOTE, spare // 3))))
        note = max(MIN_NOTE, spare - title)
        return title, evidence, note, bar

    def _title_lines(self, width: int) -> list[list[str]]:
        """Each title as the lines it shows on: whole, wrapped to `width` on up to MAX_TITLE_LINES lines
        when the board has the rows for it (the words that tell two hypotheses apart are often the last
        ones), else cut on one line."""
        import textwrap

        flat = [one_line(i.title, 400) for i in self.board.items]
        wrapped = [textwrap.wrap(t, width) or [""] for t in flat]
        for lines in wrapped:
            if len(lines) > MAX_TITLE_LINES:
                del lines[MAX_TITLE_LINES:]
                lines[-1] = lines[-1][:width - 1] + "…"  # more follows
        if sum(len(lines) for lines in wrapped) > self._rows_available():
            return [[one_line(t, width)] for t in flat]
        return wrapped

    def _rows_available(self) -> int:
        """Rows the board may show below its header: its height when the layout fixes it (the compact
        board pane), else what its max-height leaves (the wide layout's board grows to it)."""
        height, most = self.styles.height, self.styles.max_height
        if height is not None and not height.is_auto:
            return self.scrollable_content_region.height - 1
        if most is not None and most.is_cells:
            return int(most.value) - self.styles.gutter.height - 1
        return MAX_TITLE_LINES * len(self.board.items)

    def set_hint(self, hint: str) -> None:
        self.hint = hint
        if not self.flashed:
            self.border_subtitle = hint

    def flash(self, text: str, error: bool = False) -> None:
        """Say what a key did, in the bottom border, for FLASH_S seconds (literal text)."""
        from tui.text import template

        self.flashed = text
        self.border_subtitle = template("[b $text-error]$t[/]" if error else "[b]$t[/]", t=text)
        if self._flash_timer is not None:
            self._flash_timer.stop()
        self._flash_timer = self.set_timer(FLASH_S, self._unflash)

    def _unflash(self) -> None:
        self.flashed = ""
        self._flash_timer = None
        self.border_subtitle = self.hint

    def load(self, board: Board, evidence: Mapping[str, Evidence], notes: Mapping[str, str]) -> None:
        self.board = board
        self.evidence = dict(evidence)
        self.notes = dict(notes)
        self.redraw()

    @property
    def selected(self) -> int:
        return max(0, min(self.cursor_row, len(self.board.items) - 1))

    def redraw(self, cursor: int | None = None) -> None:
        """Fill the table from the board (keeping the cursor's row, or moving it to `cursor`). A drawing
        identical to the one showing is kept as it is: refilling it would only make the table render every
        row again (its auto height settling makes the layout resize it once more, to the same columns)."""
        keep = self.cursor_row if cursor is None else cursor
        self._widths = self._fit()
        columns, rows = drawing = self._drawing(self._widths)
        if drawing != self._drawn:
            self._drawn = drawing
            self.clear(columns=True)
            for label, key, width in columns:
                self.add_column(label, key=key, width=width)
            for key, height, cells in rows:
                self.add_row(*cells, key=key, height=height)
        elif cursor is None:
            return  # the same rows under the same cursor
        if self.board.items:
            self.move_cursor(row=max(0, min(keep, len(self.board.items) - 1)))

    def _drawing(self, widths: tuple[int, int, int, int]) -> tuple[tuple[tuple[str, str, int], ...],
                                                                  tuple[tuple[str, int, tuple[Any, ...]], ...]]:
        """The table for `widths`: its columns (label, key, width) and rows (key, height, cells)."""
        title_w, evidence_w, note_w, bar_w = widths
        step = 100 // bar_w  # percent per full block
        columns = (("#", "rank", FIXED_WIDTHS["rank"]), ("", "label", FIXED_WIDTHS["label"]),
                   ("Conf", "conf", FIXED_WIDTHS["conf"]), ("", "bar", bar_w), ("Hypothesis", "title", title_w),
                   ("Evidence", "evidence", evidence_w), ("Note", "note", note_w))
        titles = self._title_lines(title_w)
        rows = []
        for rank, item in enumerate(self.board.items, start=1):
            bar = "█" * (item.confidence // step) + ("▌" if item.confidence % step >= step // 2 else "")
            note = self.notes.get(item.id, "")
            lines = titles[rank - 1]
            # Text, never str: a DataTable reads str cells as markup (Texts compare by text and spans)
            cells = (str(rank), literal(item.label, 4, style="bold"), f"{item.confidence:>3}%", bar,
                     literal("\n".join(lines), multiline=True, lines=MAX_TITLE_LINES),
                     self._marks(item.id), literal(one_line(note, note_w)))
            rows.append((item.id, len(lines), cells))
        return columns, tuple(rows)

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

    def action_unpin(self) -> None:
        if self.board.items:
            self.post_message(self.UnpinRequested(self.board.items[self.selected].id))

    def action_first(self) -> None:
        if self.board.items:
            self.move_cursor(row=0)

    def action_last(self) -> None:
        if self.board.items:
            self.move_cursor(row=len(self.board.items) - 1)

    def action_note(self) -> None:
        if self.board.items:
            item = self.board.items[self.selected]
            self.post_message(self.NoteRequested(item.id, item.name))
