"""Shared helpers for the tests that drive a served app in headless chromium or through a terminal (no tests
here): where chromium is, the terminal output a tab received (as a stream of text and as the screen it draws),
bounded waits for states, and the journals a served game writes.

The page draws the terminal on a canvas (xterm.js), so there is no text to read in the DOM: a test reads the
terminal output off the page's websocket (`Screen.feed`, hooked to the page's frames) or off a pseudo-terminal
(`servedrill join`), and `Screen.lines()` replays it onto a character grid, the screen as the player sees it."""

from __future__ import annotations

import codecs
import contextlib
import json
import re
import shutil
import time
import unicodedata
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""As the machine notes advise: without the background-networking flags chromium keeps trying to reach
hosts this closed network refuses."""
NO_CHROMIUM = "Debian chromium is not installed (apt-get install chromium; make test tries)"

FOCUSED_JS = "() => document.activeElement?.classList.contains('xterm-helper-textarea') === true"
"""Whether the terminal's input element has the page's focus (typed keys go to it)."""


class Screen:
    """The terminal output a tab received, as text (escape sequences removed, `text`) and as the character grid
    it draws (`lines`: the cursor moves and erases Textual writes, replayed; styles dropped)."""

    ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
    TOKEN = re.compile(r"\x1b\[([0-9;?<>=]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
                       r"|\x1b[=>78]|([^\x1b]+)")
    PARTIAL = re.compile(r"\x1b(?:\[[0-9;?<>=]*[ -/]*|\][^\x07\x1b]*|[()])?$")
    """An escape sequence cut off at the end of a frame (the rest comes with the next one)."""

    def __init__(self) -> None:
        self.data = b""
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""
        self._grid: dict[int, list[str]] = {}
        self._row = self._col = 0

    def feed(self, payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            self.data = (self.data + payload)[-65536:]
            self.total += len(payload)
            self._draw(self._decoder.decode(payload))

    def clear(self) -> None:
        """Forget the stream so far (`text` starts again); the grid keeps what is on the screen."""
        self.data = b""

    def text(self) -> str:
        return self.ANSI.sub(b"", self.data).decode("utf-8", "replace")

    def lines(self) -> list[str]:
        """The screen now, one string per row."""
        if not self._grid:
            return []
        return ["".join(self._grid.get(row, [])).rstrip() for row in range(max(self._grid) + 1)]

    def shows(self, needle: str) -> bool:
        return any(needle in line for line in self.lines())

    def row_of(self, word: str) -> str | None:
        """The first screen row with `word` as a whole word (a player's row in a table, say)."""
        pattern = re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])")
        return next((line for line in self.lines() if pattern.search(line)), None)

    def _draw(self, text: str) -> None:
        text = self._pending + text
        cut = self.PARTIAL.search(text)
        self._pending = text[cut.start():] if cut and cut.group() else ""
        if self._pending:
            text = text[:len(text) - len(self._pending)]
        for match in self.TOKEN.finditer(text):
            params, final, plain = match.group(1), match.group(2), match.group(3)
            if plain is not None:
                self._put(plain)
            elif final in ("H", "f"):
                parts = [int(p) if p.isdigit() else 1 for p in (params or "").split(";")] + [1, 1]
                self._row, self._col = max(parts[0], 1) - 1, max(parts[1], 1) - 1
            elif final == "J" and params in ("2", "3"):
                self._grid.clear()
            elif final == "K":
                line = self._grid.setdefault(self._row, [])
                if params in ("", "0"):
                    del line[self._col:]
                elif params == "2":
                    line.clear()

    def _put(self, plain: str) -> None:
        for ch in plain:
            if ch == "\r":
                self._col = 0
            elif ch == "\n":
                self._row += 1
            elif ch == "\b":
                self._col = max(0, self._col - 1)
            elif ch >= " ":
                line = self._grid.setdefault(self._row, [])
                width = 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
                while len(line) < self._col + width:
                    line.append(" ")
                line[self._col] = ch
                if width == 2:
                    line[self._col + 1] = ""
                self._col += width


def wait_until(predicate: Any, timeout: float, interval: float = 0.1, page: Any = None) -> bool:
    """Poll `predicate` until true or `timeout`. With `page`, wait through Playwright between polls: its
    synchronous API delivers events (the websocket frames `Screen` reads) only while one of its calls
    runs, never during a plain sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if page is not None:
            page.wait_for_timeout(interval * 1000)
        else:
            time.sleep(interval)
    return bool(predicate())


def shows(page: Any, screen: Screen, needle: str, what: str, timeout: float = 60) -> None:
    """Wait until the tab's terminal output shows `needle` (a state, not a time)."""
    assert wait_until(lambda: needle in screen.text(), timeout, 0.02, page), (
        f"no {what} in the tab ({needle!r}); it shows: {screen.text()[-600:]!r}")


def events(data: Path) -> list[dict[str, Any]]:
    """Every event of every session file under `data` (header lines left out)."""
    return [e for path in sorted((data / "sessions").glob("*.jsonl")) for e in events_of(path)]


def events_of(path: Path) -> list[dict[str, Any]]:
    """The events of one session file (its header line left out; a line being written skipped)."""
    out: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out
