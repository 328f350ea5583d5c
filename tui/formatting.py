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


def column_widths(cells: list[list[str]], available: int, gutter: int = 1, padding: int = 2) -> list[int]:
    """Widths for the columns of a table of `cells` (rows of plain text, the header first) that share
    `available` characters: a column whose content fits in an even share gets exactly its content's
    width, and the columns that need more share what the others leave (water-filling), each at least as
    wide as its longest word where that can be had. `padding` is added to each width (the cell's own)
    and `gutter` counted between columns."""
    count = max((len(row) for row in cells), default=0)
    if count == 0:
        return []
    natural = [max((len(row[i]) for row in cells if i < len(row)), default=0) + padding for i in range(count)]
    longest_word = [max((len(w) for row in cells if i < len(row) for w in row[i].split()), default=0) + padding
                    for i in range(count)]
    left = max(count, available - gutter * (count - 1))
    widths = [0] * count
    open_columns = set(range(count))
    while open_columns:
        share = left // len(open_columns)
        fits = [i for i in open_columns if natural[i] <= share]
        if not fits:
            break
        for i in fits:
            widths[i] = natural[i]
            left -= natural[i]
            open_columns.discard(i)
    if open_columns:
        # the wide columns: each its longest word first (when there is room), the rest in proportion
        floor = {i: min(longest_word[i], natural[i]) for i in open_columns}
        if sum(floor.values()) > left:
            floor = {i: 1 for i in open_columns}
        spare = left - sum(floor.values())
        want = sum(natural[i] - floor[i] for i in open_columns) or 1
        for i in open_columns:
            widths[i] = floor[i] + spare * (natural[i] - floor[i]) // want
        # what integer division left over goes to the widest
        widest = max(open_columns, key=lambda i: natural[i])
        widths[widest] += left - sum(widths[i] for i in open_columns)
    return widths
