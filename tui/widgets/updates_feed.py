"""Updates delivered during the round, oldest first: the incident's timed injects, the interviewer's
messages, hints and injects, and the hints the player took. Read-only; it lives in a sidebar tab so the
player can reopen it after a notification has faded."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui.formatting import clock_text
from tui.text import clean, one_line

MAX_UPDATE_CHARS = 4000
"""An update's text is cut to this in the feed (what a session accepts from the interviewer: whole)."""

KIND_TITLES = {"inject": "Update", "message": "Message", "hint": "Hint"}


def update_title(update: Any) -> str:
    """A notification's title for an update (game.session.Update): plain text, the sender made visible
    and cut (it comes from the incident file or the interviewer)."""
    kind = KIND_TITLES.get(update.kind, one_line(update.kind, 20).title())
    sender = one_line(update.sender, 60) if update.sender else ""
    if update.kind == "hint":
        cost = f" (-{update.cost} points)" if update.cost else ""
        who = f" from {sender}" if update.source == "gm" else ""
        return f"{kind}{who}{cost}"
    return f"{kind} from {sender}" if sender else kind


def update_body(update: Any) -> str:
    """An update's text as shown: newlines kept, control characters visible, cut at MAX_UPDATE_CHARS."""
    return clean(update.text.strip(), MAX_UPDATE_CHARS, multiline=True, lines=200)


def update_text(update: Any) -> Text:
    """One feed entry: elapsed time, title, then the text on the following lines."""
    style = {"inject": "bold yellow", "message": "bold cyan", "hint": "bold magenta"}.get(update.kind, "bold")
    return Text.assemble((f"{clock_text(max(0.0, update.elapsed_s))} ", "dim"), (update_title(update), style),
                         "\n", update_body(update))


class UpdatesFeed(OptionList):
    """Starts with `updates` (game.session.Update, oldest first); `add` appends one and shows it."""

    def __init__(self, updates: Iterable[Any] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._initial = list(updates)
        self.count = 0

    def on_mount(self) -> None:
        for update in self._initial:
            self.add(update)

    def add(self, update: Any) -> None:
        self.add_option(Option(update_text(update), id=f"u{update.seq}"))
        self.count += 1
        self.highlighted = self.option_count - 1
