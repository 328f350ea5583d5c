"""The HTML reports' Jinja2 templates (the files ``*.html.j2`` beside this module), and `render`.

Autoescape is on for every template: a player's name, a query's SQL or an interviewer's note is text,
never markup. What is already markup (an SVG chart that escaped its own text) is passed in as
`markupsafe.Markup` by the code that built it, so the trust is decided where the markup is made."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("game.reports", "templates"),
        autoescape=True,  # every template is HTML, whatever its name ends in
        undefined=jinja2.StrictUndefined,  # a misspelt name is an error, not an empty cell
        keep_trailing_newline=True,
    )


def render(name: str, **context: Any) -> str:
    """The template `name` (e.g. "leaderboard.html.j2") rendered with `context`."""
    return _environment().get_template(name).render(**context)
