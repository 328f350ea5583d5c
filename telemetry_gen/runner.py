"""Run an incident through the engine model and build its telemetry tables.

The incident's faults and noise become engine-model faults and workload changes; the
simulation produces what happened; `tables` turns that into what an observability stack
would have recorded. `ablate=True` runs the same seed with the faults removed (the
validator's counterfactual).

What a fault changes outside the engines, each kind declares in its workload hook
(engine_model.fault_kinds: `FaultKind.workload`) to a `WorkloadEffects`, and this module applies the
declarations in one fixed order, naming no kind: extra requests (drawn from a seed of their own),
rescaled token counts, delays on the way through the gateway to the router, then the offline
evaluations and the GPUs' throttle causes. How clients time out and retry reaches the simulation as its
`clients` (telemetry_gen.clients), which sends the retries. The base workload's draws never change
(common random numbers), so two worlds of one incident differ only by their faults.

Why one module a little over 500 lines: it is the one translation from an incident file to a
simulation run, and each step above derives its seed from the incident seed in a fixed order
(`_derived_seed`); splitting the steps across modules would hide that order, which every digest
depends on.
"""

from __future__ import annotations

import hashlib
import math
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from engine_model.config import EngineConfig
from engine_model.fault_kinds import REGISTRY
from engine_model.fault_kinds.config_change import ConfigChange
from engine_model.faults import WORKLOAD_FAULTS, Fault
from engine_model.profiles import get_gpu, get_model
from engine_model.request import Request
from engine_model.results import SimResult
from engine_model.simulation import FleetSpec, PoolSpec, Simulation, replica_names
from engine_model.trace import EventTrace
from incidents.fault_spec import ConfigChangeNoise, ReplicaRestart
from incidents.spec import App as AppSpecYaml
from incidents.spec import (
    BurstArrival,
    ClosedLoopArrival,
    FaultSpec,
    Incident,
    ReplayArrival,
    ZipfPopularity,
    replica_index,
)
from telemetry_gen import tables as T
from telemetry_gen.clients import client_deploys, client_model, declares_clients
from telemetry_gen.quality import base_scores
from telemetry_gen.store import table_digest
from telemetry_gen.workload import (
    DEFAULT_MAX_MODEL_LEN,
    AdapterMix,
    AppSpec,
    Burst,
    LengthDist,
    Ramp,
    RateChange,
    RateCurve,
    ReplayTrace,
    WorkloadSpec,
    adapter_names,
    generate_requests,
)
from telemetry_gen.workload import standard_apps as _standard_apps

PROBE_PERIOD_S = 300.0
PROBE_PROMPTS = 4
PROBE_ID_BASE = 10_000_000
SURGE_ID_BASE = 20_000_000
"""Request ids of a traffic surge's extra requests start here (the base workload's run 0..N-1)."""

# The API gateway's own transit time in normal operation: log-normal, median 3 ms (about 1.5 to 6 ms).
# The generated arrival process is the arrival at the router, so this baseline only moves the
# client-side timestamp earlier; a gateway_latency fault delays the arrival at the router.
GATEWAY_MEDIAN_S = 0.003
GATEWAY_SIGMA = 0.35
_GATEWAY_SALT = zlib.crc32(b"api-gateway")

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
    gpu = get_gpu(f.gpu)
    # vLLM V1 picks its batch limits by GPU (EngineConfig.for_gpu); the incident's knobs go on top
    cfg = EngineConfig.for_gpu(gpu.name, gpu.hbm_gib, tensor_parallel_size=f.tensor_parallel,
                               pipeline_parallel_size=f.pipeline_parallel, **f.engine)
    fallback = None
    threshold = None
    if f.router.fallback is not None:
        fb = f.router.fallback
        fb_gpu = get_gpu(fb.gpu)
        fallback = PoolSpec(fb.model, fb.gpu, fb.replicas, EngineConfig.for_gpu(fb_gpu.name, fb_gpu.hbm_gib), "v1",
                            name_prefix="fallback")
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


