"""The text of the interviewer's screen (tui/screens/gm.py), from a `game.gameday.gm.Watch.snapshot`: status line,
query rows and detail, truth, evidence, board, score and the delivered feed. Pure functions of the snapshot
(tested directly); the answer stays HIDDEN until the snapshot says it is revealed."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.content import Content

from tui.formatting import cell_text, clock_text
from tui.text import clean, one_line, template

MAX_SQL_CHARS = 8000
"""The candidate's SQL is shown up to this many characters in the query detail."""

HIDDEN = ("[dim]Hidden until the candidate submits (servedrill watch --reveal shows it from the start)."
          "[/dim]")


def _clock(seconds: float | None) -> str:
    return "-:--" if seconds is None else clock_text(seconds)


def _labels(snap: dict[str, Any]) -> dict[str, str]:
    return {h["id"]: h["label"] for h in snap["hypotheses"]}


def is_revealed(snap: dict[str, Any]) -> bool:
    return bool(snap.get("revealed")) and "score" in snap


def _join(lines: list[Content]) -> Content:
    return Content("\n").join(lines)


def status_text(snap: dict[str, Any]) -> Content:
    s = snap["session"]
    hints = snap["hints"]
    queries = f"queries {len(snap['queries'])}" + (f" / {s['query_budget']}" if s["query_budget"] else "")
    if is_revealed(snap):
        score = snap["score"]
        total = f"[b]score {score['total']:.1f}" + ("" if score["submitted"] else " so far") + "[/b]"
    else:
        total = "[dim]answer hidden[/dim]"
    waiting = [p for p in snap["pending"] if not p.get("problem")]
    pending = f"  ·  [b]{len(waiting)} waiting[/b]" if waiting else ""
    return template(f"[b]$player[/b] on $incident  ·  $state  ·  time {_clock(s['elapsed_s'])}  ·  {queries}  ·  "
                    f"hints {hints['taken']} / {hints['total']}  ·  {total}{pending}",
                    player=one_line(s["player"], 60), incident=one_line(s["incident_id"], 80),
                    state=one_line(s["state"], 20))


def query_rows(snap: dict[str, Any], width: int = 60) -> list[tuple[Text, ...]]:
    """(Qn, at, result, what it ruled out, SQL) per query, as literal Text cells (a DataTable reads a str
    cell as markup, and the SQL is the candidate's); what it ruled out (by board label) only once the
    answer is revealed."""
    labels = _labels(snap)
    revealed = is_revealed(snap)
    rows = []
    for q in snap["queries"]:
        outcome = f"{q['row_count']} rows" if q["ok"] else "error"
        if q["schema_exploration"]:
            ruled = "schema"
        elif not revealed or not q["ok"]:
            ruled = "·" if q["ok"] else "-"
        else:
            ruled = ", ".join(sorted(labels.get(r, "?") for r in q.get("ruled_out", []))) or "nothing"
        rows.append(tuple(Text(one_line(cell, 200), end="") for cell in (
            f"Q{q['index']}", _clock(q["elapsed_s"]), outcome, ruled, one_line(q["sql"], width))))
    return rows


def query_detail(query: dict[str, Any] | None) -> Content:
    if query is None:
        return template("[dim]No queries yet. They appear here as the candidate runs them.[/dim]")
    head = template(f"[b]Q{query['index']}[/b] at {_clock(query['elapsed_s'])}\n$sql\n",
                    sql=clean(query["sql"].strip(), MAX_SQL_CHARS, multiline=True, lines=60))
    if not query["ok"]:
        return head + template("[red]error: $error[/red]",
                               error=clean(str(query["error"]), 2000, multiline=True, lines=20))
    cols = query["columns"]
    lines = ["  ".join(cell_text(c) for c in cols)] + ["  ".join(cell_text(v) for v in row) for row in query["rows"]]
    more = query["row_count"] - len(query["rows"])
    tail = f"\n… {more} more rows" if more > 0 else ""
    return head + template("$rows", rows="\n".join(lines)) + Content(tail)


