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
expanded into points, one per cell or row (`_table_points`, `_serving_table_points`). Points are
independent, so `run_fidelity` spreads them over worker processes.

Metrics (milliseconds, tokens/s), computed the same way for the model run and the published figures:
ttft_ms (mean time to first token from the client's send), tpot_ms (mean over requests of
(latency - ttft) / (output - 1), as `vllm bench serve` prints it; where a source gives mean ITL instead,
the model's token-weighted mean inter-token time), output_throughput_tok_s (generated tokens / benchmark
duration), decode_step_ms (batch points: mean latency / output tokens), prefill_step_ms (prefill-bound
points: max_num_batched_tokens * duration / input tokens, i.e. the time of one full prefill chunk).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from engine_model.config import EngineConfig
from engine_model.frontend import FrontendConfig
from engine_model.request import Request
from engine_model.simulation import FleetSpec, PoolSpec, Simulation
from telemetry_gen.workload import AppSpec, LengthDist, RateCurve, ReplayTrace, WorkloadSpec, generate_requests

POINTS_PATH = Path(__file__).resolve().parent / "data" / "fidelity_points.yaml"
# per-request ShareGPT lengths (input, output tokens) for points with `lengths: sharegpt`; how the file was
# made, and how it departs from the benchmark's own sample, is in tools/sharegpt_lengths.py
SHAREGPT_LENGTHS_PATH = Path(__file__).resolve().parent / "data" / "fidelity_sharegpt_lengths.csv"
LENGTH_SOURCES = ("fixed", "sharegpt")
METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "output_throughput_tok_s", "decode_step_ms", "prefill_step_ms")
TARGET_MEDIAN_ABS_ERROR = 0.10  # issue 14: median |relative error| per metric at most 10 %
_NO_TIMEOUT_S = 1e7  # benchmark clients wait for every response


@dataclass(frozen=True)
class FidelityPoint:
    """One documented benchmark setup (see the YAML file's header for the fields' meaning)."""

    name: str
    source: str
    model: str
    gpu: str
    engine: str
    tp: int
    input_tokens: int
    output_tokens: int
    load: str  # batch | rate | concurrency
    num_prompts: int
    published: dict[str, float]
    rate: float = math.inf  # requests/s for load "rate"
    concurrency: int = 0  # clients for load "concurrency"
    seed: int = 0
    prefill_bound: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    lengths: str = "fixed"  # fixed: every request input_tokens / output_tokens; sharegpt: see sharegpt_lengths
    table: str = ""  # the `tables:` or `serving_tables:` entry the point is a cell or row of; "" for a point

    def engine_config(self) -> EngineConfig:
        cfg = EngineConfig(tensor_parallel_size=self.tp).with_changes(**self.config)
        cfg.validate()
        return cfg


def load_points(path: Path = POINTS_PATH) -> list[FidelityPoint]:
    """The points of the YAML file, validated (ValueError names the point and the problem)."""
    raw = yaml.safe_load(path.read_text())
    out: list[FidelityPoint] = []
    for item in raw.get("points", []):
        name = str(item.get("name", "?"))
        load = dict(item.get("load") or {})
        kind = str(load.get("kind", ""))
        if kind not in ("batch", "rate", "concurrency"):
            raise ValueError(f"{name}: load kind must be batch, rate or concurrency, not {kind!r}")
        published = {str(k): float(v) for k, v in (item.get("published") or {}).items()}
        if not published or not item.get("source"):
            raise ValueError(f"{name}: every point needs a source and published figures")
        rate = load.get("rate", "inf")
        point = FidelityPoint(
            name=name,
            source=str(item["source"]),
            model=str(item["model"]),
            gpu=str(item["gpu"]),
            engine=str(item.get("engine", "")),
            tp=int(item.get("tp", 1)),
            input_tokens=int(item["input_tokens"]),
            output_tokens=int(item["output_tokens"]),
            load=kind,
            num_prompts=int(item["num_prompts"]),
            published=published,
            rate=math.inf if str(rate) == "inf" else float(rate),
            concurrency=int(load.get("concurrency", 0)),
            seed=int(load.get("seed", 0)),
            prefill_bound=bool(item.get("prefill_bound", False)),
            config=dict(item.get("config") or {}),
            lengths=str(item.get("lengths", "fixed")),
        )
        if point.lengths not in LENGTH_SOURCES:
            raise ValueError(f"{name}: lengths must be one of {LENGTH_SOURCES}, not {point.lengths!r}")
        if kind == "concurrency" and point.concurrency < 1:
            raise ValueError(f"{name}: a concurrency load needs concurrency >= 1")
        out.append(point)
    for table in raw.get("tables", []):
        out.extend(_table_points(table))
    for table in raw.get("serving_tables", []):
        out.extend(_serving_table_points(table))
    return out


