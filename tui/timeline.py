"""The debrief's "your queries against the fault timeline": which stretch of the incident window
each query read, drawn under the injected faults. Pure; text for a Markdown code block."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tui.formatting import clock_text, one_line

STRIP = 40
"""Characters the incident window is drawn across."""


def read_span(reads: Sequence[Mapping[str, Any]], t0: Any, duration_s: float) -> tuple[float, float] | None:
    """[start, end] simulated seconds a query's reads covered, from their `ts` bounds (none: the whole
    window), clipped to the window; None when it read no table."""
    from game.observe import ts_bounds

    if not reads:
        return None
    low, high = duration_s, 0.0
    for read in reads:
        bounds = ts_bounds(read.get("filters") or [], t0)
        a = 0.0 if bounds.low is None else max(0.0, bounds.low)
        b = duration_s if bounds.high is None else min(duration_s, bounds.high)
        if a > b:  # bounds that contradict each other come from different scans: count the whole window
            a, b = 0.0, duration_s
        low, high = min(low, a), max(high, b)
    return low, high


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


def timeline_text(incident: Any, events: Iterable[Any], first_seen: Mapping[str, int],
                  width: int = STRIP) -> str:
    """Plain text: the fault row, then one row per query with its time into the investigation
    (from the start event), the span it read, and the signals it saw first."""
    evs = list(events)
    duration = float(incident.window.duration_s)
    t0 = incident.window.start
    start = next((e.time for e in evs if e.kind == "start"), evs[0].time if evs else 0.0)
    label_w = 14
    end_label = clock_text(duration)
    axis = "t+0:00".ljust(width - len("t+" + end_label)) + "t+" + end_label
    lines = [" " * label_w + axis,
             "faults".ljust(label_w) + fault_strip((f.at_s for f in incident.faults), duration, width)]
    seen_in: dict[int, list[str]] = {}
    for sid, q in first_seen.items():
        seen_in.setdefault(q, []).append(sid)
    for e in evs:
        if e.kind != "query":
            continue
        index = int(e.data.get("index", 0))
        label = f"Q{index} +{clock_text(e.time - start)}".ljust(label_w)
        if not e.data.get("ok"):
            lines.append(label + one_line(f"(failed: {e.data.get('error') or 'error'})", width))
            continue
        span = read_span(e.data.get("reads") or [], t0, duration)
        note = ", ".join(seen_in.get(index, []))
        lines.append((label + span_strip(span, duration, width) + (f"  {note}" if note else "")).rstrip())
    return "\n".join(lines)


def timeline_markdown(incident: Any, events: Iterable[Any], first_seen: Mapping[str, int]) -> str:
    """The timeline as a Markdown section."""
    body = timeline_text(incident, events, first_seen)
    return ("## Your queries against the fault timeline\n\n"
            "Each bar is the stretch of the incident window a query read; ▼ marks an injected fault. "
            "Names after a bar are signals that query saw first.\n\n"
            f"```text\n{body}\n```\n")
