"""Score a diagnosis from 0 to 100 against what the player's queries showed. See docs/scoring.md.

Every hypothesis is a world (`telemetry_gen.proving.worlds`); `game.rules.assess` says which rival worlds each
query told apart from the truth. From that:

- **conclusion (55)**: the worlds no query ruled out form the set an ideal investigator still
  entertains; their belief is even over that set. The player's final confidences are scored with the
  log score (probability floor 1%), in expectation under that ideal belief, as skill against an even
  spread over all hypotheses: an even spread earns 0, certainty on the truth after ruling out every
  rival earns 55. Because the expectation runs over what the evidence left open, a lucky guess earns
  what a guess is worth (less than nothing), and honest uncertainty beats a coin-flip all-in. The
  rule is strictly proper: reporting the ideal belief maximises it. Below -55 it is held at -55.
- **evidence (35)**: the rivals the player's queries ruled out, each counted as far as the player's final
  belief used it: in full at 0% confidence, not at all at the even share 1/n or more, linearly between.
  A rival ruled out by a query the player then ignored (a random board, an even one) earns nothing:
  evidence is credited for its use, so stumbling on a revealing table is not skill.
- **pins (10)**: a pin is the player's reading of a result. It is right when the query really points
  that way (refutes: the query rules the hypothesis out; supports: it does not rule it out but rules
  out some other hypothesis) and wrong when it points the other way. Each hypothesis with a right pin
  earns 10/n, each wrong pin costs 10/n.
- **penalties**: queries that ruled out nothing new beyond the first few (schema browsing is free),
  queries beyond the incident's budget, and hints at their cost.

The order hypotheses are listed in, their names, and anything a transcript says about a query's
result play no part: only the SQL text, re-run on the worlds, does. The total is clipped to 0..100.
`score` is pure: the evidence comes in as an argument.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from game.session import QUERY, RANK, SUBMIT, Event, active_pins
from incidents.spec import Incident

CONCLUSION_POINTS = 55.0
EVIDENCE_POINTS = 35.0
PIN_POINTS = 10.0
PROBABILITY_FLOOR = 0.01
"""Confidence below this counts as this in the log score, so a single 0% costs a bounded amount."""
FREE_IDLE_QUERIES = 8
IDLE_QUERY_POINTS = 1.0
IDLE_QUERY_CAP = 10.0
OVER_BUDGET_POINTS = 2.0
OVER_BUDGET_CAP = 20.0

TRUTH_OUTCOME = "<truth>"


@dataclass(frozen=True)
class QueryEvidence:
    """What one query showed: `ruled_out` are the rivals whose world gives a materially different
    result; `why` says, per ruled-out rival, in a reader's words, the reading a reader would cite
    (telemetry_gen.proving.evidence.cite) and `margins` the largest margin of any reading (how many times
    the required distance). `ok` is whether the query ran on the
    truth world; `rows` how many rows it returned there; `assessed` False when scoring's time budget ran
    out before the query was re-run (it then rules out nothing)."""

    index: int
    sql: str
    ok: bool
    rows: int = 0
    schema: bool = False
    ruled_out: tuple[str, ...] = ()
    why: dict[str, str] = field(default_factory=dict)
    assessed: bool = True
    margins: dict[str, float] = field(default_factory=dict)
    note: str = ""
    """Why the query could rule nothing out whatever it showed (a threshold of the player's own,
    telemetry_gen.proving.thresholds); empty otherwise."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Component:
    """One line of the score. `points` is within [-max, max] (penalties: max 0, points <= 0)."""

    key: str
    title: str
    group: str
    points: float
    max: float
    reason: str