def _setup_point(table: dict[str, Any], setup: dict[str, Any], name: str, isl: int, osl: int,
                 base_knobs: dict[str, Any], **fields: Any) -> FidelityPoint:
    """A table's point for one setup (model, gpu, tp and knobs): knobs are `base_knobs`, then the
    table's `config`, then the setup's own `config`, each overriding the one before."""
    return FidelityPoint(
        name=name,
        source=str(table["source"]),
        model=str(setup["model"]),
        gpu=str(setup["gpu"]),
        engine=str(table.get("engine", "")),
        tp=int(setup.get("tp", 1)),
        input_tokens=isl,
        output_tokens=osl,
        config={**base_knobs, **dict(table.get("config") or {}), **dict(setup.get("config") or {})},
        table=str(table.get("name", "?")),
        **fields,
    )


def _serving_table_points(table: dict[str, Any]) -> list[FidelityPoint]:
    """The points of one published serving table: one per row, at a request rate, with several metrics.

    `setups` name the model, GPU, TP degree (and knobs over the table's `config`) of each block of rows;
    `columns` name what each row holds: "qps" first (requests/s, or "inf": every request at once), then
    published metrics (ttft_ms, itl_ms, tpot_ms, output_throughput_tok_s); `rows` map a setup to
    "input/output" lengths to a list of rows. Every point is a rate point: `num_prompts` requests at
    seeded Poisson times at its rate (all at t=0 for "inf"), through the API-server stage."""
    tname = str(table.get("name", "?"))
    columns = [str(c) for c in table.get("columns") or []]
    metrics = columns[1:]
    allowed = {"ttft_ms", "itl_ms", "tpot_ms", "output_throughput_tok_s"}
    if not table.get("source") or columns[:1] != ["qps"] or not metrics or not set(metrics) <= allowed:
        raise ValueError(f"{tname}: a serving table needs a source and columns [qps, then some of "
                         f"{sorted(allowed)}]")
    setups = dict(table.get("setups") or {})
    out: list[FidelityPoint] = []
    for setup_name, by_length in (table.get("rows") or {}).items():
        setup = setups.get(setup_name)
        if setup is None:
            raise ValueError(f"{tname}: rows name setup {setup_name!r}, which `setups` does not define")
        for lengths, rows in by_length.items():
            isl, _, osl = str(lengths).partition("/")
            if not (isl.isdigit() and osl.isdigit()):
                raise ValueError(f"{tname}: {setup_name} lengths {lengths!r} are not input/output")
            for row in rows:
                if len(row) != len(columns):
                    raise ValueError(f"{tname}: {setup_name} {lengths} row {row} has {len(row)} values "
                                     f"for {len(columns)} columns")
                qps = str(row[0]).lower()
                out.append(_setup_point(
                    table, setup, f"{tname}-{setup_name}-{isl}-{osl}-qps{qps}", int(isl), int(osl), {},
                    load="rate",
                    num_prompts=int(table["num_prompts"]),
                    published={m: float(v) for m, v in zip(metrics, row[1:], strict=True)},
                    rate=math.inf if qps == "inf" else float(qps),
                ))
    return out


def _table_points(table: dict[str, Any]) -> list[FidelityPoint]:
    """The points of one published table: one per (row, column) cell that has a figure.

    A table names its source, engine, load and the one metric its cells hold; `columns` are the setups
    (name, model, gpu, tp, config: the knobs shared by every row are the table's `config`), `rows` map
    "input/output" lengths to one figure per column (null where the source has none) and `num_prompts`
    maps the same keys to the request count the source used for that row. Without a max_model_len in the
    knobs, each row's engine is built for its own input + output length, as `trtllm-bench build` sizes
    an engine from its dataset."""
    tname = str(table.get("name", "?"))
    metric = str(table.get("metric", ""))
    if metric not in METRICS or not table.get("source"):
        raise ValueError(f"{tname}: a table needs a source and a metric out of {METRICS}")
    load = dict(table.get("load") or {})
    if load.get("kind") != "batch":
        raise ValueError(f"{tname}: tables hold offline batch runs (load kind batch)")
    columns = list(table.get("columns") or [])
    counts = {str(k): int(v) for k, v in (table.get("num_prompts") or {}).items()}
    out: list[FidelityPoint] = []
    for lengths, cells in (table.get("rows") or {}).items():
        key = str(lengths)
        isl, _, osl = key.partition("/")
        if not (isl.isdigit() and osl.isdigit()) or key not in counts:
            raise ValueError(f"{tname}: row {key!r} needs input/output lengths and a num_prompts entry")
        if len(cells) != len(columns):
            raise ValueError(f"{tname}: row {key} has {len(cells)} figures for {len(columns)} columns")
        for col, value in zip(columns, cells, strict=True):
            if value is None:
                continue
            out.append(_setup_point(
                table, col, f"{tname}-{col['name']}-{isl}-{osl}", int(isl), int(osl),
                {"max_model_len": int(isl) + int(osl)},
                load="batch",
                num_prompts=counts[key],
                published={metric: float(value)},
            ))
    return out


