"""A one-line key bar from the actions table: the focused pane's keys, then the screen's, then the app's,
cut with an ellipsis where the line ends, and at the right end the pinned keys (run, submit, help), which
stay whatever has focus and however narrow the terminal. Two Statics instead of Textual's Footer, whose
widget per key costs a restyle on every screen change and focus move."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape
from textual.widgets import Static

from tui.actions import commands, key_label

__all__ = ["KeyBar", "key_label", "keybar_markup", "pinned_markup"]


def _item(key: str, title: str) -> str:
    return f"[b $footer-key-foreground]{escape(key_label(key))}[/] {escape(title)}"


def keybar_markup(scopes: Sequence[str], pinned: bool = False) -> str:
    """Markup listing the shown commands of `scopes`, first scope first, each key once; the pinned ones
    only (`pinned`) or all but those."""
    seen: set[str] = set()
    parts = []
    for scope in scopes:
        for command in commands(scope):
            key = command.keys.split(",")[0]
            if not command.show or key in seen or command.pinned != pinned:
                continue
            seen.add(key)
            parts.append(_item(key, command.title))
    return "  ".join(parts)


def pinned_markup(scopes: Sequence[str]) -> str:
    return keybar_markup(scopes, pinned=True)


class KeyBar(Horizontal):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
    }
    KeyBar > #keybar-keys {
        width: 1fr;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    KeyBar > #keybar-pinned {
        width: auto;
        padding: 0 1;
        text-wrap: nowrap;
    }
    """

    def __init__(self, *scopes: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.base = list(scopes)
        self.extra: list[str] = []

    def compose(self) -> ComposeResult:
        scopes = [*self.base, "app"]
        yield Static(keybar_markup(scopes), id="keybar-keys")
        yield Static(pinned_markup(scopes), id="keybar-pinned")

    def show_scopes(self, *extra: str) -> None:
        """Show the keys of `extra` scopes (the focused pane's) before the screen's own."""
        if list(extra) == self.extra:
            return
        self.extra = list(extra)
        self.query_one("#keybar-keys", Static).update(keybar_markup([*extra, *self.base, "app"]))

    @property
    def text(self) -> str:
        """What the bar shows, as plain text (for tests)."""
        return " ".join(str(s.render()) for s in self.query(Static))
