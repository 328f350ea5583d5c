"""The simulation's optional event trace (engine_model.trace): Chrome trace format, off by default."""

from __future__ import annotations

import json
from pathlib import Path

from engine_model.config import EngineConfig
from engine_model.simulation import FleetSpec, PoolSpec, simulate
from engine_model.sources import SOURCE_ORDER, TIMER_NAMES
from engine_model.trace import EventTrace
from telemetry_gen.workload import generate_requests, standard_workload

FLEET = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 2, EngineConfig()))


def _requests() -> list:
    return generate_requests(standard_workload(60.0, 4.0), seed=2)


def test_a_trace_records_every_event_and_changes_nothing(tmp_path: Path) -> None:
    plain = simulate(FLEET, _requests(), [], 60.0)
    trace = EventTrace()
    traced = simulate(FLEET, _requests(), [], 60.0, trace=trace)
    assert repr(traced.requests) == repr(plain.requests) and repr(traced.samples) == repr(plain.samples)  # NaNs
    data = json.loads(trace.write(tmp_path / "run.trace.json").read_text())
    events = [e for e in data["traceEvents"] if e["ph"] != "M"]
    # every event fired is recorded (the run's count also holds the one past the horizon that ended it)
    assert traced.stats["events"] - 1 <= len(events) <= traced.stats["events"]
    names = {e["name"] for e in events}
    assert {"arrival", "handover", "sample"} <= names
    assert names <= set(SOURCE_ORDER) | set(TIMER_NAMES) | {"mixed", "prefill_only", "decode_run"}
    tracks = {e["args"]["name"] for e in data["traceEvents"] if e["ph"] == "M"}
    assert tracks == {"fleet", "vllm-0", "vllm-1"}
    steps = [e for e in events if e["ph"] == "X"]
    assert steps and all(e["dur"] >= 0 and e["tid"] in (1, 2) for e in steps)


def test_a_full_trace_counts_what_it_dropped() -> None:
    trace = EventTrace(max_events=10)
    simulate(FLEET, _requests(), [], 60.0, trace=trace)
    assert len(trace.events) == 10 and trace.dropped > 0
    assert trace.to_dict()["otherData"]["dropped_events"] == trace.dropped
