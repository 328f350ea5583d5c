"""Telemetry a GPU engineer would believe, on every library incident (seed 0, the databases the proof tests
build, from the shared cache): GPU activity within its scrape window, temperature moving no faster than a
heatsink allows, clocks idling down and saying why they are low, framebuffer gauges that agree with an OOM's
message, error counters only where hardware failed, host CPU counters that add up, and the debrief's latency
wording following the data."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from engine_model.memory import largest_step_activation_bytes
from engine_model.profiles import GPUProfile, get_gpu
from game.rules.debrief import (
    FLAT_WITHIN,
    MIN_APP_REQUESTS,
    LatencyShift,
    change_phrase,
    latency_lines,
    latency_shifts,
    truth_database,
)
from incidents.loader import find_incident, iter_library, load_incident, load_variant
from incidents.spec import Incident, ReplicaScope, replica_index
from telemetry_gen import gpu_state as G
from telemetry_gen import tables as T
from telemetry_gen.cache import ensure_database
from telemetry_gen.node_metrics import VCPUS_PER_GPU
from telemetry_gen.proving.worlds import build_world
from telemetry_gen.runner import build_telemetry, engine_setups, fleet_spec

pytestmark = pytest.mark.slow  # simulates fixture incidents and checks table invariants

LIBRARY = iter_library()
IDS = [p.stem for p in LIBRARY]

MAX_TEMP_RATE_C_PER_S = 1.5
"""Bound on how fast a heatsinked GPU's temperature moves, averaged over a scrape: heating is at most all of
its power into its heat capacity (TDP / C = (full-load rise) / tau ~ 48 C / 45 s ~ 1.1 C/s), cooling at most
(T - inlet) / tau ~ 59 C / 45 s ~ 1.3 C/s from the slowdown temperature. 1.5 C/s leaves room for the model's
constants; a real board's bulk temperature (not a hot spot) moves on that scale once its die has settled."""
TEMP_READING_SLACK_C = 2.0
"""Two integer readings with 0.3 C sensor noise each can differ by this much more than the bulk moved."""


@pytest.fixture(scope="module", autouse=True)
def _cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield library_cache


@dataclass(frozen=True)
class Built:
    incident: Incident
    metrics: pd.DataFrame  # DCGM and node series, with t (seconds from the window start)
    logs: pd.DataFrame
    gpus: dict[str, GPUProfile]
    db: Path


@cache
def built(stem: str) -> Built:
    incident, _ = load_variant(find_incident(stem), 0)
    info = ensure_database(incident, 0)
    con = duckdb.connect(info.path, read_only=True)
    try:
        m = con.execute("SELECT ts, replica, name, value FROM metrics "
                        "WHERE name LIKE 'DCGM_%' OR name LIKE 'node_%'").df()
        logs = con.execute("SELECT ts, replica, level, component, message FROM logs").df()
    finally:
        con.close()
    start = pd.Timestamp(incident.window.start.replace(tzinfo=None))
    m["t"] = (m.ts - start).dt.total_seconds()
    logs["t"] = (logs.ts - start).dt.total_seconds()
    gpus = {name: setup.gpu for name, setup in engine_setups(fleet_spec(incident)).items()}
    return Built(incident, m, logs, gpus, Path(info.path))


def wide(b: Built) -> pd.DataFrame:
    """One row per (replica, scrape), one column per series."""
    return b.metrics.pivot_table(index=["replica", "t"], columns="name", values="value").reset_index()


def boost(b: Built, replica: str) -> float:
    return b.gpus[replica].sm_clock_mhz


def truth_scope(inc: Incident, kind: str) -> set[str]:
    """Replicas a true fault of `kind` is scoped to (every primary replica for a fleet-wide one)."""
    out: set[str] = set()
    for f in inc.faults:
        if f.kind != kind:
            continue
        if isinstance(f.scope, ReplicaScope):
            out.update(f"vllm-{replica_index(r)}" for r in f.scope.replicas)
        else:
            out.update(f"vllm-{i}" for i in range(inc.fleet.replicas))
    return out


# ---------------------------------------------------------------- activity


