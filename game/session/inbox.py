"""The interviewer's inbox, read from the candidate's side.

The inbox is an append-only JSON-lines sidecar ``<session_id>.gm`` next to the journal, written by
`game.gameday.gm` under a file lock. An item is {"id", "time", "kind": "message" | "hint" | "inject", "from",
"text"?, "cost"?, "index"?, "sig"}. The session journals each item as the event `gm_event` names, with
the item's id under ``gm``; whether an item was delivered is decided by the journal, never here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from game.session.records import HINT, INJECT, MESSAGE, Kind, SessionError
from incidents.bounded_read import ReadRefused, read_lines

GM_SENDER = "Interviewer"
"""Who a game-master item is from when it names nobody."""
MAX_INBOX_LINE_BYTES = 64 * 1024
"""Longest inbox line read, bytes. `game.gameday.gm` writes an item's text of at most MAX_GM_TEXT_CHARS (4,000)
characters, JSON-escaped (at most 12 bytes a character), a sender of at most 100 and a signature:
under 50 KB. A longer line was not written by `servedrill send` and is skipped unread."""
MAX_INBOX_BYTES = 16 * 1024 * 1024
"""Largest inbox read, bytes: 250 items of the longest kind, thousands of ordinary ones (an interview
sends tens). Nothing past it is read."""


def read_inbox(path: Path, offset: int = 0, problems: list[str] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Complete lines of an inbox from byte `offset`: (items, the offset after the last complete line).

    A line still being written (no newline yet) is left for the next read; a line that is not a JSON
    object with a string id is skipped, and so is one longer than MAX_INBOX_LINE_BYTES (unread). Nothing
    past MAX_INBOX_BYTES is read. A missing inbox has no items (yet); one that is not a regular file
    (a FIFO, a device, a directory) has none ever. Each such problem is one line added to `problems`."""
    try:
        found = read_lines(path, offset, max_bytes=MAX_INBOX_BYTES, max_line=MAX_INBOX_LINE_BYTES,
                           what="interviewer inbox", follow_symlinks=False)
    except ReadRefused as exc:
        if problems is not None:
            problems.append(str(exc))
        return [], offset
    except OSError:  # not there yet, or passing trouble: the next poll reads from the same offset
        return [], offset
    if problems is not None:
        problems.extend(found.problems)
    items = []
    for _, line in found.lines:
        if line is None:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            items.append(item)
    return items, found.end


def gm_event(item: Mapping[str, Any], hints_taken: int) -> tuple[Kind, dict[str, Any]]:
    """The journal event (kind, data) that delivers one inbox item to a session that has taken
    `hints_taken` of the incident's hints. The rules still decide whether the session takes it."""
    kind, gid = item.get("kind"), item["id"]
    sender = item.get("from") or GM_SENDER
    match kind:
        case Kind.MESSAGE:
            return MESSAGE, {"from": sender, "text": item.get("text"), "gm": gid}
        case Kind.HINT if item.get("text") is None:  # the incident's next hint, at its cost
            return HINT, {"index": hints_taken, "gm": gid}
        case Kind.HINT:
            return HINT, {"index": None, "text": item.get("text"), "cost": item.get("cost", 0), "from": sender,
                          "gm": gid}
        case Kind.INJECT if item.get("index") is not None:
            return INJECT, {"index": item.get("index"), "gm": gid}
        case Kind.INJECT:
            return INJECT, {"index": None, "from": sender, "text": item.get("text"), "gm": gid}
    raise SessionError(f"unknown game-master item kind {kind!r}")


class InboxReader:
    """Follows one inbox: `new_items` returns the items appended since the last call plus those put
    back with `wait` (a hint or inject sent before the start waits for it)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._offset = 0
        self._size = -1
        self._waiting: list[dict[str, Any]] = []
        self.problems: list[str] = []
        """One line per inbox problem seen (a refused file, a skipped over-long line), each once."""

    def new_items(self) -> list[dict[str, Any]]:
        """Waiting items, then the inbox's new complete lines (read only when its size changed)."""
        if self.path is not None:
            try:
                size = self.path.stat().st_size
            except OSError:  # no inbox yet: nothing new
                size = -1
            # past the cap nothing more is read: the size still changing must not make every poll reopen it
            if size != self._size and size >= 0 and self._offset < MAX_INBOX_BYTES:
                problems: list[str] = []
                items, self._offset = read_inbox(self.path, self._offset, problems)
                self._size = size
                self._waiting.extend(items)
                self.problems.extend(p for p in problems if p not in self.problems)
        out, self._waiting = self._waiting, []
        return out

    def wait(self, item: dict[str, Any]) -> None:
        """Offer `item` again on the next call."""
        self._waiting.append(item)
