"""Turn a simulation run into the tables an observability stack would hold.

The tables, their columns and types are incidents.telemetry_schema's: `build_tables` builds them in its
order and checks each frame against it (`conform`). Every value here is read off the simulation
(per-request timestamps, scraped replica state, engine events). Nothing is derived from the incident's
faults: a GPU clock gauge shows the clock the simulated hardware ran at, a log line reports the sizes of
the allocation that failed in the simulated step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from engine_model.replica import ITL_BUCKETS
from engine_model.results import SimResult
from incidents import telemetry_schema as schema
from telemetry_gen import gpu_state as G
from telemetry_gen.context import EngineSetup, EvalSuite, ExternalEvent, TelemetryContext, timestamps
from telemetry_gen.hardware_series import (
    TUPLE_SAMPLES,
    XID_SALT,
    ReplicaHardware,
    dcgm_frames,
    replica_hardware,
    replica_rng,
    xid_events,
)

__all__ = ["EngineSetup", "EvalSuite", "ExternalEvent", "ReplicaHardware", "TelemetryContext", "build_tables",
           "conform", "replica_hardware", "xid_events"]


# ----- request columns as arrays, once per build ---------------------------------------------------
# A run's request columns are Python lists of ~100k boxed values spread over the heap; converting one is
# ~10 ms of cache misses, and the builders read the same few columns (arrival, status, replica) five times.
# Inside build_tables each distinct (column, dtype) is converted once; the arrays are shared, never written.
class _Memo(threading.local):
    """The open build's converted columns, per thread: two builds at once (the game prepares a mitigation's
    run while another is built) neither share nor outlive each other's."""

    arrays: dict[tuple[int, str], tuple[list[Any], np.ndarray]] | None = None
    codes: dict[tuple[int, str], tuple[list[Any], np.ndarray, dict[Any, int]]] | None = None


_MEMO = _Memo()
_NUMERIC = (float, np.int64)
"""dtypes `column` converts with np.fromiter: the same values as np.asarray, a third faster (asarray first
walks the list to discover a shape and a dtype it has been given)."""


@contextmanager
def _columns_once() -> Iterator[None]:
    """Within the block, `column` converts each list once (per dtype); afterwards nothing is kept."""
    outer = (_MEMO.arrays, _MEMO.codes)
    if _MEMO.arrays is None:
        _MEMO.arrays = {}
    if _MEMO.codes is None:
        _MEMO.codes = {}
    try:
        yield
    finally:
        _MEMO.arrays, _MEMO.codes = outer


def column(values: list[Any], dtype: Any = None) -> np.ndarray:
    """np.asarray(values, dtype), from the build's memo when one is open (the caller must not write to it)."""
    memo = _MEMO.arrays
    if memo is None:
        return _convert(values, dtype)
    key = (id(values), str(dtype))
    hit = memo.get(key)
    if hit is not None and hit[0] is values:  # the list itself is held, so its id cannot be reused
        return hit[1]
    arr = _convert(values, dtype)
    memo[key] = (values, arr)
    return arr


def _convert(values: list[Any], dtype: Any) -> np.ndarray:
    """np.asarray(values, dtype); a numeric list through np.fromiter (see _NUMERIC), or through asarray when
    fromiter refuses an item (a None, which asarray reads as NaN)."""
    if dtype in _NUMERIC:
        try:
            return np.fromiter(values, dtype=dtype, count=len(values))
        except (TypeError, ValueError):
            pass
    return np.asarray(values, dtype=dtype)


def codes(values: list[Any]) -> tuple[np.ndarray, dict[Any, int]]:
    """(code of each item, code of each distinct item) for a column of few distinct values (a replica's name):
    comparing codes is ~70x cheaper than comparing strings. From the build's memo like `column`."""
    key = (id(values), "codes")
    memo = _MEMO.codes
    hit = memo.get(key) if memo is not None else None
    if hit is not None and hit[0] is values:
        return hit[1], hit[2]
    found, uniques = pd.factorize(np.array(values, dtype=object))
    code_of = {u: i for i, u in enumerate(uniques.tolist())}
    if memo is not None:
        memo[key] = (values, found, code_of)
    return found, code_of


