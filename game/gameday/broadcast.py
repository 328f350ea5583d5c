"""A message from the facilitator to every player in a round (`broadcast` in the console, `servedrill gameday
broadcast PLAN TEXT`).

It is the interviewer's message (`game.gameday.gm.send`), delivered into the inbox of each game a roster player
is playing in the round: the round's incident and seed, started since the round started, not handed in yet.
Each player's game shows it as its other updates (the terminal's notice strip and Updates pane, line mode at the
next prompt). The same credential rule holds (`gm.check_sender`): a game takes a message only under the
interviewer key it verifies with, so a broadcast is refused for every game the sender may not send to, and says
so per player. A player who has no game yet in the round does not get it (they are listed: say it again, or
tell them), nor does one who handed in already.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from game.gameday.collect import journals
from game.gameday.gm import GMError, make_item, send
from game.gameday.plan import GameDay, Round


@dataclass
class Broadcast:
    """What one broadcast did: `delivered` player -> session id; `handed_in` and `not_playing` players it
    skipped; `refused` player -> why (one line)."""

    round: int
    text: str
    sender: str
    delivered: dict[str, str] = field(default_factory=dict)
    handed_in: list[str] = field(default_factory=list)
    not_playing: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "text": self.text, "from": self.sender, "delivered": dict(self.delivered),
                "handed_in": list(self.handed_in), "not_playing": list(self.not_playing),
                "refused": dict(self.refused)}

    def lines(self) -> list[str]:
        """What the broadcast did, as the console and `gameday broadcast` print it."""
        out = [f"Sent to {len(self.delivered)} player(s) in round {self.round}"
               + (f": {', '.join(sorted(self.delivered))}" if self.delivered else "")]
        if self.not_playing:
            out.append(f"  no game yet (not reached): {', '.join(self.not_playing)}")
        if self.handed_in:
            out.append(f"  handed in already: {', '.join(self.handed_in)}")
        out += [f"  refused for {player}: {why}" for player, why in sorted(self.refused.items())]
        return out


def broadcast(gameday: GameDay, rnd: Round, folders: Iterable[Path], text: str, *, sender: str | None = None,
              started: float | None = None) -> Broadcast:
    """Send `text` to every roster player's game in round `rnd` found in the data folders `folders` (games
    begun before `started` are practice and left out). GMError (one line) for a text no game would take."""
    who = (sender or "").strip() or (f"Facilitator {gameday.facilitator}" if gameday.facilitator else "Facilitator")
    make_item("message", text=text, sender=who)  # empty or too long: refused before anything is sent
    out = Broadcast(rnd.number, text, who)
    games: dict[str, list[Any]] = {}
    hand_ins = gameday.hand_ins(rnd)  # each player's game, or in a team round each team's one game (sent once)
    for journal in journals(folders):
        if (journal.player not in hand_ins or journal.incident_id != rnd.incident_id
                or journal.seed != rnd.seed):
            continue
        begun = next((float(e["time"]) for e in journal.events if e.get("kind") == "start"), None)
        if started is not None and begun is not None and begun < started:
            continue
        games.setdefault(journal.player, []).append(journal)
    for player in hand_ins:
        mine = games.get(player, [])
        playing = [j for j in mine if j.submitted is None]
        if not mine:
            out.not_playing.append(player)
        elif not playing:
            out.handed_in.append(player)
        for journal in playing:
            try:
                send(journal.path, "message", text=text, sender=who)
            except GMError as exc:
                out.refused[player] = str(exc)
                continue
            out.delivered[player] = str(journal.header.get("session_id", journal.path.stem))
    return out
