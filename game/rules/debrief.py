"""The page after submission: what happened, what each query ruled out and what it left open, the
queries that settle it, the score with reasons, and the fix. Markdown, so the TUI and line mode show the same text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from engine_model.faults import FAULT_KINDS
from game.rules.mitigation import MitigationScore, mitigation_markdown
from game.rules.scoring import ScoreReport
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


# ----- what the latency did ----------------------------------------------------------------------------
FLAT_WITHIN = 0.10
"""A measured change is called flat only within this share of the value before (±10%): several times the
run-to-run spread of a median over a few hundred requests (a few percent), so noise never reads as a change,
and small enough that no reader would call it one. Anything larger is named with its size."""

LATENCY_MEASURES: tuple[tuple[str, str, float], ...] = (
    ("API server", "api_server_s", 0.5),
    ("queue wait", "queue_s", 0.5),
    ("prefill", "prefill_s", 0.5),
    ("time per output token", "tpot_s", 0.5),
    ("time to first token", "ttft_s", 0.9),
)
"""(label, requests column, quantile) of the latency components the debrief measures."""


def change_phrase(before: float, after: float, flat_within: float = FLAT_WITHIN) -> str:
    """Words for a measured change: "flat (+3%)" only within ±flat_within, else "rose 40%", "fell 25%",
    "rose 3.9x" (twice or more)."""
    if not before or before != before or after != after:  # zero or NaN: no relative change
        return "not measurable"
    ratio = after / before
    pct = f"{100.0 * (ratio - 1.0):+.0f}%"
    if abs(ratio - 1.0) <= flat_within + 1e-12:  # (1.1 / 1.0 - 1 is a hair above 0.1 in floating point)
        return f"flat ({pct})"
    if ratio >= 2.0:
        return f"rose {ratio:.1f}x"
    return f"rose {pct[1:]}" if ratio > 1.0 else f"fell {pct[1:]}"


MIN_APP_REQUESTS = 50
"""An app gets rows of its own only with at least this many finished requests on each side of the fault, so
that its p90 rests on five requests or more rather than on one or two (an app whose requests are NULL is
never one: requests always name their app)."""


@dataclass(frozen=True)
class LatencyShift:
    """One latency component's quantile (seconds) before and after the first fault, over one app's
    requests (`app`) or over every app's ("")."""

    label: str
    column: str
    quantile: float
    before: float
    after: float
    app: str = ""

    @property
    def phrase(self) -> str:
        return change_phrase(self.before, self.after)


def _fault_replicas(incident: Incident) -> list[str]:
    """The replicas the true faults were scoped to, when every one names replicas ([] otherwise: fleet-wide)."""
    names: set[str] = set()
    for f in incident.faults:
        if not isinstance(f.scope, ReplicaScope):
            return []
        names.update(f"vllm-{replica_index(r)}" for r in f.scope.replicas)
    return sorted(names)


def latency_shifts(con: duckdb.DuckDBPyConnection, incident: Incident) -> tuple[list[str], list[LatencyShift]]:
    """Each measure of LATENCY_MEASURES over the requests that finished before vs after the first fault,
    on the replicas the faults were scoped to (all of them for a fleet-wide fault): over every app's
    requests (app ""), and, when two or more apps have MIN_APP_REQUESTS on each side, over each such app's,
    because a change in the mix of apps moves a pooled percentile with no request getting slower, and one
    app's slowdown can hide in a pooled one. Returns the replicas ([] for the whole fleet) and the shifts,
    pooled first, then app by app in name order; none without faults or without requests on both sides."""
    if not incident.faults:
        return [], []
    at = min(f.at_s for f in incident.faults)
    start = incident.window.start.replace(tzinfo=None)
    replicas = _fault_replicas(incident)
    where = "status = 'ok'"
    params: list[Any] = [start, at]
    if replicas:
        where += " AND replica IN (" + ", ".join("?" for _ in replicas) + ")"
        params += replicas
    cols = ", ".join(f"quantile_cont({c}, {q}) AS q{i}" for i, (_, c, q) in enumerate(LATENCY_MEASURES))
    # GROUPING SETS: the pooled rows (app NULL) and each app's, in one scan
    sql = (f"SELECT app, epoch(ts) - epoch(CAST(? AS TIMESTAMP)) >= ? AS after, count(*) AS n, {cols} "
           f"FROM requests WHERE {where} GROUP BY GROUPING SETS ((after), (app, after))")
    try:
        fetched = con.execute(sql, params).fetchall()
    except duckdb.Error:
        return replicas, []
    rows: dict[tuple[str | None, bool], tuple[Any, ...]] = {(r[0], bool(r[1])): r for r in fetched}
    if not (rows.get((None, False)) and rows.get((None, True))):
        return replicas, []
    apps = sorted(str(app) for app, after in rows if app is not None and not after
                  and rows[(app, False)][2] >= MIN_APP_REQUESTS
                  and (app, True) in rows and rows[(app, True)][2] >= MIN_APP_REQUESTS)
    groups: list[str | None] = [None, *apps] if len(apps) > 1 else [None]
    out = []
    for app in groups:
        for i, (label, column, q) in enumerate(LATENCY_MEASURES):
            b, a = rows[(app, False)][3 + i], rows[(app, True)][3 + i]
            if b is not None and a is not None:
                out.append(LatencyShift(label, column, q, float(b), float(a), app or ""))
    return replicas, out


