"""The mitigation's score, apart from the diagnosis's: did the fleet recover, how soon, at what cost, and did
the actions address the cause or a symptom (docs/mitigation.md).

Everything is read off the mitigation run's telemetry (telemetry_gen.mitigation) with the incident's own
recovery claims: recovered = every claim holds over its window; time to recovery = from the decision to
the end of the first sliding window (RECOVERY_STEP_S apart, RECOVERY_WINDOW_S long) from which on the first
claim holds; errors during the change = requests that failed from the decision to the horizon, against the
same span of the run without actions; requests shed = those the gateway rejected for a shed tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from incidents.claims import evaluate_symptom, window_bounds_sql
from incidents.mitigation import parse_actions
from incidents.spec import Incident
from telemetry_gen.mitigation import mitigated_database, recovery_on

RECOVERY_WINDOW_S = 120.0
RECOVERY_STEP_S = 30.0
POINTS_RECOVERED = 60
POINTS_FAST = 20  # scaled down linearly to 0 at the horizon
POINTS_CAUSE = 20


@dataclass(frozen=True)
class MitigationScore:
    """How the mitigation went. `verdict` is "cause" (a right action list of the incident), "symptom" (a
    wrong one, or any that did not recover) or "recovered" (not listed, but the fleet recovered)."""

    actions: tuple[str, ...]
    decision_s: float
    end_s: float
    recovered: bool
    claims: tuple[tuple[str, bool, str], ...]
    time_to_recovery_s: float | None
    errors_after: int
    errors_unmitigated: int
    requests_shed: int
    restarts: int
    verdict: str
    cost_note: str
    points: int
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {"actions": list(self.actions), "decision_s": self.decision_s, "end_s": self.end_s,
                "recovered": self.recovered, "time_to_recovery_s": self.time_to_recovery_s,
                "errors_after": self.errors_after, "errors_unmitigated": self.errors_unmitigated,
                "requests_shed": self.requests_shed, "restarts": self.restarts, "verdict": self.verdict,
                "points": self.points, "digest": self.digest,
                "claims": [{"id": c, "holds": h, "message": m} for c, h, m in self.claims]}


def _errors(con: duckdb.DuckDBPyConnection, inc: Incident, start: float, end: float) -> int:
    where = window_bounds_sql(inc.window.start, (start, end))
    row = con.execute(f"SELECT count(*) FROM requests WHERE status <> 'ok' AND {where}").fetchone()
    return int(row[0]) if row else 0


def _restarts(con: duckdb.DuckDBPyConnection, inc: Incident, start: float) -> int:
    """Replica restarts (each drains first: its SIGTERM line) and drains out of the router's pool (the change
    log's `drained` rows) from `start` on."""
    where = window_bounds_sql(inc.window.start, (start, 1e12))
    row = con.execute(f"SELECT count(*) FROM logs WHERE message LIKE '%drain%' AND {where}").fetchone()
    drained = con.execute(f"SELECT count(*) FROM events WHERE component = 'router' AND detail = 'drained' "
                          f"AND new_value = 'true' AND {where}").fetchone()
    return (int(row[0]) if row else 0) + (int(drained[0]) if drained else 0)


def time_to_recovery(con: duckdb.DuckDBPyConnection, inc: Incident, decision_s: float, end_s: float) -> float | None:
    """Seconds from the decision to the end of the first short window from which on the first recovery claim
    holds in every later window (None: it never settles)."""
    assert inc.mitigation is not None
    claim = inc.mitigation.recovery[0]
    starts: list[float] = []
    s = decision_s
    while s + RECOVERY_WINDOW_S <= end_s + 1e-9:
        starts.append(s)
        s += RECOVERY_STEP_S
    holds = []
    for s in starts:
        side = claim.a.model_copy(update={"window": (s, s + RECOVERY_WINDOW_S)})
        holds.append(evaluate_symptom(con, claim.model_copy(update={"a": side}), inc.window.start).holds)
    first = None
    for i in range(len(holds) - 1, -1, -1):  # the earliest start from which every later window holds
        if not holds[i]:
            break
        first = i
    return None if first is None else starts[first] + RECOVERY_WINDOW_S - decision_s


