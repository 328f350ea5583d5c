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

KIND_TITLES = {"inject": "Update", "message": "Message", "hint": "Hint"}


def update_title(update: Any) -> str:
    """A notification's title for an update (game.session.Update)."""
    kind = KIND_TITLES.get(update.kind, update.kind.title())
    if update.kind == "hint":
        cost = f" (-{update.cost} points)" if update.cost else ""
        who = f" from {update.sender}" if update.source == "gm" else ""
        return f"{kind}{who}{cost}"
    return f"{kind} from {update.sender}" if update.sender else kind


def update_text(update: Any) -> Text:
    """One feed entry: elapsed time, title, then the text on the following lines."""
    style = {"inject": "bold yellow", "message": "bold cyan", "hint": "bold magenta"}.get(update.kind, "bold")
    return Text.assemble((f"{clock_text(max(0.0, update.elapsed_s))} ", "dim"), (update_title(update), style),
                         "\n", update.text.strip())


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
