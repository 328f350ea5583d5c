"""Run an incident through the engine model and build its telemetry tables.

The incident's faults and noise become engine-model faults and workload changes; the
simulation produces what happened; `tables` turns that into what an observability stack
would have recorded. `ablate=True` runs the same seed with the faults removed (the
validator's counterfactual).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine_model.config import EngineConfig
from engine_model.faults import Fault
from engine_model.profiles import get_gpu
from engine_model.request import Request
from engine_model.results import SimResult
from engine_model.simulation import FleetSpec, PoolSpec, Simulation
from incidents.spec import Incident, replica_index
from telemetry_gen import tables as T
from telemetry_gen.quality import base_scores
from telemetry_gen.store import table_digest
from telemetry_gen.workload import AppSpec, Burst, LengthDist, Ramp, RateCurve, WorkloadSpec, generate_requests
from telemetry_gen.workload import standard_apps as _standard_apps

PROBE_PERIOD_S = 300.0
PROBE_PROMPTS = 4
PROBE_ID_BASE = 10_000_000

Progress = Callable[[float, str], None]


@dataclass
class Telemetry:
    """The built tables and what identifies them."""

    tables: dict[str, pd.DataFrame]
    digest: str
    run: SimResult
    wall_s: float

    def row_counts(self) -> dict[str, int]:
        return {name: len(df) for name, df in self.tables.items()}


def fleet_spec(inc: Incident) -> FleetSpec:
    f = inc.fleet
    cfg = EngineConfig().with_changes(
        tensor_parallel_size=f.tensor_parallel, pipeline_parallel_size=f.pipeline_parallel, **f.engine
    )
    fallback = None
    threshold = None
    if f.router.fallback is not None:
        fb = f.router.fallback
        fallback = PoolSpec(fb.model, fb.gpu, fb.replicas, EngineConfig(), "v1", name_prefix="fallback")
        threshold = fb.queue_threshold
    return FleetSpec(
        primary=PoolSpec(f.model, f.gpu, f.replicas, cfg, f.model_version),
        fallback=fallback,
        router_policy=f.router.policy,
        fallback_threshold=threshold,
    )


def _scope(scope: Any, n: int) -> tuple[int, ...] | None:
    if scope == "all":
        return None
    if hasattr(scope, "replicas"):
        return tuple(sorted({i for ref in scope.replicas if (i := replica_index(ref)) is not None}))
    return tuple(range(max(1, math.ceil(scope.fraction * n))))


def engine_faults(inc: Incident, *, ablate: bool = False) -> list[Fault]:
    """The incident's faults (unless ablated) plus noise that acts on the engines."""
    n = inc.fleet.replicas
    out: list[Fault] = []
    if not ablate:
        for fs in inc.faults:
            out.append(Fault(fs.kind, fs.at_s, fs.until_s, _scope(fs.scope, n), fs.intensity, dict(fs.params)))
    for noise in inc.noise:
        if noise.kind == "config_change":
            out.append(Fault("config_change", noise.at_s, None, _scope(noise.scope, n), 1.0, dict(noise.params)))
        elif noise.kind == "replica_restart":
            idx = replica_index(noise.replica)
            out.append(Fault("config_change", noise.at_s, None, (idx,) if idx is not None else None, 1.0, {}))
    return out


def _length(d: Any) -> LengthDist:
    kw: dict[str, Any] = {"kind": d.kind, "scale": d.scale, "min": d.min}
    if d.trace is not None:
        kw["trace"] = d.trace
    if d.median is not None:
        kw["median"] = d.median
    if d.sigma is not None:
        kw["sigma"] = d.sigma
    if d.max is not None:
        kw["max"] = d.max
    return LengthDist(**kw)


