"""Fidelity harness: replay documented public benchmark setups through the engine model and compare.

Each point of `data/fidelity_points.yaml` names its source, the model, GPU, engine version, TP degree,
request lengths, load (an offline batch, Poisson arrivals at a rate, or a closed loop of N clients) and
the published figures, and what was fitted to it (`fitted_to`: the constants chosen on it; empty for a
held-out point). `run_fidelity` simulates every point and reports model vs published per metric and the
median |relative error| per metric over the points that publish it: pooled, per engine, per group
(held out / fitted) and per engine and group. The verdict (`meets_target`, `decide_target`) is taken on
held-out vLLM points only: a fit says nothing about figures outside it (docs/fidelity.md has the split).

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
# What the bench is judged on (issue 33): the points no constant was chosen on, of the engine the model
# stands for. A fit is only evidence out of sample, so fitted points (and TensorRT-LLM's, which the model
# does not claim to be) inform but never decide. The target: over held-out vLLM points, the median
# |relative error| of TTFT and of TPOT at most 15 %, and no such point off by more than 2x either way.
# The aim beyond it stays issue 14's 10 %; the result says how far each median is from it.
TARGET_ENGINE = "vLLM"
TARGET_METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms")
TARGET_MEDIAN_ABS_ERROR = 0.15  # fraction: held-out vLLM median |model / published - 1| per target metric
TARGET_WORST_FACTOR = 2.0  # max(model / published, published / model) of any held-out vLLM point
AIM_MEDIAN_ABS_ERROR = 0.10  # fraction: issue 14's goal per metric; reported against, not decided on
GROUPS = ("held_out", "fitted")
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
    """Per metric: how many points publish it, the median |relative error|, the median signed error (both
    fractions: modelled / published - 1) and `within_aim` (median |error| <= AIM_MEDIAN_ABS_ERROR; null
    without points). A summary gives no verdict: the target is `decide_target`'s, on held-out vLLM points."""
    errors: dict[str, list[float]] = {m: [] for m in METRICS}
    for row in rows:
        for metric, err in row["rel_error"].items():
            errors[metric].append(err)
    out: dict[str, dict[str, Any]] = {}
    for metric, errs in errors.items():
        if not errs:
            out[metric] = {"points": 0, "median_abs_rel_error": None, "median_rel_error": None,
                           "within_aim": None}
            continue
        med_abs = statistics.median(abs(e) for e in errs)
        out[metric] = {
            "points": len(errs),
            "median_abs_rel_error": round(med_abs, 4),
            "median_rel_error": round(statistics.median(errs), 4),
            "within_aim": med_abs <= AIM_MEDIAN_ABS_ERROR,
        }
    return out


def point_group(row: dict[str, Any]) -> str:
    """"held_out" for a row nothing was fitted to (empty `fitted_to`), else "fitted"."""
    return "fitted" if row.get("fitted_to") else "held_out"


