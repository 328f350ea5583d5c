"""The compact workspace's pane bar: one line naming each pane with its key, the one shown highlighted;
a click shows a pane as its key does. (Textual's Tabs takes two lines and a focus stop.)"""

from __future__ import annotations

from typing import Any

from textual.reactive import reactive
from textual.widgets import Static

from tui.actions import key_label

PANES: dict[str, tuple[str, str]] = {
    "results": ("Results", "ctrl+o"),
    "plot": ("Plot", "ctrl+g"),
    "board": ("Board", "ctrl+b"),
    "schema": ("Tables", "ctrl+t"),
    "queries": ("Queries", "ctrl+l"),
    "updates": ("Updates", "f4"),
}
"""Pane name -> (title, key), in the bar's order. The keys are the workspace's (tui.actions)."""


def pane_bar_markup(active: str, updates: int = 0) -> str:
    parts = []
    for name, (title, key) in PANES.items():
        label = f"{title} {updates}" if name == "updates" and updates else title
        text = f" {label} [dim]{key_label(key)}[/dim] " if name != active else f" [b]{label}[/b] {key_label(key)} "
        style = "reverse" if name == active else ""
        inner = f"[{style}]{text}[/]" if style else text
        parts.append(f"[@click=screen.show_pane('{name}')]{inner}[/]")
    return "│".join(parts)


class PaneBar(Static):
    DEFAULT_CSS = """
    PaneBar {
        height: 1;
        background: $boost;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        display: none;
        link-style: none;
        link-style-hover: bold;
        link-background-hover: $accent 30%;
    }
    """

    active: reactive[str] = reactive("results")
    updates: reactive[int] = reactive(0)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(pane_bar_markup("results"), **kwargs)

    def watch_active(self) -> None:
        self.update(pane_bar_markup(self.active, self.updates))

    def watch_updates(self) -> None:
        self.update(pane_bar_markup(self.active, self.updates))