def workload_spec(inc: Incident) -> WorkloadSpec:
    w = inc.workload
    bursts = [Burst(b.start_s, b.duration_s, b.factor) for b in w.bursts]
    bursts += [Burst(x.at_s, x.duration_s, x.factor) for x in inc.noise if x.kind == "traffic_burst"]
    curve = RateCurve(
        base_rps=w.base_rps, daily_amplitude=w.daily_amplitude, peak_hour=w.peak_hour, start_hour=w.start_hour,
        bursts=tuple(bursts), ramps=tuple(Ramp(r.start_s, r.duration_s, r.to_factor) for r in w.ramps),
        noise=0.1,
    )
    if w.apps == "standard":
        apps = _standard_apps()
    else:
        apps = tuple(
            AppSpec(
                name=a.name, weight=a.weight, prompt=_length(a.prompt), output=_length(a.output),
                tenants=tuple(f"{a.name}-t{i}" for i in range(a.tenants)),
                system_prompts=a.system_prompts if a.system_prompt_tokens > 0 else 0,
                system_prompt_tokens=a.system_prompt_tokens if a.system_prompts > 0 else 0,
                temperature=a.temperature, seeded_fraction=a.seeded_fraction, n=a.n, priority=a.priority,
                max_tokens=a.max_tokens, rate_shape=a.rate_shape, timeout_s=a.timeout_s,
            )
            for a in w.apps
        )
    return WorkloadSpec(duration_s=inc.window.duration_s, rate=curve, apps=apps)


def probe_requests(duration_s: float, first_id: int = PROBE_ID_BASE) -> list[Request]:
    """Determinism probes: a few fixed greedy prompts replayed every PROBE_PERIOD_S seconds."""
    out = []
    k = 0
    for i, t in enumerate(np.arange(17.0, duration_s, PROBE_PERIOD_S)):
        for p in range(PROBE_PROMPTS):
            out.append(Request(
                request_id=first_id + k, arrival_s=float(t + 0.5 * p), prompt_tokens=180 + 40 * p, output_tokens=64,
                app="probe", tenant="sre-probes", prompt_hash=900_000_001 + p, session_key=0, temperature=0.0,
                seed=1234, max_tokens=64, logprobs=True,
            ))
            k += 1
        del i
    return out


def eval_suites(inc: Incident, ablate: bool) -> list[T.EvalSuite]:
    base = base_scores(inc.fleet.model)
    suites = [T.EvalSuite(inc.fleet.model_version, base, n=1000, at_s=-86_400.0)]
    for fs in [] if ablate else inc.faults:
        if fs.kind != "model_rollout":
            continue
        version = str(fs.params.get("version", inc.fleet.model_version + "-next"))
        deltas = fs.params.get("eval_deltas", {}) or {}
        scores = {task: min(1.0, max(0.0, v + float(deltas.get(task, 0.0)) * fs.intensity)) for task, v in base.items()}
        suites.append(T.EvalSuite(version, scores, n=1000, at_s=max(0.0, fs.at_s - 3600.0)))
    return suites


def external_events(inc: Incident) -> list[T.ExternalEvent]:
    out = []
    for x in inc.noise:
        if x.kind == "deploy_event":
            idx = replica_index(x.replica) if x.replica is not None else None
            out.append(T.ExternalEvent(x.at_s, "deploy", x.service, f"{x.service} deployed version {x.version}",
                                       replica=f"vllm-{idx}" if idx is not None else ""))
    return out


def build_telemetry(inc: Incident, seed: int, *, ablate: bool = False, progress: Progress | None = None) -> Telemetry:
    """Simulate the incident (or its ablation) and build every table. Deterministic in (incident, seed)."""
    wall0 = time.perf_counter()
    say = progress or (lambda f, s: None)
    say(0.0, "workload")
    reqs = generate_requests(workload_spec(inc), seed)
    reqs = sorted(reqs + probe_requests(inc.window.duration_s), key=lambda r: (r.arrival_s, r.request_id))
    fleet = fleet_spec(inc)
    sim = Simulation(fleet, reqs, engine_faults(inc, ablate=ablate), inc.window.duration_s,
                     sample_interval_s=inc.window.scrape_interval_s,
                     progress=(lambda f: say(0.05 + 0.8 * f, "simulating")))
    run = sim.run()
    say(0.85, "tables")
    gpu = get_gpu(inc.fleet.gpu)
    ctx = T.TelemetryContext(
        t0=inc.window.start, gpu=gpu, gpus_per_replica=inc.fleet.tensor_parallel * inc.fleet.pipeline_parallel,
        seed=seed, evals=eval_suites(inc, ablate), external_events=external_events(inc),
    )
    tables = {
        "requests": T.requests_table(run, ctx),
        "metrics": T.metrics_table(run, ctx),
        "events": T.events_table(run, ctx),
        "logs": T.logs_table(run, ctx),
        "evals": T.evals_table(ctx),
        "probes": T.probes_table(run, ctx),
    }
    digest = table_digest(tables)
    say(1.0, "done")
    return Telemetry(tables, digest, run, time.perf_counter() - wall0)


