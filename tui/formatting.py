"""Text for cells, durations and clocks. Pure functions shared by the screens."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from tui.text import ELLIPSIS, visible
from tui.text import one_line as _one_line

MAX_CELL_CHARS = 60


def cell_text(value: Any) -> str:
    """A result value as table text: NULL for None, floats to 6 significant digits, timestamps
    without a time zone suffix, newlines as spaces, control characters visible (tui.text.visible), long
    text cut at MAX_CELL_CHARS characters with an ellipsis. Still plain text: show it as a Text, never
    as markup."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond else "seconds")
        return text
    if isinstance(value, dt.timedelta):
        return f"{value.total_seconds():g} s"
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    text = visible(str(value).replace("\r\n", " ").replace("\n", " "))
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + ELLIPSIS


def table_rows(rows: Sequence[Sequence[Any]], limit: int) -> list[tuple[str, ...]]:
    """The first `limit` rows as text cells."""
    return [tuple(cell_text(v) for v in row) for row in rows[:limit]]


def duration_text(seconds: float) -> str:
    """12 ms below a second, 1.23 s below a minute, else 2 min 05 s."""
    if seconds < 1.0:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60.0:
        return f"{seconds:.2f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s"


def clock_text(seconds: float) -> str:
    """Elapsed seconds as m:ss, or h:mm:ss from an hour; negative counts as 0."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def one_line(text: str, width: int) -> str:
    """`text` on one line, control characters visible, cut to `width` characters with an ellipsis."""
    return _one_line(text, width)
