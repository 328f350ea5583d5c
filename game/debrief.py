"""The page after submission: what happened, what the player saw and missed, the shortest path that
settles it, the score with reasons, and the fix. Markdown, so the TUI and line mode show the same text."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from engine_model.faults import FAULT_KINDS
from game.scoring import ScoreReport, discriminates, posterior, truth_ids
from game.session import QUERY, Event
from incidents.spec import FaultSpec, FractionScope, Incident, ReplicaScope, replica_index

SETTLED = 0.9
"""Posterior on the truth at which the shortest path stops."""


EXHAUSTIVE_UP_TO = 14
"""Incidents with at most this many signals get an exhaustive search for the shortest settling set."""


def _truth_mass(incident: Incident, signals: list[str], truth: set[str]) -> float:
    return sum(p for h, p in posterior(incident, signals).items() if h in truth)


def shortest_path(incident: Incident, threshold: float = SETTLED) -> list[str] | None:
    """Fewest signals whose likelihoods together push the truth's posterior above `threshold` (uniform
    prior), in file order; None when all signals together do not get there. Exact for incidents with at
    most EXHAUSTIVE_UP_TO signals (the first settling set of the smallest size, in file order); above
    that, chosen greedily."""
    truth = set(truth_ids(incident))
    ids = [s.id for s in incident.signals]
    if len(ids) <= EXHAUSTIVE_UP_TO:
        for size in range(1, len(ids) + 1):
            for combo in itertools.combinations(ids, size):
                if _truth_mass(incident, list(combo), truth) > threshold:
                    return list(combo)
        return None
    chosen: list[str] = []
    left = list(ids)
    while left:
        gains = {sid: _truth_mass(incident, [*chosen, sid], truth) for sid in left}
        best = max(left, key=lambda sid: gains[sid])  # max keeps the first of equals: file order
        chosen.append(best)
        left.remove(best)
        if gains[best] > threshold:
            return chosen
    return None


def _clock(incident: Incident, seconds: float) -> str:
    stamp = incident.window.start + timedelta(seconds=seconds)
    minutes, secs = divmod(round(seconds), 60)
    return f"t+{minutes:d}:{secs:02d} ({stamp:%H:%M:%S} UTC)"


def _scope(incident: Incident, scope: Any) -> str:
    n = incident.fleet.replicas
    if isinstance(scope, ReplicaScope):
        names = [f"vllm-{replica_index(r)}" for r in scope.replicas]
        return ", ".join(names)
    if isinstance(scope, FractionScope):
        count = max(1, round(scope.fraction * n))
        return f"{scope.fraction:.0%} of replicas (vllm-0 .. vllm-{count - 1})"
    return f"all {n} replicas"


def fault_timeline(incident: Incident) -> list[str]:
    """One line per fault, in time order: when, kind (with what it means), scope, parameters."""
    return [_fault_line(incident, f) for f in sorted(incident.faults, key=lambda f: f.at_s)]


def _fault_line(incident: Incident, f: FaultSpec) -> str:
    meaning = FAULT_KINDS.get(f.kind, ("",))[0]
    until = f" until {_clock(incident, f.until_s)}" if f.until_s is not None else ""
    params = ", ".join(f"{k}={v}" for k, v in f.params.items())
    extra = f"; {params}" if params else ""
    strength = f"; intensity {f.intensity:g}" if f.intensity < 1 else ""
    return (f"{_clock(incident, f.at_s)}{until}: **{f.kind}** ({meaning}) on {_scope(incident, f.scope)}"
            f"{extra}{strength}")


def _noise_lines(incident: Incident) -> list[str]:
    out = []
    for n in sorted(incident.noise, key=lambda n: n.at_s):
        what = {
            "deploy_event": lambda n: f"deploy of {n.service} {n.version}",
            "traffic_burst": lambda n: f"traffic burst x{n.factor:g} for {n.duration_s:g} s",
            "config_change": lambda n: "config change " + ", ".join(f"{k}={v}" for k, v in n.params.items()),
            "replica_restart": lambda n: f"routine restart of vllm-{replica_index(n.replica)}",
        }[n.kind](n)
        out.append(f"{_clock(incident, n.at_s)}: {what}")
    return out


def _belief_path(incident: Incident, events: Iterable[Event], report: ScoreReport) -> list[str]:
    truth = set(report.truth)
    seen: list[str] = []
    lines = []
    for e in events:
        if e.kind != QUERY:
            continue
        new = [sid for sid, q in report.first_seen.items() if q == e.data.get("index") and sid not in seen]
        if not new:
            continue
        seen += new
        p = sum(v for h, v in posterior(incident, seen).items() if h in truth)
        lines.append(f"| Q{e.data.get('index')} | {', '.join(new)} | {p:.0%} |")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def debrief_markdown(incident: Incident, events: Iterable[Event | dict[str, Any]],
                     report: ScoreReport) -> str:
    """The debrief as Markdown: cause and chain, fault timeline, evidence seen and missed, the
    shortest settling path with its queries, the score breakdown, and the mitigation."""
    evs = [Event.from_dict(e) for e in events]
    titles = {h.id: h.title for h in incident.hypotheses}
    truth = report.truth
    signals = {s.id: s for s in incident.signals}
    out: list[str] = [f"# Debrief: {incident.title}", ""]

    out += ["## What happened", ""]
    names = " and ".join(f"**{titles[h]}** (`{h}`)" for h in truth)
    out += [f"The cause: {names}.", "", incident.debrief.summary.strip(), ""]
    out += ["Causal chain:", ""]
    out += [f"{i}. {step}" for i, step in enumerate(incident.debrief.causal_chain, start=1)]
    out.append("")

    out += ["## Fault timeline", ""]
    out += [f"- {line}" for line in fault_timeline(incident)] or ["- (no injected faults)"]
    noise = _noise_lines(incident)
    if noise:
        out += ["", "Also in the window, harmless:", ""] + [f"- {line}" for line in noise]
    out.append("")

    out += ["## Your ranking", ""]
    if report.ranking:
        out += ["| # | Hypothesis | You | Your evidence justified |", "|---|---|---|---|"]
        ranked = [r["id"] for r in report.ranking]
        conf = {r["id"]: f"{r['confidence']:.0f}%" for r in report.ranking}
        unranked = [h.id for h in incident.hypotheses if h.id not in conf]
        for i, hid in enumerate(ranked + unranked, start=1):
            mark = " (true)" if hid in truth else ""
            place = str(i) if hid in conf else "-"
            out.append(f"| {place} | {_cell(titles[hid])}{mark} | {conf.get(hid, 'not ranked')} | "
                       f"{report.justified_posterior.get(hid, 0.0):.0%} |")
    else:
        out.append("No ranking was given.")
    out.append("")

    out += ["## Evidence", ""]
    if report.observed_signals:
        out.append("You observed:")
        out.append("")
        out += [f"- `{sid}` in Q{report.first_seen[sid]}: {signals[sid].shows}"
                for sid in report.observed_signals]
    else:
        out.append("You observed none of the incident's signals.")
    path = shortest_path(incident)
    rival = _rival(incident, report)
    decisive = [sid for sid in report.missed_signals
                if (path and sid in path) or any(discriminates(signals[sid], t, rival) for t in truth)]
    if decisive:
        out += ["", "Decisive evidence you missed:", ""]
        out += [f"- `{sid}`: {signals[sid].shows}" for sid in decisive]
    belief = _belief_path(incident, evs, report)
    if belief:
        out += ["", "Where the evidence should have moved your belief in the true cause:", "",
                "| After | New signals | Justified |", "|---|---|---|", *belief]
    out.append("")

    out += ["## The shortest path that settles it", ""]
    if path:
        out.append(f"{len(path)} queries take the true cause above {SETTLED:.0%}:")
        out.append("")
        for sid in path:
            out += [f"- `{sid}`: {signals[sid].shows}", "", "  ```sql", f"  {signals[sid].query.strip()}",
                    "  ```", ""]
    elif incident.debrief.settling_queries:
        out += ["The signals alone do not settle it; the author's settling queries:", ""]
        for sql in incident.debrief.settling_queries:
            out += ["```sql", sql.strip(), "```", ""]
    else:
        out += ["No short path settles this incident from its signals.", ""]

    headline = f"**{report.total:.1f} / 100**" + ("" if report.submitted else " (not submitted)")
    out += ["## Score", "", headline, "", "| Component | Points | Why |", "|---|---|---|"]
    for c in report.components:
        pts = f"{c.points:+.1f}" if c.group == "penalty" else f"{c.points:.1f} / {c.max:.0f}"
        out.append(f"| {_cell(c.title)} | {pts} | {_cell(c.reason)} |")
    out.append("")

    out += ["## Mitigation", "", incident.debrief.mitigation.strip(), ""]
    return "\n".join(out)


def _rival(incident: Incident, report: ScoreReport) -> str:
    """The player's strongest wrong hypothesis: top wrong one on their ranking, else the best-supported."""
    wrong = [h.id for h in incident.hypotheses if not h.true]
    ranked = [r["id"] for r in report.ranking if r["id"] in wrong]
    if ranked:
        return ranked[0]
    return max(wrong, key=lambda h: report.justified_posterior.get(h, 0.0))

