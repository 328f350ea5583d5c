"""What building an incident's telemetry would cost, estimated from the incident alone, before any simulation.

`estimate(inc)` turns the knobs that drive work (window length, scrape interval, replicas, parallel sizes,
arrival rate with its bursts, ramps and rate changes, closed loops, bursts and replays, traffic surges,
tenants and system prompts) into the quantities a build spends time and memory on: client requests, engine
steps, replica scrapes and metric rows, KV-cache blocks the engines allocate, rate-curve cells the workload
generator evaluates, and resident memory. `excesses(est)` compares them with `BOUNDS`; `servedrill validate`
and `servedrill generate` refuse an incident over a bound (unless --allow-large), naming the YAML knob
that drives the cost (docs/authoring.md, "Bounds").

Everything here is arithmetic on the incident and the engine's start-up plan (engine_model.memory): no
request is drawn and nothing is simulated, so an estimate takes milliseconds whatever the knobs say.
Figures are expectations (a Poisson draw lands within a few per cent of them); retries are not counted
(they need failures, which only the simulation knows; `max_attempts` is at most 20).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from engine_model.memory import plan_memory
from engine_model.profiles import get_gpu, get_model
from engine_model.step_cost import StepCostModel
from incidents.loader import Diagnostic, IncidentError, SourceMap, has_variables, load_incident, source_map
from incidents.spec import BurstArrival, ClosedLoopArrival, Incident, LengthDist, ReplayArrival, TrafficBurstNoise
from incidents.variants import VALIDATION_SEEDS
from telemetry_gen.runner import PROBE_PERIOD_S, PROBE_PROMPTS, fleet_spec, live_faults, workload_effects
from telemetry_gen.workload import Burst, Ramp, RateChange, RateCurve, load_trace, standard_apps

Loc = tuple[str | int, ...]

# ---------------------------------------------------------------------------------------------- bounds
# Measured on this machine class (2 cores; `servedrill generate --force`, docs/authoring.md "Bounds"): the
# library's largest build is 45k requests, 54k metric rows, 4.7 s and 281 MB. A build costs about 1.3 KB
# and 70 us per request, 230 B per metric row and 60 B per KV block; each bound keeps one build within
# about 1.5 GB and a couple of minutes while leaving the library 10x or more of room.
BOUNDS: dict[str, float] = {
    "requests": 1_000_000,  # 22x the library's largest (45k); ~1.3 GB, ~70 s
    "engine_steps": 20_000_000,  # ~20x the library's largest estimate
    "metric_rows": 4_000_000,  # 70x the library's largest (54k); ~0.9 GB
    "kv_blocks": 8_000_000,  # ~10x the library's largest (a 4-replica fleet of 8B models on H100s)
    "curve_cells": 50_000_000,  # (bursts + ramps + rate changes + 1) x 1 s cells the rate curve is evaluated on
    "names": 100_000,  # tenants or system prompts of one app (the generator keeps arrays of them)
    "memory_bytes": 1.5 * 2**30,  # resident memory of the build, estimated
}
"""Largest value of each estimated quantity a build may reach without --allow-large."""

UNITS: dict[str, str] = {
    "requests": "requests", "engine_steps": "engine steps", "metric_rows": "metric rows",
    "kv_blocks": "KV-cache blocks", "curve_cells": "rate-curve cells", "names": "names",
    "memory_bytes": "bytes of memory",
}

# Costs per item, measured (see BOUNDS): resident bytes of a build
BASE_BYTES = 200 * 2**20  # the interpreter, numpy, pandas, DuckDB and an empty run
BYTES_PER_REQUEST = 1_300
BYTES_PER_METRIC_ROW = 230
BYTES_PER_KV_BLOCK = 60  # the engine's block lists (engine_model.kv_cache: four Python lists of ints)
BYTES_PER_NAME = 100
SERIES_PER_SCRAPE = 60  # metric rows one replica's scrape adds (engine series + DCGM + node)
_CURVE_STEP_S = 60.0  # the estimate's own grid over the window (edges of every event included)
_GRID_STEP_S = 1.0  # the workload generator's grid (telemetry_gen.workload)
# what the messages compare a knob with: a typical incident is an hour at 30 req/s on 8 replicas scraped
# every 10 s (the library's are 25-40 minutes at 2-26 req/s on 2-4 replicas)
_TYPICAL = {"duration_s": 3600.0, "rps": 30.0, "replicas": 8.0, "scrape_s": 10.0}


@dataclass(frozen=True)
class Driver:
    """The YAML knob behind a quantity: its location in the file and what it says, e.g.
    (("workload", "base_rps"), "workload.base_rps: 5000 req/s over a 2100 s window")."""

    loc: Loc
    text: str


@dataclass
class CostEstimate:
    """Expected work of one build (one world) of an incident; see the module docstring. Counts are floats
    (expectations; inf when a knob is unbounded)."""

    requests: float = 0.0
    output_tokens: float = 0.0
    engine_steps: float = 0.0
    replica_scrapes: float = 0.0
    metric_rows: float = 0.0
    kv_blocks: float = 0.0
    curve_cells: float = 0.0
    names: float = 0.0
    memory_bytes: float = 0.0
    drivers: dict[str, Driver] = field(default_factory=dict)

    def quantities(self) -> dict[str, float]:
        """Each bounded quantity (the keys of BOUNDS) and its estimate."""
        return {name: float(getattr(self, name)) for name in BOUNDS}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every figure (rounded) and, per quantity, the knob that drives it."""
        out: dict[str, Any] = {k: _json_number(v) for k, v in self.quantities().items()}
        out["output_tokens"] = _json_number(self.output_tokens)
        out["replica_scrapes"] = _json_number(self.replica_scrapes)
        out["drivers"] = {k: ".".join(str(p) for p in d.loc) for k, d in self.drivers.items()}
        return out


