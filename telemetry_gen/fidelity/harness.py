"""Fidelity harness: replay documented public benchmark setups through the engine model and compare.

Each point of `data/fidelity_points.yaml` names its source, the model, GPU, engine version, TP degree,
request lengths, load (an offline batch, Poisson arrivals at a rate, or a closed loop of N clients) and
the published figures. `run_fidelity` simulates every point and reports model vs published per metric
and the median |relative error| per metric over the points that publish it, over all points and per engine.

How the load is driven:
* every point's client is a one-app workload built from the incident format's shapes (`point_workload`:
  telemetry_gen.workload's burst, replay and closed-loop arrivals), simulated by
  `engine_model.simulation.Simulation` with a one-replica fleet (so any stage the simulation adds in
  front of the engine, such as the API server, is included);
* batch points (`vllm bench latency`, offline) send every request at t=0 straight into the engine (no API
  server: OFFLINE_FRONTEND); rate "inf" sends every request at t=0 through the API server (one burst, as
  `vllm bench serve` does); rate points at seeded Poisson times;
* concurrency points are a closed loop (engine_model.clients): `concurrency` clients start at t=0 and each
  sends its next request when its last one finished as the client saw it (after the API server streamed
  the last token), as `vllm bench serve --max-concurrency` does.

Published tables (YAML `tables:`, one metric per cell, offline batches such as NVIDIA's TensorRT-LLM
throughput grid) and serving tables (`serving_tables:`, a request rate and several metrics per row) are
expanded into points, one per cell or row (telemetry_gen.fidelity.points, which also reads and checks
the file, the built-in one or a user's own). Points are independent, so `run_fidelity` spreads them
over worker processes.

Metrics (milliseconds, tokens/s), computed the same way for the model run and the published figures:
ttft_ms (mean time to first token from the client's send), tpot_ms (mean over requests of
(latency - ttft) / (output - 1), as `vllm bench serve` prints it; where a source gives mean ITL instead,
the model's token-weighted mean inter-token time), output_throughput_tok_s (generated tokens / benchmark
duration), decode_step_ms (batch points: mean latency / output tokens), prefill_step_ms (prefill-bound
points: max_num_batched_tokens * duration / input tokens, i.e. the time of one full prefill chunk; points
that publish prefill_ms, an offline batch whose prompts fit one step: the mean time to the first token,
i.e. that step's time).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from engine_model.frontend import FrontendConfig
from engine_model.request import Request
from engine_model.simulation import FleetSpec, PoolSpec, Simulation
from telemetry_gen.fidelity.points import (
    METRICS,
    POINTS_PATH,
    FidelityPoint,
    PointsError,
    load_points,
    published_metrics,
    select,
)
from telemetry_gen.workload import AppSpec, LengthDist, RateCurve, ReplayTrace, WorkloadSpec, generate_requests

# the points' format and reader live in fidelity_points; callers may take them from here
__all__ = ["METRICS", "POINTS_PATH", "FidelityPoint", "PointsError", "format_fidelity", "load_points",
           "published_metrics", "run_fidelity", "select"]

# per-request ShareGPT lengths (input, output tokens) for points with `lengths: sharegpt`; how the file was
# made, and how it departs from the benchmark's own sample, is in tools/sharegpt_lengths.py
SHAREGPT_LENGTHS_PATH = Path(__file__).resolve().parent.parent / "data" / "fidelity_sharegpt_lengths.csv"
TARGET_MEDIAN_ABS_ERROR = 0.10  # issue 14: median |relative error| per metric at most 10 %
_NO_TIMEOUT_S = 1e7  # benchmark clients wait for every response


# ---- requests and runs ------------------------------------------------------------------------------
class _FixedLengths(TypedDict):
    """AppSpec's length fields as point_workload passes them (typed, so the ** call is checked)."""

    prompt: LengthDist
    output: LengthDist


class _ClientFields(TypedDict):
    """AppSpec's client fields that every point shares."""

    system_prompts: int
    max_tokens: int
    timeout_s: float


