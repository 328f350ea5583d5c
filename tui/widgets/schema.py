"""The schema browser: tables and their columns from the gateway's catalog, with descriptions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree

from tui.text import one_line


class SchemaTree(Tree[Any]):
    """Tables as branches, columns as leaves. Selecting a column (Enter or click) asks the screen to
    insert its name into the editor; highlighting one shows its description."""

    class Insert(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Described(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("tables", **kwargs)
        self.show_root = False
        self.guide_depth = 2

    def load(self, entries: Iterable[Any]) -> dict[str, list[str]]:
        """Fill from CatalogEntry-like objects (table, column, type, description); returns the
        columns by table."""
        self.clear()
        by_table: dict[str, list[Any]] = {}
        for entry in entries:
            by_table.setdefault(str(entry.table), []).append(entry)
        for table, columns in by_table.items():
            # Text labels: a Tree reads a str label as markup
            branch = self.root.add(Text(one_line(table, 80)), data=("table", table, ""), expand=False)
            for entry in columns:
                label = Text.assemble(one_line(entry.column, 80), " ", (one_line(entry.type.lower(), 40), "dim"))
                branch.add_leaf(label, data=("column", str(entry.column), str(entry.description)))
        return {t: [str(e.column) for e in cols] for t, cols in by_table.items()}

    def on_tree_node_selected(self, event: Tree.NodeSelected[Any]) -> None:
        data = event.node.data
        if data and data[0] == "column":
            event.stop()
            self.post_message(self.Insert(data[1]))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        data = event.node.data
        if not data:
            return
        kind, name, description = data
        text = f"{name}: {description}" if kind == "column" and description else name
        self.post_message(self.Described(text))
