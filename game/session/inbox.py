"""The interviewer's inbox, read from the candidate's side.

The inbox is an append-only JSON-lines sidecar ``<session_id>.gm`` next to the journal, written by
`game.gm` under a file lock. An item is {"id", "time", "kind": "message" | "hint" | "inject", "from",
"text"?, "cost"?, "index"?, "sig"}. The session journals each item as the event `gm_event` names, with
the item's id under ``gm``; whether an item was delivered is decided by the journal, never here."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from game.session.records import HINT, INJECT, MESSAGE, Kind, SessionError

GM_SENDER = "Interviewer"
"""Who a game-master item is from when it names nobody."""


def read_inbox(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete lines of an inbox from byte `offset`: (items, the offset after the last complete line).

    A line still being written (no newline yet) is left for the next read; a line that is not a JSON
    object with a string id is skipped. A missing or unreadable inbox has no items (yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            raw = fh.read()
    except OSError:  # not there yet, or passing trouble: the next poll reads from the same offset
        return [], offset
    end = raw.rfind(b"\n")
    if end < 0:
        return [], offset
    items = []
    for line in raw[:end].split(b"\n"):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            items.append(item)
    return items, offset + end + 1


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

    def new_items(self) -> list[dict[str, Any]]:
        """Waiting items, then the inbox's new complete lines (read only when its size changed)."""
        if self.path is not None:
            try:
                size = self.path.stat().st_size
            except OSError:  # no inbox yet: nothing new
                size = -1
            if size != self._size and size >= 0:
                items, self._offset = read_inbox(self.path, self._offset)
                self._size = size
                self._waiting.extend(items)
        out, self._waiting = self._waiting, []
        return out

    def wait(self, item: dict[str, Any]) -> None:
        """Offer `item` again on the next call."""
        self._waiting.append(item)