def point_workload(point: FidelityPoint) -> WorkloadSpec:
    """The point's benchmark client as a workload of one app with its fixed lengths, built from the same
    shapes an incident uses: a burst at t=0 (batch, rate inf), a replayed trace of seeded Poisson send
    times (exactly num_prompts requests, as `vllm bench serve --request-rate R` sends), or a closed loop
    of `concurrency` clients. No shared prefixes: random and ShareGPT prompts do not repeat."""
    n = point.num_prompts
    fixed: _FixedLengths = {"prompt": LengthDist("fixed", median=point.input_tokens, max=point.input_tokens),
                            "output": LengthDist("fixed", median=point.output_tokens, max=point.output_tokens)}
    common: _ClientFields = {"system_prompts": 0, "max_tokens": point.output_tokens, "timeout_s": _NO_TIMEOUT_S}
    if point.load == "concurrency":
        app = AppSpec("bench", 1.0, **fixed, **common, arrival="closed", clients=point.concurrency, requests=n)
        horizon = _NO_TIMEOUT_S
    elif point.load == "rate" and math.isfinite(point.rate):
        rng = random.Random(point.seed)
        sends = [0.0]
        for _ in range(n - 1):
            sends.append(sends[-1] + rng.expovariate(point.rate))
        trace = ReplayTrace(np.array(sends), np.full(n, point.input_tokens, dtype=np.int64),
                            np.full(n, point.output_tokens, dtype=np.int64), source=point.name)
        app = AppSpec("bench", 1.0, **fixed, **common, arrival="replay", replay=trace)
        horizon = sends[-1] + 1.0
    else:
        app = AppSpec("bench", 1.0, **fixed, **common, arrival="burst", requests=n)
        horizon = 1.0
    return WorkloadSpec(duration_s=horizon, rate=RateCurve(base_rps=1.0, daily_amplitude=0.0), apps=(app,))


def _scaled(values: list[int], total: int) -> list[int]:
    """`values` scaled so that they sum to `total` exactly (largest remainders get the rounding), each >= 1."""
    raw = [v * total / sum(values) for v in values]
    out = [max(1, math.floor(x)) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - math.floor(raw[i]), reverse=True)
    for i in order[: max(0, total - sum(out))]:
        out[i] += 1
    return out


def sharegpt_lengths(n: int, input_tokens: int, output_tokens: int) -> list[tuple[int, int]]:
    """(input, output) tokens of the first `n` requests of the ShareGPT sample, scaled so their totals are
    n * input_tokens and n * output_tokens (a point's published means). `vllm bench serve` sends the
    dataset's requests in sample order with max_tokens = the reply's length, so a replay needs the
    spread, not only the means: a run's duration ends with its longest replies, decoded at a small batch."""
    rows = [line.split(",") for line in SHAREGPT_LENGTHS_PATH.read_text().splitlines()[1:] if line.strip()]
    if n > len(rows):
        raise ValueError(f"the ShareGPT sample has {len(rows)} requests, not {n}")
    ins = _scaled([int(r[0]) for r in rows[:n]], n * input_tokens)
    outs = _scaled([int(r[1]) for r in rows[:n]], n * output_tokens)
    return list(zip(ins, outs, strict=True))


def make_requests(point: FidelityPoint) -> list[Request]:
    """The point's requests (request_id 0..n-1 in send order; a closed loop's held ones have arrival inf).
    With `lengths: sharegpt` request i gets row i of the ShareGPT sample (sharegpt_lengths)."""
    reqs = generate_requests(point_workload(point), seed=point.seed)
    if point.lengths == "sharegpt":
        lengths = sharegpt_lengths(len(reqs), point.input_tokens, point.output_tokens)
        for r in reqs:
            r.prompt_tokens, r.output_tokens = lengths[r.request_id]
            r.max_tokens = r.output_tokens
            r.prefix_tokens = min(r.prefix_tokens, r.prompt_tokens)
    return reqs


