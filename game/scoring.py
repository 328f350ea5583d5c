"""Score a diagnosis from 0 to 100 as named components, each with its points, maximum and a reason.

What the debugging round measures is hypothesis ranking and evidence discipline, so the score has
three positive groups and a set of penalties:

- ranking (35): the Brier score of the submitted confidences (25) and the reciprocal rank of the
  truth (10). Brier rather than log: it is strictly proper like the log score, but bounded, so a
  single 0% on the truth costs a fixed amount instead of minus infinity, no probability floor has to
  be invented, and its gap to a calibrated report reads directly as "overconfident". It is scored
  as skill against an even spread over the hypotheses: an even spread earns 0, certainty on the
  truth earns all 25. Several true causes count as one outcome ("the truth"); aliases were already
  mapped to ids when the session recorded the ranking.
- evidence (40): the posterior the observed signals justify (uniform prior, naive Bayes over the
  observed signals' likelihoods) on the truth (20), and the log likelihood ratio of the observed
  signals between the truth and the player's strongest wrong hypothesis (20). Both are measured
  against what observing every signal would give, capped at 0.9 and ln 10 (10:1 odds).
- discipline (25): decomposing latency before the first ranking on latency incidents, or looking at
  any evidence before the first ranking elsewhere (10); a named discriminator query that observed a
  signal whose likelihoods differ at least twofold between the player's top two hypotheses (15).
- penalties: confidence on the truth more than 10 points above what the evidence justifies (a
  lucky guess), queries that observed no signal and were not schema exploration beyond the first
  few, queries beyond the incident's budget, and hints at their cost.

The total is clipped to 0..100. `score` is pure: the CLI and the TUI call the same function.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from game.observe import decomposes_latency, is_latency_incident, is_schema_exploration, observed_signals
from game.session import QUERY, RANK, SUBMIT, Event
from incidents.spec import Incident, Signal

BRIER_POINTS = 25.0
RANK_POINTS = 10.0
JUSTIFIED_POINTS = 20.0
SEPARATION_POINTS = 20.0
FIRST_LOOK_POINTS = 10.0
DISCRIMINATOR_POINTS = 15.0

JUSTIFIED_TARGET = 0.9
"""Justified posterior on the truth that earns all JUSTIFIED_POINTS (less when all signals fall short)."""
SEPARATION_TARGET = math.log(10.0)
"""Log likelihood ratio (nats) of truth over rival that earns all SEPARATION_POINTS."""
MATERIAL_RATIO = 2.0
"""A signal discriminates two hypotheses when their likelihoods differ at least this many times."""
LIKELIHOOD_FLOOR = 1e-3
"""Likelihoods below this count as this, so one observation cannot make a posterior exactly zero."""

UNSUPPORTED_TOLERANCE = 0.10
UNSUPPORTED_POINTS = 25.0
"""Penalty per unit of confidence on the truth above justified + tolerance. At most 25 per unit, so that
lowering the truth's confidence never gains more than the Brier component loses."""
FREE_WASTED_QUERIES = 5
WASTED_QUERY_POINTS = 1.0
WASTED_QUERY_CAP = 15.0
OVER_BUDGET_POINTS = 2.0
OVER_BUDGET_CAP = 20.0


@dataclass(frozen=True)
class Component:
    """One line of the score. `points` is within [min(0, max), max(0, max)]; penalties have max 0."""

    key: str
    title: str
    group: str
    points: float
    max: float
    reason: str


@dataclass
class ScoreReport:
    """A scored session. Probabilities are 0..1; `first_seen` maps a signal id to the query index (Qn)
    that first observed it."""

    incident_id: str
    total: float
    components: list[Component]
    truth: list[str]
    ranking: list[dict[str, Any]]
    submitted: bool
    justified_posterior: dict[str, float]
    observed_signals: list[str]
    missed_signals: list[str]
    first_seen: dict[str, int] = field(default_factory=dict)
    queries: int = 0
    query_budget: int | None = None
    hint_cost: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["components"] = [asdict(c) for c in self.components]
        return out

    def component(self, key: str) -> Component:
        return next(c for c in self.components if c.key == key)


