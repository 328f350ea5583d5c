"""An optional record of the events a simulation fired, in Chrome's trace event format.

For debugging a run: pass an `EventTrace` to `Simulation` (or `simulate`, or
telemetry_gen.runner.build_telemetry), then `write()` it and open the file in https://ui.perfetto.dev
or chrome://tracing. Every replica is a track of its own (its steps as spans, its handovers and client
timeouts as instants); the fleet's own events (arrivals, retries, timers) are on track 0. Simulated
seconds are shown as trace microseconds x 1e6, so the viewer's time axis reads as simulated time.

Off by default: a run without a trace pays one `is None` test per event and records nothing.

    trace = EventTrace()
    simulate(fleet, requests, faults, 600.0, trace=trace)
    trace.write("run.trace.json")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FLEET_TRACK = 0
"""Track (Chrome trace `tid`) of events that belong to no replica; replica i is on track i + 1."""
US_PER_S = 1e6


def _track(replica: int | None) -> int:
    return FLEET_TRACK if replica is None else replica + 1


class EventTrace:
    """Trace events in memory, at most `max_events` of them (later ones are counted in `dropped`).

    Times are simulated seconds; they are written as microseconds, the format's unit.
    """

    def __init__(self, max_events: int = 1_000_000) -> None:
        self.max_events = max_events
        self.events: list[dict[str, Any]] = []
        self.dropped = 0
        self._tracks: dict[int, str] = {FLEET_TRACK: "fleet"}

    def name_replica(self, replica: int, name: str) -> None:
        """Label the track of the replica with fleet index `replica` (shown as a thread name in the viewer)."""
        self._tracks[_track(replica)] = name

    def instant(self, name: str, t_s: float, replica: int | None = None, args: dict[str, Any] | None = None) -> None:
        """An event at one instant, `t_s` simulated seconds, on a replica's track (None: the fleet's)."""
        self._add({"name": name, "ph": "i", "s": "t", "ts": t_s * US_PER_S, "pid": 0, "tid": _track(replica),
                   "args": args or {}})

    def span(self, name: str, start_s: float, end_s: float, replica: int | None,
             args: dict[str, Any] | None = None) -> None:
        """An event lasting from `start_s` to `end_s` simulated seconds (a complete event, "X")."""
        self._add({"name": name, "ph": "X", "ts": start_s * US_PER_S, "dur": max(0.0, end_s - start_s) * US_PER_S,
                   "pid": 0, "tid": _track(replica), "args": args or {}})

    def _add(self, event: dict[str, Any]) -> None:
        if len(self.events) >= self.max_events:
            self.dropped += 1
            return
        self.events.append(event)

    def to_dict(self) -> dict[str, Any]:
        """The trace as the JSON object format: traceEvents, with a metadata event naming each track."""
        names = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": label}}
                 for tid, label in sorted(self._tracks.items())]
        return {"traceEvents": names + self.events, "displayTimeUnit": "ms",
                "otherData": {"dropped_events": self.dropped, "time_unit": "simulated seconds x 1e6"}}

    def write(self, path: str | Path) -> Path:
        """Write the trace as JSON to `path`; returns the path."""
        out = Path(path)
        out.write_text(json.dumps(self.to_dict()))
        return out