@dataclass(frozen=True)
class RunFigures:
    """Per-request times of one modelled run (seconds from the start of the benchmark)."""

    sent_s: list[float]
    first_token_s: list[float]
    finish_s: list[float]
    output_tokens: list[int]
    input_tokens: int  # total prompt tokens


# Offline batch points (`vllm bench latency`) call LLM.generate in-process with token-id prompts: no HTTP
# server, no tokenisation, no SSE; the whole batch is in the engine before its first step, and outputs are
# processed in the caller while the engine core runs its next step. So they run without an API-server stage.
OFFLINE_FRONTEND = FrontendConfig(fixed_s=0.0, per_prompt_token_s=0.0, per_output_token_s=0.0, latency_s=0.0)
# Triton's tensorrtllm_backend streams every token through its Python post-processing model (one
# detokenisation and one response per token, in one model instance unless configured otherwise): a serial
# per-token stage whose backlog delays each request's first token under load. 60 us per token is fitted to
# NVIDIA's Triton serving table (trtllm-serving in the points file), not measured: the all-at-once rows'
# request throughput implies a serial stage of about that per streamed token (plus a per-request cost
# after the last token, not modelled), and the table's TTFT at 4-32 QPS agrees (median |error| over its
# 72 rows 10.2 % at vLLM's 20 us, 9.6 % at 40 us, 8.3 % at 60 us, 8.5 % at 80 us; the ITL and throughput
# medians unchanged, but where the stage saturates, the 8B 202/214 all-at-once rows, their ITL runs
# slower still: +45 -> +59 % on H100, +39 -> +74 % on H200).
TRITON_PER_OUTPUT_TOKEN_S = 60e-6
# The front end each `server:` of a point runs behind (fidelity_points.SERVERS). Triton's (a C++ HTTP
# server with Python tokenising and detokenising models) takes vLLM's intake costs, for want of a
# measurement of its own, its own per-token cost above, and no hand-off latency: NVIDIA's TensorRT-LLM
# serving rows have light-load TTFTs within a few ms of the engine model's prefill without one.
SERVER_FRONTENDS = {
    "vllm": FrontendConfig(),
    "triton": replace(FrontendConfig(), latency_s=0.0, per_output_token_s=TRITON_PER_OUTPUT_TOKEN_S),
    "offline": OFFLINE_FRONTEND,
}


def _simulate(point: FidelityPoint, reqs: list[Request]) -> RunFigures:
    frontend = SERVER_FRONTENDS[point.front_end]
    pool = PoolSpec(point.model, point.gpu, 1, point.engine_config(), frontend=frontend)
    sends = [r.arrival_s for r in reqs if math.isfinite(r.arrival_s)]
    # a closed loop sends until its requests run out: its window must not end first
    window = _NO_TIMEOUT_S if point.load == "concurrency" else max(sends, default=0.0) + 1.0
    run = Simulation(FleetSpec(primary=pool), reqs, [], window, sample_interval_s=window).run()
    r = run.requests
    ok = [i for i, s in enumerate(r["status"]) if s == "ok"]
    if len(ok) != len(reqs):
        raise RuntimeError(f"{point.name}: {len(reqs) - len(ok)} of {len(reqs)} requests did not complete")
    return RunFigures(
        sent_s=[r["arrival_s"][i] - r["gateway_s"][i] for i in ok],
        first_token_s=[r["first_token_s"][i] for i in ok],
        finish_s=[r["finish_s"][i] for i in ok],
        output_tokens=[int(r["output_tokens"][i]) for i in ok],
        input_tokens=sum(int(r["prompt_tokens"][i]) for i in ok),
    )


def run_point(point: FidelityPoint) -> RunFigures:
    """Simulate one point's benchmark."""
    return _simulate(point, make_requests(point))


