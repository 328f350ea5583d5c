"""The web side of `servedrill serve --gameday PLAN`: the page pointed at the player's own websocket, the page
that says why a request was refused, and the options the command accepts. Who may play, in which round and
with which seat is the game's (`game.gameday.gate`, through `game.api.round_gate`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from game.gameday.gate import RoundGate


def websocket_url(page: str, token: str) -> str:
    """The page textual-serve rendered, its app's websocket pointed at `/ws/<token>` (the page's own
    script adds the terminal size to it as a query)."""
    import re

    return re.sub(r'(data-session-websocket-url="[^"]*?/ws)(")', lambda m: f"{m.group(1)}/{token}{m.group(2)}",
                  page, count=1)


def room_websocket_url(page: str, token: str) -> str:
    """The page textual-serve rendered, its app's websocket pointed at the facilitator's room,
    `/room/<token>/ws`."""
    import re
    from urllib.parse import quote

    return re.sub(r'(data-session-websocket-url="[^"]*?)/ws(")',
                  lambda m: f"{m.group(1)}/room/{quote(token, safe='')}/ws{m.group(2)}", page, count=1)


def room_link(gate: RoundGate, base_url: str) -> str | None:
    """The live room's link to print when the server starts (None: the roster has no facilitator token)."""
    return gate.roster.room_link(base_url)


def refusal_page(message: str) -> str:
    """A small page that says why (no script, nothing from outside)."""
    from html import escape

    return ("<!doctype html><html><head><meta charset='utf-8'><title>servedrill game day</title></head>"
            "<body style='font: 20px/1.5 sans-serif; max-width: 40em; margin: 3em auto'>"
            f"<p>{escape(message)}</p></body></html>")


def gate_for(plan: Path, round_no: int | None, *, incident: str | None, seed: int | None, player: str | None,
             random_deal: bool, library: list[Path]) -> RoundGate:
    """The gate `serve --gameday PLAN` runs with; ValueError (one line: file: what, hint) for a plan, roster or
    option that cannot be served."""
    from game import api

    given = [name for name, value in (("INCIDENT", incident), ("--seed", seed), ("--player", player),
                                      ("--random", random_deal), ("--incidents", library)) if value]
    if given:
        raise ValueError(f"--gameday serves the plan's rounds: {given[0]} does not combine with it (hint: the plan "
                         "names each round's incident and seed; the roster names the players)")
    return api.round_gate(plan, round_no)
