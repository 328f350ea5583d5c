"""The SQL editor: a code editor with query history and table/column completion."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.message import Message
from textual.theme import Theme
from textual.widgets import OptionList
from textual.widgets.option_list import Option
from textual.widgets.text_area import LanguageDoesNotExist

from tui import highlight_cache
from tui.actions import bindings
from tui.completion import Completion, complete
from tui.text import editable, one_line
from tui.widgets.safe_text import SafeTextArea

highlight_cache.install()  # every editor of the process shares one compiled highlight query


class CompletionMenu(OptionList):
    """The candidates when more than one name matches; floats over the screen near the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "dismiss", "Close")]

    class Chosen(Message):
        def __init__(self, text: str | None) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.candidates: list[str] = []

    def offer(self, candidates: Sequence[str]) -> None:
        """Show `candidates` (names from the catalog), each as literal text."""
        self.candidates = list(candidates)
        self.clear_options()
        self.add_options([Option(Text(one_line(c, 80)), id=f"c{i}") for i, c in enumerate(self.candidates)])

    def action_dismiss(self) -> None:
        self.post_message(self.Chosen(None))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        index = int((event.option.id or "c0")[1:])
        self.post_message(self.Chosen(self.candidates[index] if index < len(self.candidates) else None))

    def on_blur(self) -> None:
        self.display = False


