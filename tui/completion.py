"""Table and column name completion for the SQL editor: pure functions over the gateway's catalog."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]*)?$")
_TABLE_CONTEXT = re.compile(r"\b(from|join)\s+$", re.IGNORECASE)


@dataclass(frozen=True)
class Completion:
    """Replace the `prefix` just before the cursor with one of `candidates` (sorted, unique)."""

    prefix: str
    candidates: tuple[str, ...]

    @property
    def common(self) -> str:
        """Longest text every candidate starts with (case-insensitively), in the first one's case."""
        if not self.candidates:
            return self.prefix
        first = self.candidates[0]
        n = len(first)
        for other in self.candidates[1:]:
            n = min(n, len(other))
            while n and other[:n].lower() != first[:n].lower():
                n -= 1
        return first[:n]


def word_before(text_before_cursor: str) -> str:
    """The identifier (optionally `table.` qualified) that ends at the cursor; empty when none."""
    match = _WORD.search(text_before_cursor)
    return match.group(0) if match else ""


def complete(text_before_cursor: str, columns_by_table: Mapping[str, Sequence[str]]) -> Completion:
    """Candidates for the word ending at the cursor.

    `table.pre` completes columns of that table; right after FROM or JOIN only tables are offered;
    elsewhere tables and every column. Matching is by case-insensitive prefix."""
    word = word_before(text_before_cursor)
    before = text_before_cursor[: len(text_before_cursor) - len(word)]
    if "." in word:
        table, _, stem = word.partition(".")
        names: Iterable[str] = next(
            (cols for t, cols in columns_by_table.items() if t.lower() == table.lower()), ())
        found = sorted({c for c in names if c.lower().startswith(stem.lower())})
        return Completion(stem, tuple(found))
    if _TABLE_CONTEXT.search(before):
        pool: set[str] = set(columns_by_table)
    else:
        pool = set(columns_by_table) | {c for cols in columns_by_table.values() for c in cols}
    if not word:
        return Completion("", tuple(sorted(pool)) if _TABLE_CONTEXT.search(before) else ())
    found = sorted(n for n in pool if n.lower().startswith(word.lower()) and n != word)
    return Completion(word, tuple(found))
