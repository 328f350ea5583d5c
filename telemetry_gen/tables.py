"""Turn a simulation run into the tables an observability stack would hold.

Every value here is read off the simulation (per-request timestamps, scraped replica
state, engine events). Nothing is derived from the incident's faults: a GPU clock gauge
shows the clock the simulated hardware ran at, a log line reports the sizes of the
allocation that failed in the simulated step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from engine_model.config import EngineConfig
from engine_model.memory import MemoryPlan, plan_memory
from engine_model.profiles import GPUProfile, ModelProfile, get_model
from engine_model.replica import ITL_BUCKETS
from engine_model.results import SimResult
from telemetry_gen import gpu_state as G
from telemetry_gen.node_metrics import node_series, per_window

MIB = 1024**2


@dataclass(frozen=True)
class EvalSuite:
    """Offline evaluation of one model version: task -> true score (0..1) and sample size."""

    model_version: str
    scores: dict[str, float]
    n: int = 1000
    at_s: float = 0.0


@dataclass(frozen=True)
class ExternalEvent:
    """Something outside the engines that a change log records (an unrelated deploy, a traffic note)."""

    t: float
    kind: str
    component: str
    detail: str
    replica: str = ""
    old_value: str = ""
    new_value: str = ""


@dataclass(frozen=True)
class EngineSetup:
    """What a replica starts with: model, GPU and engine config (its memory plan sizes the FB gauges)."""

    model: ModelProfile
    gpu: GPUProfile
    config: EngineConfig


@dataclass
class TelemetryContext:
    """What the tables need besides the run itself.

    `engines`: each replica's starting setup (replicas not in it use `gpu` and `gpus_per_replica`, and their
    FB gauges show the engine's own memory figure). `throttle_causes`: replica -> why its clock was throttled
    when the engine ran it slower ("thermal", the default, or "power"); the engine does not model the cause.
    `client_columns`: the requests table gets attempt and first_request_id (the incident's clients may retry;
    without them the table is as it always was)."""

    t0: datetime
    gpu: GPUProfile
    gpus_per_replica: int = 1
    seed: int = 0
    evals: list[EvalSuite] = field(default_factory=list)
    external_events: list[ExternalEvent] = field(default_factory=list)
    probe_app: str = "probe"
    engines: dict[str, EngineSetup] = field(default_factory=dict)
    throttle_causes: dict[str, str] = field(default_factory=dict)
    client_columns: bool = False

    def gpu_of(self, replica: str) -> GPUProfile:
        setup = self.engines.get(replica)
        return setup.gpu if setup is not None else self.gpu

    def gpus_of(self, replica: str) -> int:
        setup = self.engines.get(replica)
        if setup is None:
            return self.gpus_per_replica
        return setup.config.tensor_parallel_size * setup.config.pipeline_parallel_size


def _ts(t0: datetime, seconds: np.ndarray) -> pd.Series:
    return pd.Series(pd.Timestamp(t0) + pd.to_timedelta(np.asarray(seconds, dtype=float), unit="s")).astype(
        "datetime64[us]"
    )


# ----- requests ---------------------------------------------------------------------------------
def requests_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """One row per request that finished (ok) or failed, ordered by arrival at the gateway.

    ts is the arrival at the API gateway; gateway_s runs from there to the arrival at the router
    (the simulation's arrival). ttft_s = gateway_s + queue_s + prefill_s: queue runs from the arrival
    at the router to the first step that scheduled the request, prefill from there to the end of the
    step that produced the first token (the prefill step emits it). decode_s runs from the first to
    the last token; e2e_s = ttft_s + decode_s, from the gateway arrival to the last token.
    """
    r = run.requests
    arrival = np.asarray(r["arrival_s"], dtype=float)  # at the router
    gateway = np.asarray(r["gateway_s"], dtype=float)
    sent = arrival - gateway  # at the gateway
    sched = np.asarray(r["first_scheduled_s"], dtype=float)
    first = np.asarray(r["first_token_s"], dtype=float)
    finish = np.asarray(r["finish_s"], dtype=float)
    out_tokens = np.asarray(r["output_tokens"], dtype=np.int64)
    ok = np.asarray(r["status"]) == "ok"
    queue = np.where(np.isnan(sched), np.nan, sched - arrival)
    prefill = first - sched
    ttft = first - sent
    decode = np.where(ok, finish - first, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(ok & (out_tokens > 1), decode / np.maximum(out_tokens - 1, 1), np.nan)
    e2e = finish - sent
    seeds = pd.array([s if s is not None else None for s in r["seed"]], dtype="Int64")
    df = pd.DataFrame(
        {
            "request_id": np.asarray(r["request_id"], dtype=np.int64),
            "ts": _ts(ctx.t0, sent),
            "app": pd.Series(r["app"], dtype="string"),
            "tenant": pd.Series(r["tenant"], dtype="string"),
            "replica": pd.Series(r["replica"], dtype="string"),
            "model": pd.Series(r["model"], dtype="string"),
            "model_version": pd.Series(r["model_version"], dtype="string"),
            "route": pd.Series(r["route"], dtype="string"),
            "gateway_s": gateway,
            "queue_s": queue,
            "prefill_s": prefill,
            "decode_s": decode,
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": e2e,
            "prompt_tokens": np.asarray(r["prompt_tokens"], dtype=np.int64),
            "cached_tokens": np.asarray(r["cached_tokens"], dtype=np.int64),
            "output_tokens": out_tokens,
            "num_preemptions": np.asarray(r["num_preemptions"], dtype=np.int64),
            "status": pd.Series(r["status"], dtype="string"),
            "finish_reason": pd.Series(r["finish_reason"], dtype="string"),
            "temperature": np.asarray(r["temperature"], dtype=float),
            "seed": seeds,
            "output_hash": pd.Series(r["output_hash"], dtype="string"),
        }
    )
    if ctx.client_columns:
        df["attempt"] = np.asarray(r["attempt"], dtype=np.int64)
        first = np.asarray(r["first_request_id"], dtype=np.int64)
        df["first_request_id"] = np.where(first >= 0, first, df["request_id"].to_numpy())
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
# histogram _sum/_count pairs accumulated from finished requests at each scrape
LATENCY_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": ("first_token_s", "ttft"),
    "vllm:e2e_request_latency_seconds": ("finish_s", "e2e"),
    "vllm:request_queue_time_seconds": ("first_scheduled_s", "queue"),
}


def metrics_table(run: SimResult, ctx: TelemetryContext) -> pd.DataFrame:
    """Prometheus-style samples in long format (ts, replica, name, value), one scrape per interval."""
    s = {k: np.asarray(v) for k, v in run.samples.items() if k != "itl_counts"}
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
    for name, (end_col, _) in LATENCY_HISTOGRAMS.items():
        sums, counts = _histogram_sums(run, end_col, t, rep)
        add(f"{name}_sum", sums, up)
        add(f"{name}_count", counts, up)
    counts = np.cumsum(np.stack([np.asarray(c, dtype=float) for c in run.samples["itl_counts"]]), axis=1)
    for j, le in enumerate(ITL_BUCKETS):
        add(f'vllm:inter_token_latency_seconds_bucket{{le="{le:g}"}}', counts[:, j], up)
    add('vllm:inter_token_latency_seconds_bucket{le="+Inf"}', counts[:, -1], up)
    add("vllm:inter_token_latency_seconds_sum", s["itl_sum"], up)
    add("vllm:inter_token_latency_seconds_count", counts[:, -1], up)
    frames.extend(_dcgm_frames(run, ctx))
    df = pd.concat(frames, ignore_index=True)
    df.insert(0, "ts", _ts(ctx.t0, df.pop("t").to_numpy()))
    df["replica"] = df["replica"].astype("string")
    df["name"] = df["name"].astype("string")
    return df.sort_values(["ts", "replica", "name"], kind="stable").reset_index(drop=True)


def _histogram_sums(run: SimResult, end_col: str, t: np.ndarray, rep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative sum and count of a per-request latency, as scraped at each sample (t, replica)."""
    r = run.requests
    ok = np.asarray(r["status"]) == "ok"
    end = np.asarray(r[end_col], dtype=float)
    arrival = np.asarray(r["arrival_s"], dtype=float)
    value = end - arrival
    names = np.asarray(r["replica"])
    sums = np.zeros(len(t))
    counts = np.zeros(len(t))
    for name in np.unique(rep):
        sel = ok & (names == name) & ~np.isnan(end)
        order = np.argsort(end[sel], kind="stable")
        ends, vals = end[sel][order], value[sel][order]
        csum = np.concatenate([[0.0], np.cumsum(vals)])
        rows = np.nonzero(rep == name)[0]
        idx = np.searchsorted(ends, t[rows], side="right")
        sums[rows] = csum[idx]
        counts[rows] = idx
    return sums, counts


# ----- GPU and host series -------------------------------------------------------------------------
# dcgm-exporter field names (../shared/reference/dcgm: default counters, plus the opt-in ECC and NVLink error
# counters; DCGM_FI_DEV_CLOCKS_EVENT_REASONS is field 112, named DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before DCGM 3.3).
XID_SALT, GPU_SALT, NODE_SALT = 7919, 7927, 7933  # streams of draws of their own, per replica


@dataclass(frozen=True)
class ReplicaHardware:
    """One replica's GPU and host at its scrapes: `rows` index the run's samples, in time order."""

    rows: np.ndarray
    t: np.ndarray
    gpu: G.GpuTrace
    errors: G.ErrorTrace
    fb_used_bytes: np.ndarray
    fb_total_bytes: np.ndarray
    nvlink: bool
    node: dict[str, np.ndarray]


def _hardware_changes(run: SimResult) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """replica -> hardware factor -> [(time, value)] as the engine logged them."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for e in run.events:
        if e.kind == "hardware":
            for k, v in e.detail.items():
                out.setdefault(e.replica, {}).setdefault(k, []).append((e.t, float(v)))
    return out


def _crashes(run: SimResult, reason: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in run.events:
        if e.kind == "crash" and e.detail.get("reason") == reason:
            out.setdefault(e.replica, []).append({"t": e.t, **e.detail})
    return out


def _plans(run: SimResult, name: str, setup: EngineSetup) -> list[tuple[float, MemoryPlan]]:
    """The memory plans a replica ran with and since when: its start-up config, then each restart's
    (the engine logs the knobs that changed and the model it loaded)."""
    cfg, model = setup.config, setup.model
    out = [(-np.inf, plan_memory(model, setup.gpu, cfg))]
    for e in run.events:
        if e.replica != name or e.kind != "engine_ready":
            continue
        changes = {k: v[1] for k, v in e.detail.get("changes", {}).items()}
        if changes:
            cfg = cfg.with_changes(**changes)
        model = get_model(str(e.detail.get("model", model.name)))
        out.append((e.t, plan_memory(model, setup.gpu, cfg)))
    return out


def _fb_used(run: SimResult, name: str, ctx: TelemetryContext, s: dict[str, np.ndarray], rows: np.ndarray
             ) -> np.ndarray:
    t = s["t"][rows].astype(float)
    used = s["memory_used_bytes"][rows].astype(float)
    total = s["memory_total_bytes"][rows].astype(float)
    up = s["up"][rows].astype(bool)
    setup = ctx.engines.get(name)
    try:
        plans = _plans(run, name, setup) if setup is not None else []
    except (KeyError, ValueError):  # a setup the engine started but the plan cannot repeat: its own figure
        plans = []
    if not plans:
        return np.where(up, used, 0.0)
    starts = np.array([p[0] for p in plans])
    idx = np.searchsorted(starts, t, side="right") - 1
    held = np.array([float(p.weight_bytes + p.kv_bytes + p.activation_peak_bytes + p.cuda_graph_bytes
                           + p.non_torch_bytes) for _, p in plans])[idx]
    limit = np.array([float(p.activation_peak_bytes + p.headroom_bytes) for _, p in plans])[idx]
    ooms = [(c["t"], float(c["leaked_bytes"])) for c in _crashes(run, "oom").get(name, [])]
    return G.fb_used_bytes(t, up, used, total, held, limit, ooms)


def _activity(s: dict[str, np.ndarray], rows: np.ndarray, changes: dict[str, list[tuple[float, float]]]
              ) -> np.ndarray:
    """(busy, tensor-active, DRAM-active) share of each scrape window. DRAM-active is the memory time at
    the bandwidth the HBM delivered, scaled to its nominal bandwidth (bytes moved / nominal peak)."""
    t = s["t"][rows].astype(float)
    shares = G.window_shares(t, np.stack([s["busy_s_total"][rows], s["compute_s_total"][rows],
                                          s["memory_s_total"][rows]], axis=1).astype(float))
    shares[:, 2] *= G.window_mean(t, changes.get("hbm_bw_factor", []))
    return shares


def _replica_rng(ctx: TelemetryContext, salt: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([ctx.seed % (1 << 63), salt, index]))


def _replica_errors(run: SimResult, ctx: TelemetryContext, s: dict[str, np.ndarray], name: str, index: int,
                    rows: np.ndarray, shares: np.ndarray, changes: dict[str, list[tuple[float, float]]]
                    ) -> tuple[G.ErrorTrace, bool]:
    gpu = ctx.gpu_of(name)
    nvlink = gpu.link.name.startswith("nvlink")
    xids = [(c["t"], int(c.get("xid", 79))) for c in _crashes(run, "xid").get(name, [])]
    errors = G.error_trace(s["t"][rows].astype(float), shares[:, 0], shares[:, 2], changes.get("hbm_bw_factor", []),
                           changes.get("link_factor", []), nvlink, ctx.gpus_of(name) > 1, xids,
                           _replica_rng(ctx, XID_SALT, index))
    return errors, nvlink


def _replica_rows(s: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    rep = s["replica"]
    return [(str(name), np.nonzero(rep == name)[0]) for name in sorted(np.unique(rep).tolist())]


def _samples(run: SimResult) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in run.samples.items() if k != "itl_counts"}


def replica_hardware(run: SimResult, ctx: TelemetryContext) -> dict[str, ReplicaHardware]:
    """Every replica's GPU and host series, from the run's samples and hardware events (see gpu_state and
    node_metrics). The values the metrics table rounds and writes; tests read them before any rounding."""
    s = _samples(run)
    changes = _hardware_changes(run)
    out: dict[str, ReplicaHardware] = {}
    for index, (name, rows) in enumerate(_replica_rows(s)):
        t = s["t"][rows].astype(float)
        gpu = ctx.gpu_of(name)
        mine = changes.get(name, {})
        shares = _activity(s, rows, mine)
        clock = G.window_mean(t, mine.get("clock_factor", []))
        throttles = G.throttles_from(mine.get("clock_factor", []), ctx.throttle_causes.get(name, "thermal"))
        trace = G.gpu_trace(t, shares, clock, gpu, throttles, _replica_rng(ctx, GPU_SALT, index))
        errors, nvlink = _replica_errors(run, ctx, s, name, index, rows, shares, mine)
        up = s["up"][rows].astype(bool)
        queued = (s["running"][rows] + s["waiting"][rows]) > 0
        node = node_series(
            t, np.where(queued, 1.0, np.clip(shares[:, 0], 0.0, 1.0)),
            per_window(t, s["requests_finished_total"][rows]), per_window(t, s["generation_tokens_total"][rows]),
            G.window_mean(t, mine.get("host_overhead_factor", [])), up, ctx.gpus_of(name),
            _replica_rng(ctx, NODE_SALT, index),
        )
        out[name] = ReplicaHardware(rows, t, trace, errors, _fb_used(run, name, ctx, s, rows),
                                    s["memory_total_bytes"][rows].astype(float), nvlink, node)
    return out


def xid_events(run: SimResult, ctx: TelemetryContext) -> dict[str, tuple[G.Xid, ...]]:
    """replica -> the Xids its GPU's driver logged (the same draws as replica_hardware's)."""
    s = _samples(run)
    changes = _hardware_changes(run)
    out: dict[str, tuple[G.Xid, ...]] = {}
    for index, (name, rows) in enumerate(_replica_rows(s)):
        mine = changes.get(name, {})
        out[name] = _replica_errors(run, ctx, s, name, index, rows, _activity(s, rows, mine), mine)[0].xids
    return out


def _dcgm_frames(run: SimResult, ctx: TelemetryContext) -> list[pd.DataFrame]:
    """GPU series as dcgm-exporter reports them and host series as node_exporter does, for every replica at
    every scrape (the exporters run whether or not the engine is up)."""
    s = _samples(run)
    frames: list[pd.DataFrame] = []
    for hw in replica_hardware(run, ctx).values():
        g, e = hw.gpu, hw.errors
        mib = 1.0 / MIB
        series: dict[str, np.ndarray] = {
            "DCGM_FI_DEV_SM_CLOCK": np.round(g.sm_clock_mhz),
            "DCGM_FI_DEV_GPU_UTIL": np.round(100.0 * g.busy),  # shares are <= 1 by construction: no clip
            "DCGM_FI_DEV_POWER_USAGE": g.power_w,
            "DCGM_FI_DEV_GPU_TEMP": np.round(g.temp_c),
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": g.reasons.astype(float),
            "DCGM_FI_DEV_FB_USED": np.round(hw.fb_used_bytes * mib),
            "DCGM_FI_DEV_FB_FREE": np.round(np.maximum(hw.fb_total_bytes - hw.fb_used_bytes, 0.0) * mib),
            "DCGM_FI_PROF_DRAM_ACTIVE": g.dram,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": g.tensor,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": g.busy,
            "DCGM_FI_DEV_XID_ERRORS": e.last_xid,
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": e.sbe,
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": e.dbe,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": e.remapped_correctable,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": e.remapped_uncorrectable,
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": e.pcie_replay,
        }
        if hw.nvlink:
            series["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"] = e.nvlink_crc
            series["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] = e.nvlink_replay
        series.update(hw.node)
        rep = s["replica"][hw.rows]
        for metric, values in series.items():
            frames.append(pd.DataFrame({"t": hw.t, "replica": rep, "name": metric,
                                        "value": np.round(np.asarray(values, dtype=float), 3)}))
    return frames


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
    for x in ctx.external_events:
        rows.append(_ev(x.t, x.replica, x.kind, x.component, x.detail, x.old_value, x.new_value))
    df = pd.DataFrame(rows, columns=["t", "replica", "kind", "component", "detail", "old_value", "new_value"])
    df.insert(0, "ts", _ts(ctx.t0, df.pop("t").to_numpy(dtype=float)))
    for c in df.columns[1:]:
        df[c] = df[c].astype("string")
    return df.sort_values(["ts", "replica", "kind", "detail"], kind="stable").reset_index(drop=True)


def _ev(t: float, replica: str, kind: str, component: str, detail: str, old: str = "", new: str = "") -> dict[str, Any]:
    return {"t": t, "replica": replica, "kind": kind, "component": component, "detail": detail,
            "old_value": old or None, "new_value": new or None}


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
                gib = 1024**3
                rows.append((e.t, e.replica, "ERROR", "core.py",
                             f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                             f"{d['tried_bytes'] / gib:.2f} GiB. GPU 0 has a total capacity of "
                             f"{d['total_bytes'] / gib:.2f} GiB of which {d['free_bytes'] / gib:.2f} GiB is free. "
                             f"Including non-PyTorch memory, this process has {d['in_use_bytes'] / gib:.2f} GiB "
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
    df.insert(0, "ts", _ts(ctx.t0, df.pop("t").to_numpy(dtype=float)))
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
        pid = 2000 + int(_replica_rng(ctx, XID_SALT + 1, index).integers(0, 60000))
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
    df.insert(0, "ts", _ts(ctx.t0, df.pop("t").to_numpy(dtype=float)))
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
    app = np.asarray(r["app"])
    ok = np.asarray(r["status"]) == "ok"
    sel = np.nonzero((app == ctx.probe_app) & ok)[0]
    sel = sel[np.argsort(np.asarray(r["arrival_s"], dtype=float)[sel], kind="stable")]
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
    df.insert(0, "ts", _ts(ctx.t0, df.pop("t").to_numpy(dtype=float)))
    for c in ("replica", "prompt_id", "output_hash"):
        df[c] = df[c].astype("string")
    df["probe_id"] = df["probe_id"].astype(np.int64)
    df["batch_size"] = df["batch_size"].astype(np.int64)
    return df
