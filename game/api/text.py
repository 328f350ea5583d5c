"""Text from data, players and interviewers made visible, for every front end (the terminal app's widgets
through tui/text.py, line mode and the console directly): control characters (C0 but newline, DEL, C1, and
the Unicode controls that reorder or hide text) become visible stand-ins (ESC shows as "␛", NUL as "␀",
U+202E as "<U+202E>"), so an escape sequence in a cell, a name or a message cannot move the cursor, recolour
the terminal or reorder what is shown; tabs become spaces. One table, so every front end shows the same."""

from __future__ import annotations

from typing import Any

_FORMAT_CONTROLS = (
    0x061C, 0x200E, 0x200F, 0xFEFF,
    *range(0x202A, 0x202F),  # LRE RLE PDF LRO RLO
    *range(0x2066, 0x206A),  # LRI RLI FSI PDI
)


def _table(keep_newlines: bool, keep_tabs: bool = False) -> dict[int, str]:
    table: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20)}  # ␀ .. ␟ (Control Pictures)
    table[0x7F] = "\u2421"  # ␡
    table[0x09] = " "
    if keep_tabs:
        del table[0x09]
    if keep_newlines:
        del table[0x0A]
    for c in range(0x80, 0xA0):
        table[c] = f"<U+{c:04X}>"
    for c in _FORMAT_CONTROLS:
        table[c] = f"<U+{c:04X}>"
    return table


_ONE_LINE = _table(keep_newlines=False)
_MULTI_LINE = _table(keep_newlines=True)
_EDITABLE = _table(keep_newlines=True, keep_tabs=True)


def visible(value: Any, *, multiline: bool = False) -> str:
    """`value` as text with every control character replaced by a visible stand-in. With `multiline`,
    newlines stay (CR LF and a lone CR count as one); otherwise a newline shows as "␊"."""
    text = value if isinstance(value, str) else str(value)
    if multiline:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.translate(_MULTI_LINE if multiline else _ONE_LINE)


def editable(text: str) -> str:
    """Text for an editor (SQL, a note): newlines and tabs kept (a terminal's paste ends lines with CR:
    those become newlines), other control characters visible (an escape sequence pasted or journalled
    cannot reach the terminal through the editor)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_EDITABLE)