# ----- requests ---------------------------------------------------------------------------------
def requests_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """One row per request that finished (ok) or failed, ordered by arrival at the gateway.

    ts is the arrival at the API gateway; gateway_s runs from there to the arrival at the router
    (the simulation's arrival, where the replica's API server takes the request). ttft_s = gateway_s +
    api_server_s + queue_s + prefill_s: api_server_s runs from the router to the hand-off to the engine
    core (intake, tokenisation, waiting behind other intakes), queue from there to the first step that
    scheduled the request (vLLM's queue interval: an idle engine shows ~0 however slow the API server),
    prefill from there to the end of the step that produced the first token (the prefill step emits it).
    decode_s runs from the first to the last token; e2e_s = ttft_s + decode_s, from the gateway arrival
    to the last token. A request that never reached the engine has NULL api_server_s and queue_s.
    """
    r = run.requests
    arrival = column(r["arrival_s"], dtype=float)  # at the router
    gateway = column(r["gateway_s"], dtype=float)
    sent = arrival - gateway  # at the gateway
    engine = column(r["engine_arrival_s"], dtype=float)  # NaN: never reached the engine
    sched = column(r["first_scheduled_s"], dtype=float)
    first = column(r["first_token_s"], dtype=float)
    finish = column(r["finish_s"], dtype=float)
    out_tokens = column(r["output_tokens"], dtype=np.int64)
    ok = column(r["status"]) == "ok"
    api_server = engine - arrival
    queue = np.where(np.isnan(sched), np.nan, sched - engine)
    prefill = first - sched
    ttft = first - sent
    decode = np.where(ok, finish - first, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(ok & (out_tokens > 1), decode / np.maximum(out_tokens - 1, 1), np.nan)
    e2e = finish - sent
    seeds = pd.array([s if s is not None else None for s in r["seed"]], dtype="Int64")
    df = pd.DataFrame(
        {
            "request_id": column(r["request_id"], dtype=np.int64),
            "ts": timestamps(ctx.t0, sent),
            "app": pd.Series(r["app"], dtype="string"),
            "tenant": pd.Series(r["tenant"], dtype="string"),
            "replica": pd.Series(r["replica"], dtype="string"),
            "model": pd.Series(r["model"], dtype="string"),
            "model_version": pd.Series(r["model_version"], dtype="string"),
            "route": pd.Series(r["route"], dtype="string"),
            "gateway_s": gateway,
            "api_server_s": api_server,
            "queue_s": queue,
            "prefill_s": prefill,
            "decode_s": decode,
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": e2e,
            "prompt_tokens": column(r["prompt_tokens"], dtype=np.int64),
            "cached_tokens": column(r["cached_tokens"], dtype=np.int64),
            "output_tokens": out_tokens,
            "num_preemptions": column(r["num_preemptions"], dtype=np.int64),
            "status": pd.Series(r["status"], dtype="string"),
            "finish_reason": pd.Series(r["finish_reason"], dtype="string"),
            "temperature": column(r["temperature"], dtype=float),
            "seed": seeds,
            "output_hash": pd.Series(r["output_hash"], dtype="string"),
        }
    )
    if ctx.client_columns:
        df["attempt"] = column(r["attempt"], dtype=np.int64)
        first = column(r["first_request_id"], dtype=np.int64)
        df["first_request_id"] = np.where(first >= 0, first, df["request_id"].to_numpy())
    if ctx.adapter_names:
        names = np.array(["", *ctx.adapter_names], dtype=object)
        df["adapter"] = pd.Series(names[column(r["lora"], dtype=np.int64)], dtype="string")
    df = df[df["app"] != ctx.probe_app]
    return df.sort_values(["ts", "request_id"], kind="stable").reset_index(drop=True)


# ----- metrics ----------------------------------------------------------------------------------
ENGINE_COUNTERS = {
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
    "vllm:num_preemptions_total": "preemptions_total",
    "vllm:prefix_cache_queries_total": "prefix_queries_total",
    "vllm:prefix_cache_hits_total": "prefix_hits_total",
    "vllm:request_success_total": "requests_finished_total",
}
SPEC_COUNTERS = {
    "vllm:spec_decode_num_drafts_total": "spec_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total": "spec_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total": "spec_accepted_tokens_total",
}
ENGINE_GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
}
# histogram _sum/_count pairs accumulated from finished requests at each scrape: name -> (the interval's
# start, its end). TTFT and e2e count from the API server's arrival, as vLLM's do; the queue time from the
# hand-off to the engine core (vLLM: QUEUED -> SCHEDULED, docs/design/metrics.md), so the API server's part
# is its own series (not an upstream vLLM metric: vLLM exports no such interval, an engineer derives it
# from TTFT; named in the family of request_queue/prefill/decode_time_seconds).
LATENCY_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": ("arrival_s", "first_token_s"),
    "vllm:e2e_request_latency_seconds": ("arrival_s", "finish_s"),
    "vllm:request_queue_time_seconds": ("engine_arrival_s", "first_scheduled_s"),
    "vllm:request_api_server_time_seconds": ("arrival_s", "engine_arrival_s"),
}