def summarise_groups(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """`summarise` over the held-out rows and over the fitted rows separately (GROUPS order)."""
    listed = list(rows)
    return {g: summarise(r for r in listed if point_group(r) == g) for g in GROUPS}


def _factor(rel_error: float) -> float:
    """How many times off a figure is, either way: max(m/p, p/m) for rel_error = m/p - 1 (inf if m <= 0)."""
    ratio = 1.0 + rel_error
    return math.inf if ratio <= 0 else max(ratio, 1.0 / ratio)


def decide_target(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The bench's verdict, from the held-out rows of TARGET_ENGINE only (fitted rows and other engines'
    rows are ignored whatever their errors): per TARGET_METRICS metric the held-out points, the median
    |error| and signed error (fractions), `over_aim` (median |error| - AIM_MEDIAN_ABS_ERROR: how far from
    10 %, negative when under it), the worst point (name, error, `worst_factor` = max(m/p, p/m)) and
    whether both bounds hold. `meets` is true only when every target metric has held-out points, meets
    both bounds, and no held-out vLLM point failed to run: no points is no evidence, never a pass."""
    held = [r for r in rows if engine_family(r["engine"]) == TARGET_ENGINE and point_group(r) == "held_out"]
    failed = [r["name"] for r in held if r.get("error")]
    metrics: dict[str, dict[str, Any]] = {}
    for metric in TARGET_METRICS:
        errs = [(r["name"], float(r["rel_error"][metric])) for r in held if metric in r.get("rel_error", {})]
        if not errs:
            metrics[metric] = {"points": 0, "median_abs_rel_error": None, "median_rel_error": None,
                               "over_aim": None, "worst_point": None, "worst_rel_error": None,
                               "worst_factor": None, "meets": False}
            continue
        med_abs = statistics.median(abs(e) for _, e in errs)
        worst_name, worst_err = max(errs, key=lambda ne: _factor(ne[1]))
        worst = _factor(worst_err)
        metrics[metric] = {
            "points": len(errs),
            "median_abs_rel_error": round(med_abs, 4),
            "median_rel_error": round(statistics.median(e for _, e in errs), 4),
            "over_aim": round(med_abs - AIM_MEDIAN_ABS_ERROR, 4),
            "worst_point": worst_name,
            "worst_rel_error": round(worst_err, 4),
            "worst_factor": round(worst, 4) if math.isfinite(worst) else None,
            "meets": med_abs <= TARGET_MEDIAN_ABS_ERROR and worst <= TARGET_WORST_FACTOR,
        }
    return {
        "engine": TARGET_ENGINE,
        "group": "held_out",
        "points": len(held),
        "failed_points": failed,
        "max_median_abs_rel_error": TARGET_MEDIAN_ABS_ERROR,
        "max_worst_factor": TARGET_WORST_FACTOR,
        "aim_median_abs_rel_error": AIM_MEDIAN_ABS_ERROR,
        "metrics": metrics,
        "meets": not failed and all(m["meets"] for m in metrics.values()),
    }


def engine_family(engine: str) -> str:
    """The engine a point's `engine` text names, without its version: its first word ("vLLM v0.11.0" ->
    "vLLM", "TensorRT-LLM (PyTorch backend ...)" -> "TensorRT-LLM")."""
    words = engine.split()
    return words[0] if words else "?"


def _point_head(p: FidelityPoint, pub: dict[str, float]) -> dict[str, Any]:
    """The part of a point's row that describes the point and its published figures."""
    return {
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
        "fitted_to": list(p.fitted_to),
        "held_out": p.held_out,
        "published": {k: round(v, 4) for k, v in pub.items()},
    }


def failed_point_row(p: FidelityPoint, error: str) -> dict[str, Any]:
    """The row of a point whose simulation did not come back (its worker died, it timed out)."""
    return {**_point_head(p, published_metrics(p)), "modelled": {}, "rel_error": {}, "error": error[:300]}


def point_row(p: FidelityPoint) -> dict[str, Any]:
    """Simulate one point and compare: the JSON row of `run_fidelity`'s `points`. A point the engine
    model cannot run (its weights and activations do not fit, or requests never finish) keeps its row
    with `error` set and no modelled figures, so one bad point of a file does not hide the others."""
    pub = published_metrics(p)
    row = _point_head(p, pub)
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


POINT_TIMEOUT_S = 900.0
"""The longest one point's simulation may run before it is stopped and its row carries the error."""


def run_fidelity(points: list[FidelityPoint] | None = None, workers: int | None = None,
                 ray: str | None = None) -> dict[str, Any]:
    """Simulate every point; JSON-ready result (keys documented in docs/cli.md, `bench fidelity`).

    Points are independent simulations, so with workers > 1 (default: default_workers()) they run in
    that many fresh (spawned) processes, or as Ray tasks on the cluster at `ray` (telemetry_gen.fanout;
    `workers` at a time when given, else one per CPU of the cluster); the rows, in the points' order, are the
    same either way. Raises telemetry_gen.fanout.FanoutError when Ray cannot start."""
    from telemetry_gen.fanout import fan_out

    t0 = time.perf_counter()
    pts = load_points() if points is None else points
    n = default_workers() if workers is None and ray is None else max(0 if ray else 1, workers or 0)
    by_index: dict[int, dict[str, Any]] = {}
    for outcome in fan_out(point_row, pts, ray=ray, jobs=n, task_timeout_s=POINT_TIMEOUT_S):
        by_index[outcome.index] = outcome.value if outcome.value is not None else \
            failed_point_row(outcome.task, outcome.error or "no result")
    rows = [by_index[i] for i in range(len(pts))]
    families = sorted({engine_family(row["engine"]) for row in rows})
    failed = [row["name"] for row in rows if row["error"]]
    target = decide_target(rows)
    return {
        "points": rows,
        # pooled over every point, fitted or not: a description, never the verdict (a pooled median
        # passed on TensorRT-LLM points the constants were chosen on while held-out vLLM points missed)
        "summary": summarise(rows),
        # the same medians per engine (vLLM, TensorRT-LLM): a good fit on one engine's points must not
        # hide a poor one on the other's
        "summary_by_engine": {f: summarise(r for r in rows if engine_family(r["engine"]) == f) for f in families},
        # ... per group (held out: nothing fitted to the point; fitted), and per engine and group
        "summary_by_group": summarise_groups(rows),
        "summary_by_engine_and_group": {
            f: summarise_groups(r for r in rows if engine_family(r["engine"]) == f) for f in families},
        "held_out_points": sum(point_group(r) == "held_out" for r in rows),
        "fitted_points": sum(point_group(r) == "fitted" for r in rows),
        "fidelity_target": target,
        "target_median_abs_rel_error": TARGET_MEDIAN_ABS_ERROR,
        "target_worst_factor": TARGET_WORST_FACTOR,
        "aim_median_abs_rel_error": AIM_MEDIAN_ABS_ERROR,
        # points that could not run are named, not silently left out of the medians
        "failed_points": failed,
        "meets_target": target["meets"],
        "wall_s": round(time.perf_counter() - t0, 3),
        "workers": n if n > 1 and len(pts) > 1 else 1,
        "ray": ray,
    }