def live_faults(inc: Incident, *, ablate: bool = False) -> list[FaultSpec]:
    """The incident's faults that have an effect: none when ablated, and never one at intensity 0 throughout
    (intensity 0 means no effect, for every kind)."""
    if ablate:
        return []
    out = []
    for fs in inc.faults:
        first, steps = fs.schedule()
        if first > 0.0 or any(i > 0.0 for _, i in steps):
            out.append(fs)
    return out


def engine_faults(inc: Incident, *, ablate: bool = False) -> list[Fault]:
    """The incident's faults (unless ablated) plus noise that acts on the engines."""
    n = inc.fleet.replicas
    out: list[Fault] = []
    for fs in live_faults(inc, ablate=ablate):
        if fs.kind in WORKLOAD_FAULTS:
            continue  # acted on the requests or the evaluations already
        first, steps = fs.schedule()
        out.append(Fault(fs.kind, fs.at_s, fs.until_s, _scope(fs.scope, n), first, dict(fs.params), steps))
    # routine config changes and restarts are config changes the router and engines go through like any other
    for noise in inc.noise:
        if isinstance(noise, ConfigChangeNoise):
            out.append(Fault(ConfigChange.name, noise.at_s, None, _scope(noise.scope, n), 1.0, dict(noise.params)))
        elif isinstance(noise, ReplicaRestart):
            idx = replica_index(noise.replica)
            out.append(Fault(ConfigChange.name, noise.at_s, None, (idx,) if idx is not None else None, 1.0, {}))
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
                name=a.name, weight=a.weight,
                prompt=_length(a.prompt) if a.prompt is not None else _REPLAYED,
                output=_length(a.output) if a.output is not None else _REPLAYED,
                tenants=tuple(f"{a.name}-t{i}" for i in range(a.tenants)),
                system_prompts=a.system_prompts if a.system_prompt_tokens > 0 else 0,
                system_prompt_tokens=a.system_prompt_tokens if a.system_prompts > 0 else 0,
                temperature=a.temperature, seeded_fraction=a.seeded_fraction, n=a.n, priority=a.priority,
                max_tokens=a.max_tokens, rate_shape=a.rate_shape, timeout_s=a.timeout_s,
                batch_period_s=a.batch_period_s, batch_duration_s=a.batch_duration_s,
                batch_size_sigma=a.batch_size_sigma, length_correlation=a.length_correlation,
                adapters=_adapter_mix(a),
                **_arrival_fields(a),
            )
            for a in w.apps
        )
    changes: dict[str, list[RateChange]] = {}
    for c in w.rate_changes:
        duration = math.inf if c.duration_s is None else c.duration_s
        changes.setdefault(c.app, []).append(RateChange(c.start_s, c.factor, duration, c.tenant))
    apps = tuple(replace(a, rate_changes=tuple(changes[a.name])) if a.name in changes else a for a in apps)
    return WorkloadSpec(duration_s=inc.window.duration_s, rate=curve, apps=apps)


def _adapter_mix(app: AppSpecYaml) -> AdapterMix | None:
    d = app.adapters
    if d is None:
        return None
    pop = d.popularity
    skew = pop.skew if isinstance(pop, ZipfPopularity) else 0.0
    return AdapterMix(count=d.count, rank=d.rank, popularity=pop.kind, skew=skew, share=d.share)


# lengths of a replayed app come from its trace; its LengthDist is never drawn from
_REPLAYED = LengthDist("fixed", median=1.0)


def _arrival_fields(app: AppSpecYaml) -> dict[str, Any]:
    """AppSpec's arrival fields for the YAML app's `arrival` (none: open loop)."""
    arrival = app.arrival
    if isinstance(arrival, ClosedLoopArrival):
        return {"arrival": "closed", "clients": arrival.clients, "requests": arrival.requests,
                "think_time_s": arrival.think_time_s, "start_s": arrival.start_s}
    if isinstance(arrival, BurstArrival):
        return {"arrival": "burst", "requests": arrival.requests, "start_s": arrival.at_s}
    if isinstance(arrival, ReplayArrival):
        rows = arrival._rows
        if rows is None:
            raise ValueError(f"app {app.name}: its trace {arrival.path!r} was not read; load the incident from "
                             "its file (incidents.loader.load_incident)")
        trace = ReplayTrace(rows.arrival_s * arrival.time_scale, rows.prompt_tokens, rows.output_tokens,
                            rows.source)
        return {"arrival": "replay", "replay": trace, "start_s": arrival.start_s}
    return {}


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