def metrics_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """Prometheus-style samples in long format (ts, replica, name, value), one scrape per interval."""
    s = {k: np.asarray(v) for k, v in run.samples.items() if k not in TUPLE_SAMPLES}
    t = s["t"].astype(float)
    rep = s["replica"]
    up = s["up"].astype(bool)
    frames: list[pd.DataFrame] = []

    def add(name: str, values: np.ndarray, mask: np.ndarray | None = None) -> None:
        m = np.ones(len(t), dtype=bool) if mask is None else mask
        frames.append(pd.DataFrame({"t": t[m], "replica": rep[m], "name": name, "value": values[m].astype(float)}))

    # a down engine exposes nothing: its engine series have gaps, as in Prometheus
    for name, col in ENGINE_GAUGES.items():
        add(name, s[col], up)
    for name, col in ENGINE_COUNTERS.items():
        add(name, s[col], up)
    if np.any(s["spec_draft_tokens_total"] > 0):
        for name, col in SPEC_COUNTERS.items():
            add(name, s[col], up)
    for name, (start_col, end_col) in LATENCY_HISTOGRAMS.items():
        sums, counts = _histogram_sums(run, start_col, end_col, t, rep)
        add(f"{name}_sum", sums, up)
        add(f"{name}_count", counts, up)
    counts = np.cumsum(np.stack([np.asarray(c, dtype=float) for c in run.samples["itl_counts"]]), axis=1)
    for j, le in enumerate(ITL_BUCKETS):
        add(f'vllm:inter_token_latency_seconds_bucket{{le="{le:g}"}}', counts[:, j], up)
    add('vllm:inter_token_latency_seconds_bucket{le="+Inf"}', counts[:, -1], up)
    add("vllm:inter_token_latency_seconds_sum", s["itl_sum"], up)
    add("vllm:inter_token_latency_seconds_count", counts[:, -1], up)
    if ctx.adapter_names:
        frames.extend(_lora_info(run, ctx, t, rep))
    frames.extend(dcgm_frames(run, ctx))
    df = pd.concat(frames, ignore_index=True)
    df.insert(0, "ts", timestamps(ctx.t0, df.pop("t").to_numpy()))
    df["replica"] = df["replica"].astype("string")
    df["name"] = df["name"].astype("string")
    return df.sort_values(["ts", "replica", "name"], kind="stable").reset_index(drop=True)


