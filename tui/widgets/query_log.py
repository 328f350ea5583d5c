"""The player's queries so far (Q1..Qn), one line each: Enter (or a click) recalls one's SQL into the editor
and its kept rows into the results, and the focus stays here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui.actions import bindings
from tui.formatting import one_line


def entry_text(data: Mapping[str, Any], width: int = 60) -> Text:
    index = data.get("index")
    if data.get("ok"):
        status = Text(f"{int(data.get('row_count', 0)):>5} rows ", style="green")
    else:
        status = Text(" error     ", style="red")
    sql = one_line(str(data.get("sql", "")), width)
    text = Text.assemble(Text(f"Q{index:<3}", style="bold"), status, sql)
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


class QueryLog(OptionList):
    """Starts with `queries` (query event data, oldest first)."""

    BINDINGS = bindings("queries")

    class Recalled(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, queries: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._initial = list(queries)

    def on_mount(self) -> None:
        self.load(self._initial)

    def load(self, queries: Iterable[Mapping[str, Any]]) -> None:
        self.clear_options()
        for data in queries:
            self.add(data)

    def add(self, data: Mapping[str, Any]) -> None:
        self.add_option(Option(entry_text(data, 200), id=f"q{data.get('index')}"))
        self.highlighted = self.option_count - 1

    def action_recall(self) -> None:
        if self.highlighted is not None:
            self.action_select()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Recalled(int(event.option.id[1:])))
