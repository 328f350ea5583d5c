"""The debrief's "your queries against the fault timeline": which stretch of the incident window
each query read, drawn under the injected faults, and which rival hypotheses it ruled out first
(from the score report's `per_query`). Pure; text for a Markdown code block."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from game.api import read_span
from tui.formatting import clock_text, one_line

STRIP = 40
"""Characters the incident window is drawn across."""


def _cell(seconds: float, duration_s: float, width: int) -> int:
    return min(width - 1, max(0, int(seconds / duration_s * width))) if duration_s > 0 else 0


def fault_strip(fault_times: Iterable[float], duration_s: float, width: int = STRIP) -> str:
    """A row of dots with ▼ at each fault's start (simulated seconds)."""
    cells = ["·"] * width
    for at in fault_times:
        cells[_cell(at, duration_s, width)] = "▼"
    return "".join(cells)


def span_strip(span: tuple[float, float] | None, duration_s: float, width: int = STRIP) -> str:
    """█ over the cells a span covers, · elsewhere; blank for no span."""
    if span is None:
        return " " * width
    a, b = _cell(span[0], duration_s, width), _cell(span[1], duration_s, width)
    return "".join("█" if a <= i <= b else "·" for i in range(width))


def hypothesis_names(incident: Any, board: Sequence[Any] | None = None) -> dict[str, str]:
    """What the timeline calls each hypothesis: its board label (`board`: `game.session.hypotheses.Shown`),
    else its title."""
    labels = {s.id: s.label for s in board or ()}
    return {h.id: labels.get(h.id, h.title) for h in incident.hypotheses}


def legend(incident: Any, board: Sequence[Any]) -> str:
    """One line per hypothesis in board order: "B  title", the true ones marked."""
    truth = {h.id for h in incident.hypotheses if h.true}
    return "\n".join(f"{s.label:<3}{s.title}" + ("  (true)" if s.id in truth else "") for s in board)


def timeline_text(incident: Any, events: Iterable[Any], per_query: Sequence[Mapping[str, Any]],
                  board: Sequence[Any] | None = None, width: int = STRIP) -> str:
    """Plain text: the fault row, then one row per query with its time into the investigation
    (from the start event), the span it read, and the rivals it was first to rule out (by board
    label, or title without a `board`); with a board, a legend of the labels follows."""
    evs = list(events)
    names = hypothesis_names(incident, board)
    first_out = {int(q["index"]): sorted(names.get(r, r) for r in q.get("new", ())) for q in per_query}
    duration = float(incident.window.duration_s)
    t0 = incident.window.start
    start = next((e.time for e in evs if e.kind == "start"), evs[0].time if evs else 0.0)
    label_w = 14
    end_label = clock_text(duration)
    axis = "t+0:00".ljust(width - len("t+" + end_label)) + "t+" + end_label
    lines = [" " * label_w + axis,
             "faults".ljust(label_w) + fault_strip((f.at_s for f in incident.faults), duration, width)]
    for e in evs:
        if e.kind != "query":
            continue
        index = int(e.data.get("index", 0))
        label = f"Q{index} +{clock_text(e.time - start)}".ljust(label_w)
        if not e.data.get("ok"):
            lines.append(label + one_line(f"(failed: {e.data.get('error') or 'error'})", width))
            continue
        span = read_span(e.data.get("reads") or [], t0, duration)
        out = first_out.get(index, [])
        note = f"  rules out {', '.join(out)}" if out else ""
        lines.append((label + span_strip(span, duration, width) + note).rstrip())
    if board:
        lines += ["", legend(incident, board)]
    return "\n".join(lines)


def timeline_markdown(incident: Any, events: Iterable[Any], per_query: Sequence[Mapping[str, Any]],
                      board: Sequence[Any] | None = None) -> str:
    """The timeline as a Markdown section."""
    body = timeline_text(incident, events, per_query, board)
    return ("## Your queries against the fault timeline\n\n"
            "Each bar is the stretch of the incident window a query read; ▼ marks an injected fault. "
            "After a bar: the rival hypotheses that query was the first to rule out.\n\n"
            f"```text\n{body}\n```\n")
