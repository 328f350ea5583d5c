"""The hypotheses as a player sees them: in an order shuffled per session, labelled A, B, C...

The file order of an incident says nothing to the player (authors tend to put the truth first), so
every listing a player sees (board, briefing, line mode, reports before the debrief) uses this
order. It is deterministic in (incident id, seed, hypothesis ids), so a replayed session shows the
same board. Players refer to hypotheses by label or by title; ids stay internal (they may name the
cause).
"""

from __future__ import annotations

import hashlib
import string
from collections.abc import Sequence
from dataclasses import dataclass

from incidents.spec import Hypothesis, Incident

LABELS = string.ascii_uppercase


@dataclass(frozen=True)
class Shown:
    """One hypothesis on the board: its label (A, B, ...), internal id and title."""

    label: str
    id: str
    title: str


def _key(incident_id: str, seed: int, hypothesis_id: str) -> bytes:
    return hashlib.sha256(f"{incident_id}|{seed}|{hypothesis_id}".encode()).digest()


def board_order(incident: Incident, seed: int) -> list[Hypothesis]:
    """The incident's hypotheses in the session's shuffled order."""
    return sorted(incident.hypotheses, key=lambda h: _key(incident.id, int(seed), h.id))


def shown_hypotheses(incident: Incident, seed: int) -> list[Shown]:
    """(label, id, title) in board order."""
    return [Shown(LABELS[i % 26] * (1 + i // 26), h.id, h.title) for i, h in enumerate(board_order(incident, seed))]


def resolve(name: str, shown: Sequence[Shown]) -> str | None:
    """The hypothesis id a player's word stands for: a label (any case) or a title (any case, or a
    prefix of exactly one title); None when it names none or several."""
    word = name.strip()
    for s in shown:
        if word.upper() == s.label:
            return s.id
    folded = word.casefold()
    if not folded:
        return None
    exact = [s.id for s in shown if s.title.casefold() == folded]
    if exact:
        return exact[0]
    prefix = [s.id for s in shown if s.title.casefold().startswith(folded)]
    return prefix[0] if len(prefix) == 1 else None