class SqlEditor(SafeTextArea):
    """TextArea for SQL. ctrl+up and ctrl+down walk the history, and nothing else does: the arrows only
    move the cursor, so a stray Down never replaces what the player wrote. Tab completes a name or
    indents when there is nothing to complete."""

    BINDINGS = bindings("editor")

    class CompletionOffered(Message):
        """Several candidates: the screen shows a menu. `prefix` is the text they would replace."""

        def __init__(self, completion: Completion) -> None:
            super().__init__()
            self.completion = completion

    def __init__(self, text: str = "", **kwargs: object) -> None:
        super().__init__(text, theme="monokai", soft_wrap=True, tab_behavior="indent",
                         show_line_numbers=True, **kwargs)
        with contextlib.suppress(LanguageDoesNotExist):  # without tree-sitter-sql: plain text
            self.language = "sql"
        self.query_history: list[str] = []
        self._position: int | None = None
        self._draft = ""
        self._shown = ""  # the history entry last put in the editor
        self.columns_by_table: dict[str, list[str]] = {}

    def on_mount(self) -> None:
        # the cursor after the text it opens with (the last query, the draft): a key pressed as the
        # workspace opens (the briefing's Enter pressed again) never lands in front of it
        self.move_cursor(self.document.end)
        self._follow_theme(self.app.current_theme)
        self.app.theme_changed_signal.subscribe(self, self._follow_theme)

    def _follow_theme(self, theme: Theme) -> None:
        # monokai's dark box reads poorly inside a light theme
        self.theme = "monokai" if theme.dark else "github_light"

    # ------------------------------------------------------------ history

    def set_history(self, queries: Sequence[str]) -> None:
        """Past queries, oldest first; consecutive duplicates kept once."""
        self.query_history = []
        for sql in queries:
            self.remember(sql)

    def remember(self, sql: str) -> None:
        text = sql.strip()
        if text and (not self.query_history or self.query_history[-1] != text):
            self.query_history.append(text)
        self._position = None

    def _edited_since_recall(self) -> None:
        # an entry the player has since edited is their draft now: the walk starts again from the end
        if self._position is not None and self.text != self._shown:
            self._position = None

    def action_history_previous(self) -> None:
        if not self.query_history:
            return
        self._edited_since_recall()
        if self._position is None:
            self._draft = self.text
            self._position = len(self.query_history)
        self._position = max(0, self._position - 1)
        self._show(self.query_history[self._position])

    def action_history_next(self) -> None:
        self._edited_since_recall()
        if self._position is None:
            return
        self._position += 1
        if self._position >= len(self.query_history):
            self._position = None
            self._show(self._draft)
        else:
            self._show(self.query_history[self._position])

    def _show(self, text: str) -> None:
        self.put(text)
        self._shown = self.text

    def put(self, sql: str) -> None:
        """Make `sql` the editor's whole text (never spliced into what was there), the cursor at its end,
        as one edit: ctrl+z brings back what it replaced."""
        text = editable(sql)
        if text != self.text:
            self.replace(text, self.document.start, self.document.end, maintain_selection_offset=False)
        self.move_cursor(self.document.end)

    def recall(self, sql: str) -> None:
        """Put a past query in the editor (the query list's Enter); the history walk starts afresh."""
        self._position = None
        self.put(sql)

    # ------------------------------------------------------------ editing keys (tui.actions, scope "editor")

    def action_select_query(self) -> None:
        self.focus()
        self.select_all()

    def action_clear_query(self) -> None:
        self.focus()
        self._position = None
        if self.text:
            self.replace("", self.document.start, self.document.end, maintain_selection_offset=False)
        self.move_cursor((0, 0))

    def _selected_rows(self) -> tuple[int, int]:
        start, end = sorted(self.selection)
        last = end[0]
        if end[0] > start[0] and end[1] == 0:
            last -= 1  # a selection ending at a line's start does not take that line
        return start[0], last

    def action_duplicate_line(self) -> None:
        self.focus()
        first, last = self._selected_rows()
        block = "\n".join(self.document[r] for r in range(first, last + 1))
        end = (last, len(self.document[last]))
        row, col = self.cursor_location
        self.replace("\n" + block, end, end, maintain_selection_offset=False)
        self.move_cursor((row + last - first + 1, col))  # on the copy, where the cursor was

    def action_comment_line(self) -> None:
        """Toggle `-- ` at the start of the line or the selected lines (every non-blank one commented:
        uncomment; else comment them all at their common indent)."""
        self.focus()
        first, last = self._selected_rows()
        lines = [self.document[r] for r in range(first, last + 1)]
        filled = [line for line in lines if line.strip()]
        if not filled:
            return
        if all(line.lstrip().startswith("--") for line in filled):
            def uncomment(line: str) -> str:
                body = line.lstrip()
                indent = line[:len(line) - len(body)]
                body = body[2:]
                return indent + (body[1:] if body.startswith(" ") else body)
            changed = [uncomment(line) if line.strip() else line for line in lines]
        else:
            indent = min(len(line) - len(line.lstrip()) for line in filled)
            changed = [line[:indent] + "-- " + line[indent:] if line.strip() else line for line in lines]
        row, col = self.cursor_location
        shift = len(changed[row - first]) - len(lines[row - first]) if first <= row <= last else 0
        self.replace("\n".join(changed), (first, 0), (last, len(lines[-1])), maintain_selection_offset=False)
        self.move_cursor((row, max(0, col + shift)))

    # ------------------------------------------------------------ completion

    def set_catalog(self, columns_by_table: Mapping[str, Sequence[str]]) -> None:
        self.columns_by_table = {t: list(c) for t, c in columns_by_table.items()}

    def text_before_cursor(self) -> str:
        row, col = self.cursor_location
        return self.document[row][:col]

    def insert_completion(self, prefix: str, text: str) -> None:
        """Replace `prefix` (just before the cursor) with `text`."""
        row, col = self.cursor_location
        self.replace(text, (row, col - len(prefix)), (row, col))

    def action_complete(self) -> bool:
        """Complete the word at the cursor; False when there is nothing to complete."""
        found = complete(self.text_before_cursor(), self.columns_by_table)
        if not found.candidates:
            return False
        if len(found.candidates) == 1:
            self.insert_completion(found.prefix, found.candidates[0])
            return True
        common = found.common
        if len(common) > len(found.prefix):
            self.insert_completion(found.prefix, common)
            found = Completion(common, found.candidates)
        self.post_message(self.CompletionOffered(found))
        return True

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "tab" and self.selection.is_empty and self.action_complete():
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)


def prime() -> None:
    """Compile the editor's highlight query now, as an editor does (tui.highlight_cache): the warm template
    calls this before it forks, so no tab's app compiles it again."""
    SqlEditor("")