def _lora_info(run: SimResult, ctx: TelemetryContext, t: np.ndarray, rep: np.ndarray) -> list[pd.DataFrame]:
    """vllm:lora_requests_info of every engine that serves adapters: at each scrape the series whose labels
    are its GPU slots (max_lora) and the adapters of its running and waiting requests; as in vLLM, the value
    is the wall-clock time the labels were set (here the scrape's Unix time)."""
    s = run.samples
    names = ("", *ctx.adapter_names)
    unix = (timestamps(ctx.t0, t).to_numpy().astype("datetime64[us]").astype(np.int64) / 1e6).astype(float)
    rows_t, rows_rep, rows_name, rows_val = [], [], [], []
    for i, slots in enumerate(s["max_lora"]):
        if not slots:
            continue  # down, or LoRA off on this engine: no series
        running = ",".join(names[a] for a in s["lora_running"][i])
        waiting = ",".join(names[a] for a in s["lora_waiting"][i])
        rows_t.append(t[i])
        rows_rep.append(rep[i])
        rows_name.append(f'vllm:lora_requests_info{{max_lora="{slots}",running_lora_adapters="{running}",'
                         f'waiting_lora_adapters="{waiting}"}}')
        rows_val.append(unix[i])
    if not rows_t:
        return []
    return [pd.DataFrame({"t": np.asarray(rows_t, dtype=float), "replica": np.asarray(rows_rep),
                          "name": rows_name, "value": np.asarray(rows_val, dtype=float)})]