@dataclass(frozen=True)
class Excess:
    """One quantity over its bound: the knob to blame (loc), a one-line message and a hint."""

    quantity: str
    value: float
    bound: float
    loc: Loc
    message: str
    hint: str


def _json_number(x: float) -> float | int | None:
    if not math.isfinite(x):
        return None
    return round(x) if abs(x) < 2**53 else x


def _loc_text(loc: Loc) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _num(x: float) -> str:
    """1234567 -> '1.2e+06'; small numbers as they are."""
    if not math.isfinite(x):
        return "unbounded"
    return f"{x:,.0f}" if abs(x) < 1e6 else f"{x:.2g}"


# ------------------------------------------------------------------------------------------ traffic


@dataclass(frozen=True)
class _App:
    """What the estimate needs of one app: its open-loop share and shape, or its fixed request count."""

    index: int | None  # position in workload.apps (None: the standard mix)
    name: str
    weight: float
    daily: bool
    open: bool
    fixed_requests: float  # closed loop, burst or replay: requests sent, whatever the rate curve
    replay: bool
    mean_output: float
    completions: int
    tenants: int
    system_prompts: int


def _mean_length(d: Any, cap: float) -> float:
    """Mean of a length distribution (spec.LengthDist or workload.LengthDist), tokens, clipped to `cap`."""
    kind, scale = d.kind, float(d.scale)
    if kind == "trace":
        values = load_trace(d.trace)[1]
        mean = float(values.mean()) * scale
    elif kind == "lognormal":
        mean = float(d.median) * math.exp(0.5 * float(d.sigma) ** 2) * scale
    else:
        mean = float(d.median) * scale
    top = cap if d.max is None else min(cap, float(d.max))
    return max(float(d.min), min(mean, top))