# ---------------------------------------------------------------- probability


def posterior(incident: Incident, signal_ids: Iterable[str]) -> dict[str, float]:
    """P(hypothesis | the signals were seen): uniform prior, signals independent given the hypothesis."""
    by_id = {s.id: s for s in incident.signals}
    log_post = {h.id: 0.0 for h in incident.hypotheses}
    for sid in dict.fromkeys(signal_ids):
        signal = by_id[sid]
        for hid in log_post:
            log_post[hid] += math.log(max(signal.likelihood(hid), LIKELIHOOD_FLOOR))
    top = max(log_post.values())
    weights = {h: math.exp(v - top) for h, v in log_post.items()}
    norm = sum(weights.values())
    return {h: w / norm for h, w in weights.items()}


def log_ratio(signal: Signal, a: str, b: str) -> float:
    """ln P(signal | a) / P(signal | b), with the likelihood floor."""
    la = max(signal.likelihood(a), LIKELIHOOD_FLOOR)
    lb = max(signal.likelihood(b), LIKELIHOOD_FLOOR)
    return math.log(la) - math.log(lb)


def discriminates(signal: Signal, a: str, b: str) -> bool:
    """Whether the signal's likelihoods under a and b differ at least MATERIAL_RATIO times."""
    return abs(log_ratio(signal, a, b)) >= math.log(MATERIAL_RATIO) - 1e-12


def truth_ids(incident: Incident) -> list[str]:
    return [h.id for h in incident.hypotheses if h.true]


def brier(probs: dict[str, float], truth: Iterable[str]) -> float:
    """Brier score with the true causes merged into one outcome: (P(truth) - 1)^2 + sum of p^2 over the
    wrong hypotheses. 0 is perfect, 2 the worst; probabilities 0..1."""
    true = set(truth)
    p_true = sum(p for h, p in probs.items() if h in true)
    return (p_true - 1.0) ** 2 + sum(p * p for h, p in probs.items() if h not in true)


# ---------------------------------------------------------------- scoring


@dataclass
class _Query:
    index: int
    seq: int
    sql: str
    ok: bool
    reads: list[Any]
    signals: list[str]


def _queries(incident: Incident, events: Sequence[Event]) -> list[_Query]:
    out = []
    for e in events:
        if e.kind != QUERY:
            continue
        reads = list(e.data.get("reads") or [])
        ok = bool(e.data.get("ok"))
        out.append(_Query(int(e.data.get("index", len(out) + 1)), e.seq, str(e.data.get("sql", "")), ok,
                          reads, observed_signals(incident, reads, ok)))
    return out


