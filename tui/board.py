"""The hypothesis board as the player edits it: an order and a confidence per hypothesis.

This is a draft. Nothing here is recorded until the player saves the ranking or submits, and then
`game.session.Session` decides whether it is acceptable; the helpers below only say what the player
would be told, so the screen can warn before the session refuses.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

STEP = 5
"""Percentage points one +/- press moves a confidence."""


class Labelled(Protocol):
    """A hypothesis as the session shows it (`game.session.hypotheses.Shown`)."""

    @property
    def label(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def title(self) -> str: ...


@dataclass
class BoardItem:
    """One hypothesis on the board: its board `label` (A, B, ...), internal `id` (never shown) and
    title. `confidence` is in whole percent, 0..100."""

    id: str
    title: str
    confidence: int = 0
    label: str = ""

    @property
    def name(self) -> str:
        """What the player reads: "B  Title" (the title alone when there is no label)."""
        return f"{self.label}  {self.title}" if self.label else self.title

    @property
    def quoted(self) -> str:
        """For a sentence: "B 'Title'"."""
        return f"{self.label} '{self.title}'" if self.label else f"'{self.title}'"


@dataclass
class Evidence:
    """Queries (their Qn numbers) pinned to one hypothesis."""

    supports: list[int] = field(default_factory=list)
    refutes: list[int] = field(default_factory=list)


@dataclass
class Board:
    """Hypotheses in the player's order, most likely first."""

    items: list[BoardItem]

    @classmethod
    def initial(cls, hypotheses: Sequence[Labelled],
                ranking: Sequence[Mapping[str, Any]] | None = None) -> Board:
        """Board from the session's board (`Session.board`: label, id, title in its shuffled order).
        With a saved `ranking` ([{"id", "confidence"}], best first), its order and confidences;
        unranked hypotheses follow at 0% in board order. Without, the board order with an even split
        of 100 (the player has not ranked yet; earlier rows get the remainder, so confidences never
        rise down the list)."""
        shown = {h.id: h for h in hypotheses}
        if ranking:
            items = [BoardItem(h.id, h.title, round(float(r["confidence"])), h.label)
                     for r in ranking if (h := shown.get(str(r["id"]))) is not None]
            ranked = {i.id for i in items}
            items += [BoardItem(h.id, h.title, 0, h.label) for h in hypotheses if h.id not in ranked]
            return cls(items)
        n = len(hypotheses)
        base, extra = divmod(100, n) if n else (0, 0)
        return cls([BoardItem(h.id, h.title, base + (1 if i < extra else 0), h.label)
                    for i, h in enumerate(hypotheses)])

    def copy(self) -> Board:
        return Board([BoardItem(i.id, i.title, i.confidence, i.label) for i in self.items])

    @property
    def total(self) -> int:
        """Sum of confidences, percent."""
        return sum(i.confidence for i in self.items)

    def move(self, index: int, delta: int) -> int:
        """Move the item at `index` by `delta` places (clamped to the list); returns its new index."""
        if not self.items:
            return 0
        index = max(0, min(index, len(self.items) - 1))
        target = max(0, min(index + delta, len(self.items) - 1))
        item = self.items.pop(index)
        self.items.insert(target, item)
        return target

    def adjust(self, index: int, delta: int) -> None:
        """Change one confidence by `delta` percent, kept within 0..100."""
        item = self.items[index]
        item.confidence = max(0, min(100, item.confidence + delta))

    def normalised(self) -> Board:
        """Confidences scaled to sum to exactly 100 (largest remainders get the spare points, ties
        to the earlier row), then ordered by confidence, stable. All zero becomes an even split."""
        if not self.items:
            return Board([])
        total = self.total
        weights = [i.confidence for i in self.items] if total > 0 else [1] * len(self.items)
        norm = sum(weights)
        exact = [100 * w / norm for w in weights]
        floors = [int(x) for x in exact]
        spare = 100 - sum(floors)
        by_remainder = sorted(range(len(exact)), key=lambda k: (-(exact[k] - floors[k]), k))
        for k in by_remainder[:spare]:
            floors[k] += 1
        items = [BoardItem(i.id, i.title, c, i.label) for i, c in zip(self.items, floors, strict=True)]
        items.sort(key=lambda i: -i.confidence)
        return Board(items)

    def problems(self) -> list[str]:
        """What stands between this draft and an acceptable ranking, one line each (empty: none)."""
        out = []
        if self.total != 100:
            out.append(f"confidences sum to {self.total}%, not 100%")
        for a, b in itertools.pairwise(self.items):
            if b.confidence > a.confidence:
                out.append(f"{b.quoted} ({b.confidence}%) sits below {a.quoted} ({a.confidence}%)")
                break
        return out

    def ranking(self) -> list[tuple[str, float]]:
        """(id, confidence percent) pairs, best first: what `Session.rank` and `submit` take."""
        return [(i.id, float(i.confidence)) for i in self.items]

    def same_as(self, ranking: Sequence[Mapping[str, Any]] | None) -> bool:
        """Whether the board shows exactly this saved ranking (hypotheses at 0% may be left off it)."""
        saved = [(str(r["id"]), round(float(r["confidence"]))) for r in ranking or []]
        shown = [(i.id, i.confidence) for i in self.items]
        return bool(saved) and shown[: len(saved)] == saved and all(c == 0 for _, c in shown[len(saved):])


def evidence_by_hypothesis(events: Iterable[Any]) -> dict[str, Evidence]:
    """Pins from session events (objects with `kind` and `data`), by hypothesis id, in pin order.
    Pinning the same query twice with the same stance counts once; an "unpin" event (query, hypothesis
    and, optionally, stance) takes the pin off again."""
    out: dict[str, Evidence] = {}
    for e in events:
        if e.kind not in ("pin", "unpin"):
            continue
        ev = out.setdefault(str(e.data["hypothesis"]), Evidence())
        query = int(e.data["query"])
        stance = e.data.get("stance")
        if e.kind == "unpin":
            for name, bucket in (("supports", ev.supports), ("refutes", ev.refutes)):
                if stance in (None, name) and query in bucket:
                    bucket.remove(query)
            continue
        bucket = ev.supports if stance == "supports" else ev.refutes
        if query not in bucket:
            bucket.append(query)
    return out


def latest_notes(events: Iterable[Any]) -> dict[str, str]:
    """The last note written on each hypothesis, by id."""
    return {str(e.data["hypothesis"]): str(e.data["text"]) for e in events if e.kind == "note"}
