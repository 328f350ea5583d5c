"""The notice strip: one line under the status line for what the game tells the player (an update arrived,
a ranking could not be saved, a query was refused). It takes a line of its own instead of floating over the
results, the plot or a dialog the way a toast does, and shows only while it has something to say.

Each notice has a key: a newer one with the same key replaces it, and `withdraw(key)` takes it away once
its cause is gone (the board's confidences fixed, say); a notice with a timeout goes by itself. The newest
notice in force shows; when it goes, the one before it (if still in force) shows again. The whole text of
an update stays in the Updates pane (F4); here it is cut to the line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import Static

from tui.text import one_line

SEVERITY_STYLES = {"information": "bold", "warning": "bold yellow", "error": "bold red"}
SEVERITY_MARKS = {"information": "●", "warning": "▲", "error": "✖"}


@dataclass
class Notice:
    key: str
    text: str
    severity: str = "information"
    title: str = ""
    until: float | None = None
    """Monotonic time it goes by itself (None: until withdrawn or replaced)."""


class NoticeStrip(Static):
    """Shows the newest notice in force, one line; hidden when there is none."""

    DEFAULT_CSS = """
    NoticeStrip {
        height: 1;
        padding: 0 1;
        background: $boost;
        display: none;
    }
    NoticeStrip.-shown { display: block; }
    NoticeStrip.-warning { background: $warning 15%; }
    NoticeStrip.-error { background: $error 20%; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", markup=False, **kwargs)
        self.notices: list[Notice] = []
        self._timer: Any = None

    def on_mount(self) -> None:
        self._timer = self.set_interval(0.5, self._expire)

    @property
    def current(self) -> Notice | None:
        return self.notices[-1] if self.notices else None

    def show(self, text: str, *, key: str = "", severity: str = "information", title: str = "",
             timeout: float | None = 20.0) -> None:
        """Show `text` (plain text, cut to one line) now; `key` replaces an earlier notice of that key
        (default: the text itself); `timeout` seconds later it goes by itself (None: it stays until
        withdrawn or replaced)."""
        import time

        key = key or text
        self.notices = [n for n in self.notices if n.key != key]
        until = None if timeout is None else time.monotonic() + timeout
        self.notices.append(Notice(key, text, severity, title, until))
        self._draw()

    def withdraw(self, key: str) -> bool:
        """Take the notice of `key` away (its cause is gone); whether there was one."""
        kept = [n for n in self.notices if n.key != key]
        gone = len(kept) != len(self.notices)
        self.notices = kept
        if gone:
            self._draw()
        return gone

    def has(self, key: str) -> bool:
        return any(n.key == key for n in self.notices)

    def _expire(self) -> None:
        import time

        now = time.monotonic()
        kept = [n for n in self.notices if n.until is None or n.until > now]
        if len(kept) != len(self.notices):
            self.notices = kept
            self._draw()

    def _draw(self) -> None:
        notice = self.current
        for severity in ("warning", "error"):
            self.set_class(notice is not None and notice.severity == severity, f"-{severity}")
        self.set_class(notice is not None, "-shown")
        if notice is None:
            self.update("")
            return
        width = max(20, (self.size.width or self.app.size.width) - 2)
        mark = SEVERITY_MARKS.get(notice.severity, "●")
        title = f"{one_line(notice.title, 60)}: " if notice.title else ""
        body = one_line(" ".join(notice.text.split()), width)
        line = Text.assemble((f"{mark} {title}", SEVERITY_STYLES.get(notice.severity, "bold")), body)
        line.truncate(width, overflow="ellipsis")
        self.update(line)

    def on_resize(self) -> None:
        self._draw()
