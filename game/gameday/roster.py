"""A game day's roster of secrets: one token per player, the journal key, the server's registry.

`servedrill gameday roster PLAN` writes, beside the plan file (never in a session or results folder):

- `<plan>.roster.json` (mode 0600): each roster player's secret token, and the facilitator's, which opens the
  live room in a browser (`/room/TOKEN`) and no game. A player's browser link
  (`http://HOST:PORT/?token=...`) and terminal join command carry it; a served round accepts only a
  token on this roster and takes the player's name from it (no typed names in a round).
- `<plan>.journal.key` (mode 0600): the key the server signs its journals with (game.session.signing);
  collection and the leaderboard verify with it.
- `<plan>.server/` (mode 0700): the server's registry of which session each player plays each round
  in (game.session.seat).

Running it again keeps every player's token (links already handed out stay good), adds tokens for new
roster players, drops those no longer on it, and with `reissue` gives a player a new token (the old link
stops working: a lost or shared link).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from game.gameday.plan import GameDay
from game.session import signing
from incidents.bounded_read import read_text

ROSTER_FORMAT = "servedrill-roster"
MAX_ROSTER_BYTES = 1024 * 1024


class RosterError(Exception):
    """A roster that cannot be used; the message is one line (with a hint)."""


def roster_file_for(plan: Path) -> Path:
    return Path(plan).with_name(f"{Path(plan).stem}.roster.json")


def server_dir_for(plan: Path) -> Path:
    return Path(plan).with_name(f"{Path(plan).stem}.server")


@dataclass(frozen=True)
class Roster:
    """Player -> token, and where the secrets are."""

    path: Path
    tokens: dict[str, str]
    key_file: Path
    server_dir: Path
    facilitator: str | None = None
    """The facilitator's token: it opens the live room (`/room/TOKEN`), never a game; None in a roster written
    before the room (running `gameday roster` again adds it)."""

    def player_of(self, token: str | None) -> str | None:
        """The player whose token this is, or None (compared in constant time, every entry)."""
        if not token:
            return None
        found = None
        for player, known in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = player
        return found

    def is_facilitator(self, token: str | None) -> bool:
        """Whether `token` is the facilitator's (compared in constant time); a player's token is not."""
        return bool(token and self.facilitator) and hmac.compare_digest(str(self.facilitator).encode(),
                                                                        str(token).encode())

    def room_link(self, base_url: str) -> str | None:
        """The live room's link for the facilitator (None without a facilitator token)."""
        return None if not self.facilitator else f"{base_url.rstrip('/')}/room/{quote(self.facilitator)}"

    def link(self, base_url: str, player: str) -> str:
        return f"{base_url.rstrip('/')}/?token={quote(self.tokens[player])}"

    def join_command(self, base_url: str, player: str) -> str:
        return f"servedrill join '{self.link(base_url, player)}'"


def _inside(path: Path, folder: Path | None) -> bool:
    if folder is None:
        return False
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _check_place(gameday: GameDay) -> None:
    """Secrets beside the plan must not land where players can read them."""
    here = gameday.path.parent
    for folder, what in ((gameday.data, "the players' data folder"), (gameday.results, "the results folder")):
        if folder is not None and _inside(here, folder):
            raise RosterError(f"{gameday.path}: the plan sits in {what} ({folder}), where the roster's tokens and "
                              "the journal key would be readable by players (hint: keep the plan in a folder "
                              "only the facilitator reads)")


def load_roster(gameday: GameDay) -> Roster:
    """The roster of `gameday`; RosterError when there is none, it is readable by others, or damaged."""
    path = roster_file_for(gameday.path)
    try:
        mode = os.stat(path).st_mode
        doc: Any = json.loads(read_text(path, max_bytes=MAX_ROSTER_BYTES, what="roster file"))
    except FileNotFoundError:
        raise RosterError(f"{path}: no roster yet (hint: servedrill gameday roster {gameday.path})") from None
    except (OSError, ValueError) as exc:
        raise RosterError(f"{path}: cannot read the roster ({exc}) (hint: servedrill gameday roster "
                          f"{gameday.path} writes it again, keeping nobody's token)") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RosterError(f"{path}: the roster's tokens may be read by other users (mode {stat.S_IMODE(mode):o}) "
                          f"(hint: chmod 600 {path} and reissue every token: servedrill gameday roster "
                          f"{gameday.path} --reissue-all)")
    raw = doc.get("tokens") if isinstance(doc, dict) and doc.get("format") == ROSTER_FORMAT else None
    if not isinstance(raw, dict):
        raise RosterError(f"{path}: not a servedrill roster (hint: servedrill gameday roster {gameday.path})")
    tokens = {str(p): str(t) for p, t in raw.items() if p in gameday.players and isinstance(t, str) and t}
    facilitator = doc.get("facilitator")
    if not isinstance(facilitator, str) or not facilitator or facilitator in tokens.values():
        facilitator = None
    return Roster(path, tokens, signing.key_file_for(gameday.path), server_dir_for(gameday.path), facilitator)


def make_roster(gameday: GameDay, reissue: tuple[str, ...] = (), reissue_all: bool = False) -> Roster:
    """Write (or bring up to date) the roster, the journal key and the server's folder of `gameday`."""
    _check_place(gameday)
    unknown = [p for p in reissue if p not in gameday.players]
    if unknown:
        raise RosterError(f"{gameday.path}: player '{unknown[0]}' is on no team (hint: players: "
                          f"{', '.join(gameday.players)})")
    path = roster_file_for(gameday.path)
    old: dict[str, str] = {}
    facilitator: str | None = None
    if path.exists() and not reissue_all:
        try:
            kept = load_roster(gameday)
            old, facilitator = dict(kept.tokens), kept.facilitator
        except RosterError:
            old = {}  # unreadable or open to others: every token is new
    tokens = {p: (old[p] if p in old and p not in reissue else secrets.token_urlsafe(18)) for p in gameday.players}
    facilitator = facilitator or secrets.token_urlsafe(18)
    signing.write_private(path, json.dumps({"format": ROSTER_FORMAT, "format_version": 1, "event": gameday.event,
                                            "tokens": tokens, "facilitator": facilitator}, indent=1) + "\n")
    key_file = signing.key_file_for(gameday.path)
    try:
        signing.make_key(key_file)
    except signing.KeyError_ as exc:
        raise RosterError(str(exc)) from None
    server = server_dir_for(gameday.path)
    server.mkdir(mode=0o700, exist_ok=True)
    os.chmod(server, 0o700)
    return Roster(path, tokens, key_file, server, facilitator)
