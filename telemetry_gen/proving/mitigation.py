"""Proving an incident's mitigation section: every right action list recovers the fleet (every recovery
claim holds on the continuation) and every wrong one does not (some recovery claim fails). Run by
`prove` with the hypothesis worlds, so on the first seeds of the proof policy (`validate --deep`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from incidents.mitigation import parse_actions
from incidents.spec import Incident
from telemetry_gen.mitigation import build_mitigated, recovery

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class MitigationCheck:
    """One action list of the mitigation section on one seed: whether it recovered, as it must or must not."""

    side: Literal["right", "wrong"]
    index: int
    actions: tuple[str, ...]
    recovered: bool
    claims: tuple[tuple[str, bool, str], ...]  # (claim id, holds, the claim's message)
    wall_s: float
    error: str | None = None

    @property
    def subject(self) -> Loc:
        return ("mitigation", self.side, self.index)

    @property
    def ok(self) -> bool:
        return self.error is None and self.recovered == (self.side == "right")

    @property
    def problem(self) -> str | None:
        if self.error is not None:
            return f"mitigation {self.side} {list(self.actions)}: {self.error}"
        if self.ok:
            return None
        if self.side == "right":
            failed = [f"{cid} ({msg})" for cid, holds, msg in self.claims if not holds]
            return f"mitigation right {list(self.actions)} does not recover: " + "; ".join(failed)
        return f"mitigation wrong {list(self.actions)} recovers the fleet too: every recovery claim holds"

    def line(self) -> str:
        verdict = "recovers" if self.recovered else "does not recover"
        return f"mitigation {self.side} {' + '.join(self.actions)}: {verdict} ({self.wall_s:.1f} s)"

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "index": self.index, "actions": list(self.actions), "recovered": self.recovered,
                "ok": self.ok, "error": self.error,
                "claims": [{"id": c, "holds": h, "message": m} for c, h, m in self.claims]}


def check_mitigation(incident: Incident, seed: int) -> list[MitigationCheck]:
    """Each right and wrong action list simulated past the window at `seed`, its recovery claims evaluated."""
    mit = incident.mitigation
    if mit is None:
        return []
    out: list[MitigationCheck] = []
    for side, lists in (("right", mit.right), ("wrong", mit.wrong)):
        for i, texts in enumerate(lists):
            try:
                run = build_mitigated(incident, seed, parse_actions(texts))
            except ValueError as exc:
                out.append(MitigationCheck(side, i, tuple(texts), False, (), 0.0, str(exc)))  # type: ignore[arg-type]
                continue
            rec = recovery(incident, run)
            claims = tuple((cid, r.holds, r.message) for cid, r in rec.results)
            out.append(MitigationCheck(side, i, tuple(texts), rec.recovered, claims,  # type: ignore[arg-type]
                                       run.telemetry.wall_s))
    return out