def _clip01(x: float) -> float:
    return min(1.0, max(0.0, x))


def eval_suites(inc: Incident, ablate: bool) -> list[T.EvalSuite]:
    """Offline evaluations: the deployed version's, one per rolled-out version, and, for an eval
    harness change, the re-evaluation of every version already evaluated (appended last, so the
    earlier runs' sampling noise stays as it was)."""
    base = base_scores(inc.fleet.model)
    suites = [T.EvalSuite(inc.fleet.model_version, base, n=1000, at_s=-86_400.0)]
    effects = workload_effects(live_faults(inc, ablate=ablate), inc.fleet.replicas)
    for fault, version, moved in effects.versions:
        scores = {task: _clip01(v + moved.get(task, 0.0)) for task, v in base.items()}
        label = inc.fleet.model_version + "-next" if version is None else version
        suites.append(T.EvalSuite(label, scores, n=1000, at_s=max(0.0, fault.start_s - 3600.0)))
    for fault, moved in effects.rescores:
        deltas = {task: moved.get(task, 0.0) for task in base}
        if not any(deltas.values()):
            continue  # intensity 0 or no task moves: the harness change is invisible
        until = math.inf if fault.end_s is None else fault.end_s

        def rescored(suite: T.EvalSuite, deltas: dict[str, float] = deltas) -> dict[str, float]:
            return {task: _clip01(v + deltas.get(task, 0.0)) for task, v in suite.scores.items()}

        # every version evaluated before is evaluated again with the new harness when it lands
        latest: dict[str, T.EvalSuite] = {}
        for suite in suites:
            if suite.at_s < fault.start_s:
                latest[suite.model_version] = suite
        # evaluations run while the new harness is in place score with it
        suites = [replace(x, scores=rescored(x)) if fault.start_s <= x.at_s < until else x for x in suites]
        suites += [T.EvalSuite(v, rescored(x), n=x.n, at_s=fault.start_s) for v, x in latest.items()]
    return suites


# ----- what faults change outside the engines ------------------------------------------------------
class WorkloadEffects:
    """What the faults' workload hooks declared (engine_model.fault_kinds.base.WorkloadHost), in fault
    order. `position`: the index, in the list of faults being declared, of the fault declaring now
    (gateway delays and reshapes derive their seeds from it)."""

    def __init__(self) -> None:
        self.position = 0
        self.surges: list[tuple[Fault, str | None, float]] = []  # (fault, app, extra rate factor)
        self.shifts: list[tuple[int, Fault, str | None, float, float]] = []  # (position, fault, app, prompt, output)
        # (position, fault, mean s, log-sigma, app or None for every app)
        self.delays: list[tuple[int, Fault, float, float, str | None]] = []
        self.rescores: list[tuple[Fault, Mapping[str, float]]] = []  # (fault, score change by task)
        self.versions: list[tuple[Fault, str | None, Mapping[str, float]]] = []  # (fault, version, change by task)
        self.throttles: list[tuple[Fault, str]] = []  # (fault, cause)

    def add_requests(self, fault: Fault, app: str | None, extra: float) -> None:
        self.surges.append((fault, app, extra))

    def reshape(self, fault: Fault, app: str | None, prompt_scale: float, output_scale: float) -> None:
        self.shifts.append((self.position, fault, app, prompt_scale, output_scale))

    def delay(self, fault: Fault, mean_s: float, sigma: float, app: str | None = None) -> None:
        self.delays.append((self.position, fault, mean_s, sigma, app))

    def rescore(self, fault: Fault, deltas: Mapping[str, float]) -> None:
        self.rescores.append((fault, deltas))

    def evaluate_version(self, fault: Fault, version: str | None, deltas: Mapping[str, float]) -> None:
        self.versions.append((fault, version, deltas))

    def throttle_cause(self, fault: Fault, cause: str) -> None:
        self.throttles.append((fault, cause))


