"""Text from data, players and interviewers, made literal for the formats reports are written in."""

from __future__ import annotations

import html
import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~])")


def plain(text: Any, limit: int = 2000) -> str:
    """One line of text: control characters and escape sequences dropped, at most `limit` characters."""
    out = _CONTROL.sub("", str(text).replace("\r", " ").replace("\n", " ").replace("\t", " "))
    return out if len(out) <= limit else out[: limit - 1] + "…"


def md_text(text: Any, limit: int = 2000) -> str:
    """`plain`, then as literal Markdown: HTML escaped and Markdown punctuation backslash-escaped, so a
    name like `<img onerror=...>` or `**x**` reads as typed and renders nothing."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(plain(text, limit), quote=False))


def md_cell(text: Any, limit: int = 2000) -> str:
    """Lighter than `md_text` for text people also read raw (line mode prints the debrief as is): one
    line, HTML escaped, table pipes escaped; Markdown emphasis is left alone."""
    return html.escape(plain(text, limit), quote=False).replace("|", "\\|")
