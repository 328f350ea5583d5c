"""GPU and host series: what dcgm-exporter and node_exporter would scrape for every replica (clocks, power,
temperature, utilisation, framebuffer, ECC/NVLink/Xid counters, host CPU), read off the run's samples and
hardware events through telemetry_gen.gpu_state and node_metrics. The metrics table appends these frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from engine_model.memory import MemoryPlan, plan_memory
from engine_model.profiles import get_model
from engine_model.results import SimResult
from telemetry_gen import gpu_state as G
from telemetry_gen.context import MIB, EngineSetup, TelemetryContext
from telemetry_gen.node_metrics import node_series, per_window

TUPLE_SAMPLES = ("itl_counts", "lora_running", "lora_waiting")  # sample fields holding a tuple per scrape

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


WINDOW_TAIL_SALT = 0x7A11
"""Salt of the draws past the incident's window in a mitigation run (see _WindowRng)."""


class _WindowRng:
    """The draws of a run longer than its incident's window (a mitigation run, telemetry_gen.mitigation),
    made so that the window's part is what a build of the window alone draws: a draw as long as the series
    (`n` scrapes) takes its first `n0` values (the scrapes within the window) from `main`, in the same order
    as that build, and the rest from `tail`; every other draw comes from `main`. Only the methods the
    hardware series call are offered."""

    def __init__(self, main: np.random.Generator, tail: np.random.Generator, n: int, n0: int) -> None:
        self.main, self.tail, self.n, self.n0 = main, tail, n, n0

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: int | None = None) -> Any:
        if size == self.n:
            rest = self.tail.normal(loc, scale, self.n - self.n0)
            return np.concatenate([self.main.normal(loc, scale, self.n0), rest])
        return self.main.normal(loc, scale, size)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: int | None = None) -> Any:
        if size == self.n:
            rest = self.tail.uniform(low, high, self.n - self.n0)
            return np.concatenate([self.main.uniform(low, high, self.n0), rest])
        return self.main.uniform(low, high, size)

    def poisson(self, lam: Any = 1.0, size: int | None = None) -> Any:
        arr = np.asarray(lam)
        if size is None and arr.ndim == 1 and len(arr) == self.n:
            return np.concatenate([self.main.poisson(arr[: self.n0]), self.tail.poisson(arr[self.n0:])])
        return self.main.poisson(lam, size)

    def integers(self, low: int, high: int | None = None, size: int | None = None) -> Any:
        return self.main.integers(low, high, size)


def replica_rng(ctx: TelemetryContext, salt: int, index: int, t: np.ndarray | None = None) -> np.random.Generator:
    """The replica's generator for one kind of series. When the run outlasts the incident's window
    (`ctx.window_s`) and `t` (the replica's scrape times) goes past it, draws over the series are split at the
    window's end so the window's values are the window-only build's (_WindowRng)."""
    main = np.random.default_rng(np.random.SeedSequence([ctx.seed % (1 << 63), salt, index]))
    if ctx.window_s is None or t is None or not len(t) or float(t[-1]) <= ctx.window_s + 1e-9:
        return main
    tail = np.random.default_rng(np.random.SeedSequence([ctx.seed % (1 << 63), salt, index, WINDOW_TAIL_SALT]))
    n0 = int(np.count_nonzero(t <= ctx.window_s + 1e-9))
    return cast(np.random.Generator, _WindowRng(main, tail, len(t), n0))


def _replica_errors(run: SimResult, ctx: TelemetryContext, s: dict[str, np.ndarray], name: str, index: int,
                    rows: np.ndarray, shares: np.ndarray, changes: dict[str, list[tuple[float, float]]]
                    ) -> tuple[G.ErrorTrace, bool]:
    gpu = ctx.gpu_of(name)
    nvlink = gpu.link.name.startswith("nvlink")
    xids = [(c["t"], int(c.get("xid", 79))) for c in _crashes(run, "xid").get(name, [])]
    errors = G.error_trace(s["t"][rows].astype(float), shares[:, 0], shares[:, 2], changes.get("hbm_bw_factor", []),
                           changes.get("link_factor", []), nvlink, ctx.gpus_of(name) > 1, xids,
                           replica_rng(ctx, XID_SALT, index, s["t"][rows].astype(float)))
    return errors, nvlink


def _replica_rows(s: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    rep = s["replica"]
    return [(str(name), np.nonzero(rep == name)[0]) for name in sorted(np.unique(rep).tolist())]


def _samples(run: SimResult) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in run.samples.items() if k not in TUPLE_SAMPLES}


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
        trace = G.gpu_trace(t, shares, clock, gpu, throttles, replica_rng(ctx, GPU_SALT, index, t))
        errors, nvlink = _replica_errors(run, ctx, s, name, index, rows, shares, mine)
        up = s["up"][rows].astype(bool)
        queued = (s["running"][rows] + s["waiting"][rows]) > 0
        node = node_series(
            t, np.where(queued, 1.0, np.clip(shares[:, 0], 0.0, 1.0)),
            per_window(t, s["requests_finished_total"][rows]), per_window(t, s["generation_tokens_total"][rows]),
            G.window_mean(t, mine.get("host_overhead_factor", [])), up, ctx.gpus_of(name),
            replica_rng(ctx, NODE_SALT, index, t),
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


def dcgm_frames(run: SimResult, ctx: TelemetryContext) -> list[pd.DataFrame]:
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