def workload_effects(faults: list[FaultSpec], n_replicas: int = 1) -> WorkloadEffects:
    """Every fault's declared effects outside the engines (its kind's `workload` hook), in order;
    `n_replicas` resolves a fractional scope."""
    effects = WorkloadEffects()
    for k, fs in enumerate(faults):
        effects.position = k
        first, steps = fs.schedule()
        fault = Fault(fs.kind, fs.at_s, fs.until_s, _scope(fs.scope, n_replicas), first, dict(fs.params), steps)
        REGISTRY[fs.kind].workload(effects, fault)
    return effects


def _derived_seed(seed: int, *parts: object) -> int:
    """A 63-bit seed for a stream of draws of its own, from the run's seed and a label."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _apps_named(spec: WorkloadSpec, kind: str, app: str | None) -> str | None:
    """A fault's app (None: every app); an app the workload lacks is an error."""
    if app is None:
        return None
    names = [a.name for a in spec.apps]
    if app not in names:
        raise ValueError(f"{kind}: no app {app!r} in the workload (apps: {', '.join(names)})")
    return app


def surge_requests(spec: WorkloadSpec, seed: int, faults: list[FaultSpec], first_id: int = SURGE_ID_BASE,
                   max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> list[list[Request]]:
    """The extra requests each fault declared (`add_requests`): `extra` times the normal rate of its app
    (or of every app) between its start and end, drawn from a seed derived from `seed`, the fault's kind
    and its rank among the faults that add requests, with fresh request ids from `first_id`. One list
    per fault that adds any."""
    out: list[list[Request]] = []
    next_id = first_id
    for k, (fault, named, extra) in enumerate(workload_effects(faults).surges, 1):
        app = _apps_named(spec, fault.kind, named)
        start, end = max(0.0, fault.start_s), min(spec.duration_s, fault.end_s or spec.duration_s)
        if extra <= 0.0 or end <= start:
            continue
        # zero outside the window; inside, the same curve (diurnal shape, bursts, ramps) scaled to the extra
        off = [Burst(0.0, start, 0.0)] if start > 0.0 else []
        off += [Burst(end, spec.duration_s - end, 0.0)] if end < spec.duration_s else []
        rate = spec.rate
        # a surge adds open-loop traffic: closed loops, bursts and replays keep their own shape
        apps = tuple(a for a in spec.apps if a.arrival == "open")
        base_rps = rate.base_rps * extra
        if app is not None:
            chosen = next(a for a in spec.apps if a.name == app)
            if chosen.arrival != "open":
                raise ValueError(f"{fault.kind}: app {app!r} is not open-loop (its arrival is {chosen.arrival})")
            base_rps *= spec.share(chosen)  # its normal share, now carried alone
            apps = (chosen,)
        if not apps:
            continue
        curve = replace(rate, base_rps=base_rps, bursts=(*rate.bursts, *off))
        extra_spec = WorkloadSpec(duration_s=spec.duration_s, rate=curve, apps=apps)
        reqs = generate_requests(extra_spec, _derived_seed(seed, fault.kind, k), max_model_len)
        # A batch app's job carries a period's worth of requests, sized by the rate over the period ahead:
        # a job begun before the surge would bring surge requests early. The surge is its window's. (The
        # other shapes' extra rate is zero outside the window already.)
        batch = {a.name for a in apps if a.rate_shape == "batch"}
        if batch:
            reqs = [r for r in reqs if r.app not in batch or start <= r.arrival_s < end]
        # the surge's adapters are numbered within its own apps: renumber them as in the whole workload
        ids = {i + 1: j + 1 for i, j in enumerate(map(adapter_names(spec).index, adapter_names(extra_spec)))}
        for r in reqs:
            r.request_id = next_id
            next_id += 1
            if r.lora:
                r.lora = ids[r.lora]
        out.append(reqs)
    return out


def _active(fault: Fault, t: float) -> bool:
    return fault.start_s <= t and (fault.end_s is None or t < fault.end_s)


def shift_workload(reqs: list[Request], faults: list[FaultSpec], spec: WorkloadSpec,
                   max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> None:
    """The reshapes faults declared (`reshape`), in place: requests of the app (or of every app) arriving
    while the fault is on get their prompt beyond the shared system prompt scaled by its prompt scale and
    their output by its output scale. Ids and arrivals stay; a changed prompt gets a new content hash (the
    same for repeats of one prompt, so they still share it)."""
    for k, fault, named, ps, os_ in workload_effects(faults).shifts:
        app = _apps_named(spec, fault.kind, named)
        if ps == 1.0 and os_ == 1.0:
            continue
        salt = _derived_seed(0, fault.kind, k) | 1
        for r in reqs:
            # a closed loop's requests keep their prepared lengths (most are sent after generation anyway)
            if (app is not None and r.app != app) or r.loop >= 0 or not _active(fault, r.arrival_s):
                continue
            if ps != 1.0:
                user = max(1, round((r.prompt_tokens - r.prefix_tokens) * ps))
                r.prompt_tokens = min(r.prefix_tokens + user, max_model_len - 1)
                r.prompt_hash = (((r.prompt_hash ^ salt) * 0x9E3779B97F4A7C15) & ((1 << 63) - 1)) or 1
            out = round(r.output_tokens * os_) if os_ != 1.0 else r.output_tokens
            r.output_tokens = max(1, min(out, r.max_tokens, max_model_len - r.prompt_tokens))


def gateway_transit(parts: list[list[Request]], faults: list[FaultSpec], seed: int) -> None:
    """Route each part's requests through the API gateway, in place.

    Every request gets the gateway's baseline transit (`gateway_s`, a few ms drawn from a generator of
    its own per part, so the workload's draws stay as they were); the generated arrival is the arrival
    at the router, so the client sent it gateway_s earlier. A delay a fault declared (`delay`) and active
    when the client sent the request (of its app, if it names one) adds its mean on average (log-normal
    with its sigma): the request reaches the router, and the engines, that much later. The delay draws are
    the same whichever app a delay names, so naming one changes nothing for that app's requests.
    """
    delays = workload_effects(faults).delays
    for p, reqs in enumerate(parts):
        if not reqs:
            continue
        n = len(reqs)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed % (1 << 64), _GATEWAY_SALT, p, 0])))
        gw = GATEWAY_MEDIAN_S * np.exp(GATEWAY_SIGMA * rng.standard_normal(n))
        arrival = np.array([r.arrival_s for r in reqs], dtype=float)
        sent = arrival - gw
        extra = np.zeros(n)
        apps = np.array([r.app for r in reqs], dtype=object) if any(d[4] is not None for d in delays) else None
        for k, fault, mean, sigma, app in delays:
            if mean <= 0.0:
                continue
            jrng = np.random.Generator(
                np.random.PCG64(np.random.SeedSequence([seed % (1 << 64), _GATEWAY_SALT, p, k + 1]))
            )
            delay = mean * np.exp(sigma * jrng.standard_normal(n) - 0.5 * sigma * sigma)
            until = math.inf if fault.end_s is None else fault.end_s
            active = (sent >= fault.start_s) & (sent < until)
            if app is not None and apps is not None:
                active &= apps == app
            extra += np.where(active, delay, 0.0)
        for r, g, e in zip(reqs, (gw + extra).tolist(), extra.tolist(), strict=True):
            r.gateway_s = g
            r.arrival_s += e


