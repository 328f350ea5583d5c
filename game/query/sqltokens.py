"""SQL text cut into tokens by DuckDB's own tokenizer (`duckdb.tokenize`), for the few places that need
to look inside SQL without running it: the gateway's statement checks, and the plan and filter analysis
behind scoring. Quotes, doubled quotes, dollar quoting and comments are DuckDB's business, not ours.

`duckdb.tokenize` gives each token's start as a UTF-8 byte offset; `tokens` turns those into character
offsets, so text with non-ASCII characters (a player's `'é'`, a comment in another script) is cut where
DuckDB cut it."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Any

import duckdb

KEYWORD = duckdb.token_type.keyword
IDENTIFIER = duckdb.token_type.identifier
OPERATOR = duckdb.token_type.operator
COMMENT = duckdb.token_type.comment


@dataclass(frozen=True)
class Token:
    """One token: `text` without surrounding white space, `start` and `end` character offsets of that
    text in the input, `kind` DuckDB's token type."""

    start: int
    end: int
    text: str
    kind: Any

    def is_word(self, word: str) -> bool:
        """Whether this is the keyword or operator `word` (case-insensitive)."""
        return self.kind in (KEYWORD, OPERATOR) and self.text.upper() == word.upper()

    @property
    def depth_change(self) -> int:
        """How this token moves the parenthesis depth (an operator may carry more than one)."""
        return self.text.count("(") - self.text.count(")") if self.kind == OPERATOR else 0


def tokens(text: str, *, comments: bool = False) -> list[Token]:
    """`text`'s tokens in order; comments only with `comments`. Never raises for any str: a lone
    surrogate (not UTF-8, which DuckDB refuses) is tokenized as "?", which keeps every offset."""
    safe = text.encode("utf-8", "replace").decode("utf-8")  # one "?" per unencodable character
    raw = duckdb.tokenize(safe)
    if safe.isascii():
        starts = [start for start, _ in raw]
    else:
        # byte offset -> character offset: the character whose bytes hold that offset
        byte_of = list(itertools.accumulate((len(ch.encode("utf-8")) for ch in safe), initial=0))
        starts = [bisect.bisect_right(byte_of, start) - 1 for start, _ in raw]
    out = []
    for i, (_, kind) in enumerate(raw):
        start, end = starts[i], starts[i + 1] if i + 1 < len(raw) else len(text)
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        body = piece.strip()
        if kind == COMMENT and not comments:
            continue
        out.append(Token(start + lead, start + lead + len(body), body, kind))
    return out


def identifiers(text: str) -> set[str]:
    """Identifier- and keyword-like words in `text`, lower case and unquoted; words inside string
    literals or comments do not count."""
    return {t.text.strip('"').lower() for t in tokens(text) if t.kind in (IDENTIFIER, KEYWORD)}


def split_top_level(text: str, separator: str) -> list[str]:
    """`text` cut at each `separator` (a keyword such as AND or OR, or an operator such as ",") that
    stands outside parentheses, strings and quoted names; the parts are stripped."""
    parts: list[str] = []
    depth = 0
    start = 0
    for token in tokens(text, comments=True):
        if depth == 0 and token.is_word(separator):
            parts.append(text[start:token.start])
            start = token.end
            continue
        depth += token.depth_change
    parts.append(text[start:])
    return [p.strip() for p in parts]


def strip_parens(text: str) -> str:
    """`text` stripped, without parentheses that wrap all of it, however many: ``((a = 1))`` is
    ``a = 1``, while ``(a) AND (b)`` stays as it is."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _wrapped(text):
        text = text[1:-1].strip()
    return text


def _wrapped(text: str) -> bool:
    """Whether the parenthesis that opens `text` closes at its very end (and not before)."""
    found = tokens(text, comments=True)
    depth = 0
    for i, token in enumerate(found):
        depth += token.depth_change
        if depth <= 0:
            return i == len(found) - 1 and token.end == len(text)
    return False
