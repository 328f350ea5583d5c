"""Text from data, players and interviewers, made safe to show: literal, visible and bounded.

Everything the game did not write itself (result cells and column names, notes, SQL, incident and
hypothesis titles, interviewer messages, player names, error messages that quote any of those) goes
through here before a widget sees it:

- literal: never parsed as markup. `literal()` returns a `rich.text.Text` (DataTable cells, OptionList
  prompts, Tree labels, Static content); `template()` fills a markup template written here with values
  taken as plain text (Textual's `$name` variables), so styling never comes from the data. Escaping
  data into a markup string is not enough: Textual's markup also reads "[$name]" tags, which
  `escape()` leaves alone.
- visible: control characters become visible stand-ins (game.api.text, the table every front end shares:
  ESC shows as "␛", NUL as "␀", U+202E as "<U+202E>"), so an ANSI escape in a cell cannot move the cursor or
  recolour the terminal; tabs become spaces.
- bounded: cut at a limit with an ellipsis (and, for multi-line text, a line limit); the full value stays
  in the session and is reachable elsewhere (the row detail of the results table, the note dialog).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.content import Content

from game.api.text import editable as editable  # re-exported: the widgets take it from here
from game.api.text import visible

ELLIPSIS = "…"

MAX_TEXT_CHARS = 4000
"""Default cap for free text (a note, a message, a SQL text) shown in one place."""

MAX_LINES = 60
"""Default cap on the lines of multi-line text shown in one place."""

def bounded(text: str, limit: int | None = MAX_TEXT_CHARS, lines: int | None = None) -> str:
    """`text` cut to `limit` characters and `lines` lines, an ellipsis marking the cut."""
    cut = False
    if lines is not None:
        parts = text.split("\n")
        if len(parts) > lines:
            text, cut = "\n".join(parts[:lines]), True
    if limit is not None and len(text) > limit:
        text, cut = text[: max(0, limit - 1)], True
    return text + ELLIPSIS if cut else text


def clean(value: Any, limit: int | None = MAX_TEXT_CHARS, *, multiline: bool = False,
          lines: int | None = None) -> str:
    """Visible and bounded text (a str, still to be shown literally)."""
    if multiline and lines is None:
        lines = MAX_LINES
    return bounded(visible(value, multiline=multiline), limit, lines)


def one_line(value: Any, width: int) -> str:
    """On one line (whitespace runs folded to one space), visible, cut to `width` characters."""
    flat = " ".join(visible(value, multiline=True).split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + ELLIPSIS


def literal(value: Any, limit: int | None = MAX_TEXT_CHARS, *, style: str = "", multiline: bool = False,
            lines: int | None = None) -> Text:
    """A Rich Text of `value`: never markup, visible, bounded."""
    return Text(clean(value, limit, multiline=multiline, lines=lines), style=style, end="")


def template(markup: str, **values: Any) -> Content:
    """Textual `Content` from a markup template written here, with `$name` placeholders filled by
    `values` as literal text (never parsed as markup); str values are made visible on the way (cap
    them beforehand with `clean` or `one_line`), Text and Content values are kept as they are."""
    filled: dict[str, object] = {}
    for name, value in values.items():
        if isinstance(value, Text):
            filled[name] = Content.from_rich_text(value)
        elif isinstance(value, Content):
            filled[name] = value
        else:
            filled[name] = visible(value, multiline=True)
    return Content.from_markup(markup, **filled)