def client_requests(inc: Incident, seed: int, *, ablate: bool = False) -> list[Request]:
    """What the clients send, as it reaches the router: the workload plus any surge, shifted and routed
    through the gateway by the workload-side faults (none when ablated), unsorted."""
    spec = workload_spec(inc)
    faults = [fs for fs in live_faults(inc, ablate=ablate) if fs.kind in WORKLOAD_FAULTS]
    fleet = fleet_spec(inc)
    # clients size requests to the context the serving fleet advertises: the smallest of its pools
    limit = min(pool.config.max_model_len for pool in (fleet.primary, fleet.fallback) if pool is not None)
    parts = [generate_requests(spec, seed, limit), *surge_requests(spec, seed, faults, max_model_len=limit)]
    for reqs in parts:
        shift_workload(reqs, faults, spec, limit)
    gateway_transit(parts, faults, seed)
    return [r for reqs in parts for r in reqs]


def external_events(inc: Incident) -> list[T.ExternalEvent]:
    out = []
    for x in inc.noise:
        if x.kind == "deploy_event":
            idx = replica_index(x.replica) if x.replica is not None else None
            out.append(T.ExternalEvent(x.at_s, "deploy", x.service, f"{x.service} deployed version {x.version}",
                                       replica=f"vllm-{idx}" if idx is not None else ""))
    return out


