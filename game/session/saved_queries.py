"""A player's saved queries: named SQL kept in the data directory and offered in every incident.

One JSON file per data directory (`saved-queries.json`), a list of queries per player, so players sharing a
machine keep theirs apart. A name is text only: it is a key inside the file, never a path, and it is shown
literally. Every bound is checked before anything is written: a name of 1 to MAX_NAME_CHARS printable
characters, a query of at most MAX_SQL_CHARS, at most MAX_SAVED per player, the file at most MAX_FILE_BYTES.

Nothing is lost: a file that cannot be read back (edited by hand, cut short) is never overwritten; saving
refuses with the file's name, what is wrong and what to do. Writes go to a temporary file renamed over the
old one, under an exclusive lock, so two games saving at once both keep their query."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from incidents.bounded_read import read_text

FILE_NAME = "saved-queries.json"
FORMAT = 1
MAX_NAME_CHARS = 60
MAX_SQL_CHARS = 8_000
MAX_SAVED = 100
MAX_FILE_BYTES = 8 << 20
"""Room for many players' full lists; a larger file is not this game's and is refused, never read whole."""


class SavedQueryError(ValueError):
    """A name, query or file the saved queries refuse: `str()` is one line with a hint."""


@dataclass(frozen=True)
class SavedQuery:
    """One saved query: its name (a key, shown literally), its SQL, and when it was saved (epoch seconds)."""

    name: str
    sql: str
    saved_at: float


def saved_path(root: Path) -> Path:
    return root / FILE_NAME


def clean_name(text: str) -> str:
    """The name as it is stored: whitespace runs made one space, trimmed. Raises SavedQueryError when it is
    empty, too long or holds a control character."""
    name = " ".join(text.split())
    if not name:
        raise SavedQueryError("a saved query needs a name (hint: a few words that say what it shows)")
    if len(name) > MAX_NAME_CHARS:
        raise SavedQueryError(f"the name is {len(name)} characters; at most {MAX_NAME_CHARS} "
                              "(hint: a few words that say what it shows)")
    if any(not c.isprintable() for c in name):
        raise SavedQueryError("the name holds a control character (hint: letters, digits, spaces and punctuation)")
    return name


def _read(root: Path) -> dict[str, list[SavedQuery]]:
    """Every player's saved queries; {} when there is no file. Raises SavedQueryError when the file
    cannot be read back as this game wrote it."""
    path = saved_path(root)
    if not path.exists():
        return {}
    hint = f"(hint: move {path.name} aside to start a new list; nothing was changed)"
    try:
        data = json.loads(read_text(path, max_bytes=MAX_FILE_BYTES, what="saved queries"))
    except OSError as exc:
        raise SavedQueryError(f"{path}: cannot read: {exc.strerror or exc} {hint}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else str(path)
        raise SavedQueryError(f"{where}: not the JSON this game writes ({str(exc).split(':')[0]}) {hint}") from None
    players = data.get("players") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(players, dict):
        raise SavedQueryError(f"{path}: not a saved-queries file of format {FORMAT} {hint}")
    out: dict[str, list[SavedQuery]] = {}
    for player, entries in players.items():
        if not isinstance(entries, list):
            raise SavedQueryError(f"{path}: player {str(player)[:40]!r} has no list of queries {hint}")
        kept = []
        for entry in entries[:MAX_SAVED]:
            ok = (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("sql"), str)
                  and isinstance(entry.get("saved_at"), int | float))
            if not ok:
                raise SavedQueryError(f"{path}: a query of player {str(player)[:40]!r} is not name, sql and "
                                      f"saved_at {hint}")
            kept.append(SavedQuery(entry["name"][:MAX_NAME_CHARS], entry["sql"][:MAX_SQL_CHARS],
                                   float(entry["saved_at"])))
        out[str(player)] = kept
    return out


def _write(root: Path, players: dict[str, list[SavedQuery]]) -> None:
    data: dict[str, Any] = {"format": FORMAT, "players": {
        p: [{"name": q.name, "sql": q.sql, "saved_at": q.saved_at} for q in qs] for p, qs in players.items()}}
    text = json.dumps(data, indent=1, ensure_ascii=False)
    if len(text.encode()) > MAX_FILE_BYTES:
        raise SavedQueryError(f"{saved_path(root)}: the saved queries would pass {MAX_FILE_BYTES >> 20} MB "
                              "(hint: forget some saved queries first)")
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".saved-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, saved_path(root))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """An exclusive lock over a read-change-write of the file (a lock file beside it; blocks briefly)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".saved-queries.lock", "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def saved_queries(root: Path, player: str) -> list[SavedQuery]:
    """The player's saved queries, in the order saved (a replaced one keeps its place). Raises
    SavedQueryError when the file is unreadable."""
    return list(_read(root).get(player, []))


def save_query(root: Path, player: str, name: str, sql: str, *, now: float | None = None) -> tuple[SavedQuery, bool]:
    """Save `sql` under `name` for `player`: (the saved query, whether it replaced one of that name, compared
    without regard to case). Raises SavedQueryError on a bad name, an empty or too long query, a full list or an
    unreadable file; nothing is written then."""
    clean = clean_name(name)
    text = sql.strip()
    if not text:
        raise SavedQueryError("there is no query to save (hint: write or run one first)")
    if len(text) > MAX_SQL_CHARS:
        raise SavedQueryError(f"the query is {len(text)} characters; at most {MAX_SQL_CHARS} are saved")
    query = SavedQuery(clean, text, time.time() if now is None else now)
    with _locked(root):
        players = _read(root)
        mine = players.get(player, [])
        at = next((i for i, q in enumerate(mine) if q.name.casefold() == clean.casefold()), None)
        if at is None:
            if len(mine) >= MAX_SAVED:
                raise SavedQueryError(f"you have {MAX_SAVED} saved queries, the most kept "
                                      "(hint: forget one first)")
            mine = [*mine, query]
        else:
            mine = [*mine[:at], query, *mine[at + 1:]]
        players[player] = mine
        _write(root, players)
    return query, at is not None


def forget_query(root: Path, player: str, name: str) -> SavedQuery:
    """Delete the player's saved query called `name` (any case) and return it. Raises SavedQueryError when
    there is none of that name or the file is unreadable."""
    wanted = " ".join(name.split()).casefold()
    with _locked(root):
        players = _read(root)
        mine = players.get(player, [])
        at = next((i for i, q in enumerate(mine) if q.name.casefold() == wanted), None)
        if at is None:
            raise SavedQueryError(f"no saved query is called {name[:MAX_NAME_CHARS]!r} (hint: list them to see "
                                  "their names)")
        gone = mine[at]
        players[player] = mine[:at] + mine[at + 1:]
        _write(root, players)
    return gone
