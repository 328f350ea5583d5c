"""The page after submission: what happened, what each query ruled out and what it left open, the
queries that settle it, the score with reasons, and the fix. Markdown, so the TUI and line mode show the same text."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from engine_model.faults import FAULT_KINDS
from game.scoring import ScoreReport
from game.session import Event
from game.text import md_cell
from incidents.spec import FaultSpec, FractionScope, Incident, ReplicaScope, replica_index


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


def _cell(text: str) -> str:
    return md_cell(text)


def debrief_markdown(incident: Incident, events: Iterable[Event | dict[str, Any]],
                     report: ScoreReport) -> str:
    """The debrief as Markdown: cause and chain, fault timeline, the ranking against what the evidence
    supported, what each query ruled out, the settling queries, the score breakdown, the mitigation."""
    del events  # the report carries what the events showed
    titles = {h.id: h.title for h in incident.hypotheses}
    truth = report.truth
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
        out += ["| # | Hypothesis | You | What your evidence supported |", "|---|---|---|---|"]
        ranked = [r["id"] for r in report.ranking]
        conf = {r["id"]: f"{r['confidence']:.0f}%" for r in report.ranking}
        unranked = [h.id for h in incident.hypotheses if h.id not in conf]
        for i, hid in enumerate(ranked + unranked, start=1):
            mark = " (true)" if hid in truth else ""
            place = str(i) if hid in conf else "-"
            out.append(f"| {place} | {_cell(titles[hid])}{mark} | {conf.get(hid, 'not ranked')} | "
                       f"{report.ideal_belief.get(hid, 0.0):.0%} |")
    else:
        out.append("No ranking was given.")
    out.append("")

    out += ["## What each query ruled out", "",
            "Each hypothesis was simulated as a world of its own. A query rules a hypothesis out when its "
            "result on that world differs from what you saw by more than two runs of one world differ.", ""]
    if report.per_query:
        out += ["| Query | Ruled out | What differed |", "|---|---|---|"]
        for q in report.per_query:
            if not q["ok"]:
                out.append(f"| Q{q['index']} | (failed) | |")
                continue
            if not q["ruled_out"]:
                why = "returned no rows" if q["rows"] == 0 else "looks the same on every world still open"
                out.append(f"| Q{q['index']} | nothing | {why} |")
                continue
            ruled = ", ".join(titles[r] + ("" if r in q["new"] else " (again)") for r in q["ruled_out"])
            why = "; ".join(f"{q['why'][r]}" for r in q["ruled_out"] if r in q["why"])
            out.append(f"| Q{q['index']} | {_cell(ruled)} | {_cell(why)} |")
    else:
        out.append("You ran no queries.")
    still = [r for r in report.rivals if r not in report.ruled_out]
    if still:
        out += ["", "Never ruled out: " + ", ".join(f"**{titles[r]}**" for r in still) + "."]
    if report.pins:
        out += ["", "Your pins:", ""]
        for p in report.pins:
            verdict = {"right": "points that way", "wrong": "points the other way",
                       "silent": "says nothing about it"}[p["verdict"]]
            out.append(f"- Q{p['query']} {p['stance']} {_cell(titles.get(p['hypothesis'], p['hypothesis']))}: "
                       f"the result {verdict}")
    out.append("")

    out += ["## Evidence that settles it", ""]
    if incident.debrief.settling_queries:
        for sql in incident.debrief.settling_queries:
            out += ["```sql", sql.strip(), "```", ""]
    signals = [sig for sig in incident.signals if sig.shows]
    if signals:
        out += ["What the telemetry shows:", ""] + [f"- {_cell(sig.shows)}" for sig in signals] + [""]

    headline = f"**{report.total:.1f} / 100**" + ("" if report.submitted else " (not submitted)")
    out += ["## Score", "", headline, "", "| Component | Points | Why |", "|---|---|---|"]
    for c in report.components:
        pts = f"{c.points:+.1f}" if c.group == "penalty" else f"{c.points:.1f} / {c.max:.0f}"
        out.append(f"| {_cell(c.title)} | {pts} | {_cell(c.reason)} |")
    out.append("")

    out += ["## Mitigation", "", incident.debrief.mitigation.strip(), ""]
    return "\n".join(out)