def _histogram_sums(run: SimResult, start_col: str, end_col: str, t: np.ndarray, rep: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative sum and count of a per-request interval from `start_col` to `end_col` (seconds) of the
    requests that finished ok, each counted once its interval has ended, as scraped at each sample (t,
    replica)."""
    r = run.requests
    ok = column(r["status"]) == "ok"
    end = column(r[end_col], dtype=float)
    value = end - column(r[start_col], dtype=float)
    names, code_of = codes(r["replica"])
    sums = np.zeros(len(t))
    counts = np.zeros(len(t))
    for name in np.unique(rep):
        sel = ok & (names == code_of.get(str(name), -2)) & ~np.isnan(end)
        order = np.argsort(end[sel], kind="stable")
        ends, vals = end[sel][order], value[sel][order]
        csum = np.concatenate([[0.0], np.cumsum(vals)])
        rows = np.nonzero(rep == name)[0]
        idx = np.searchsorted(ends, t[rows], side="right")
        sums[rows] = csum[idx]
        counts[rows] = idx
    return sums, counts


# ----- events and logs --------------------------------------------------------------------------
def events_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """Change log: deploys, config changes (old and new values), restarts, crashes, router changes."""
    rows: list[dict[str, Any]] = []
    for e in run.events:
        d = e.detail
        if e.kind == "drain_start":
            what = f"rolling restart: draining for version {d.get('model_version')}"
            rows.append(_ev(e.t, e.replica, "deploy", "k8s", what))
        elif e.kind == "engine_ready":
            what = f"engine ready, model {d['model']} {d['model_version']}"
            rows.append(_ev(e.t, e.replica, "restart", "vllm", what))
            if d.get("old_model_version") != d.get("model_version"):
                rows.append(_ev(e.t, e.replica, "config_change", "vllm", "model_version",
                                str(d.get("old_model_version")), str(d.get("model_version"))))
            for knob, (old, new) in sorted(d.get("changes", {}).items()):
                rows.append(_ev(e.t, e.replica, "config_change", "vllm", knob, str(old), str(new)))
        elif e.kind == "crash":
            rows.append(_ev(e.t, e.replica, "crash", "vllm", f"engine core died ({d.get('reason')})"))
        elif e.kind == "startup_failed":
            rows.append(_ev(e.t, e.replica, "crash", "vllm", "engine failed to start"))
        elif e.kind in ("router_policy", "fallback_policy"):
            rows.append(_ev(e.t, "", "config_change", "router", e.kind, str(d.get("old")), str(d.get("new"))))
        elif e.kind == "router_drain":  # the replica out of the pool (true) or back in (false)
            rows.append(_ev(e.t, e.replica, "config_change", "router", "drained", str(d.get("old")), str(d.get("new"))))
    for x in ctx.external_events:
        rows.append(_ev(x.t, x.replica, x.kind, x.component, x.detail, x.old_value, x.new_value))
    df = pd.DataFrame(rows, columns=["t", "replica", "kind", "component", "detail", "old_value", "new_value"])
    df.insert(0, "ts", timestamps(ctx.t0, df.pop("t").to_numpy(dtype=float)))
    for c in df.columns[1:]:
        df[c] = df[c].astype("string")
    return df.sort_values(["ts", "replica", "kind", "detail"], kind="stable").reset_index(drop=True)


def _ev(t: float, replica: str, kind: str, component: str, detail: str, old: str = "", new: str = "") -> dict[str, Any]:
    return {"t": t, "replica": replica, "kind": kind, "component": component, "detail": detail,
            "old_value": old or None, "new_value": new or None}


def torch_size(n: int) -> str:
    """A byte count as PyTorch's caching allocator prints it in an out-of-memory message: bytes up to 1 KiB,
    then KiB, MiB or GiB with two decimals (so an allocation of a few hundred MiB reads as MiB, as it does)."""
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1 << 20:
        return f"{n / 1024:.2f} KiB"
    if n <= 1 << 30:
        return f"{n / (1 << 20):.2f} MiB"
    return f"{n / (1 << 30):.2f} GiB"


def logs_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """Engine log lines in the shapes vLLM and PyTorch print them, and the NVIDIA driver's Xid lines from the
    node's kernel log (component `kernel`)."""
    rows: list[tuple[float, str, str, str, str]] = []
    rows.extend(_stats_lines(run))
    rows.extend(_xid_lines(run, ctx))
    for e in run.events:
        d = e.detail
        if e.kind == "engine_ready":
            rows.append((e.t - 2.0, e.replica, "INFO", "gpu_worker.py",
                         f"Available KV cache memory: {d['kv_gib']:.2f} GiB"))
            conc = d["kv_tokens"] / max(1, d["max_model_len"])
            rows.append((e.t - 1.9, e.replica, "INFO", "kv_cache_utils.py",
                         f"GPU KV cache size: {d['kv_tokens']:,} tokens, Maximum concurrency for "
                         f"{d['max_model_len']:,} tokens per request: {conc:.2f}x"))
            rows.append((e.t - 1.0, e.replica, "INFO", "gpu_model_runner.py",
                         f"Graph capturing finished, took {d['graph_gib']:.2f} GiB"))
            rows.append((e.t, e.replica, "INFO", "api_server.py", "Application startup complete."))
        elif e.kind == "crash":
            if d.get("reason") == "oom":
                rows.append((e.t, e.replica, "ERROR", "core.py",
                             f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                             f"{torch_size(d['tried_bytes'])}. GPU 0 has a total capacity of "
                             f"{torch_size(d['total_bytes'])} of which {torch_size(d['free_bytes'])} is free. "
                             f"Including non-PyTorch memory, this process has {torch_size(d['in_use_bytes'])} "
                             f"memory in use."))
            elif d.get("reason") == "drain_timeout":
                rows.append((e.t, e.replica, "WARNING", "launcher.py",
                             f"Graceful shutdown timed out; aborting {d.get('in_flight', 0)} requests"))
                continue
            elif d.get("reason") == "xid":
                rows.append((e.t, e.replica, "ERROR", "core.py",
                             f"RuntimeError: CUDA error: unspecified launch failure (Xid {d.get('xid', 79)})"))
            rows.append((e.t, e.replica, "ERROR", "core.py", "EngineCore encountered a fatal error."))
            rows.append((e.t + 0.01, e.replica, "ERROR", "core_client.py",
                         "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."))
        elif e.kind == "startup_failed":
            rows.append((e.t, e.replica, "ERROR", "core.py", f"ValueError: {d.get('error', '')}"))
        elif e.kind in ("drain_start", "shutdown"):
            msg = "Received SIGTERM, draining requests" if e.kind == "drain_start" else "Shutting down engine"
            rows.append((e.t, e.replica, "INFO", "launcher.py", msg))
    df = pd.DataFrame(rows, columns=["t", "replica", "level", "component", "message"])
    df.insert(0, "ts", timestamps(ctx.t0, df.pop("t").to_numpy(dtype=float)))
    for c in df.columns[1:]:
        df[c] = df[c].astype("string")
    return df.sort_values(["ts", "replica", "message"], kind="stable").reset_index(drop=True)


XID_LEVELS = {63: "WARNING"}  # a row remap is recorded and contained; the others are errors


def _xid_lines(run: SimResult, ctx: TelemetryContext) -> list[tuple[float, str, str, str, str]]:
    """`NVRM: Xid (PCI:<bus>): <code>, pid=..., name=..., <message>` for every Xid of every GPU. A crash's Xid
    reaches the kernel log a few ms before the engine notices the failed CUDA call; a row remap or an NVLink
    fault is the driver's own and names no process."""
    out: list[tuple[float, str, str, str, str]] = []
    for index, (name, xids) in enumerate(xid_events(run, ctx).items()):
        bus = G.PCI_BUS_IDS[index % len(G.PCI_BUS_IDS)]
        pid = 2000 + int(replica_rng(ctx, XID_SALT + 1, index).integers(0, 60000))
        for x in xids:
            lives = sum(1 for e in run.events if e.replica == name and e.kind == "engine_ready" and e.t <= x.t)
            who = f"pid={pid + 7 * lives}, name=python3" if x.code in (48, 79) else "pid='<unknown>', name=<unknown>"
            when = x.t - 0.005 if x.code in (48, 79) else x.t
            out.append((when, name, XID_LEVELS.get(x.code, "ERROR"), "kernel",
                        f"NVRM: Xid (PCI:{bus}): {x.code}, {who}, {x.detail}".rstrip(", ")))
    return out


def _stats_lines(run: SimResult) -> list[tuple[float, str, str, str, str]]:
    """The periodic `Engine 000: Avg prompt throughput ...` line, one per scrape while busy."""
    s = run.samples
    out: list[tuple[float, str, str, str, str]] = []
    last: dict[str, tuple[float, float, float, float, float, float]] = {}
    for i in range(len(s["t"])):
        name, t = s["replica"][i], s["t"][i]
        cur = (t, s["prompt_tokens_total"][i], s["generation_tokens_total"][i], s["preemptions_total"][i],
               s["prefix_queries_total"][i], s["prefix_hits_total"][i])
        prev = last.get(name)
        last[name] = cur
        if prev is None or not s["up"][i] or cur[0] <= prev[0]:
            continue
        dt = cur[0] - prev[0]
        running, waiting = s["running"][i], s["waiting"][i]
        if running == 0 and waiting == 0 and cur[2] == prev[2]:
            continue  # idle engines log at DEBUG
        pre = int(cur[3] - prev[3])
        q, h = cur[4] - prev[4], cur[5] - prev[5]
        parts = [
            f"Avg prompt throughput: {(cur[1] - prev[1]) / dt:.1f} tokens/s",
            f"Avg generation throughput: {(cur[2] - prev[2]) / dt:.1f} tokens/s",
            f"Running: {running} reqs",
            f"Waiting: {waiting} reqs",
        ]
        if pre > 0:
            parts.append(f"Preemptions: {pre}")
        parts.append(f"GPU KV cache usage: {100.0 * s['kv_usage'][i]:.1f}%")
        parts.append(f"Prefix cache hit rate: {100.0 * h / q if q > 0 else 0.0:.1f}%")
        out.append((t, name, "INFO", "loggers.py", "Engine 000: " + ", ".join(parts)))
    return out


def evals_table(ctx: TelemetryContext) -> pd.DataFrame:
    """Offline evaluation runs: observed accuracy of n samples per task, with a 95% Wilson interval."""
    rng = np.random.default_rng(np.random.PCG64(ctx.seed + 104729))
    rows = []
    for suite in ctx.evals:
        for task in sorted(suite.scores):
            p = float(np.clip(suite.scores[task], 0.0, 1.0))
            k = int(rng.binomial(suite.n, p))
            lo, hi = _wilson(k, suite.n)
            rows.append((suite.at_s, suite.model_version, task, k / suite.n, suite.n, lo, hi))
    df = pd.DataFrame(rows, columns=["t", "model_version", "task", "score", "n", "ci_low", "ci_high"])
    df.insert(0, "ts", timestamps(ctx.t0, df.pop("t").to_numpy(dtype=float)))
    df["model_version"] = df["model_version"].astype("string")
    df["task"] = df["task"].astype("string")
    df["n"] = df["n"].astype(np.int64)
    return df


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return round(float(centre - half), 4), round(float(centre + half), 4)


def probes_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """Determinism probes: fixed prompts replayed through the fleet; drift against each prompt's first run."""
    r = run.requests
    app = column(r["app"])
    ok = column(r["status"]) == "ok"
    sel = np.nonzero((app == ctx.probe_app) & ok)[0]
    sel = sel[np.argsort(column(r["arrival_s"], dtype=float)[sel], kind="stable")]
    ref: dict[int, float] = {}
    rows = []
    for i in sel:
        ph = int(r["prompt_hash"][i])
        lp = float(r["first_logprob"][i])
        drift = abs(lp - ref.setdefault(ph, lp))
        rows.append((r["arrival_s"][i], r["replica"][i], int(r["request_id"][i]), f"p{ph % 100000:05d}",
                     int(r["batch_at_first_token"][i]), r["output_hash"][i], round(drift, 7)))
    df = pd.DataFrame(rows, columns=["t", "replica", "probe_id", "prompt_id", "batch_size", "output_hash",
                                     "logprob_drift"])
    df.insert(0, "ts", timestamps(ctx.t0, df.pop("t").to_numpy(dtype=float)))
    for c in ("replica", "prompt_id", "output_hash"):
        df[c] = df[c].astype("string")
    df["probe_id"] = df["probe_id"].astype(np.int64)
    df["batch_size"] = df["batch_size"].astype(np.int64)
    return df


# ----- the schema ---------------------------------------------------------------------------------
# pandas dtype -> the DuckDB type a frame column of it becomes (duckdb's pandas scan)
DUCKDB_TYPE_OF_DTYPE = {"int64": "BIGINT", "Int64": "BIGINT", "float64": "DOUBLE", "datetime64[us]": "TIMESTAMP",
                        "string": "VARCHAR"}

BUILDERS: dict[str, Callable[[SimResult, TelemetryContext], pd.DataFrame]] = {
    "requests": requests_table,
    "metrics": metrics_table,
    "events": events_table,
    "logs": logs_table,
    "evals": lambda run, ctx: evals_table(ctx),
    "probes": probes_table,
}
"""Table name -> the function that builds it; the names are exactly incidents.telemetry_schema.TABLE_NAMES."""


def conform(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """`df` unchanged when its columns are the schema's for table `name`, in order, each of a dtype that
    becomes the schema's DuckDB type; ValueError naming the difference otherwise (a builder and the schema
    that disagree are a programming error, caught on every build). An empty frame may leave columns untyped
    (object): the frames are hashed as built, so typing them here would change the content digest."""
    want = schema.table(name)
    names = want.column_names
    optional = schema.OPTIONAL_COLUMNS.get(name, ())
    if optional:  # built without some of its optional columns (they come last, in the schema's order)
        names = tuple(c for c in names if c not in optional or c in df.columns)
    if tuple(df.columns) != names:
        raise ValueError(f"table {name}: built columns {list(df.columns)}, the schema says {list(names)}")
    for col in want.columns:
        if col.name not in names:
            continue
        got = DUCKDB_TYPE_OF_DTYPE.get(str(df[col.name].dtype))
        if got is None and df.empty and df[col.name].dtype == object:
            continue  # an empty frame built from no rows has untyped columns; the store types them
        if got != col.type:
            raise ValueError(f"table {name}: column {col.name} is {df[col.name].dtype} ({got}), the schema says "
                             f"{col.type}")
    return df


def build_tables(run: SimResult, ctx: TelemetryContext) -> dict[str, pd.DataFrame]:
    """Every table of the schema, in its order, each checked against it."""
    if tuple(BUILDERS) != schema.TABLE_NAMES:
        raise ValueError(f"table builders {list(BUILDERS)} differ from the schema's tables {list(schema.TABLE_NAMES)}")
    with _columns_once():
        return {name: conform(name, build(run, ctx)) for name, build in BUILDERS.items()}
