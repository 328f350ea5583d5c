"""The interviewer's one-page report of a round: what the candidate did, in what order, and how it scored.

Sections: the outcome (true cause, submitted ranking, score); what they looked at first; the evidence
(each query's rivals ruled out, recomputed on the hypothesis worlds) and the pins they set; the
timeline of queries, belief changes and deliveries; the score breakdown; and a blank notes section.
The answer (truth, evidence, score) is in the report only once the candidate submitted, or with
`reveal`. `build_report` gives a JSON-ready dict (`servedrill report --json` prints it; keys in
docs/cli.md); `to_markdown` and `to_html` render it, every text from the session or the player
escaped. Pure apart from `report_for`, which reads a session file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from game.reports.templates import render
from game.session import HINT, INJECT, MESSAGE, NOTE, PIN, QUERY, RANK, SUBMIT, UNPIN
from game.text import md_text

FIRST_LOOKS = 3
"""Queries listed under "what they looked at first"."""


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = max(0, int(seconds))
    minutes, secs = divmod(total, 60)
    return f"{minutes}:{secs:02d}"


def _ranking_text(ranking: list[dict[str, Any]], names: dict[str, str]) -> str:
    return ", ".join(f"{names.get(r['id'], '?')} {r['confidence']:.0f}%" for r in ranking)


def build_report(watch: Any) -> dict[str, Any]:
    """The report of the session a `game.gameday.gm.Watch` follows (as far as its journal goes)."""
    snap = watch.snapshot()
    events = watch.events
    revealed = bool(snap.get("revealed"))
    names = {h["id"]: f"{h['label']} {h['title']}" for h in snap["hypotheses"]}
    truth = {t["id"] for t in snap.get("truth", [])}
    session = snap["session"]
    start = session["started"]

    def rel(t: float) -> float | None:
        # the candidate's game clock, as the snapshot's times (time a process held the session)
        return None if start is None else round(watch.mirror.elapsed(t), 3)

    queries = {q["index"]: q for q in snap["queries"]}
    timeline: list[dict[str, Any]] = []
    for e in events:
        d = e.data
        if e.kind == QUERY:
            q = queries[d["index"]]
            outcome = f"{q['row_count']} rows" if q["ok"] else f"error: {q['error']}"
            ruled = q.get("ruled_out")
            seen = (f"; ruled out {', '.join(names.get(r, r) for r in ruled)}" if ruled else
                    "; ruled out nothing" if ruled is not None and q["ok"] else "")
            detail = f"Q{q['index']} ({outcome}{seen}): {' '.join(q['sql'].split())}"
        elif e.kind in (RANK, SUBMIT):
            verb = "Submitted" if e.kind == SUBMIT else "Ranked"
            detail = f"{verb}: {_ranking_text(d.get('ranking', []), names)}"
            if revealed:
                p_truth = sum(r["confidence"] for r in d.get("ranking", []) if r["id"] in truth)
                detail += f" (truth at {p_truth:.0f}%)"
        elif e.kind == PIN:
            detail = f"Pinned Q{d['query']} as {d['stance']} {names.get(d['hypothesis'], '?')}"
        elif e.kind == UNPIN:
            detail = f"Unpinned Q{d['query']} ({d['stance']}) from {names.get(d['hypothesis'], '?')}"
        elif e.kind == NOTE:
            detail = f"Note on {names.get(d['hypothesis'], '?')}: {' '.join(d['text'].split())}"
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
    first_look = {
        "first_queries": [{"index": q["index"], "elapsed_s": q["elapsed_s"], "sql": q["sql"],
                           "ruled_out": [names.get(r, r) for r in q.get("ruled_out", [])]}
                          for q in snap["queries"][:FIRST_LOOKS]],
        "queries_before_first_ranking": len(before),
        "first_ranking_elapsed_s": None if first_rank is None else rel(first_rank.time),
    }
    score = snap.get("score")
    evidence = None
    if score is not None:
        evidence = {
            "ruled_out": [{"hypothesis": names.get(r, r), "query": q} for r, q in score["ruled_out"].items()],
            "still_open": [names.get(r, r) for r in score["rivals"] if r not in score["ruled_out"]],
            "pins": [{**p, "hypothesis": names.get(p["hypothesis"], p["hypothesis"])} for p in score["pins"]],
        }
    ranking = snap["board"]["ranking"]
    return {
        "ok": True,
        "revealed": revealed,
        "session_id": session["session_id"],
        "player": session["player"],
        "incident_id": session["incident_id"],
        "incident_title": session["incident_title"],
        "state": session["state"],
        "created": session["created"],
        "duration_s": session["elapsed_s"],
        "generated": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "truth": snap.get("truth", []),
        "final_ranking": [{"id": r["id"], "label": r["label"], "title": r["title"], "confidence": r["confidence"]}
                          for r in ranking],
        "submitted": snap["submission"] is not None,
        "first_look": first_look,
        "evidence": evidence,
        "timeline": timeline,
        "belief_changes": len(snap["board"]["history"]),
        "score": None if score is None else {
            "total": score["total"], "components": score["components"], "hint_cost": score["hint_cost"],
            "queries": score["queries"], "query_budget": score["query_budget"]},
        "notes": "",
    }


def report_for(path: Path | str, *, reveal: bool = False) -> dict[str, Any]:
    """The report of the session file at `path` (raises game.gameday.gm.GMError when it cannot be read). The
    answer is in it once the candidate submitted, or with `reveal`."""
    from game.gameday.gm import Watch

    return build_report(Watch(path, reveal=reveal))


# ---------------------------------------------------------------- rendering


def _md(text: Any) -> str:
    """Text from a session as literal Markdown table text: no HTML, no markup, one line."""
    return md_text(text)


def _pts(c: dict[str, Any]) -> str:
    return f"{c['points']:+.1f}" if c["group"] == "penalty" else f"{c['points']:.1f} / {c['max']:.0f}"


def to_markdown(report: dict[str, Any]) -> str:
    r = report
    out = [f"# Interview report: {_md(r['player'])} on {_md(r['incident_title'])}", "",
           f"- Session: {_md(r['session_id'])} ({_md(r['incident_id'])}), started {_md(r['created'])}, "
           f"{_clock(r['duration_s'])} long, {_md(r['state'])}"]
    if r["revealed"]:
        out.append(f"- True cause: {_md(', '.join(t['title'] for t in r['truth']))}")
    out.append(f"- Final ranking{'' if r['submitted'] else ' (not submitted)'}: "
               + (_md(", ".join(f"{x['label']} {x['title']} {x['confidence']:.0f}%" for x in r["final_ranking"]))
                  or "none"))
    out.append(f"- Score: **{r['score']['total']:.1f} / 100**" if r["score"] else
               "- Score and answer: shown once the candidate submits (or with --reveal)")
    fl = r["first_look"]
    out += ["", "## What they looked at first", "",
            f"Queries before the first ranking: {fl['queries_before_first_ranking']}.", ""]
    for q in fl["first_queries"]:
        ruled = ", ".join(q["ruled_out"])
        out.append(f"1. Q{q['index']} at {_clock(q['elapsed_s'])}{' (ruled out ' + ruled + ')' if ruled else ''}: "
                   f"{_md(' '.join(q['sql'].split()))}")
    if not fl["first_queries"]:
        out.append("No queries.")
    ev = r["evidence"]
    if ev is not None:
        out += ["", "## Evidence", ""]
        out += [f"- {_md(x['hypothesis'])}: ruled out by Q{x['query']}" for x in ev["ruled_out"]]
        out += [f"- {_md(h)}: never ruled out" for h in ev["still_open"]]
        out += [f"- Pin: Q{p['query']} {p['stance']} {_md(p['hypothesis'])}: {p['verdict']}" for p in ev["pins"]]
    out += ["", "## Timeline", "", "| at | what |", "|---|---|"]
    out += [f"| {_clock(t['elapsed_s'])} | {_md(t['detail'])} |" for t in r["timeline"]]
    if r["score"]:
        out += ["", "## Score", "", "| component | points | why |", "|---|---:|---|"]
        out += [f"| {_md(c['title'])} | {_pts(c)} | {_md(c['reason'])} |" for c in r["score"]["components"]]
        out.append(f"| **Total** | **{r['score']['total']:.1f}** | |")
    out += ["", "## Interviewer's notes", "", "_Strengths:_", "", "", "_Concerns:_", "", "",
            "_Recommendation:_", "", ""]
    return "\n".join(out)


_CSS = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
        "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.25rem .5rem;"
        "vertical-align:top;text-align:left}code{background:#f3f3f3}.notes{min-height:8rem;border:1px dashed #999;"
        "padding:.5rem}")


def to_html(report: dict[str, Any]) -> str:
    """The report as one HTML page (template game/reports/templates/interview_report.html.j2; every text from
    the session escaped there)."""
    return render("interview_report.html.j2", r=report, css=_CSS, clock=_clock, points=_pts)
