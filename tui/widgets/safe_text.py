"""A TextArea that never holds a control character other than newline and tab: text loaded into it (a
journalled SQL, a note) and text pasted into it have the rest made visible (tui.text.editable), so an
escape sequence cannot reach the terminal through the editor."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.widgets import TextArea

from tui.text import editable


class SafeTextArea(TextArea):
    def __init__(self, text: str = "", **kwargs: Any) -> None:
        super().__init__(editable(text), **kwargs)

    def load_text(self, text: str) -> None:
        super().load_text(editable(text))

    async def _on_paste(self, event: events.Paste) -> None:
        # Textual calls every class's _on_paste along the MRO unless the default is prevented: TextArea's
        # own would insert the text a second time, as it came
        event.prevent_default()
        if self.read_only:
            return
        if result := self._replace_via_keyboard(editable(event.text), *self.selection):
            self.move_cursor(result.end_location)
            self.focus()