@pytest.mark.parametrize("stem", IDS)
def test_gpu_activity_stays_within_its_window(stem: str) -> None:
    """The stored activity series are not clipped: a step's time is spread over the windows it ran in."""
    w = wide(built(stem))
    busy = w["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert busy.between(0.0, 1.0005).all(), busy.max()
    assert w["DCGM_FI_DEV_GPU_UTIL"].between(0, 100).all()
    assert busy.mean() > 0.05  # the fleet did work
    # a pipe is active only while the GPU is
    assert (w["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] <= busy + 0.002).all()
    assert (w["DCGM_FI_PROF_DRAM_ACTIVE"] <= busy + 0.002).all()


def test_utilisation_before_any_rounding_is_within_each_window() -> None:
    """replica_hardware's values, before the metrics table rounds them: at most the window, and every second
    of device time the engine counted is in some window."""
    inc = load_incident(find_incident("one-slow-replica"), 0)
    tel = build_telemetry(inc, 0)
    ctx = T.TelemetryContext(t0=inc.window.start, gpu=get_gpu(inc.fleet.gpu), seed=0,
                             engines=engine_setups(fleet_spec(inc)))
    s = tel.run.samples
    for name, hw in T.replica_hardware(tel.run, ctx).items():
        assert hw.gpu.busy.max() <= 1.0 + 1e-9 and hw.gpu.busy.min() >= 0.0
        assert np.all(hw.gpu.tensor <= hw.gpu.busy + 1e-9)
        counted = max(v for r, v in zip(s["replica"], s["busy_s_total"], strict=True) if r == name)
        assert np.sum(hw.gpu.busy[1:] * np.diff(hw.t)) == pytest.approx(counted, rel=1e-9)
        # no leak here: the engine holds the same memory all along, and the memory plan accounts for all of it
        assert len(np.unique(hw.fb_used_bytes)) == 1
        assert 0.8 * hw.fb_total_bytes[0] < hw.fb_used_bytes[0] < hw.fb_total_bytes[0]


# ---------------------------------------------------------------- temperature and clocks


@pytest.mark.parametrize("stem", IDS)
def test_temperature_moves_at_a_physical_rate(stem: str) -> None:
    b = built(stem)
    for replica, g in wide(b).groupby("replica"):
        spec = G.thermal_spec(b.gpus[replica])
        temp, t = g["DCGM_FI_DEV_GPU_TEMP"].to_numpy(), g["t"].to_numpy()
        step = np.abs(np.diff(temp)) - TEMP_READING_SLACK_C
        assert np.all(step <= MAX_TEMP_RATE_C_PER_S * np.diff(t)), (replica, np.max(step / np.diff(t)))
        assert temp.min() >= spec.inlet_c - 2 and temp.max() <= spec.slowdown_c + 2


@pytest.mark.parametrize("stem", IDS)
def test_clocks_idle_down_and_a_low_clock_says_why(stem: str) -> None:
    b = built(stem)
    w = wide(b)
    reasons = w["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"].astype(np.int64)
    full = w.replica.map({r: boost(b, r) for r in w.replica.unique()})
    idle = w["DCGM_FI_DEV_GPU_UTIL"] == 0
    assert (w.loc[idle, "DCGM_FI_DEV_SM_CLOCK"] < 0.5 * full[idle]).all()
    assert ((reasons[idle] & G.REASON_GPU_IDLE) > 0).all()
    working = w["DCGM_FI_DEV_GPU_UTIL"] >= 50
    free = working & (reasons == 0)
    assert (w.loc[free, "DCGM_FI_DEV_SM_CLOCK"] == full[free]).all()  # nothing holds it back: boost
    slow = working & (w["DCGM_FI_DEV_SM_CLOCK"] < 0.99 * full)
    assert ((reasons[slow] & (G.THERMAL_REASONS | G.REASON_SW_POWER_CAP)) > 0).all()
    hot = (reasons & G.THERMAL_REASONS) > 0
    limits = w.replica.map({r: G.thermal_spec(b.gpus[r]).max_operating_c for r in w.replica.unique()})
    assert (w.loc[hot, "DCGM_FI_DEV_GPU_TEMP"] >= limits[hot] - 3).all()  # thermally throttled means hot


@pytest.mark.parametrize("stem", IDS)
def test_a_thermally_throttled_gpu_is_hotter_than_its_peers(stem: str) -> None:
    w = wide(built(stem))
    hot = (w["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"].astype(np.int64) & G.THERMAL_REASONS) > 0
    for replica in w.loc[hot, "replica"].unique():
        when = set(w.loc[hot & (w.replica == replica), "t"])
        same = w[w.t.isin(when)]
        mine = same[same.replica == replica]["DCGM_FI_DEV_GPU_TEMP"].mean()
        peers = same[same.replica != replica].groupby("replica")["DCGM_FI_DEV_GPU_TEMP"].mean()
        assert (mine > peers + 10).all(), (replica, mine, peers.to_dict())


# ---------------------------------------------------------------- memory at an OOM

_SIZE = r"([\d.]+) (bytes|KiB|MiB|GiB)"
_OOM = re.compile(rf"Tried to allocate {_SIZE}\. GPU 0 has a total capacity of {_SIZE} of which {_SIZE} is free\. "
                  rf".*this process has {_SIZE}")
_MIB = {"bytes": 1 / (1 << 20), "KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0}


@pytest.mark.parametrize("stem", IDS)
def test_framebuffer_at_an_oom_agrees_with_the_message(stem: str) -> None:
    b = built(stem)
    w = wide(b)
    fb = (w["DCGM_FI_DEV_FB_USED"] + w["DCGM_FI_DEV_FB_FREE"]).groupby(w.replica)
    assert ((fb.max() - fb.min()) <= 1).all()  # used + free is the device, whole MiB apart for rounding
    setups = {name: setup for name, setup in engine_setups(fleet_spec(b.incident)).items()}
    for row in b.logs[b.logs.message.str.contains("OutOfMemoryError")].itertuples():
        parts = _OOM.search(row.message).groups()
        tried, total, free, in_use = (float(parts[i]) * _MIB[parts[i + 1]] for i in (0, 2, 4, 6))  # MiB
        setup = setups[row.replica]
        # the step's tensors allocated before the one that failed: at most its largest workspace less that one
        before = largest_step_activation_bytes(setup.model, setup.config) / (1 << 20) - tried
        g = w[(w.replica == row.replica) & (w.t <= row.t)].sort_values("t")
        last = g.iloc[-1]
        # the leak grows per request served, and requests finish in bursts at a peak: the bound is the
        # fastest it shrank in any scrape of the last minute, not in the last scrape alone
        leak_per_scrape = max(0.0, float(-g["DCGM_FI_DEV_FB_FREE"].iloc[-7:].diff().min()))
        # free memory only shrinks towards the OOM, and no faster than it just did (rounding: 0.01 GiB, 1 MiB)
        assert free <= last["DCGM_FI_DEV_FB_FREE"] + 12
        assert last["DCGM_FI_DEV_FB_FREE"] - free <= 2 * leak_per_scrape + max(0.0, before) + 12, (row.replica, row.t)
        assert free < tried  # the allocation failed: less was free than it asked for
        assert last["DCGM_FI_DEV_FB_FREE"] > 0
        assert abs(last["DCGM_FI_DEV_FB_USED"] + last["DCGM_FI_DEV_FB_FREE"] - total) <= 12
        assert in_use >= last["DCGM_FI_DEV_FB_USED"] - 12


# ---------------------------------------------------------------- hardware errors

_COUNTERS = {
    "hbm_degradation": ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
    "link_degradation": ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                         "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
}
_XIDS = {"hbm_degradation": 63, "link_degradation": 74}


@pytest.mark.parametrize("stem", IDS)
def test_failing_hardware_leaves_its_counters_and_nothing_else_does(stem: str) -> None:
    b = built(stem)
    w = wide(b)
    kernel = b.logs[b.logs.component == "kernel"]
    for kind, names in _COUNTERS.items():
        failed = truth_scope(b.incident, kind)
        present = [n for n in names if n in w.columns]
        counts = w.groupby("replica")[present].max().sum(axis=1)
        assert set(counts[counts > 0].index) == failed, (kind, counts.to_dict())
        xid = kernel[kernel.message.str.contains(f"): {_XIDS[kind]}, ", regex=False)]
        assert set(xid.replica) == failed
    # every Xid the driver logged is on the gauge from then on
    for row in kernel.itertuples():
        after = w[(w.replica == row.replica) & (w.t >= row.t)]
        code = int(re.search(r"\): (\d+),", row.message).group(1))
        assert (after["DCGM_FI_DEV_XID_ERRORS"] > 0).all() and code in set(after["DCGM_FI_DEV_XID_ERRORS"])


# ---------------------------------------------------------------- host


@pytest.mark.parametrize("stem", IDS)
def test_host_cpu_time_adds_up_to_the_nodes_cpus(stem: str) -> None:
    b = built(stem)
    setups = engine_setups(fleet_spec(b.incident))
    cpu = b.metrics[b.metrics.name.str.startswith("node_cpu_seconds_total")]
    for replica, g in cpu.groupby("replica"):
        total = g.groupby("t").value.sum().sort_index()
        rate = np.diff(total.to_numpy()) / np.diff(total.index.to_numpy())
        cfg = setups[replica].config
        vcpus = VCPUS_PER_GPU * cfg.tensor_parallel_size * cfg.pipeline_parallel_size
        assert rate == pytest.approx(np.full(len(rate), vcpus), abs=0.01)


def test_host_contention_shows_on_the_node() -> None:
    inc, _ = load_variant(find_incident("third-of-streams-crawl"), 0)
    path = build_world(inc, 0, "host-contention").path
    world = next(h for h in inc.hypotheses if h.id == "host-contention").world
    fault = world[0]
    slow = f"vllm-{replica_index(fault.scope.replicas[0])}"
    con = duckdb.connect(path, read_only=True)
    try:
        m = con.execute("SELECT replica, epoch(ts) - epoch(min(ts) OVER ()) AS t, name, value FROM metrics "
                        "WHERE name IN ('node_load1', 'node_pressure_cpu_waiting_seconds_total', "
                        "'DCGM_FI_DEV_GPU_UTIL')").df()
    finally:
        con.close()
    late = m[m.t > fault.at_s + 120]
    load = late[late.name == "node_load1"].groupby("replica").value.mean()
    vcpus = VCPUS_PER_GPU * inc.fleet.tensor_parallel
    assert load[slow] > 2 * vcpus and (load.drop(slow) < 0.25 * vcpus).all()
    psi = late[late.name == "node_pressure_cpu_waiting_seconds_total"].sort_values("t").groupby("replica").value
    waiting = (psi.last() - psi.first()) / (late.t.max() - late.t.min())
    assert waiting[slow] > 0.5 and (waiting.drop(slow) < 0.05).all()
    util = late[late.name == "DCGM_FI_DEV_GPU_UTIL"].groupby("replica").value.mean()
    assert util[slow] < util.drop(slow).min() - 10  # the GPU waits on the host


def test_the_library_exercises_every_case() -> None:
    """The checks above are not vacuous: some incident idles a GPU, throttles one, OOMs, degrades HBM and a
    link."""
    seen: set[str] = set()
    for stem in IDS:
        b = built(stem)
        w = wide(b)
        reasons = w["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"].astype(np.int64)
        seen |= {"idle"} if (w["DCGM_FI_DEV_GPU_UTIL"] == 0).any() else set()
        seen |= {"thermal"} if ((reasons & G.THERMAL_REASONS) > 0).any() else set()
        seen |= {"oom"} if b.logs.message.str.contains("OutOfMemoryError").any() else set()
        seen |= {"hbm"} if truth_scope(b.incident, "hbm_degradation") else set()
        seen |= {"link"} if truth_scope(b.incident, "link_degradation") else set()
    assert seen == {"idle", "thermal", "oom", "hbm", "link"}


# ---------------------------------------------------------------- the debrief's wording


def test_change_wording_calls_only_small_changes_flat() -> None:
    assert change_phrase(1.0, 1.05) == "flat (+5%)"
    assert change_phrase(1.0, 1.0 + FLAT_WITHIN) == "flat (+10%)"
    assert change_phrase(1.0, 1.4) == "rose 40%"
    assert change_phrase(1.0, 0.75) == "fell 25%"
    assert change_phrase(1.0, 3.9) == "rose 3.9x"
    assert change_phrase(0.0, 1.0) == "not measurable"
    assert change_phrase(1.0, math.nan) == "not measurable"


def _measured(b: Built) -> tuple[list[str], list[LatencyShift]]:
    """The debrief's latency shifts on a built incident's database (the replicas, the shifts)."""
    con = duckdb.connect(str(b.db), read_only=True)
    try:
        return latency_shifts(con, b.incident)
    finally:
        con.close()


def test_the_debrief_does_not_call_a_40_percent_slower_decode_flat() -> None:
    """ttft-tripled-after-deploy: prefill grows about fourfold, and time per output token rises by more than
    a third; the measured wording says so."""
    b = built("ttft-tripled-after-deploy")
    replicas, shifts = _measured(b)
    assert replicas == []  # a fleet-wide fault
    by = {s.column: s for s in shifts if not s.app}
    assert by["tpot_s"].after / by["tpot_s"].before > 1.25
    assert by["tpot_s"].phrase.startswith("rose")
    assert by["prefill_s"].phrase.startswith("rose") and by["prefill_s"].phrase.endswith("x")


def test_the_debrief_measures_the_database_the_session_played() -> None:
    b = built("ttft-tripled-after-deploy")
    digest = ensure_database(b.incident, 0).digest
    found = truth_database(b.incident, [{"kind": "start", "data": {"telemetry_digest": digest}}])
    # (a cache may hold several builds of one telemetry, made by code versions that changed nothing in it)
    assert found is not None and json.loads(found.with_suffix(".json").read_text())["digest"] == digest
    assert truth_database(b.incident, [{"kind": "start", "data": {"telemetry_digest": None}}]) is None
    lines = latency_lines(b.incident, *_measured(b))
    tpot = next(line for line in lines if "tpot_s" in line)
    assert "| rose " in tpot and "flat" not in tpot
    assert any("flat only" in line and f"{FLAT_WITHIN:.0%}" in line for line in lines)  # the threshold is stated


def test_the_debrief_shows_each_app_where_a_pooled_percentile_hides_one() -> None:
    """tuned-assistant-starts-slowly: only the assistant's requests wait (its adapter), the chat app's do not;
    the pooled p90 TTFT mixes the two. The debrief gives each app its own rows, and they say so."""
    b = built("tuned-assistant-starts-slowly")
    replicas, shifts = _measured(b)
    ttft = {s.app: s for s in shifts if s.column == "ttft_s"}
    assert set(ttft) == {"", "assistant", "chat"}
    assert ttft["chat"].phrase.startswith("flat")
    assert ttft["assistant"].after / ttft["assistant"].before > 2 * ttft[""].after / ttft[""].before
    lines = latency_lines(b.incident, replicas, shifts)
    assert "| Measure | App | Before | After | Change |" in lines
    chat = [line for line in lines if line.startswith("| | chat |")]
    assert len(chat) == 5 and "flat" in chat[-1]  # the measures in order, TTFT last


def _requests_db(counts: dict[str, tuple[int, int]], at: float, start: object) -> duckdb.DuckDBPyConnection:
    """An in-memory requests table: per app, (before, after) finished requests, the after ones twice as slow."""
    con = duckdb.connect()
    con.execute("CREATE TABLE requests (ts TIMESTAMP, replica VARCHAR, app VARCHAR, status VARCHAR, "
                "api_server_s DOUBLE, queue_s DOUBLE, prefill_s DOUBLE, tpot_s DOUBLE, ttft_s DOUBLE)")
    rows = []
    for app, (n_before, n_after) in counts.items():
        for i in range(n_before + n_after):
            after = i >= n_before
            t = at + 1 + i if after else at - 1 - i
            v = 2.0 if after else 1.0
            rows.append((pd.Timestamp(start) + pd.Timedelta(seconds=t), "vllm-0", app, "ok", v, v, v, v, v))
    con.executemany("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return con


def test_an_app_gets_rows_only_with_enough_requests_on_both_sides() -> None:
    incident, _ = load_variant(find_incident("ttft-tripled-after-deploy"), 0)
    at = min(f.at_s for f in incident.faults)
    start = incident.window.start.replace(tzinfo=None)
    n = MIN_APP_REQUESTS
    con = _requests_db({"a": (n, n), "b": (n, n), "few": (n - 1, 5 * n)}, at, start)
    apps = {s.app for s in latency_shifts(con, incident)[1]}
    assert apps == {"", "a", "b"}
    # one app with enough requests: its rows would repeat the pooled ones, so there are none
    con = _requests_db({"a": (n, n), "few": (n, n - 1)}, at, start)
    shifts = latency_shifts(con, incident)[1]
    assert {s.app for s in shifts} == {""} and len(shifts) == 5
    assert all(s.phrase == "rose 2.0x" for s in shifts)
    lines = latency_lines(incident, [], shifts)
    assert "| Measure | Before | After | Change |" in lines