def _apps(inc: Incident) -> list[_App]:
    duration = inc.window.duration_s
    apps = inc.workload.apps
    if isinstance(apps, str):
        return [_App(None, a.name, a.weight, a.rate_shape == "daily", True, 0.0, False,
                     _mean_length(a.output, a.max_tokens), a.n, len(a.tenants), a.system_prompts)
                for a in standard_apps()]
    out = []
    for i, a in enumerate(apps):
        arrival = a.arrival
        fixed = 0.0
        if isinstance(arrival, ClosedLoopArrival):
            fixed = float(arrival.requests) if arrival.start_s < duration else 0.0
        elif isinstance(arrival, BurstArrival):
            fixed = float(arrival.requests) if arrival.at_s < duration else 0.0
        elif isinstance(arrival, ReplayArrival):
            rows = arrival._rows
            if rows is not None:
                fixed = float(np.count_nonzero(rows.arrival_s * arrival.time_scale + arrival.start_s < duration))
        if isinstance(arrival, ReplayArrival) and arrival._rows is not None:
            mean_out = float(np.mean(arrival._rows.output_tokens)) if len(arrival._rows.output_tokens) else 0.0
        else:
            assert isinstance(a.output, LengthDist)
            mean_out = _mean_length(a.output, a.max_tokens)
        out.append(_App(i, a.name, a.weight, a.rate_shape == "daily", arrival is None, fixed,
                        isinstance(arrival, ReplayArrival), mean_out, a.n,
                        a.tenants, a.system_prompts))
    return out


def _curve(inc: Incident) -> RateCurve:
    w = inc.workload
    bursts = [Burst(b.start_s, b.duration_s, b.factor) for b in w.bursts]
    bursts += [Burst(x.at_s, x.duration_s, x.factor) for x in inc.noise if x.kind == "traffic_burst"]
    return RateCurve(base_rps=w.base_rps, daily_amplitude=w.daily_amplitude, peak_hour=w.peak_hour,
                     start_hour=w.start_hour, bursts=tuple(bursts),
                     ramps=tuple(Ramp(r.start_s, r.duration_s, r.to_factor) for r in w.ramps))