def _same(a: list[str], b: list[str]) -> bool:
    return sorted(x.text() for x in parse_actions(a)) == sorted(x.text() for x in parse_actions(b))


def score_mitigation(inc: Incident, seed: int, actions: list[str], decision_s: float) -> MitigationScore:
    """Simulate (or find in the build cache) the mitigation and the run without it, and score the first."""
    mit = inc.mitigation
    assert mit is not None
    parsed = parse_actions(actions)
    info, shed = mitigated_database(inc, seed, parsed, decision_s=decision_s)
    base, _ = mitigated_database(inc, seed, [], decision_s=decision_s)
    end = info.span_s
    con = duckdb.connect(info.path, read_only=True)
    try:
        rec = recovery_on(con, inc)
        ttr = time_to_recovery(con, inc, decision_s, end) if rec.recovered else None
        errors = _errors(con, inc, decision_s, end)
        restarts = _restarts(con, inc, decision_s)
    finally:
        con.close()
    bcon = duckdb.connect(base.path, read_only=True)
    try:
        errors_base = _errors(bcon, inc, decision_s, end)
    finally:
        bcon.close()
    if any(_same(actions, right) for right in mit.right):
        verdict = "cause"
    elif rec.recovered:
        verdict = "recovered"
    else:
        verdict = "symptom"
    points = 0
    if rec.recovered:
        points += POINTS_RECOVERED + POINTS_CAUSE * (verdict == "cause")
        if ttr is not None:
            points += round(POINTS_FAST * max(0.0, 1.0 - ttr / max(end - decision_s, 1.0)))
    return MitigationScore(tuple(a.text() for a in parsed), decision_s, end, rec.recovered,
                           tuple((cid, r.holds, r.message) for cid, r in rec.results), ttr, errors, errors_base,
                           shed, restarts, verdict, (mit.cost_note or "").strip(), points, info.digest)


def database_path(inc: Incident, seed: int, actions: list[str], decision_s: float) -> Path:
    """The mitigation run's database (built if needed), for the player's queries after the decision."""
    return Path(mitigated_database(inc, seed, parse_actions(actions), decision_s=decision_s)[0].path)


def mitigation_markdown(score: MitigationScore) -> list[str]:
    """The debrief's mitigation section."""
    out = ["## Mitigation", ""]
    out.append(f"At t={score.decision_s:g} s you acted: " + ", ".join(f"`{a}`" for a in score.actions) + ".")
    out.append("")
    out.append(f"- Recovered: **{'yes' if score.recovered else 'no'}** "
               f"(the fleet was simulated to t={score.end_s:g} s)")
    for cid, holds, msg in score.claims:
        out.append(f"  - {'holds' if holds else 'fails'}: {cid} ({msg})")
    ttr = "never settled" if score.time_to_recovery_s is None else f"{score.time_to_recovery_s:.0f} s"
    out.append(f"- Time to recovery: {ttr}")
    out.append(f"- Errors from the decision on: {score.errors_after} (without acting: {score.errors_unmitigated})")
    out.append(f"- Requests shed: {score.requests_shed}; replica drains and restarts: {score.restarts}")
    out.append("- GPU-hours added: 0 (no replicas were added)")
    what = {"cause": "addressed the cause", "recovered": "recovered the fleet, though the incident does not list "
            "it as the fix", "symptom": "treated a symptom: the cause is still there"}[score.verdict]
    out.append(f"- The actions {what}.")
    if score.cost_note and score.verdict != "cause":
        out += ["", score.cost_note]
    out += ["", f"Mitigation score: {score.points}/100 (kept apart from the diagnosis's score)."]
    return out
