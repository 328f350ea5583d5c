"""The GPU and host state models behind the DCGM and node_exporter series (telemetry_gen.gpu_state,
telemetry_gen.node_metrics): activity per scrape window, clocks, power, the thermal state, the error
counters, the framebuffer at an OOM, host CPU under contention."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine_model.profiles import get_gpu
from telemetry_gen import gpu_state as G
from telemetry_gen.node_metrics import VCPUS_PER_GPU, first_order, node_series

H100 = get_gpu("H100-SXM")
L40S = get_gpu("L40S")
SPEC = G.thermal_spec(H100)


def _grid(duration: float, step: float = 10.0) -> np.ndarray:
    return np.arange(0.0, duration + step / 2, step)


# ---------------------------------------------------------------- activity per window


def test_a_step_credited_at_its_end_is_spread_back_over_the_windows_it_ran_in() -> None:
    t = _grid(40.0)
    # the GPU ran flat out from t=5 to t=35; the engine credited 25 s at 30 (a long decode run) and 5 s at 35
    busy = np.array([0.0, 0.0, 0.0, 25.0, 30.0])
    shares = G.window_shares(t, np.stack([busy, 0.5 * busy, 0.2 * busy], axis=1))
    assert shares[1:, 0] == pytest.approx([0.5, 1.0, 1.0, 0.5])  # the latest schedule the step ends allow
    assert shares[:, 0].max() <= 1.0
    assert np.sum(shares[1:, 0] * 10.0) == pytest.approx(30.0)  # nothing lost
    # parts move with the busy time they belong to
    assert shares[1:, 1] == pytest.approx(0.5 * shares[1:, 0])
    assert shares[1:, 2] == pytest.approx(0.2 * shares[1:, 0])
    assert shares[0] == pytest.approx(shares[1])


def test_windows_within_their_length_are_left_alone() -> None:
    t = _grid(30.0)
    busy = np.cumsum([0.0, 9.0, 4.0, 10.0])
    shares = G.window_shares(t, busy[:, None])
    assert shares[1:, 0] == pytest.approx([0.9, 0.4, 1.0])


def test_window_mean_of_a_factor_that_changes_mid_window() -> None:
    t = _grid(30.0)
    mean = G.window_mean(t, [(15.0, 0.4), (25.0, 1.0)])
    assert mean == pytest.approx([1.0, 1.0, 0.7, 0.7])
    assert G.window_mean(t, []) == pytest.approx(np.ones(4))
    assert G.window_mean(t, [(0.0, 0.5)])[0] == pytest.approx(0.5)


# ---------------------------------------------------------------- clocks and power


def test_clock_idles_down_when_the_gpu_idles_and_holds_boost_while_it_works() -> None:
    busy = np.array([0.0, 0.01, 0.04, 0.3, 0.97])
    clock = G.sm_clock_mhz(H100, SPEC, busy, np.ones(5))
    assert clock[0] == SPEC.idle_sm_clock_mhz < H100.sm_clock_mhz
    assert np.all(np.diff(clock) >= 0)
    assert clock[3:] == pytest.approx(H100.sm_clock_mhz)
    throttled = G.sm_clock_mhz(H100, SPEC, np.array([0.9]), np.array([0.4]))
    assert throttled == pytest.approx(0.4 * H100.sm_clock_mhz)


def test_power_grows_with_work_and_clock_and_stays_below_tdp() -> None:
    idle = G.power_w(H100, np.zeros(1), np.zeros(1), np.zeros(1), np.ones(1))
    decode = G.power_w(H100, np.array([0.97]), np.array([0.15]), np.array([0.7]), np.ones(1))
    prefill = G.power_w(H100, np.array([1.0]), np.array([0.7]), np.array([0.3]), np.ones(1))
    slow = G.power_w(H100, np.array([0.97]), np.array([0.15]), np.array([0.7]), np.array([0.4]))
    assert idle == pytest.approx(H100.idle_w)
    assert 400 < decode[0] < prefill[0] < H100.tdp_w
    # dynamic power goes as f * V**2: a clock at 40% keeps well under half the SM power, HBM power stays
    assert H100.idle_w < slow[0] < 0.6 * decode[0]


# ---------------------------------------------------------------- thermal state


def test_temperature_follows_power_with_the_heatsink_time_constant() -> None:
    t = _grid(600.0, 1.0)
    power = np.where(t >= 100.0, 600.0, 100.0)
    temp = G.temperature_c(t, power, np.ones(len(t)), H100, SPEC)
    r0 = SPEC.r0(H100)
    assert temp[0] == pytest.approx(SPEC.inlet_c + r0 * 100.0)
    assert temp[-1] == pytest.approx(SPEC.inlet_c + r0 * 600.0, abs=0.1)
    # one time constant after the step: 63% of the way
    rise = (temp[100 + int(SPEC.tau_s)] - temp[99]) / (r0 * 500.0)
    assert rise == pytest.approx(1.0 - math.exp(-1.0), abs=0.03)
    # never faster than all the power into the heat capacity
    assert np.max(np.diff(temp)) <= 600.0 / SPEC.capacity(H100) + 1e-9


def _throttled_run(cause: str) -> tuple[np.ndarray, G.GpuTrace, G.GpuTrace]:
    t = _grid(1800.0)
    busy = np.full(len(t), 0.95)
    shares = np.stack([busy, np.full(len(t), 0.15), np.full(len(t), 0.7)], axis=1)
    clock = G.window_mean(t, [(900.0, 0.4)])
    throttle = G.Throttle(900.0, math.inf, 0.4, cause)
    hot = G.gpu_trace(t, shares, clock, H100, [throttle])
    peer = G.gpu_trace(t, shares, np.ones(len(t)), H100)
    return t, hot, peer


def test_a_thermally_throttled_gpu_got_hot_first_and_stays_at_its_limit() -> None:
    t, hot, peer = _throttled_run("thermal")
    before, after = t < 600.0, t > 900.0
    assert hot.temp_c[before] == pytest.approx(peer.temp_c[before])
    # the cooler failed before the clock dropped: the GPU warmed to its slowdown temperature by then
    at = int(np.searchsorted(t, 900.0))
    assert hot.temp_c[at] == pytest.approx(SPEC.slowdown_c, abs=0.5)
    assert hot.temp_c[at - 6] < SPEC.slowdown_c - 3  # and it took minutes, not one scrape
    assert np.all(hot.temp_c[after] >= SPEC.slowdown_c - 1.0)
    assert np.all(hot.temp_c[after] <= SPEC.slowdown_c + 1e-6)
    assert hot.temp_c[after].mean() > peer.temp_c[after].mean() + 15  # hotter than its peer, despite less power
    assert hot.power_w[after].mean() < peer.power_w[after].mean()
    # it says why: a hardware slowdown (clock halved or lower) for heat
    assert np.all(hot.reasons[after] == G.REASON_HW_SLOWDOWN | G.REASON_HW_THERMAL)
    assert np.all(hot.reasons[before] == 0) and np.all(peer.reasons == 0)
    assert np.max(np.abs(np.diff(hot.temp_c))) <= 10.0 * H100.tdp_w / SPEC.capacity(H100)


def test_a_mild_thermal_throttle_is_the_software_slowdown_at_max_operating_temperature() -> None:
    t = _grid(1200.0)
    shares = np.stack([np.full(len(t), 0.9), np.full(len(t), 0.2), np.full(len(t), 0.6)], axis=1)
    th = G.Throttle(600.0, math.inf, 0.8, "thermal")
    trace = G.gpu_trace(t, shares, G.window_mean(t, [(600.0, 0.8)]), H100, [th])
    late = t > 700.0
    assert np.all(trace.reasons[late] == G.REASON_SW_THERMAL)
    assert trace.temp_c[late] == pytest.approx(SPEC.max_operating_c, abs=1.0)


def test_a_power_capped_gpu_runs_cooler_and_says_power() -> None:
    t, capped, peer = _throttled_run("power")
    after = t > 900.0
    assert np.all(capped.reasons[after] == G.REASON_SW_POWER_CAP)
    assert capped.temp_c[after][-1] < peer.temp_c[after][-1] - 5
    assert capped.temp_c[t < 900.0] == pytest.approx(peer.temp_c[t < 900.0])


def test_the_throttle_ends_and_the_gpu_cools_back() -> None:
    t = _grid(1800.0)
    shares = np.stack([np.full(len(t), 0.95), np.full(len(t), 0.15), np.full(len(t), 0.7)], axis=1)
    th = G.Throttle(600.0, 1200.0, 0.4, "thermal")
    trace = G.gpu_trace(t, shares, G.window_mean(t, [(600.0, 0.4), (1200.0, 1.0)]), H100, [th])
    peer = G.gpu_trace(t, shares, np.ones(len(t)), H100)
    assert trace.temp_c[-1] == pytest.approx(peer.temp_c[-1], abs=0.5)
    assert np.all(trace.reasons[t > 1210.0] == 0)


def test_an_idle_gpu_reports_gpu_idle() -> None:
    t = _grid(100.0)
    shares = np.zeros((len(t), 3))
    trace = G.gpu_trace(t, shares, np.ones(len(t)), H100)
    assert np.all(trace.reasons == G.REASON_GPU_IDLE)
    assert np.all(trace.sm_clock_mhz == SPEC.idle_sm_clock_mhz)
    assert trace.temp_c[-1] < 40.0


def test_throttles_from_clock_changes() -> None:
    got = G.throttles_from([(100.0, 0.5), (300.0, 1.0), (500.0, 0.7)], "power")
    assert got == [G.Throttle(100.0, 300.0, 0.5, "power"), G.Throttle(500.0, math.inf, 0.7, "power")]


# ---------------------------------------------------------------- framebuffer


def test_framebuffer_at_an_oom_matches_the_message() -> None:
    gib = 1024.0**3
    total, held, limit = 80 * gib, 79.5 * gib, 6.5 * gib
    t = _grid(100.0)
    leak = 0.01 * gib * t  # 10 MiB/s
    used = np.minimum(held + leak, total)  # the engine's own figure, capped at the device from t = 50 s
    up = t < 95.0
    oom = (94.0, 0.94 * gib)  # the OOM's leaked bytes
    args = (np.where(up, used, 0.0), np.full(len(t), total), np.full(len(t), held), np.full(len(t), limit))
    free = total - G.fb_used_bytes(t, up, *args, [oom])
    # exact where the engine's figure was not capped, interpolated towards the OOM where it was
    assert free[up] == pytest.approx(limit - leak[up], rel=1e-9)
    assert free[-1] == total  # the process is gone
    # with no OOM to aim at, the last rate carries on
    free = total - G.fb_used_bytes(t, up, *args, [])
    assert free[up] == pytest.approx(limit - leak[up], rel=1e-9)


# ---------------------------------------------------------------- error counters


def _errors(hbm: list[tuple[float, float]], link: list[tuple[float, float]], nvlink: bool = True) -> G.ErrorTrace:
    t = _grid(1200.0)
    busy = np.full(len(t), 0.9)
    return G.error_trace(t, busy, np.full(len(t), 0.6), hbm, link, nvlink, True, [], np.random.default_rng(1))


def test_a_healthy_gpu_counts_no_errors() -> None:
    e = _errors([], [])
    for counter in (e.sbe, e.dbe, e.remapped_correctable, e.nvlink_crc, e.nvlink_replay, e.pcie_replay, e.last_xid):
        assert not counter.any()
    assert e.xids == ()


def test_degraded_hbm_throws_correctable_errors_and_remaps_rows() -> None:
    t = _grid(1200.0)
    e = _errors([(300.0, 0.5)], [])
    assert not e.sbe[t <= 300.0].any()
    assert np.all(np.diff(e.sbe[t > 300.0]) > 0)  # counts every scrape while degraded
    assert not e.dbe.any()  # correctable only: the engine keeps running
    # one row remap soon after the onset, the next REMAP_EVERY_S / loss later (past this window)
    assert [x.code for x in e.xids] == [63]
    assert e.xids[0].t == pytest.approx(300.0 + G.REMAP_FIRST_S)
    assert "marked for remapping" in e.xids[0].detail
    assert e.remapped_correctable[-1] == 1 and e.last_xid[-1] == 63
    assert not e.remapped_correctable[t < 320.0].any()
    assert len(_errors([(0.0, 0.0)], []).xids) == 2  # full loss: every REMAP_EVERY_S


def test_a_degraded_link_logs_an_xid_74_and_counts_crc_errors_and_replays() -> None:
    t = _grid(1200.0)
    e = _errors([], [(600.0, 0.2)])
    assert [x.code for x in e.xids] == [74]
    assert not e.nvlink_crc[t <= 600.0].any() and e.nvlink_crc[-1] > 1000
    assert np.all(e.nvlink_replay >= e.nvlink_crc)
    pcie = _errors([], [(600.0, 0.2)], nvlink=False)
    assert pcie.xids == () and not pcie.nvlink_crc.any() and pcie.pcie_replay[-1] > 0


# ---------------------------------------------------------------- host


def test_load_average_is_a_one_minute_lag() -> None:
    t = _grid(600.0, 5.0)
    load = first_order(t, np.where(t > 0, 10.0, 0.0), 60.0, 0.0)
    assert load[12] == pytest.approx(10.0 * (1.0 - math.exp(-1.0)))


@pytest.mark.parametrize("contention", [1.0, 3.0])
def test_node_cpu_counters_add_up_to_the_cpus_and_contention_saturates_them(contention: float) -> None:
    t = _grid(600.0)
    n = len(t)
    factor = np.where(t > 300.0, contention, 1.0)
    series = node_series(t, np.full(n, 0.95), np.full(n, 5.0), np.full(n, 800.0), factor, np.ones(n, bool), 2,
                         np.random.default_rng(3))
    vcpus = 2 * VCPUS_PER_GPU
    modes = [v for k, v in series.items() if k.startswith("node_cpu_seconds_total")]
    assert len(modes) == 4
    rates = np.diff(np.sum(modes, axis=0)) / 10.0
    assert rates == pytest.approx(np.full(n - 1, vcpus))
    idle = np.diff(series['node_cpu_seconds_total{mode="idle"}']) / 10.0
    psi = np.diff(series["node_pressure_cpu_waiting_seconds_total"]) / 10.0
    quiet = slice(5, 30)
    assert idle[quiet].mean() > 0.8 * vcpus and series["node_load1"][quiet].max() < 0.2 * vcpus
    assert psi[quiet].max() < 0.01
    if contention > 1.0:
        assert idle[-10:].max() < 0.01 * vcpus
        assert series["node_load1"][-1] > 2.0 * vcpus
        assert psi[-10:].min() > 0.5