def truth_database(incident: Incident, events: Iterable[Any]) -> Path | None:
    """The built database the session played, found in the build cache by the telemetry digest its start
    event recorded (None when the session recorded none or the build is gone)."""
    from telemetry_gen.cache import cache_dir

    digest = None
    for e in events:
        kind = e.get("kind") if isinstance(e, dict) else getattr(e, "kind", None)
        data = e.get("data") if isinstance(e, dict) else getattr(e, "data", None)
        if kind == "start" and isinstance(data, dict):
            digest = data.get("telemetry_digest")
            break
    if not digest:
        return None
    for meta in sorted(cache_dir().glob(f"{incident.id}-*.json")):
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        path = Path(str(info.get("path", "")))
        if info.get("digest") == digest and path.is_file():
            return path
    return None


def latency_lines(incident: Incident, replicas: Sequence[str], shifts: Sequence[LatencyShift]) -> list[str]:
    """The debrief's latency section (Markdown lines; [] without shifts): one row per measure over every
    app's requests, followed, when the shifts hold them, by that measure for each app."""
    if not shifts:
        return []
    at = min(f.at_s for f in incident.faults)
    where = f"on {', '.join(replicas)}" if replicas else "across the fleet"
    per_app = any(s.app for s in shifts)
    out = ["## What the latency did", "",
           f"Requests {where} that arrived before vs after {_clock(incident, at)} and finished. A change counts "
           f"as flat only within ±{FLAT_WITHIN:.0%}; a larger one is given with its size."]
    if per_app:
        out.append(f"Each measure over all apps, then app by app (apps with at least {MIN_APP_REQUESTS} such "
                   "requests on each side): a pooled percentile also moves when the mix of apps changes.")
        out += ["", "| Measure | App | Before | After | Change |", "|---|---|---|---|---|"]
    else:
        out += ["", "| Measure | Before | After | Change |", "|---|---|---|---|"]
    measure = {column: i for i, (_, column, _) in enumerate(LATENCY_MEASURES)}
    # a stable sort by measure keeps each measure's rows in the order latency_shifts gives: pooled, then apps
    for s in sorted(shifts, key=lambda s: measure[s.column]):
        name = f"{s.label} (p{round(100 * s.quantile)} {s.column})"
        values = f"{s.before:.4g} s | {s.after:.4g} s | {s.phrase}"
        if not per_app:
            out.append(f"| {name} | {values} |")
        elif s.app:
            out.append(f"| | {_cell(s.app)} | {values} |")
        else:
            out.append(f"| {name} | all | {values} |")
    return [*out, ""]


def _latency_section(incident: Incident, events: Iterable[Any]) -> list[str]:
    path = truth_database(incident, events)
    if path is None:
        return []
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return []
    try:
        return latency_lines(incident, *latency_shifts(con, incident))
    finally:
        con.close()


def debrief_markdown(incident: Incident, events: Iterable[Event | dict[str, Any]],
                     report: ScoreReport, mitigation: MitigationScore | None = None) -> str:
    """The debrief as Markdown: cause and chain, fault timeline, what the latency did (measured on the
    database the session played, when the build cache still holds it), the ranking against what the evidence
    supported, what each query ruled out, the settling queries, the score breakdown, the mitigation."""
    events = list(events)  # the report carries what the queries showed; the start event names the database
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
    out += _latency_section(incident, events)

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
            "Each hypothesis was simulated as a family of worlds (its cause on other traffic, and at the other "
            "severities the incident allows). A query rules a hypothesis out when what you saw lies outside "
            "everything its family produced, on something a reader reads: a row that is there or missing, a "
            "group against its peers, which way a series moves; sizes and times only where the incident says "
            "what they could have been (docs/scoring.md).", ""]
    if report.per_query:
        out += ["| Query | Ruled out | What differed |", "|---|---|---|"]
        for q in report.per_query:
            if not q["ok"]:
                out.append(f"| Q{q['index']} | (failed) | |")
                continue
            if not q["ruled_out"]:
                why = ("not re-run: scoring's time budget was spent before it" if q.get("assessed") is False
                       else "returned no rows" if q["rows"] == 0
                       else f"read as nothing: {q['note']}" if q.get("note")
                       else "looks the same on every world still open")
                out.append(f"| Q{q['index']} | nothing | {why} |")
                continue
            # a row per rival: what differed is said beside the rival it ruled out
            for n, r in enumerate(q["ruled_out"]):
                ruled = titles[r] + ("" if r in q["new"] else " (again)")
                query = f"Q{q['index']}" if n == 0 else ""
                out.append(f"| {query} | {_cell(ruled)} | {_cell(q['why'].get(r, ''))} |")
    else:
        out.append("You ran no queries.")
    still = [r for r in report.rivals if r not in report.ruled_out]
    if still:
        out += ["", "Never ruled out: " + ", ".join(f"**{titles[r]}**" for r in still) + "."]
        for r in still:
            missed = report.missed.get(r)
            if missed:
                out += ["", f"A query that would have ruled out **{_cell(titles[r])}** ({_cell(missed['query'])}: "
                        f"{_cell(missed['why'])}):", "", "```sql", missed["sql"].strip(), "```"]
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

    if mitigation is None:
        out += ["## Mitigation", "", incident.debrief.mitigation.strip(), ""]
    else:  # the player acted: what their actions did, then what the incident recommends
        out += [*mitigation_markdown(mitigation), "", "What the incident recommends:", "",
                incident.debrief.mitigation.strip(), ""]
    return "\n".join(out)