def truth_text(snap: dict[str, Any]) -> Content:
    if not is_revealed(snap):
        return template(HIDDEN)
    labels = _labels(snap)
    lines = [template("[b green]$label  $title[/]\n$explanation", label=one_line(labels.get(t["id"], "?"), 4),
                      title=one_line(t["title"], 200), explanation=clean(t["explanation"], 2000, multiline=True))
             for t in snap["truth"]]
    return _join(lines) if lines else Content("(no true cause)")


def evidence_text(snap: dict[str, Any]) -> Content:
    """Which rival each query ruled out first, and the rivals still open (revealed only)."""
    if not is_revealed(snap):
        return template(HIDDEN)
    evidence = snap["evidence"]
    lines = [template(f"[green]✓ Q{r['query']}[/] rules out [b]$label[/b] $title", label=one_line(r["label"], 4),
                      title=one_line(r["title"], 44))
             for r in sorted(evidence["ruled_out"], key=lambda r: (r["query"], r["label"]))]
    lines += [template("[dim]· open[/] [b]$label[/b] $title", label=one_line(r["label"], 4),
                       title=one_line(r["title"], 44))
              for r in evidence["still_open"]]
    return _join(lines) if lines else Content("(no rivals)")


def board_text(snap: dict[str, Any]) -> Content:
    true = {h["id"] for h in snap["hypotheses"] if h.get("true")}
    board = snap["board"]
    lines = []
    if not board["ranking"]:
        lines.append(template("[dim]No ranking saved yet.[/dim]"))
    for n, r in enumerate(board["ranking"], start=1):
        mark = " [green]◆ truth[/]" if r["id"] in true else ""
        lines.append(template(f"{n}. [b]$label[/b] $title  [b]{r['confidence']:.0f}%[/b]{mark}",
                              label=one_line(r["label"], 4), title=one_line(r["title"], 40)))
    history = board["history"]
    if history:
        lines.append(template(f"[dim]{len(history)} ranking change{'s' if len(history) != 1 else ''}, "
                              f"last at {_clock(history[-1]['elapsed_s'])}[/dim]"))
    pins = board.get("pins", [])
    if pins:
        lines.append(Content("Pins: " + ", ".join(
            f"Q{p['query']} {'+' if p['stance'] == 'supports' else '−'}{one_line(p['label'], 4)}" for p in pins)))
    sub = snap["submission"]
    if sub is not None:
        lines.append(template(f"[b]Submitted[/b] at {_clock(sub['elapsed_s'])}"))
    return _join(lines)


def score_text(snap: dict[str, Any]) -> Content:
    if not is_revealed(snap):
        return template(HIDDEN)
    score = snap["score"]
    lines = [template(f"[b]{score['total']:.1f} / 100[/b]" + ("" if score["submitted"] else " (if submitted now)"))]
    for c in score["components"]:
        pts = f"{c['points']:+.1f}" if c["group"] == "penalty" else f"{c['points']:.1f}/{c['max']:.0f}"
        lines.append(Content(f"{one_line(c['title'], 34):<34} {pts:>9}"))
    return _join(lines)


def feed_text(snap: dict[str, Any]) -> Content:
    lines = []
    for u in snap["updates"]:
        who = "you" if u["source"] == "gm" else ("incident" if u["source"] == "incident" else "candidate")
        cost = f" -{u['cost']} pts" if u["cost"] else ""
        lines.append(template(f"{_clock(u['elapsed_s'])} [b]$kind[/b] ($who{cost}) $sender: $text",
                              kind=one_line(u["kind"], 20), who=who, sender=one_line(u["from"], 60),
                              text=one_line(u["text"], 90)))
    for p in snap["pending"]:
        text = p.get("text") or (f"incident inject {p.get('index')}" if p["kind"] == "inject" else "next hint")
        state = "[red]refused: $problem[/]" if p.get("problem") else "[yellow]waiting[/]"
        lines.append(template(f"{state} [b]$kind[/b] $text", problem=one_line(str(p.get("problem") or ""), 200),
                              kind=one_line(str(p["kind"]), 20), text=one_line(str(text), 90)))
    if not lines:
        return template("[dim]Nothing delivered yet. m sends a message, h a hint, i an inject.[/dim]")
    return _join(lines)