@dataclass
class ScoreReport:
    """A scored session. Probabilities are 0..1. `ruled_out` maps a rival to the first query (its
    index, Qn) that ruled it out; `consistent` lists the hypotheses no query ruled out (the truth is
    always among them); `ideal_belief` is the even belief over them."""

    incident_id: str
    total: float
    components: list[Component]
    truth: list[str]
    ranking: list[dict[str, Any]]
    submitted: bool
    rivals: list[str]
    ruled_out: dict[str, int]
    consistent: list[str]
    ideal_belief: dict[str, float]
    per_query: list[dict[str, Any]] = field(default_factory=list)
    pins: list[dict[str, Any]] = field(default_factory=list)
    queries: int = 0
    query_budget: int | None = None
    hint_cost: int = 0
    missed: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per rival never ruled out, a reference query that would have: {"query": its name, "sql", "why"}
    (filled by game.rules.assess.score_session; empty when none of the incident's queries rules it out)."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["components"] = [asdict(c) for c in self.components]
        return out

    def component(self, key: str) -> Component:
        return next(c for c in self.components if c.key == key)


def truth_ids(incident: Incident) -> list[str]:
    return [h.id for h in incident.hypotheses if h.true]


def _clip(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return max(lo, min(hi, x))


def _pct(p: float) -> str:
    return f"{100 * p:.0f}%"


def outcome_probabilities(incident: Incident, ranking: list[dict[str, Any]]) -> dict[str, float]:
    """Player's probability per outcome: the true hypotheses merged into one, each rival on its own.
    Without a ranking, the even spread over hypotheses."""
    truth = set(truth_ids(incident))
    hyps = [h.id for h in incident.hypotheses]
    conf = ({str(r["id"]): float(r["confidence"]) / 100.0 for r in ranking} if ranking
            else {h: 1.0 / len(hyps) for h in hyps})
    out = {TRUTH_OUTCOME: sum(conf.get(h, 0.0) for h in truth)}
    for h in hyps:
        if h not in truth:
            out[h] = conf.get(h, 0.0)
    return out


def expected_log_score(probs: Mapping[str, float], belief: Mapping[str, float]) -> float:
    """E over `belief` of ln max(p, floor), in nats (0 is perfect)."""
    return sum(q * math.log(max(probs.get(o, 0.0), PROBABILITY_FLOOR)) for o, q in belief.items() if q > 0)


def conclusion_skill(probs: Mapping[str, float], belief: Mapping[str, float], n_outcomes: int) -> float:
    """Expected log score as skill against an even spread over `n_outcomes`: 0 for the even spread,
    1 for certainty on the truth once it is the only world left; at least -1 (held there)."""
    reference = math.log(1.0 / n_outcomes)
    return max(-1.0, 1.0 - expected_log_score(probs, belief) / reference)


def evidence_use(confidence: float, n_hypotheses: int) -> float:
    """How far a final confidence (0..1) on a ruled-out rival let it go: 1 at 0, 0 at the even share
    1/n or above, linear between."""
    return _clip(1.0 - confidence * n_hypotheses)


def pin_verdict(hypothesis: str, stance: str, ruled_out: Iterable[str], truth: set[str]) -> str:
    """'right', 'wrong' or 'silent': what a pin of a query to a hypothesis is worth, given the rivals
    that query ruled out (see the module docstring)."""
    ruled = set(ruled_out)
    if hypothesis in truth:
        against, narrows = False, bool(ruled)
    else:
        against, narrows = hypothesis in ruled, bool(ruled - {hypothesis})
    if stance == "refutes":
        return "right" if against else ("wrong" if narrows else "silent")
    return "wrong" if against else ("right" if narrows else "silent")


def score(incident: Incident, events: Iterable[Event | dict[str, Any]],
          evidence: Mapping[int, QueryEvidence]) -> ScoreReport:
    """Score a session's events against the incident, given each query's evidence (by index Qn,
    from `game.rules.assess`). Pure. Uses the submission's ranking; without one, the latest ranking (then
    `submitted` is False); without any, the even spread."""
    evs = [Event.from_dict(e) for e in events]
    hyps = [h.id for h in incident.hypotheses]
    truth = truth_ids(incident)
    truth_set = set(truth)
    rivals = [h for h in hyps if h not in truth_set]
    titles = {h.id: h.title for h in incident.hypotheses}
    submit = next((e for e in evs if e.kind == SUBMIT), None)
    ranks = [e for e in evs if e.kind == RANK]
    final = submit or (ranks[-1] if ranks else None)
    ranking: list[dict[str, Any]] = [dict(r) for r in final.data["ranking"]] if final else []
    indices = [int(e.data.get("index", i + 1)) for i, e in enumerate(e for e in evs if e.kind == QUERY)]
    n_queries = len(indices)

    ruled_out: dict[str, int] = {}
    per_query: list[dict[str, Any]] = []
    idle = 0
    for index in indices:
        ev = evidence.get(index)
        ruled = [r for r in (ev.ruled_out if ev else ()) if r in rivals]
        new = [r for r in ruled if r not in ruled_out]
        for r in new:
            ruled_out[r] = index
        if ev is not None and ev.ok and not ev.schema and not new:
            idle += 1
        per_query.append({"index": index, "ok": bool(ev and ev.ok), "rows": ev.rows if ev else 0,
                          "ruled_out": ruled, "new": new, "why": dict(ev.why) if ev else {},
                          "assessed": bool(ev.assessed) if ev else False, "note": ev.note if ev else ""})
    consistent = [h for h in hyps if h in truth_set or h not in ruled_out]
    open_rivals = [r for r in rivals if r not in ruled_out]
    belief = {TRUTH_OUTCOME: 1.0 / (1 + len(open_rivals)), **{r: 1.0 / (1 + len(open_rivals)) for r in open_rivals}}
    ideal = {h: (belief[TRUTH_OUTCOME] / len(truth) if h in truth_set else belief.get(h, 0.0)) for h in hyps}

    components: list[Component] = []
    add = components.append

    # ---- conclusion
    probs = outcome_probabilities(incident, ranking)
    skill = conclusion_skill(probs, belief, 1 + len(rivals))
    p_truth = probs[TRUTH_OUTCOME]
    if not open_rivals:
        left = "Your queries ruled out every rival, so the evidence supports certainty"
    else:
        names = ", ".join(titles[r] for r in open_rivals)
        left = (f"Your queries left {len(open_rivals)} rival{'s' if len(open_rivals) > 1 else ''} open ({names}), "
                f"so the evidence supports {_pct(belief[TRUTH_OUTCOME])} on each world still open")
    add(Component("conclusion", "Conclusion the evidence supports", "conclusion",
                  round(CONCLUSION_POINTS * skill, 2), CONCLUSION_POINTS,
                  f"{left}; you put {_pct(p_truth)} on the true cause"
                  + ("" if ranking else " (no ranking: an even spread)") + "."))

    # ---- evidence
    used = {r: evidence_use(probs.get(r, 0.0), len(hyps)) for r in ruled_out}
    share = sum(used.values()) / len(rivals) if rivals else 1.0
    unused = [r for r, u in used.items() if u < 1.0]
    add(Component("evidence", "Rivals ruled out by your queries, and let go", "evidence",
                  round(EVIDENCE_POINTS * share, 2), EVIDENCE_POINTS,
                  f"{len(ruled_out)} of {len(rivals)} rival hypotheses ruled out by what your queries showed"
                  + (f"; {len(unused)} of them still held at some confidence, which counts against using them"
                     if unused else "") + "."))

    # ---- pins
    pins: list[dict[str, Any]] = []
    right_hyps: set[str] = set()
    wrong = 0
    for e in active_pins(evs):  # a withdrawn pin counts neither way; a repeated one counts once
        q, hyp, stance = int(e.data.get("query", 0)), str(e.data.get("hypothesis")), str(e.data.get("stance"))
        ev = evidence.get(q)
        verdict = pin_verdict(hyp, stance, ev.ruled_out if ev else (), truth_set)
        pins.append({"query": q, "hypothesis": hyp, "stance": stance, "verdict": verdict})
        if verdict == "right":
            right_hyps.add(hyp)
        elif verdict == "wrong":
            wrong += 1
    pin_share = _clip((len(right_hyps) - wrong) / len(hyps), -1.0, 1.0)
    add(Component("pins", "Pinned evidence read rightly", "pins", round(PIN_POINTS * pin_share, 2), PIN_POINTS,
                  f"{len(pins)} pin{'s' if len(pins) != 1 else ''}: {len(right_hyps)} hypothes"
                  f"{'is' if len(right_hyps) == 1 else 'es'} pinned with a query that points that way, "
                  f"{wrong} pin{'s' if wrong != 1 else ''} pointing the other way."))

    # ---- penalties
    over = max(0, idle - FREE_IDLE_QUERIES)
    add(Component("idle", "Queries that ruled out nothing new", "penalty",
                  -min(IDLE_QUERY_CAP, IDLE_QUERY_POINTS * over) if over else 0.0, 0.0,
                  f"{idle} of {n_queries} queries ruled out no rival that was still open "
                  f"({FREE_IDLE_QUERIES} are free; schema browsing always is)."))
    budget = incident.query_budget
    beyond = max(0, n_queries - budget) if budget else 0
    add(Component("budget", "Query budget", "penalty",
                  -min(OVER_BUDGET_CAP, OVER_BUDGET_POINTS * beyond) if beyond else 0.0, 0.0,
                  f"{n_queries} queries against a budget of {budget}." if budget
                  else f"{n_queries} queries; this incident has no budget."))
    hint_cost = sum(int(e.data.get("cost", 0)) for e in evs if e.kind == "hint")
    hints = sum(1 for e in evs if e.kind == "hint")
    add(Component("hints", "Hints", "penalty", -float(hint_cost) if hint_cost else 0.0, 0.0,
                  f"{hints} hint{'s' if hints > 1 else ''} taken, costing {hint_cost} points." if hints
                  else "No hints taken."))

    total = round(_clip(sum(c.points for c in components), 0.0, 100.0), 1)
    return ScoreReport(
        incident_id=incident.id, total=total, components=components, truth=truth, ranking=ranking,
        submitted=submit is not None, rivals=rivals, ruled_out=ruled_out, consistent=consistent,
        ideal_belief={h: round(p, 4) for h, p in ideal.items()}, per_query=per_query, pins=pins,
        queries=n_queries, query_budget=budget, hint_cost=hint_cost,
    )


def format_report(report: ScoreReport, titles: Mapping[str, str] | None = None) -> str:
    """Plain-text score breakdown for terminals; with `titles`, one line per query saying which
    rivals it ruled out."""
    lines = [f"Score {report.total:.1f} / 100" + ("" if report.submitted else "  (not submitted)")]
    for c in report.components:
        pts = f"{c.points:+.1f}" if c.group == "penalty" else f"{c.points:.1f} / {c.max:.0f}"
        lines.append(f"  {c.title:<36} {pts:>12}  {c.reason}")
    if titles is not None and report.per_query:
        lines.append("What each query ruled out:")
        for q in report.per_query:
            if not q["ok"]:
                what = "failed"
            elif q["ruled_out"]:
                what = "; ".join(f"{titles.get(r, r)} ({q['why'].get(r, '')})" for r in q["ruled_out"])
            else:
                what = "nothing"
            lines.append(f"  Q{q['index']}: {what}")
    return "\n".join(lines)