# ---- metrics ----------------------------------------------------------------------------------------
def model_metrics(point: FidelityPoint, fig: RunFigures) -> dict[str, float]:
    """The metrics the point publishes, computed from the modelled run (ms, tokens/s)."""
    n = len(fig.finish_s)
    ttft = [f - s for f, s in zip(fig.first_token_s, fig.sent_s, strict=True)]
    latency = [f - s for f, s in zip(fig.finish_s, fig.sent_s, strict=True)]
    duration = max(fig.finish_s) - min(fig.sent_s)
    out: dict[str, float] = {}
    pub = point.published
    if "ttft_ms" in pub:
        out["ttft_ms"] = 1e3 * sum(ttft) / n
    if "tpot_ms" in pub:
        per_req = [(lat - tt) / (o - 1) for lat, tt, o in zip(latency, ttft, fig.output_tokens, strict=True)
                   if o > 1]
        out["tpot_ms"] = 1e3 * sum(per_req) / len(per_req)
    elif "itl_ms" in pub:
        gaps = sum(lat - tt for lat, tt, o in zip(latency, ttft, fig.output_tokens, strict=True) if o > 1)
        out["tpot_ms"] = 1e3 * gaps / sum(o - 1 for o in fig.output_tokens if o > 1)
    if "output_throughput_tok_s" in pub:
        out["output_throughput_tok_s"] = sum(fig.output_tokens) / duration
    if "latency_ms" in pub:
        out["decode_step_ms"] = 1e3 * sum(latency) / n / point.output_tokens
    if point.prefill_bound and "duration_s" in pub:
        out["prefill_step_ms"] = 1e3 * point.engine_config().max_num_batched_tokens * duration / fig.input_tokens
    if "prefill_ms" in pub:
        out["prefill_step_ms"] = 1e3 * sum(ttft) / n
    return out


