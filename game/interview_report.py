"""The interviewer's one-page report of a round: what the candidate did, in what order, and how it scored.

Sections: the outcome (true cause, submitted ranking, score); what they looked at first (did they
split latency into its parts before their first ranking? `game.observe.decomposes_latency`); the
query they named at submit as separating their top two, with the signals it observed; the timeline of
queries, belief changes (rankings and the submission) and deliveries; the score breakdown; the
decisive signals seen and missed; and a blank notes section. `build_report` gives a JSON-ready dict
(`servedrill report --json` prints it; keys in docs/cli.md); `to_markdown` and `to_html` render
it. Pure apart from `report_for`, which reads a session file.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from game.scoring import discriminates
from game.session import HINT, INJECT, MESSAGE, NOTE, PIN, QUERY, RANK, SUBMIT

FIRST_LOOKS = 3
"""Queries listed under "what they looked at first"."""


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = max(0, int(seconds))
    minutes, secs = divmod(total, 60)
    return f"{minutes}:{secs:02d}"


def _ranking_text(ranking: list[dict[str, Any]], titles: dict[str, str]) -> str:
    return ", ".join(f"{titles.get(r['id'], r['id'])} {r['confidence']:.0f}%" for r in ranking)


def build_report(watch: Any) -> dict[str, Any]:
    """The report of the session a `game.gm.Watch` follows (as far as its journal goes)."""
    snap = watch.snapshot()
    incident = watch.incident
    events = watch.events
    titles = {h.id: h.title for h in incident.hypotheses}
    truth = {h.id for h in incident.hypotheses if h.true}
    session = snap["session"]
    start = session["started"]

    def rel(t: float) -> float | None:
        return None if start is None else round(t - start, 3)

    queries = {q["index"]: q for q in snap["queries"]}
    timeline: list[dict[str, Any]] = []
    for e in events:
        d = e.data
        if e.kind == QUERY:
            q = queries[d["index"]]
            outcome = f"{q['row_count']} rows" if q["ok"] else f"error: {q['error']}"
            seen = f"; observed {', '.join(q['signals'])}" if q["signals"] else ""
            split = "; splits latency" if q["decomposes_latency"] else ""
            detail = f"Q{q['index']} ({outcome}{seen}{split}): {' '.join(q['sql'].split())}"
        elif e.kind in (RANK, SUBMIT):
            p_truth = sum(r["confidence"] for r in d.get("ranking", []) if r["id"] in truth)
            verb = "Submitted" if e.kind == SUBMIT else "Ranked"
            disc = d.get("discriminator")
            extra = ""
            if e.kind == SUBMIT:
                extra = f"; separating query Q{disc}" if disc else "; no separating query named"
            detail = f"{verb}: {_ranking_text(d.get('ranking', []), titles)} (truth at {p_truth:.0f}%){extra}"
        elif e.kind == PIN:
            detail = f"Pinned Q{d['query']} as {d['stance']} {titles.get(d['hypothesis'], d['hypothesis'])}"
        elif e.kind == NOTE:
            detail = f"Note on {titles.get(d['hypothesis'], d['hypothesis'])}: {' '.join(d['text'].split())}"
        elif e.kind == HINT:
            who = f"from {d.get('from') or 'the interviewer'}" if d.get("gm") else "taken"
            detail = f"Hint {who} (-{d.get('cost', 0)} points): {d.get('text', '')}"
        elif e.kind in (INJECT, MESSAGE):
            source = "sent by the interviewer" if d.get("gm") else "from the incident"
            detail = f"{'Update' if e.kind == INJECT else 'Message'} {source}, {d.get('from', '')}: {d.get('text', '')}"
        else:
            continue
        timeline.append({"seq": e.seq, "elapsed_s": rel(e.time), "kind": e.kind, "detail": detail})

    first_rank = next((e for e in events if e.kind in (RANK, SUBMIT)), None)
    before = [q for q in snap["queries"] if first_rank is None or q["seq"] < first_rank.seq]
    split = next((q for q in snap["queries"] if q["decomposes_latency"]), None)
    split_before = split is not None and (first_rank is None or split["seq"] < first_rank.seq)
    if split is None:
        verdict = "They never split latency into its parts (queue, prefill, decode)."
    elif split_before:
        verdict = (f"Yes: Q{split['index']} at {_clock(split['elapsed_s'])} split latency into its parts, "
                   + (f"before the first ranking at {_clock(rel(first_rank.time))}." if first_rank
                      else "and they never ranked."))
    else:
        verdict = (f"No: they ranked first (at {_clock(rel(first_rank.time))}) and split latency only "
                   f"with Q{split['index']} at {_clock(split['elapsed_s'])}.")
    first_look = {
        "latency_incident": session["latency_incident"],
        "first_queries": [{"index": q["index"], "elapsed_s": q["elapsed_s"], "sql": q["sql"],
                           "signals": q["signals"], "decomposes_latency": q["decomposes_latency"]}
                          for q in snap["queries"][:FIRST_LOOKS]],
        "queries_before_first_ranking": len(before),
        "first_ranking_elapsed_s": None if first_rank is None else rel(first_rank.time),
        "decomposed_latency_first": split_before,
        "decomposing_query": None if split is None else split["index"],
        "verdict": verdict,
    }

    sub = snap["submission"]
    separating: dict[str, Any] | None = None
    if sub is not None:
        top = [r["id"] for r in sub.get("ranking", [])][:2]
        disc = sub.get("discriminator")
        q = queries.get(disc) if disc else None
        by_id = {s.id: s for s in incident.signals}
        separates = [s for s in (q["signals"] if q else [])
                     if len(top) == 2 and discriminates(by_id[s], top[0], top[1])]
        reason = next(c["reason"] for c in snap["score"]["components"] if c["key"] == "discriminator")
        separating = {"query": disc, "sql": q["sql"] if q else None, "signals": q["signals"] if q else [],
                      "top_two": top, "separating_signals": separates,
                      "signal_texts": {s: by_id[s].shows for s in (q["signals"] if q else [])}, "reason": reason}

    score = snap["score"]
    return {
        "ok": True,
        "session_id": session["session_id"],
        "player": session["player"],
        "incident_id": session["incident_id"],
        "incident_title": session["incident_title"],
        "state": session["state"],
        "created": session["created"],
        "duration_s": session["elapsed_s"],
        "generated": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "truth": snap["truth"],
        "final_ranking": [dict(r, title=titles.get(r["id"], r["id"])) for r in score["ranking"]],
        "submitted": score["submitted"],
        "first_look": first_look,
        "separating": separating,
        "timeline": timeline,
        "belief_changes": len(snap["board"]["history"]),
        "score": {"total": score["total"], "components": score["components"], "hint_cost": score["hint_cost"],
                  "queries": score["queries"], "query_budget": score["query_budget"]},
        "signals": [{"id": s["id"], "shows": s["shows"], "seen": s["seen"],
                     "first_seen_query": s["first_seen_query"], "decisive": s["decisive"]} for s in snap["signals"]],
        "notes": "",
    }


def report_for(path: Path | str) -> dict[str, Any]:
    """The report of the session file at `path` (raises game.gm.GMError when it cannot be read)."""
    from game.gm import Watch

    return build_report(Watch(path))


# ---------------------------------------------------------------- rendering


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(report: dict[str, Any]) -> str:
    r = report
    out = [f"# Interview report: {r['player']} on {r['incident_title']}", "",
           f"- Session: `{r['session_id']}` ({r['incident_id']}), started {r['created']}, "
           f"{_clock(r['duration_s'])} long, {r['state']}",
           f"- True cause: {', '.join(t['title'] for t in r['truth'])}",
           f"- Final ranking{'' if r['submitted'] else ' (not submitted)'}: "
           + (", ".join(f"{x['title']} {x['confidence']:.0f}%" for x in r["final_ranking"]) or "none"),
           f"- Score: **{r['score']['total']:.1f} / 100**", "",
           "## What they looked at first", ""]
    fl = r["first_look"]
    out += [f"{fl['verdict']}" + ("" if fl["latency_incident"] else " (not a latency incident)"), "",
            f"Queries before the first ranking: {fl['queries_before_first_ranking']}.", ""]
    for q in fl["first_queries"]:
        seen = ", ".join(q["signals"]) or "no signal"
        out.append(f"1. Q{q['index']} at {_clock(q['elapsed_s'])} ({seen}): `{_md(' '.join(q['sql'].split()))}`")
    if not fl["first_queries"]:
        out.append("No queries.")
    out += ["", "## The signal they named as separating their top two", ""]
    sep = r["separating"]
    if sep is None:
        out.append("Not submitted.")
    elif sep["query"] is None:
        out.append("None named at submit.")
    else:
        out += [f"Q{sep['query']}: `{_md(' '.join(str(sep['sql']).split()))}`", ""]
        out += [f"- {s}: {sep['signal_texts'][s]}" + (" (separates the top two)" if s in sep["separating_signals"]
                                                       else "") for s in sep["signals"]] or ["- observed no signal"]
        out += ["", sep["reason"]]
    out += ["", "## Timeline", "", "| at | what |", "|---|---|"]
    out += [f"| {_clock(t['elapsed_s'])} | {_md(t['detail'])} |" for t in r["timeline"]]
    out += ["", "## Score", "", "| component | points | why |", "|---|---:|---|"]
    for c in r["score"]["components"]:
        pts = f"{c['points']:+.1f}" if c["group"] == "penalty" else f"{c['points']:.1f} / {c['max']:.0f}"
        out.append(f"| {_md(c['title'])} | {pts} | {_md(c['reason'])} |")
    out += [f"| **Total** | **{r['score']['total']:.1f}** | |", "", "## Signals", ""]
    for s in r["signals"]:
        mark = f"seen in Q{s['first_seen_query']}" if s["seen"] else "not seen"
        out.append(f"- {s['id']}{' (decisive)' if s['decisive'] else ''}: {mark}. {s['shows']}")
    out += ["", "## Interviewer's notes", "", "_Strengths:_", "", "", "_Concerns:_", "", "",
            "_Recommendation:_", "", ""]
    return "\n".join(out)


_CSS = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
        "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
        "vertical-align:top;text-align:left}code{background:#f3f3f3}.notes{min-height:8rem;border:1px dashed #999;"
        "padding:.5rem}.seen{color:#176}.missed{color:#a33}")


def to_html(report: dict[str, Any]) -> str:
    r = report
    e = html.escape

    def rows(cells: list[list[str]]) -> str:
        return "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells)

    fl = r["first_look"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Interview report: {e(r['player'])} on {e(r['incident_id'])}</title><style>{_CSS}</style></head><body>",
        f"<h1>Interview report: {e(r['player'])} on {e(r['incident_title'])}</h1><ul>",
        f"<li>Session <code>{e(r['session_id'])}</code> ({e(r['incident_id'])}), started {e(r['created'])}, "
        f"{_clock(r['duration_s'])} long, {e(r['state'])}</li>",
        f"<li>True cause: {e(', '.join(t['title'] for t in r['truth']))}</li>",
        f"<li>Final ranking{'' if r['submitted'] else ' (not submitted)'}: "
        + e(", ".join(f"{x['title']} {x['confidence']:.0f}%" for x in r["final_ranking"]) or "none") + "</li>",
        f"<li>Score: <b>{r['score']['total']:.1f} / 100</b></li></ul>",
        "<h2>What they looked at first</h2>",
        f"<p>{e(fl['verdict'])}{'' if fl['latency_incident'] else ' (not a latency incident)'}</p>",
        f"<p>Queries before the first ranking: {fl['queries_before_first_ranking']}.</p><ol>",
        "".join(f"<li>Q{q['index']} at {_clock(q['elapsed_s'])} ({e(', '.join(q['signals']) or 'no signal')}): "
                f"<code>{e(' '.join(q['sql'].split()))}</code></li>" for q in fl["first_queries"]),
        "</ol><h2>The signal they named as separating their top two</h2>",
    ]
    sep = r["separating"]
    if sep is None:
        parts.append("<p>Not submitted.</p>")
    elif sep["query"] is None:
        parts.append("<p>None named at submit.</p>")
    else:
        parts.append(f"<p>Q{sep['query']}: <code>{e(' '.join(str(sep['sql']).split()))}</code></p><ul>")
        parts += [f"<li>{e(s)}: {e(sep['signal_texts'][s])}"
                  + (" (separates the top two)" if s in sep["separating_signals"] else "") + "</li>"
                  for s in sep["signals"]] or ["<li>observed no signal</li>"]
        parts.append(f"</ul><p>{e(sep['reason'])}</p>")
    parts.append("<h2>Timeline</h2><table><tr><th>at</th><th>what</th></tr>")
    parts.append(rows([[_clock(t["elapsed_s"]), e(t["detail"])] for t in r["timeline"]]))
    parts.append("</table><h2>Score</h2><table><tr><th>component</th><th>points</th><th>why</th></tr>")
    parts.append(rows([[e(c["title"]), f"{c['points']:+.1f}" if c["group"] == "penalty"
                        else f"{c['points']:.1f} / {c['max']:.0f}", e(c["reason"])]
                       for c in r["score"]["components"]]))
    parts.append(f"<tr><td><b>Total</b></td><td><b>{r['score']['total']:.1f}</b></td><td></td></tr></table>")
    parts.append("<h2>Signals</h2><ul>")
    parts += [f"<li class='{'seen' if s['seen'] else 'missed'}'>{e(s['id'])}{' (decisive)' if s['decisive'] else ''}: "
              f"{'seen in Q' + str(s['first_seen_query']) if s['seen'] else 'not seen'}. {e(s['shows'])}</li>"
              for s in r["signals"]]
    parts.append("</ul><h2>Interviewer's notes</h2><div class='notes'></div></body></html>")
    return "".join(parts) + "\n"