def _clip(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return max(lo, min(hi, x))


def _pct(p: float) -> str:
    return f"{100 * p:.0f}%"


def score(incident: Incident, events: Iterable[Event | dict[str, Any]]) -> ScoreReport:
    """Score a session's events (Event objects or their dicts) against the incident. Pure.

    Uses the submission's ranking; without one, the latest ranking (then `submitted` is False)."""
    evs = [Event.from_dict(e) for e in events]
    hyp_ids = [h.id for h in incident.hypotheses]
    truth = truth_ids(incident)
    titles = {h.id: h.title for h in incident.hypotheses}
    queries = _queries(incident, evs)
    submit = next((e for e in evs if e.kind == SUBMIT), None)
    ranks = [e for e in evs if e.kind == RANK]
    final = submit or (ranks[-1] if ranks else None)
    ranking: list[dict[str, Any]] = [dict(r) for r in final.data["ranking"]] if final else []
    probs = {h: 0.0 for h in hyp_ids}
    for r in ranking:
        probs[r["id"]] = float(r["confidence"]) / 100.0

    first_seen: dict[str, int] = {}
    for q in queries:
        for sid in q.signals:
            first_seen.setdefault(sid, q.index)
    observed = [s.id for s in incident.signals if s.id in first_seen]
    missed = [s.id for s in incident.signals if s.id not in first_seen]
    just = posterior(incident, observed)
    just_all = posterior(incident, [s.id for s in incident.signals])
    p_just = sum(just[h] for h in truth)
    p_player = sum(probs[h] for h in truth)

    components: list[Component] = []
    add = components.append

    # ---- ranking
    n, m = len(hyp_ids), len(truth)
    even = {h: 1.0 / n for h in hyp_ids}
    if ranking:
        bs, bs_even = brier(probs, truth), brier(even, truth)
        skill = _clip(1.0 - bs / bs_even) if bs_even > 0 else float(bs == 0)
        add(Component("brier", "Calibrated ranking", "ranking", round(BRIER_POINTS * skill, 2), BRIER_POINTS,
                      f"Brier score {bs:.3f} against {bs_even:.3f} for an even spread, with "
                      f"{_pct(p_player)} on the true cause."))
        order = [r["id"] for r in ranking]
        ranks_of_truth = [order.index(h) + 1 for h in truth if h in order]
        best = min(ranks_of_truth) if ranks_of_truth else None
        rank_pts = RANK_POINTS / best if best else 0.0
        why = (f"The true cause ({titles[order[best - 1]]}) is ranked {best} of {len(order)}." if best
               else "No true cause is on the ranking.")
        add(Component("rank", "Rank of the truth", "ranking", round(rank_pts, 2), RANK_POINTS, why))
    else:
        add(Component("brier", "Calibrated ranking", "ranking", 0.0, BRIER_POINTS, "No ranking was given."))
        add(Component("rank", "Rank of the truth", "ranking", 0.0, RANK_POINTS, "No ranking was given."))

    # ---- evidence
    base = m / n
    p_all = sum(just_all[h] for h in truth)
    target = min(JUSTIFIED_TARGET, p_all)
    frac = _clip((p_just - base) / (target - base)) if target > base else float(bool(observed))
    add(Component("justified", "Evidence for the truth", "evidence", round(JUSTIFIED_POINTS * frac, 2),
                  JUSTIFIED_POINTS,
                  f"The {len(observed)} of {len(incident.signals)} signals you observed justify "
                  f"{_pct(p_just)} on the true cause (all of them: {_pct(p_all)})."))

    order = [r["id"] for r in ranking]
    best_true = next((h for h in order if h in truth), None) or max(truth, key=lambda h: just[h])
    wrong = [h for h in hyp_ids if h not in truth]
    rival = next((h for h in order if h not in truth), None) or max(wrong, key=lambda h: just[h])
    by_id = {s.id: s for s in incident.signals}
    llr = sum(log_ratio(by_id[s], best_true, rival) for s in observed)
    llr_all = sum(log_ratio(s, best_true, rival) for s in incident.signals)
    sep_target = min(SEPARATION_TARGET, llr_all)
    if sep_target > 0.05:
        sep = _clip(llr / sep_target)
        why = (f"Observed evidence favours {titles[best_true]} over {titles[rival]} by "
               f"{math.exp(_clip(llr, -50, 50)):.1f}:1 (target {math.exp(sep_target):.1f}:1).")
    else:
        sep = float(bool(observed))
        why = f"No signal separates {titles[best_true]} from {titles[rival]}; any evidence counts."
    add(Component("separation", "Truth separated from the runner-up", "evidence",
                  round(SEPARATION_POINTS * sep, 2), SEPARATION_POINTS, why))

    # ---- discipline
    first_rank_seq = min((e.seq for e in evs if e.kind in (RANK, SUBMIT)), default=None)
    before = [q for q in queries if q.ok and (first_rank_seq is None or q.seq < first_rank_seq)]
    if is_latency_incident(incident):
        looked = next((q for q in before if decomposes_latency(q.reads)), None)
        why = (f"Q{looked.index} split latency into its parts before the first ranking." if looked else
               "Latency was not split into queue, prefill and decode time before the first ranking.")
        title = "Latency decomposed first"
    else:
        looked = next((q for q in before if q.signals), None)
        why = (f"Q{looked.index} looked at evidence before the first ranking." if looked else
               "No evidence was looked at before the first ranking.")
        title = "Evidence before hypotheses"
    add(Component("first_look", title, "discipline", FIRST_LOOK_POINTS if looked else 0.0,
                  FIRST_LOOK_POINTS, why))

    disc_index = submit.data.get("discriminator") if submit else None
    top = order[:2]
    if len(top) == 1:
        top.append(max((h for h in hyp_ids if h != top[0]), key=lambda h: just[h]))
    disc_q = next((q for q in queries if q.index == disc_index), None)
    if not submit:
        disc_pts, why = 0.0, "Not submitted."
    elif disc_q is None:
        disc_pts, why = 0.0, "No discriminating query was named."
    else:
        hits = [s for s in disc_q.signals if discriminates(by_id[s], top[0], top[1])]
        if hits:
            disc_pts = DISCRIMINATOR_POINTS
            why = (f"Q{disc_q.index} observed {hits[0]}, which tells {titles[top[0]]} from "
                   f"{titles[top[1]]}.")
        elif disc_q.signals:
            disc_pts = 0.0
            why = (f"Q{disc_q.index} observed {', '.join(disc_q.signals)}, which fits {titles[top[0]]} and "
                   f"{titles[top[1]]} alike.")
        else:
            disc_pts, why = 0.0, f"Q{disc_q.index} observed no signal, so it cannot separate your top two."
    add(Component("discriminator", "Discriminating query named", "discipline", disc_pts,
                  DISCRIMINATOR_POINTS, why))

    # ---- penalties
    excess = p_player - p_just - UNSUPPORTED_TOLERANCE
    pen = -UNSUPPORTED_POINTS * excess if ranking and excess > 0 else 0.0
    add(Component("unsupported", "Unsupported confidence", "penalty", round(pen, 2), 0.0,
                  f"You put {_pct(p_player)} on the true cause; your evidence justified {_pct(p_just)}."
                  if pen < 0 else "Your confidence on the true cause did not outrun your evidence."))

    wasted = [q for q in queries if q.ok and not q.signals and not is_schema_exploration(q.sql, q.reads)]
    over = max(0, len(wasted) - FREE_WASTED_QUERIES)
    pen = -min(WASTED_QUERY_CAP, WASTED_QUERY_POINTS * over) if over else 0.0
    add(Component("wasted", "Queries that could change nothing", "penalty", pen, 0.0,
                  f"{len(wasted)} of {len(queries)} queries observed no signal "
                  f"({FREE_WASTED_QUERIES} are free)."))

    budget = incident.query_budget
    beyond = max(0, len(queries) - budget) if budget else 0
    pen = -min(OVER_BUDGET_CAP, OVER_BUDGET_POINTS * beyond) if beyond else 0.0
    add(Component("budget", "Query budget", "penalty", pen, 0.0,
                  f"{len(queries)} queries against a budget of {budget}." if budget
                  else f"{len(queries)} queries; this incident has no budget."))

    hint_cost = sum(int(e.data.get("cost", 0)) for e in evs if e.kind == "hint")
    hints = sum(1 for e in evs if e.kind == "hint")
    add(Component("hints", "Hints", "penalty", -float(hint_cost) if hint_cost else 0.0, 0.0,
                  f"{hints} hint{'s' if hints > 1 else ''} taken, costing {hint_cost} points." if hints
                  else "No hints taken."))

    total = round(_clip(sum(c.points for c in components), 0.0, 100.0), 1)
    return ScoreReport(
        incident_id=incident.id, total=total, components=components, truth=truth, ranking=ranking,
        submitted=submit is not None, justified_posterior={h: round(p, 4) for h, p in just.items()},
        observed_signals=observed, missed_signals=missed, first_seen=first_seen, queries=len(queries),
        query_budget=budget, hint_cost=hint_cost,
    )


def format_report(report: ScoreReport) -> str:
    """Plain-text score breakdown for terminals."""
    lines = [f"Score {report.total:.1f} / 100" + ("" if report.submitted else "  (not submitted)")]
    for c in report.components:
        pts = f"{c.points:+.1f}" if c.group == "penalty" else f"{c.points:.1f} / {c.max:.0f}"
        lines.append(f"  {c.title:<36} {pts:>12}  {c.reason}")
    return "\n".join(lines)