# ---- requests and runs ------------------------------------------------------------------------------
def point_workload(point: FidelityPoint) -> WorkloadSpec:
    """The point's benchmark client as a workload of one app with its fixed lengths, built from the same
    shapes an incident uses: a burst at t=0 (batch, rate inf), a replayed trace of seeded Poisson send
    times (exactly num_prompts requests, as `vllm bench serve --request-rate R` sends), or a closed loop
    of `concurrency` clients. No shared prefixes: random and ShareGPT prompts do not repeat."""
    n = point.num_prompts
    fixed = {"prompt": LengthDist("fixed", median=point.input_tokens, max=point.input_tokens),
             "output": LengthDist("fixed", median=point.output_tokens, max=point.output_tokens)}
    common = {"system_prompts": 0, "max_tokens": point.output_tokens, "timeout_s": _NO_TIMEOUT_S}
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
OFFLINE_FRONTEND = FrontendConfig(fixed_s=0.0, per_prompt_token_s=0.0, per_output_token_s=0.0)


def _simulate(point: FidelityPoint, reqs: list[Request]) -> RunFigures:
    frontend = OFFLINE_FRONTEND if point.load == "batch" else FrontendConfig()
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
        out["prefill_step_ms"] = 1e3 * _chunk(point) * duration / fig.input_tokens
    return out


def published_metrics(point: FidelityPoint) -> dict[str, float]:
    """The same metrics from the published figures (see the module docstring for the derivations)."""
    pub = point.published
    out: dict[str, float] = {}
    if "ttft_ms" in pub:
        out["ttft_ms"] = pub["ttft_ms"]
    if "tpot_ms" in pub:
        out["tpot_ms"] = pub["tpot_ms"]
    elif "itl_ms" in pub:
        out["tpot_ms"] = pub["itl_ms"]
    if "output_throughput_tok_s" in pub:
        out["output_throughput_tok_s"] = pub["output_throughput_tok_s"]
    if "latency_ms" in pub:
        out["decode_step_ms"] = pub["latency_ms"] / point.output_tokens
    if point.prefill_bound and "duration_s" in pub:
        total_in = point.input_tokens * point.num_prompts
        out["prefill_step_ms"] = 1e3 * _chunk(point) * pub["duration_s"] / total_in
    return out


def _chunk(point: FidelityPoint) -> int:
    return point.engine_config().max_num_batched_tokens


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
    """Simulate one point and compare: the JSON row of `run_fidelity`'s `points`."""
    model = model_metrics(p, run_point(p))
    pub = published_metrics(p)
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
        "rate": None if not math.isfinite(p.rate) else p.rate,
        "concurrency": p.concurrency or None,
        "num_prompts": p.num_prompts,
        "table": p.table or None,
        "published": {k: round(v, 4) for k, v in pub.items()},
        "modelled": {k: round(model[k], 4) for k in pub},
        "rel_error": {k: round(model[k] / pub[k] - 1.0, 4) for k in pub},
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
        with ProcessPoolExecutor(max_workers=min(n, len(pts)), mp_context=multiprocessing.get_context("spawn")) as ex:
            rows = list(ex.map(point_row, pts, chunksize=max(1, len(pts) // (8 * n))))
    else:
        rows = [point_row(p) for p in pts]
    summary = summarise(rows)
    families = sorted({engine_family(row["engine"]) for row in rows})
    return {
        "points": rows,
        "summary": summary,
        # the same medians per engine (vLLM, TensorRT-LLM): a good fit on one engine's points must not
        # hide a poor one on the other's
        "summary_by_engine": {f: summarise(r for r in rows if engine_family(r["engine"]) == f) for f in families},
        "target_median_abs_rel_error": TARGET_MEDIAN_ABS_ERROR,
        "meets_target": all(s["meets_target"] is not False for s in summary.values()),
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
        for metric, pub in row["published"].items():
            lines.append(f"{row['name']:<{w}}{metric:<25}{pub:>12.4g}{row['modelled'][metric]:>12.4g}"
                         f"{row['rel_error'][metric]:>+9.1%}")
    target = result["target_median_abs_rel_error"]
    lines.append("")
    lines.extend(_median_lines(result["summary"], target))
    for family, summary in result.get("summary_by_engine", {}).items():
        lines.append(f"{family} points only:")
        lines.extend(_median_lines(summary, target, "  "))
    lines.append("")
    lines.append("sources:")
    lines.extend(f"  {src}" for src in dict.fromkeys(row["source"] for row in result["points"]))
    return "\n".join(lines)
