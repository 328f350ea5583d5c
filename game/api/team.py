"""A team's shared game in a game-day round with team play (the plan's `team_play`), as the front ends show it.

The game is one session every member's tab plays (`game.session.seat`, `Session.sync`): the rules stay the
session's (one hand-in per team is refused there, on the server's word). What lives here is what a front end
needs to show the team working: the other members' new events since it last asked (`team_news`, which a
screen's poll calls and redraws from) and one plain line per event saying who did what (`team_line`), so every
front end says it the same way. `game.api` re-exports these names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from game.session import Event, Session

__all__ = ["team_line", "team_news", "team_of"]

MAX_SQL_SHOWN = 80
"""Characters of a member's SQL a news line shows (the query log holds it whole)."""


def team_of(session: Session) -> tuple[str, ...]:
    """The members of the session's team game (empty: one player's game)."""
    return session.team


def team_news(session: Session) -> list[Event]:
    """What the other members recorded since the last call, oldest first (their queries, pins, rankings, notes,
    hand-in), read from the shared journal now. Empty for one player's game. Raises SessionError when the
    journal no longer verifies (changed behind the server's back)."""
    return session.team_news()


def team_line(session: Session, event: Event) -> str:
    """One plain line for `event` as a teammate's screen shows it, e.g. `ben pinned Q1 as supports B`. The
    member's name is the roster's (one word); SQL is cut short, on one line."""
    who = _short(event.data.get("by") or "a teammate", 32)
    data = event.data
    match event.kind:
        case "query":
            return f"{who} ran Q{data.get('index')}: {_short(data.get('sql', ''), MAX_SQL_SHOWN)}"
        case "pin" | "unpin":
            verb = "pinned" if event.kind == "pin" else "unpinned"
            label = session.label_of(str(data.get("hypothesis")))
            return f"{who} {verb} Q{data.get('query')} as {data.get('stance')} {label}"
        case "rank":
            rows = data.get("ranking") or []
            ranking = ", ".join(f"{session.label_of(str(r.get('id')))} {float(r.get('confidence', 0)):g}"
                                for r in rows[:6] if isinstance(r, dict))
            return f"{who} saved the ranking: {ranking}"
        case "note":
            return f"{who} wrote a note on {session.label_of(str(data.get('hypothesis')))}"
        case "submit":
            return f"{who} handed in the team's board"
        case "start":
            return f"{who} opened the investigation"
        case "hint":
            return f"{who} took a hint"
        case _:
            return f"{who}: {event.kind}"


def _short(value: object, width: int) -> str:
    """`value` on one line, control characters made visible (game.api.text), at most `width` characters."""
    from game.api.text import visible

    text = " ".join(visible(value, multiline=True).split())
    return text if len(text) <= width else text[: width - 1] + "…"