def _grid(duration: float, edges: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(cell midpoints, cell widths) of a grid over [0, duration] through every edge: the rate is smooth
    between edges (the daily curve), so the midpoint rule is exact for steps and ramps."""
    inner = [e for e in edges if 0.0 < e < duration]
    grid = np.unique(np.concatenate((np.arange(0.0, duration, _CURVE_STEP_S), np.asarray(inner, float), [duration])))
    return 0.5 * (grid[1:] + grid[:-1]), np.diff(grid)


def _app_changes(inc: Incident, name: str) -> list[RateChange]:
    return [RateChange(c.start_s, c.factor, math.inf if c.duration_s is None else c.duration_s, c.tenant)
            for c in inc.workload.rate_changes if c.app == name]


def _open_volume(inc: Incident, curve: RateCurve, app: _App, total_weight: float, mids: np.ndarray,
                 widths: np.ndarray, *, events: bool = True, mask: np.ndarray | None = None) -> float:
    """Expected open-loop requests of `app` (as telemetry_gen.workload.app_rate, times the tenant envelope the
    generator draws at), over the cells `mask` selects (all by default)."""
    if not app.open or total_weight <= 0.0:
        return 0.0
    rate = curve.base_rps * app.weight / total_weight * (curve.diurnal(mids) if app.daily else np.ones_like(mids))
    if events:
        rate = rate * curve.events(mids)
        envelope = np.ones_like(mids)
        for change in _app_changes(inc, app.name):
            if change.tenant is None:
                rate = rate * change.factor_at(mids)
            else:
                envelope = np.maximum(envelope, change.factor_at(mids))
        rate = rate * envelope
    cells = rate * widths if mask is None else (rate * widths)[mask]
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.sum(cells))


def _traffic(inc: Incident, est: CostEstimate, apps: list[_App]) -> None:
    """Requests, output tokens and their driving knob."""
    duration = inc.window.duration_s
    curve = _curve(inc)
    edges = [float(x) for x in curve.edges()]
    edges += [x for c in inc.workload.rate_changes
              for x in (c.start_s, c.start_s + (c.duration_s if c.duration_s is not None else duration))]
    mids, widths = _grid(duration, edges)
    total_weight = sum(a.weight for a in apps if a.open)
    volumes = [_open_volume(inc, curve, a, total_weight, mids, widths) + a.fixed_requests for a in apps]
    plain = sum(_open_volume(inc, curve, a, total_weight, mids, widths, events=False) for a in apps)
    # surges a fault declares (traffic_surge): `extra` times the app's (or every open app's) normal rate
    surges: list[tuple[Loc, float]] = []
    live = live_faults(inc)
    for index, spec in enumerate(inc.faults):
        if spec not in live:
            continue
        for fault, named, extra in workload_effects([spec], inc.fleet.replicas).surges:
            start, end = max(0.0, fault.start_s), min(duration, fault.end_s or duration)
            if extra <= 0.0 or end <= start:
                continue
            inside = (mids >= start) & (mids < end)
            chosen = [a for a in apps if a.open and (named is None or a.name == named)]
            added = extra * sum(_open_volume(inc, curve, a, total_weight, mids, widths, mask=inside) for a in chosen)
            surges.append((("faults", index, "params"), added))
    probes = PROBE_PROMPTS * math.ceil(max(0.0, duration - 17.0) / PROBE_PERIOD_S)
    est.requests = sum(volumes) + sum(v for _, v in surges) + probes
    est.output_tokens = sum(v * a.mean_output * a.completions for v, a in zip(volumes, apps, strict=True))
    est.output_tokens += sum(v for _, v in surges) * max((a.mean_output for a in apps), default=0.0)
    est.drivers["requests"] = _traffic_driver(inc, curve, apps, volumes, plain, surges, mids, widths, total_weight)


def _traffic_driver(inc: Incident, curve: RateCurve, apps: list[_App], volumes: list[float], plain: float,
                    surges: list[tuple[Loc, float]], mids: np.ndarray, widths: np.ndarray,
                    total_weight: float) -> Driver:
    """The knob whose requests dominate: an app's fixed count, a burst, ramp, rate change or surge that adds
    more than the plain curve, else base_rps or the window length (whichever is further above typical)."""
    w, duration = inc.workload, inc.window.duration_s
    candidates: list[tuple[float, Driver]] = []
    for a in apps:
        if a.fixed_requests > 0 and a.index is not None:
            key = "path" if a.replay else "requests"
            candidates.append((a.fixed_requests, Driver(("workload", "apps", a.index, "arrival", key),
                                                        f"app {a.name} sends {_num(a.fixed_requests)} requests")))

    def alone(burst: Burst | None = None, ramp: Ramp | None = None) -> float:
        one = RateCurve(base_rps=curve.base_rps, daily_amplitude=curve.daily_amplitude, peak_hour=curve.peak_hour,
                        start_hour=curve.start_hour, bursts=(burst,) if burst else (), ramps=(ramp,) if ramp else ())
        return sum(_open_volume(inc, one, a, total_weight, mids, widths) for a in apps if not _app_changes(inc, a.name))

    noise_bursts = [(k, x) for k, x in enumerate(inc.noise) if isinstance(x, TrafficBurstNoise)]
    # each event's own extra requests (events multiply, so alone is a lower bound of its share)
    if len(curve.bursts) + len(curve.ramps) <= 64:
        for k, b in enumerate(w.bursts):
            extra = alone(burst=Burst(b.start_s, b.duration_s, b.factor)) - plain
            candidates.append((extra, Driver(("workload", "bursts", k, "factor"),
                                             f"workload.bursts[{k}].factor: {b.factor:g} for {b.duration_s:g} s")))
        for k, x in noise_bursts:
            extra = alone(burst=Burst(x.at_s, x.duration_s, x.factor)) - plain
            candidates.append((extra, Driver(("noise", k, "factor"), f"noise[{k}].factor: {x.factor:g}")))
        for k, r in enumerate(w.ramps):
            extra = alone(ramp=Ramp(r.start_s, r.duration_s, r.to_factor)) - plain
            candidates.append((extra, Driver(("workload", "ramps", k, "to_factor"),
                                             f"workload.ramps[{k}].to_factor: {r.to_factor:g}")))
    for k, c in enumerate(w.rate_changes):
        if c.factor > 1.0:
            text = f"workload.rate_changes[{k}].factor: {c.factor:g}"
            candidates.append((plain * (c.factor - 1.0) * 0.5, Driver(("workload", "rate_changes", k, "factor"), text)))
    for loc, added in surges:
        candidates.append((added, Driver(loc, f"{_loc_text(loc)}: a traffic surge of {_num(added)} requests")))
    best = max(candidates, key=lambda c: c[0], default=None)
    if best is not None and best[0] > plain:
        return best[1]
    rps_ratio = w.base_rps / _TYPICAL["rps"]
    if duration / _TYPICAL["duration_s"] > rps_ratio:
        return Driver(("window", "duration_s"), f"window.duration_s: {duration:g} s at {w.base_rps:g} req/s")
    return Driver(("workload", "base_rps"), f"workload.base_rps: {w.base_rps:g} req/s over a {duration:g} s window")


# ------------------------------------------------------------------------------------------- fleet


def _fleet(inc: Incident, est: CostEstimate) -> None:
    """Scrapes, metric rows, KV blocks and engine steps of the fleet's pools."""
    f, window = inc.fleet, inc.window
    fb = f.router.fallback
    replicas = f.replicas + (fb.replicas if fb is not None else 0)
    scrapes = math.floor(window.duration_s / window.scrape_interval_s) + 1
    est.replica_scrapes = float(replicas) * scrapes
    est.metric_rows = est.replica_scrapes * SERIES_PER_SCRAPE
    ratios: dict[Loc, tuple[float, str]] = {
        ("window", "scrape_interval_s"): (_TYPICAL["scrape_s"] / window.scrape_interval_s,
                                         f"window.scrape_interval_s: {window.scrape_interval_s:g} s over "
                                         f"{window.duration_s:g} s ({_num(scrapes)} scrapes a replica)"),
        ("window", "duration_s"): (window.duration_s / _TYPICAL["duration_s"],
                                  f"window.duration_s: {window.duration_s:g} s scraped every "
                                  f"{window.scrape_interval_s:g} s"),
        ("fleet", "replicas"): (f.replicas / _TYPICAL["replicas"], f"fleet.replicas: {f.replicas}"),
    }
    if fb is not None:
        ratios[("fleet", "router", "fallback", "replicas")] = (fb.replicas / _TYPICAL["replicas"],
                                                              f"fleet.router.fallback.replicas: {fb.replicas}")
    loc, (_, text) = max(ratios.items(), key=lambda kv: kv[1][0])
    est.drivers["metric_rows"] = Driver(loc, text)

    spec = fleet_spec(inc)
    blocks = 0.0
    step_rate = 0.0  # engine steps per second with every replica busy
    for pool in (spec.primary, spec.fallback):
        if pool is None:
            continue
        try:
            model, gpu = get_model(pool.model), get_gpu(pool.gpu)
            plan = plan_memory(model, gpu, pool.config)
            fastest = StepCostModel(model, gpu, pool.config).step_time(0, 0.0, 1, 1.0)
        except (KeyError, ValueError):
            continue  # the validator reports an unknown model or a plan that does not fit on its own
        blocks += float(pool.replicas) * plan.num_blocks
        step_rate += pool.replicas / max(fastest, 1e-6)
    est.kv_blocks = blocks
    if f.pipeline_parallel > 1 or f.tensor_parallel > 1:
        wider = "pipeline_parallel" if f.pipeline_parallel >= f.tensor_parallel else "tensor_parallel"
        loc = ("fleet", wider)
        text = (f"fleet.tensor_parallel {f.tensor_parallel} x pipeline_parallel {f.pipeline_parallel} "
                f"on {replicas} replicas")
    else:
        loc, text = ("fleet", "replicas"), f"fleet.replicas: {f.replicas}"
    est.drivers["kv_blocks"] = Driver(loc, text)
    # a busy replica steps once per step time; an idle one not at all; each step yields at least one token
    # per running sequence, so the output tokens bound the steps too
    busy = step_rate * (window.duration_s + 600.0)
    est.engine_steps = min(busy, est.output_tokens + est.requests) if est.requests > 0 else 0.0
    est.drivers["engine_steps"] = est.drivers.get("requests", Driver(("window", "duration_s"), "the window"))


# ------------------------------------------------------------------------------------------ total


def estimate(inc: Incident) -> CostEstimate:
    """The expected cost of building one world of `inc` (see the module docstring). Milliseconds, bounded
    whatever the knobs: the rate curve is only integrated when its own cost (curve_cells) is in bounds."""
    est = CostEstimate()
    w = inc.workload
    apps = _apps(inc)
    duration = inc.window.duration_s
    # the generator evaluates every burst, ramp and rate change on a 1 s grid over the window
    events = len(w.bursts) + len(w.ramps) + len(w.rate_changes) + sum(x.kind == "traffic_burst" for x in inc.noise)
    est.curve_cells = (events + 1) * (duration / _GRID_STEP_S)
    lists = {("workload", "bursts"): len(w.bursts), ("workload", "ramps"): len(w.ramps),
             ("workload", "rate_changes"): len(w.rate_changes), ("noise",): len(inc.noise)}
    many = max(lists.items(), key=lambda kv: kv[1])
    est.drivers["curve_cells"] = Driver(many[0], f"{_loc_text(many[0])}: {many[1]} entries over {duration:g} s") \
        if many[1] > 16 else Driver(("window", "duration_s"), f"window.duration_s: {duration:g} s")
    biggest = max(((max(a.tenants, a.system_prompts), a) for a in apps), key=lambda t: t[0], default=None)
    if biggest is not None:
        count, app = biggest
        est.names = float(count)
        if app.index is not None:
            key = "tenants" if app.tenants >= app.system_prompts else "system_prompts"
            est.drivers["names"] = Driver(("workload", "apps", app.index, key), f"app {app.name}: {key} {count}")
    if math.isfinite(w.base_rps) and est.curve_cells <= BOUNDS["curve_cells"]:
        _traffic(inc, est, apps)
    else:
        est.requests = math.inf
        est.drivers["requests"] = est.drivers["curve_cells"] if math.isfinite(w.base_rps) else \
            Driver(("workload", "base_rps"), f"workload.base_rps: {w.base_rps}")
    _fleet(inc, est)
    est.memory_bytes = (BASE_BYTES + est.requests * BYTES_PER_REQUEST + est.metric_rows * BYTES_PER_METRIC_ROW
                        + est.kv_blocks * BYTES_PER_KV_BLOCK + est.names * BYTES_PER_NAME)
    parts = {"requests": est.requests * BYTES_PER_REQUEST, "metric_rows": est.metric_rows * BYTES_PER_METRIC_ROW,
             "kv_blocks": est.kv_blocks * BYTES_PER_KV_BLOCK, "names": est.names * BYTES_PER_NAME}
    heaviest = max(parts, key=lambda k: parts[k])
    est.drivers["memory_bytes"] = est.drivers.get(heaviest, Driver(("window", "duration_s"), "the window"))
    return est


_HINTS = {
    "requests": "lower the rate, shorten the window or the burst",
    "engine_steps": "fewer requests, shorter outputs or a shorter window",
    "metric_rows": "scrape less often (10 s is usual), shorten the window or use fewer replicas",
    "kv_blocks": "fewer GPUs per replica or fewer replicas (parallel sizes multiply the engine's KV blocks)",
    "curve_cells": "fewer bursts, ramps or rate changes, or a shorter window",
    "names": "fewer tenants or system prompts",
    "memory_bytes": "a smaller incident",
}


def excesses(est: CostEstimate, bounds: dict[str, float] | None = None) -> list[Excess]:
    """Each quantity of `est` over its bound, worst (largest value/bound) first; [] when all fit."""
    limits = BOUNDS if bounds is None else bounds
    out = []
    for name, value in est.quantities().items():
        bound = limits[name]
        if not value <= bound:  # catches nan and inf too
            driver = est.drivers.get(name, Driver(("window", "duration_s"), "the window"))
            about = f"about {_num(value)}" if math.isfinite(value) else "unbounded"
            message = f"{driver.text}: {about} {UNITS[name]} to build, over the bound of {_num(bound)}"
            hint = f"{_HINTS[name]}; or pass --allow-large if you mean it (docs/authoring.md, 'Bounds')"
            out.append(Excess(name, value, bound, driver.loc, message, hint))
    return sorted(out, key=lambda e: -(e.value / e.bound if math.isfinite(e.value) else math.inf))


def worst_by_knob(found: list[Excess]) -> list[Excess]:
    """One excess per knob (the worst of each), worst first: an author fixes a knob, not a quantity."""
    seen: dict[Loc, Excess] = {}
    for e in found:  # already worst first
        seen.setdefault(e.loc, e)
    return list(seen.values())


def cost_diagnostics(inc: Incident, path: str, source: SourceMap | None = None) -> list[Diagnostic]:
    """The bounds `inc` (loaded from `path`) exceeds, one Diagnostic per knob at the knob's line (the
    file's line map, incidents.loader.source_map); [] when the build fits."""
    where = source or source_map(path)
    out = []
    for e in worst_by_knob(excesses(estimate(inc))):
        line, column = where.position(e.loc) or (0, 0)
        out.append(Diagnostic(path, line, column, e.message, e.hint))
    return out


ALLOW_LARGE_ENV = "SERVEDRILL_ALLOW_LARGE"
"""Set to 1 (by `--allow-large`) to let every build of this process and its children exceed the bounds."""


def refuse_large(inc: Incident, where: str | None = None) -> None:
    """Raise IncidentError, one Diagnostic per knob at fault, when `inc`'s estimated build exceeds the bounds
    (unless $SERVEDRILL_ALLOW_LARGE is 1). `where` names the incident in the message (default its id);
    validate reports the YAML line, this is the guard every build passes (play, query, export, worlds)."""
    if os.environ.get(ALLOW_LARGE_ENV) == "1":
        return
    found = worst_by_knob(excesses(estimate(inc)))
    if found:
        raise IncidentError([Diagnostic(where or inc.id, 0, 0, e.message, e.hint) for e in found])


def _load_ratio(est: CostEstimate) -> float:
    """How full the fullest bound is: the largest value/bound of `est` (inf when a knob is unbounded)."""
    return max((v / BOUNDS[k] if math.isfinite(v) else math.inf) for k, v in est.quantities().items())


def costliest_variant(path: str) -> tuple[Incident, dict[str, float]] | None:
    """The variant of the template at `path` that costs most to build, as far as the estimate sees: every
    variable that draws numbers at whichever end of its values fills the bounds more (each tried alone
    against seed 0's draws, then all together), so a knob no validation seed happens to draw at its worst
    still answers to the bounds. None when no variable draws numbers or the file does not load."""
    from incidents.loader import variant_maker

    found = variant_maker(path)
    if found is None or not found[0]:
        return None
    ends, make = found
    worst: dict[str, float] = {}
    for name, (lo, hi) in ends.items():
        ratios = []
        for end in (lo, hi):
            inc = make({name: end})
            ratios.append(_load_ratio(estimate(inc)) if inc is not None else -1.0)
        worst[name] = hi if ratios[1] >= ratios[0] else lo
    inc = make(worst)
    return (inc, worst) if inc is not None else None


def check_file_cost(path: str, seeds: Sequence[int] | None = None) -> list[Diagnostic]:
    """cost_diagnostics of the incident file at `path`: of each variant of `seeds` for a template (default
    VALIDATION_SEEDS) and of its costliest variant (`costliest_variant`: a knob a variable draws can cost
    more on a seed nobody validated), of the file itself otherwise.
    [] when the file does not load: its own diagnostics say why."""
    source = source_map(path)
    found: dict[tuple[int, int, str], Diagnostic] = {}
    for seed in (tuple(seeds or VALIDATION_SEEDS) if has_variables(path) else (None,)):
        try:
            inc = load_incident(path, seed)
        except IncidentError:
            return []
        for d in cost_diagnostics(inc, path, source):
            found.setdefault((d.line, d.column, d.message.split(":")[0]), d)
    costliest = costliest_variant(path) if has_variables(path) else None
    if costliest is not None:
        inc, values = costliest
        drawn = ", ".join(f"{k}={v:g}" for k, v in values.items())
        for d in cost_diagnostics(inc, path, source):
            found.setdefault((d.line, d.column, d.message.split(":")[0]),
                             replace(d, message=f"{d.message} [the costliest variant: {drawn}]"))
    return list(found.values())
