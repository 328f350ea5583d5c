"""A one-line key bar from the actions table: the focused widget's keys, then the screen's, then the
app's. One Static instead of Textual's Footer, whose widget per key costs a restyle on every screen
change and focus move."""

from __future__ import annotations

from collections.abc import Sequence

from textual.markup import escape
from textual.widgets import Static

from tui.actions import commands

_KEY_NAMES = {"question_mark": "?", "slash": "/", "plus": "+", "minus": "-", "equals_sign": "=",
              "escape": "esc", "enter": "enter", "shift+up": "shift+↑", "shift+down": "shift+↓",
              "ctrl+up": "ctrl+↑", "ctrl+down": "ctrl+↓"}


def key_label(key: str) -> str:
    """How a Textual key name is shown: f5 -> F5, ctrl+s -> ^s, question_mark -> ?."""
    key = key.strip()
    if key in _KEY_NAMES:
        return _KEY_NAMES[key]
    if key.startswith("ctrl+") and len(key) == 6:
        return "^" + key[-1]
    if key.startswith("f") and key[1:].isdigit():
        return key.upper()
    return key


def keybar_markup(scopes: Sequence[str]) -> str:
    """Markup listing the shown commands of `scopes`, first scope first, each key once."""
    seen: set[str] = set()
    parts = []
    for scope in scopes:
        for command in commands(scope):
            key = command.keys.split(",")[0]
            if not command.show or key in seen:
                continue
            seen.add(key)
            parts.append(f"[b $footer-key-foreground]{escape(key_label(key))}[/] {escape(command.title)}")
    return "  ".join(parts)


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        padding: 0 1;
        background: $footer-background;
        color: $footer-foreground;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *scopes: str, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.base = list(scopes)
        self.show_scopes()

    def show_scopes(self, *extra: str) -> None:
        """Show the keys of `extra` scopes (the focused widget's) before the screen's own."""
        self.update(keybar_markup([*extra, *self.base, "app"]))