def _median_lines(summary: dict[str, dict[str, Any]], indent: str = "") -> list[str]:
    out = []
    for metric, s in summary.items():
        if s["points"]:
            out.append(f"{indent}{metric:<25} median |error| {s['median_abs_rel_error']:.1%} over {s['points']} "
                       f"points (median signed {s['median_rel_error']:+.1%})")
    return out


def _target_lines(target: dict[str, Any]) -> list[str]:
    """The verdict: held-out vLLM medians and worst points against the target, and the 10 % aim."""
    verdict = "MEETS" if target["meets"] else "MISSES"
    out = [f"target (held-out {target['engine']} points only, {target['points']} of them; median |error| at most "
           f"{target['max_median_abs_rel_error']:.0%} for TTFT and TPOT, no point off by more than "
           f"{target['max_worst_factor']:g}x): {verdict}"]
    for metric, m in target["metrics"].items():
        if not m["points"]:
            out.append(f"  {metric:<23} no held-out point publishes it - MISSES (no evidence is no pass)")
            continue
        factor = f"{m['worst_factor']:.2f}x" if m["worst_factor"] is not None else "inf"
        out.append(f"  {metric:<23} median |error| {m['median_abs_rel_error']:.1%} over {m['points']} points "
                   f"({m['over_aim']:+.1%} from the {target['aim_median_abs_rel_error']:.0%} aim; median signed "
                   f"{m['median_rel_error']:+.1%}); worst {m['worst_point']} {m['worst_rel_error']:+.1%} ({factor})"
                   f" - {'meets' if m['meets'] else 'MISSES'}")
    if target["failed_points"]:
        out.append(f"  held-out points that could not run: {', '.join(target['failed_points'][:5])}")
    return out


def format_fidelity(result: dict[str, Any]) -> str:
    """A table for people: one line per point and metric (held-out points marked), the verdict on held-out
    vLLM points, the medians (pooled, per engine, per engine and group) and the sources."""
    w = max([len("point")] + [len(row["name"]) for row in result["points"]]) + 2
    lines = [f"{'point':<{w}}{'metric':<25}{'published':>12}{'model':>12}{'error':>9}"]
    for row in result["points"]:
        if row.get("error"):
            lines.append(f"{row['name']:<{w}}FAILED: {row['error']}")
            continue
        mark = "  held out" if not row.get("fitted_to") else ""
        for metric, pub in row["published"].items():
            lines.append(f"{row['name']:<{w}}{metric:<25}{pub:>12.4g}{row['modelled'][metric]:>12.4g}"
                         f"{row['rel_error'][metric]:>+9.1%}{mark}")
    lines.append("")
    if "fidelity_target" in result:
        lines.extend(_target_lines(result["fidelity_target"]))
        lines.append("")
    lines.append("all points pooled (fitted and held out together; a description, not the target):")
    lines.extend(_median_lines(result["summary"], "  "))
    for family, summary in result.get("summary_by_engine", {}).items():
        lines.append(f"{family} points only:")
        lines.extend(_median_lines(summary, "  "))
        for group, gsum in result.get("summary_by_engine_and_group", {}).get(family, {}).items():
            count = max((s["points"] for s in gsum.values()), default=0)
            if count:
                lines.append(f"  {family} {group.replace('_', '-')} points:")
                lines.extend(_median_lines(gsum, "    "))
    if result.get("failed_points"):
        lines.append(f"{len(result['failed_points'])} point(s) could not run and are in no median: "
                     + ", ".join(result["failed_points"][:5]) + (" ..." if len(result["failed_points"]) > 5 else ""))
    lines.append("")
    lines.append("sources:")
    lines.extend(f"  {src}" for src in dict.fromkeys(row["source"] for row in result["points"]))
    return "\n".join(lines)