def engine_setups(fleet: FleetSpec) -> dict[str, T.EngineSetup]:
    """Each replica's starting model, GPU and config, by replica name."""
    out: dict[str, T.EngineSetup] = {}
    for pool in (fleet.primary, fleet.fallback):
        if pool is None:
            continue
        setup = T.EngineSetup(get_model(pool.model), get_gpu(pool.gpu), pool.config)
        out.update({name: setup for name in replica_names(pool)})
    return out


def throttle_causes(inc: Incident, *, ablate: bool = False) -> dict[str, str]:
    """Replica name -> why its GPU clock is throttled, for every replica a fault declared a throttle cause
    for (thermal or power). The engine runs the slower clock; the cause is what the GPU's temperature,
    power and clock-event reasons show."""
    out: dict[str, str] = {}
    names = replica_names(fleet_spec(inc).primary)
    for fault, cause in workload_effects(live_faults(inc, ablate=ablate), len(names)).throttles:
        for i in range(len(names)) if fault.replicas is None else fault.replicas:
            if i < len(names):
                out[names[i]] = cause
    return out


def build_telemetry(inc: Incident, seed: int, *, ablate: bool = False, progress: Progress | None = None,
                    trace: EventTrace | None = None) -> Telemetry:
    """Simulate the incident (or its ablation) and build every table. Deterministic in (incident, seed).
    `trace`: record every simulation event into it (engine_model.trace; for debugging a run)."""
    wall0 = time.perf_counter()
    say = progress or (lambda f, s: None)
    say(0.0, "workload")
    reqs = client_requests(inc, seed, ablate=ablate)
    # the SRE probes go to the router directly (no gateway)
    reqs = sorted(reqs + probe_requests(inc.window.duration_s), key=lambda r: (r.arrival_s, r.request_id))
    fleet = fleet_spec(inc)
    timeouts = {a.name: a.timeout_s for a in workload_spec(inc).apps}
    sim = Simulation(fleet, reqs, engine_faults(inc, ablate=ablate), inc.window.duration_s,
                     sample_interval_s=inc.window.scrape_interval_s,
                     progress=(lambda f: say(0.05 + 0.8 * f, "simulating")),
                     clients=client_model(inc, seed, timeouts, ablate=ablate), trace=trace)
    run = sim.run()
    say(0.85, "tables")
    gpu = get_gpu(inc.fleet.gpu)
    ctx = T.TelemetryContext(
        t0=inc.window.start, gpu=gpu, gpus_per_replica=inc.fleet.tensor_parallel * inc.fleet.pipeline_parallel,
        seed=seed, evals=eval_suites(inc, ablate), engines=engine_setups(fleet),
        external_events=external_events(inc) + [
            T.ExternalEvent(t, "deploy", part, detail) for t, part, detail in client_deploys(inc, ablate=ablate)
        ],
        throttle_causes=throttle_causes(inc, ablate=ablate), client_columns=declares_clients(inc),
        adapter_names=adapter_names(workload_spec(inc)),
    )
    tables = T.build_tables(run, ctx)
    digest = table_digest(tables)
    say(1.0, "done")
    return Telemetry(tables, digest, run, time.perf_counter() - wall0)