def summarise(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per metric: how many points publish it, the median |relative error| and the median signed error."""
    errors: dict[str, list[float]] = {m: [] for m in METRICS}
    for row in rows:
        for metric, err in row["rel_error"].items():
            errors[metric].append(err)
    out: dict[str, dict[str, Any]] = {}
    for metric, errs in errors.items():
        if not errs:
            out[metric] = {"points": 0, "median_abs_rel_error": None, "median_rel_error": None,
                           "meets_target": None}
            continue
        med_abs = statistics.median(abs(e) for e in errs)
        out[metric] = {
            "points": len(errs),
            "median_abs_rel_error": round(med_abs, 4),
            "median_rel_error": round(statistics.median(errs), 4),
            "meets_target": med_abs <= TARGET_MEDIAN_ABS_ERROR,
        }
    return out


def engine_family(engine: str) -> str:
    """The engine a point's `engine` text names, without its version: its first word ("vLLM v0.11.0" ->
    "vLLM", "TensorRT-LLM (PyTorch backend ...)" -> "TensorRT-LLM")."""
    words = engine.split()
    return words[0] if words else "?"


def point_row(p: FidelityPoint) -> dict[str, Any]:
    """Simulate one point and compare: the JSON row of `run_fidelity`'s `points`. A point the engine
    model cannot run (its weights and activations do not fit, or requests never finish) keeps its row
    with `error` set and no modelled figures, so one bad point of a file does not hide the others."""
    pub = published_metrics(p)
    row: dict[str, Any] = {
        "name": p.name,
        "source": p.source,
        "model": p.model,
        "gpu": p.gpu,
        "engine": p.engine,
        "tp": p.tp,
        "input_tokens": p.input_tokens,
        "output_tokens": p.output_tokens,
        "load": p.load,
        "server": p.front_end,
        "rate": None if not math.isfinite(p.rate) else p.rate,
        "concurrency": p.concurrency or None,
        "num_prompts": p.num_prompts,
        "table": p.table or None,
        "published": {k: round(v, 4) for k, v in pub.items()},
    }
    try:
        model = model_metrics(p, run_point(p))
    except (ValueError, RuntimeError, ArithmeticError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {**row, "modelled": {}, "rel_error": {}, "error": first[:300]}
    return {
        **row,
        "modelled": {k: round(model[k], 4) for k in pub},
        "rel_error": {k: round(model[k] / pub[k] - 1.0, 4) for k in pub},
        "error": None,
    }


def default_workers() -> int:
    """Processes `run_fidelity` spreads the points over: the CPUs this process may use, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def run_fidelity(points: list[FidelityPoint] | None = None, workers: int | None = None) -> dict[str, Any]:
    """Simulate every point; JSON-ready result (keys documented in docs/cli.md, `bench fidelity`).

    Points are independent simulations, so with workers > 1 (default: default_workers()) they run in
    that many fresh (spawned) processes; the rows, in the points' order, are the same either way."""
    t0 = time.perf_counter()
    pts = load_points() if points is None else points
    n = default_workers() if workers is None else max(1, workers)
    if n > 1 and len(pts) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: the caller may hold threads (a test runner, a TUI) that fork would copy mid-lock
        from telemetry_gen.lifeline import watch_parent

        with ProcessPoolExecutor(max_workers=min(n, len(pts)), mp_context=multiprocessing.get_context("spawn"),
                                 initializer=watch_parent) as ex:
            rows = list(ex.map(point_row, pts, chunksize=max(1, len(pts) // (8 * n))))
    else:
        rows = [point_row(p) for p in pts]
    summary = summarise(rows)
    families = sorted({engine_family(row["engine"]) for row in rows})
    failed = [row["name"] for row in rows if row["error"]]
    return {
        "points": rows,
        "summary": summary,
        # the same medians per engine (vLLM, TensorRT-LLM): a good fit on one engine's points must not
        # hide a poor one on the other's
        "summary_by_engine": {f: summarise(r for r in rows if engine_family(r["engine"]) == f) for f in families},
        "target_median_abs_rel_error": TARGET_MEDIAN_ABS_ERROR,
        # points that could not run are named, not silently left out of the medians
        "failed_points": failed,
        "meets_target": not failed and all(s["meets_target"] is not False for s in summary.values()),
        "wall_s": round(time.perf_counter() - t0, 3),
        "workers": n if n > 1 and len(pts) > 1 else 1,
    }


def _median_lines(summary: dict[str, dict[str, Any]], target: float, indent: str = "") -> list[str]:
    out = []
    for metric, s in summary.items():
        if s["points"]:
            verdict = "meets" if s["meets_target"] else "MISSES"
            out.append(f"{indent}{metric:<25} median |error| {s['median_abs_rel_error']:.1%} over {s['points']} "
                       f"points (median signed {s['median_rel_error']:+.1%}) - {verdict} {target:.0%}")
    return out


def format_fidelity(result: dict[str, Any]) -> str:
    """A table for people: one line per point and metric, the medians (all points, then per engine) and
    the sources."""
    w = max([len("point")] + [len(row["name"]) for row in result["points"]]) + 2
    lines = [f"{'point':<{w}}{'metric':<25}{'published':>12}{'model':>12}{'error':>9}"]
    for row in result["points"]:
        if row.get("error"):
            lines.append(f"{row['name']:<{w}}FAILED: {row['error']}")
            continue
        for metric, pub in row["published"].items():
            lines.append(f"{row['name']:<{w}}{metric:<25}{pub:>12.4g}{row['modelled'][metric]:>12.4g}"
                         f"{row['rel_error'][metric]:>+9.1%}")
    target = result["target_median_abs_rel_error"]
    lines.append("")
    lines.extend(_median_lines(result["summary"], target))
    for family, summary in result.get("summary_by_engine", {}).items():
        lines.append(f"{family} points only:")
        lines.extend(_median_lines(summary, target, "  "))
    if result.get("failed_points"):
        lines.append(f"{len(result['failed_points'])} point(s) could not run and are in no median: "
                     + ", ".join(result["failed_points"][:5]) + (" ..." if len(result["failed_points"]) > 5 else ""))
    lines.append("")
    lines.append("sources:")
    lines.extend(f"  {src}" for src in dict.fromkeys(row["source"] for row in result["points"]))
    return "\n".join(lines)
