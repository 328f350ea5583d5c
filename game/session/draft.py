"""The draft sidecar ``<session_id>.draft`` and the game clock that counts only time a session was held.

The sidecar is JSON, rewritten whole and atomically, never read by scoring and never part of a
transcript. It keeps what the UI has not recorded yet (the board's unsaved order and confidences, the
SQL editor's text) and when a process held the session: one [opened, last seen, closed] interval per
process that opened it. The game clock (`held_clock`) leaves out the gaps between one holder's last sign
of life and the next one's opening. A journal without a sidecar (older sessions) counts wall time."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from game.session.paths import draft_path
from game.session.records import QUERY, RANK, SUBMIT, Event
from incidents.bounded_read import read_text

DRAFT_FORMAT = "servedrill-draft"
MAX_DRAFT_EDITOR_CHARS = 100_000
"""Editor text longer than this is not kept in the draft (a draft is a convenience, not a store)."""
MAX_DRAFT_BYTES = 4 * 1024 * 1024
"""Largest draft sidecar read, bytes: the editor text (at most MAX_DRAFT_EDITOR_CHARS, JSON-escaped at
most 6 bytes a character: 600 KB), the board and one held interval (about 50 bytes) per time the
session was opened. A larger file is ignored unread, as an unreadable draft is."""
MIN_GAP_S = 5.0
"""A gap shorter than this between one holder and the next (a relaunch) still counts as held time."""


def held_gaps(held: Sequence[Sequence[Any]], event_times: Sequence[float], start: float, until: float) -> float:
    """Seconds between `start` and `until` when no process held the session: the gaps between one held
    interval's end (its last sign of life: "last seen", or its last journalled event if later) and the
    next one's opening, each clipped to [start, until]; gaps under MIN_GAP_S count as held."""
    intervals = sorted((float(h[0]), float(h[1])) for h in held)
    total = 0.0
    for (_, seen), (opened_next, _) in itertools.pairwise(intervals):
        end = max([seen, *(t for t in event_times if seen <= t < opened_next)])
        lo, hi = max(end, start), min(opened_next, until)
        if hi - lo >= MIN_GAP_S:
            total += hi - lo
    return total


def held_clock(held: Sequence[Sequence[Any]], event_times: Sequence[float], start: float, when: float) -> float:
    """The game clock at `when`: seconds since `start` less the gaps nobody held the session (negative
    for a `when` before the start). The player's screen, the timed injects and the interviewer's watch
    all read this one clock."""
    return when - start - held_gaps(held, event_times, start, when)


def read_held(session_path: Path | str) -> list[list[Any]]:
    """The held intervals in a session's draft sidecar ([] without one): for a reader in another process
    (the interviewer's screen) that wants the game clock as the player sees it (`held_clock`)."""
    try:
        raw = json.loads(read_text(draft_path(session_path), max_bytes=MAX_DRAFT_BYTES, what="draft",
                                   follow_symlinks=False))
    except (OSError, ValueError):  # no sidecar, one cut short or refused: wall time, as for an older session
        return []
    held = raw.get("held") if isinstance(raw, dict) else None
    return [h for h in held if isinstance(h, list) and len(h) == 3] if isinstance(held, list) else []


def _board_rows_ok(rows: list[Any], names: Mapping[str, str]) -> bool:
    return all(isinstance(r, Mapping) and str(r.get("id")) in names and isinstance(r.get("confidence"), int | float)
               and not isinstance(r.get("confidence"), bool) and math.isfinite(r["confidence"]) for r in rows)


class Draft:
    """One session's sidecar in memory: the unsaved board and editor text, and the held intervals.
    `path` None (an in-memory session) keeps it in memory only. Not thread-safe: the Session locks."""

    def __init__(self, path: Path | None, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self.fields: dict[str, Any] = {}
        self.held: list[list[Any]] = []  # [opened, last seen, closed] per process that held it

    def read(self) -> str | None:
        """Load the sidecar; a warning (one line) when it is unreadable or not a draft, else None."""
        if self.path is None:
            return None
        try:
            raw = json.loads(read_text(self.path, max_bytes=MAX_DRAFT_BYTES, what="draft", follow_symlinks=False))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # ReadRefused (a FIFO, a link, too large) is an OSError
            return f"{self.path}: ignored an unreadable draft ({getattr(exc, 'strerror', None) or exc})"
        if not isinstance(raw, dict) or raw.get("format") != DRAFT_FORMAT:
            return f"{self.path}: ignored: not a servedrill draft"
        held = raw.get("held")
        if isinstance(held, list):
            self.held = [[float(h[0]), float(h[1]), bool(h[2])] for h in held
                         if isinstance(h, list) and len(h) == 3 and all(isinstance(x, int | float) for x in h[:2])
                         and math.isfinite(h[0]) and math.isfinite(h[1])]
        self.fields = {k: raw[k] for k in ("board", "editor", "seq", "saved") if k in raw}
        return None

    def write(self) -> None:
        """Rewrite the sidecar atomically (a temporary file, then rename). Best effort: a draft that
        cannot be written loses only convenience, never a recorded action."""
        if self.path is None:
            return
        doc = {"format": DRAFT_FORMAT, "format_version": 1, "session_id": self.session_id,
               **{k: v for k, v in self.fields.items() if v is not None}, "held": self.held}
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(doc, separators=(",", ":"), allow_nan=False), encoding="utf-8")
            tmp.replace(self.path)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                tmp.unlink()

    def keep(self, *, board: Sequence[Mapping[str, Any]] | None, editor: str | None, seq: int, now: float) -> None:
        """Note the board and/or the editor text as of journal event `seq`."""
        if board is not None:
            self.fields["board"] = [{"id": str(r["id"]), "confidence": float(r["confidence"])} for r in board]
        if editor is not None:
            self.fields["editor"] = editor if len(editor) <= MAX_DRAFT_EDITOR_CHARS else None
        self.fields["seq"] = seq
        self.fields["saved"] = now

    def offered(self, events: Sequence[Event], names: Mapping[str, str]) -> dict[str, Any]:
        """What the draft still offers given the journal: the board unless a ranking or submission was
        recorded after it, the editor text unless a query was."""
        out: dict[str, Any] = {}
        seq = self.fields.get("seq")
        if not isinstance(seq, int):
            return out
        newer_rank = any(e.seq > seq for e in events if e.kind in (RANK, SUBMIT))
        newer_query = any(e.seq > seq for e in events if e.kind == QUERY)
        board = self.fields.get("board")
        if isinstance(board, list) and not newer_rank and _board_rows_ok(board, names):
            out["board"] = [{"id": str(r["id"]), "confidence": float(r["confidence"])} for r in board]
        editor = self.fields.get("editor")
        if isinstance(editor, str) and not newer_query:
            out["editor"] = editor
        return out

    def hold(self, now: float) -> None:
        """This process opens the session: a new held interval."""
        self.held.append([now, now, False])

    def seen(self, now: float) -> None:
        """A sign of life from this process's hold."""
        if self.held:
            self.held[-1][1] = max(self.held[-1][1], now)

    def release(self, now: float) -> bool:
        """Close this process's hold; False when it was not open."""
        if not self.held or self.held[-1][2]:
            return False
        self.held[-1][1] = max(self.held[-1][1], now)
        self.held[-1][2] = True
        return True
