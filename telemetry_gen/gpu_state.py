"""The GPU behind a replica as dcgm-exporter sees it: activity per scrape window, SM clock, power, a thermal
state with inertia, the clock-event reasons, and the error counters a failing part leaves behind.

Everything is computed from what the simulation recorded: cumulative busy / tensor / memory seconds at each
scrape, and the hardware factors the engine ran with (from its `hardware` events, with their times). The one
input the engine does not model is why a clock was throttled: `thermal` (cooling failed, the GPU ran hot and
slowed itself down) or `power` (a lowered power limit capped it). Units: seconds, W, degrees C, MHz.

All functions are pure; arrays are one replica's scrapes in time order. Window k is (t[k-1], t[k]]; the
scrape at t[0] opens the run and reports what the first window shows (the fleet was serving before the
window opened; the simulation's empty start is an artefact, not an idle GPU).

Why one module of ~630 lines: activity, clocks, power and the thermal state feed one another scrape by
scrape (one model of one device, with its constants and their sources side by side); the error counters
are its smallest part and draw on the same activity shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine_model.profiles import GPUProfile

# ----- clock-event reasons ------------------------------------------------------------------------
# Bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS (DCGM field 112; DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before DCGM 3.3),
# which are NVML's nvmlClocksEventReasons (formerly nvmlClocksThrottleReasons) constants.
REASON_GPU_IDLE = 0x1
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8  # clocks cut by half or more; set with the specific HW reason
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
THERMAL_REASONS = REASON_SW_THERMAL | REASON_HW_THERMAL

HW_SLOWDOWN_CLOCK = 0.5
"""A throttle to this share of the boost clock or less is the hardware slowdown (NVML: "reducing the core
clocks by a factor of 2 or more"); a milder one is the driver's software thermal slowdown."""

# ----- activity and clocks ------------------------------------------------------------------------
CLOCK_HOLD_BUSY = 0.05
"""Busy share of a window above which the GPU holds its clocks up for the whole window. Decode steps come
milliseconds apart, far inside the driver's idle-down delay; only a GPU that works less than this reads
(partly) at its idle clock. Estimate."""

# Shares of the dynamic power (TDP - idle) at full activity: SMs issuing at all, tensor-core work, the HBM
# interface. Estimate, set so an H100 decoding draws ~450-500 W and a prefill-heavy one ~550 W of 700 W
# (public vLLM power traces put LLM serving at 60-90% of TDP), and nothing reaches TDP unthrottled.
POWER_BUSY_SHARE = 0.40
POWER_TENSOR_SHARE = 0.35
POWER_DRAM_SHARE = 0.20
VOLTAGE_FLOOR = 0.6
"""Core voltage at zero clock relative to boost voltage, on a straight V/f line (estimate). Dynamic power goes
as f * V**2 (CMOS switching power), so a clock at 40% of boost draws ~23% of the SM dynamic power."""


@dataclass(frozen=True)
class ThermalSpec:
    """Thermal and clock constants of one GPU model: degrees C, MHz, seconds.

    The thermal state is one lump: C dT/dt = P - (T - inlet_c) / R. With healthy cooling R = R0, set so the
    steady temperature at TDP is `full_load_c`, and the time constant R0 * C is `tau_s`."""

    idle_sm_clock_mhz: float
    max_operating_c: float  # software thermal slowdown holds the GPU here
    slowdown_c: float  # hardware slowdown (clocks halved or lower) engages here
    inlet_c: float = 30.0  # air reaching the heatsink (ASHRAE A1 allows 15-32 C; warm side of a hot aisle design)
    full_load_c: float = 78.0  # steady GPU temperature at TDP with healthy cooling (air-cooled HGX, typical 65-80)
    # Heatsink time constant: lumped estimate, ~1.5 kg of copper-equivalent heatsink (C ~ 600 J/K at
    # 385 J/(kg K)) times a sink-to-air resistance of ~0.07 K/W at datacentre airflow gives R * C ~ 40-45 s.
    tau_s: float = 45.0

    def r0(self, gpu: GPUProfile) -> float:
        """Healthy thermal resistance, K/W."""
        return (self.full_load_c - self.inlet_c) / gpu.tdp_w

    def capacity(self, gpu: GPUProfile) -> float:
        """Heat capacity, J/K."""
        return self.tau_s / self.r0(gpu)


# Thresholds: H100 product brief (max operating 87 C, slowdown 89 C, shutdown 92 C); an 8x A100 SXM4
# server's `nvidia-smi -q` (max operating 85 C, slowdown 89 C, shutdown 92 C). Idle SM clocks as nvidia-smi
# shows an idle GPU (A100 210 MHz, H100 345 MHz). L40S and B200 report thresholds as T.Limit margins; they
# take the H100 figures (estimate), and the L40S an A100-like idle clock.
_SPECS: dict[str, ThermalSpec] = {
    "A100-80GB": ThermalSpec(idle_sm_clock_mhz=210.0, max_operating_c=85.0, slowdown_c=89.0),
    "H100-SXM": ThermalSpec(idle_sm_clock_mhz=345.0, max_operating_c=87.0, slowdown_c=89.0),
    "H200": ThermalSpec(idle_sm_clock_mhz=345.0, max_operating_c=87.0, slowdown_c=89.0),
    "B200": ThermalSpec(idle_sm_clock_mhz=345.0, max_operating_c=87.0, slowdown_c=89.0),
    "L40S": ThermalSpec(idle_sm_clock_mhz=210.0, max_operating_c=87.0, slowdown_c=89.0),
}


def thermal_spec(gpu: GPUProfile) -> ThermalSpec:
    """The GPU's thermal constants (an unknown GPU: H100 thresholds, idle clock 15% of boost)."""
    spec = _SPECS.get(gpu.name)
    if spec is not None:
        return spec
    return ThermalSpec(idle_sm_clock_mhz=round(0.15 * gpu.sm_clock_mhz), max_operating_c=87.0, slowdown_c=89.0)


def window_shares(t: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Per-window shares of wall time (0..1) of cumulative device-time counters scraped at `t`.

    `totals` is (n, m): column 0 the busy seconds, the others parts of them (tensor, memory). The engine credits
    a step's time when the step ends, so a long step (a multi-step decode run) lands whole in the window it
    ends in. Its time is moved back into the windows it overlapped: whatever a window holds beyond its length
    goes to the window before, with its parts in proportion (the latest schedule the step ends allow). Totals
    are kept, no window exceeds 1, nothing is clipped. Row 0 repeats row 1 (see the module docstring)."""
    t = np.asarray(t, dtype=float)
    tot = np.asarray(totals, dtype=float).reshape(len(t), -1)
    n = len(t)
    out = np.zeros_like(tot)
    if n < 2:
        return out
    dt = np.diff(t)
    credited = np.maximum(np.diff(tot, axis=0), 0.0)  # a counter never runs backwards
    carry = np.zeros(tot.shape[1])
    for k in range(n - 2, -1, -1):
        y = credited[k] + carry
        cap = dt[k]
        if y[0] > cap > 0.0:
            keep = cap / y[0]
            carry = y * (1.0 - keep)
            y = y * keep
        else:
            carry = np.zeros_like(carry)
        out[k + 1] = y / dt[k] if dt[k] > 0 else 0.0
    out[1] += carry / dt[0] if dt[0] > 0 else 0.0  # nothing can go before the start (never happens)
    out[0] = out[1]
    return out


def window_mean(t: np.ndarray, changes: Sequence[tuple[float, float]], initial: float = 1.0) -> np.ndarray:
    """Time-weighted mean over each window of a piecewise-constant signal that starts at `initial` and takes
    value v from time s for every (s, v) in `changes` (time order). Row 0: the value at t[0]."""
    t = np.asarray(t, dtype=float)
    if not changes:
        return np.full(len(t), float(initial))
    times = np.array([c[0] for c in changes], dtype=float)
    values = np.array([initial] + [c[1] for c in changes], dtype=float)
    # integral of the signal from -inf (value `initial`) to x, relative to x = times[0]
    seg = np.diff(times) * values[1:-1]
    cum = np.concatenate([[0.0], np.cumsum(seg)])

    def integral(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(times, x, side="right")  # changes at or before x
        base = np.where(i > 0, cum[np.maximum(i - 1, 0)], 0.0)
        start = np.where(i > 0, times[np.maximum(i - 1, 0)], times[0])
        return np.where(i > 0, base + (x - start) * values[i], (x - times[0]) * values[0])

    out = np.empty(len(t))
    at0 = np.searchsorted(times, t[:1], side="right")
    out[:1] = values[at0]
    if len(t) > 1:
        span = np.diff(t)
        area = integral(t[1:]) - integral(t[:-1])
        at = values[np.searchsorted(times, t[1:], side="right")]
        out[1:] = np.where(span > 0, area / np.where(span > 0, span, 1.0), at)
    return out


def clocked_up_share(busy: np.ndarray) -> np.ndarray:
    """Share of a window the GPU spent at its working clock rather than idled down (0..1)."""
    return np.clip(np.asarray(busy, dtype=float) / CLOCK_HOLD_BUSY, 0.0, 1.0)


def sm_clock_mhz(gpu: GPUProfile, spec: ThermalSpec, busy: np.ndarray, clock_factor: np.ndarray) -> np.ndarray:
    """Mean SM clock over each window, MHz: the working clock (boost x the clock factor the engine ran with)
    while busy, the idle clock once the GPU idles down."""
    working = np.maximum(gpu.sm_clock_mhz * np.asarray(clock_factor, dtype=float), spec.idle_sm_clock_mhz)
    return spec.idle_sm_clock_mhz + (working - spec.idle_sm_clock_mhz) * clocked_up_share(busy)


def dynamic_clock_power(clock_factor: np.ndarray | float) -> np.ndarray:
    """SM dynamic power at a clock factor relative to boost: f * V(f)**2 on a straight V/f line."""
    f = np.asarray(clock_factor, dtype=float)
    v = VOLTAGE_FLOOR + (1.0 - VOLTAGE_FLOOR) * f
    return f * v * v


def power_w(gpu: GPUProfile, busy: np.ndarray, tensor: np.ndarray, dram: np.ndarray,
            clock_factor: np.ndarray) -> np.ndarray:
    """Mean board power over each window, W: idle power plus SM power (busy and tensor shares, scaled by the
    clock's f * V**2) plus HBM interface power (DRAM-active share, independent of the SM clock)."""
    b = np.clip(busy, 0.0, 1.0)
    sm = (POWER_BUSY_SHARE * b + POWER_TENSOR_SHARE * np.clip(tensor, 0.0, 1.0)) * dynamic_clock_power(clock_factor)
    mem = POWER_DRAM_SHARE * np.clip(dram, 0.0, 1.0)
    return gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * (sm + mem)


# ----- thermal state ------------------------------------------------------------------------------
THERMAL_SUBSTEP_S = 2.0
"""Integration step of the thermal state, s (exact for constant power and resistance within a step)."""
PRE_HEAT_MAX_S = 1800.0
"""Longest a failing cooler is assumed to have been warming the GPU before its clock dropped, s."""
HOLD_MARGIN_C = 2.0
"""The cooling of a thermally throttled GPU is so poor that, at its throttled clock and typical load, it would
settle this far above the temperature its governor holds: the throttle is needed, and holds."""


@dataclass(frozen=True)
class Throttle:
    """One clock throttle of a replica's GPU: from start_s (when its clock dropped) to end_s (inf: for good),
    to `clock_factor` of boost, because of `cause` ("thermal" or "power")."""

    start_s: float
    end_s: float
    clock_factor: float
    cause: str = "thermal"

    @property
    def hardware(self) -> bool:
        """A hardware slowdown (clock halved or lower) rather than the driver's software slowdown."""
        return self.clock_factor <= HW_SLOWDOWN_CLOCK

    def hold_c(self, spec: ThermalSpec) -> float:
        """Temperature the thermal governor holds the GPU at during this throttle."""
        return spec.slowdown_c if self.hardware else spec.max_operating_c

    def reasons(self) -> int:
        if self.cause == "power":
            return REASON_SW_POWER_CAP
        return REASON_HW_SLOWDOWN | REASON_HW_THERMAL if self.hardware else REASON_SW_THERMAL


def throttles_from(changes: Sequence[tuple[float, float]], cause: str = "thermal") -> list[Throttle]:
    """Throttle episodes from a replica's clock-factor changes (time, factor), in time order."""
    out: list[Throttle] = []
    start: float | None = None
    level = 1.0
    for when, value in changes:
        if value < 1.0 and start is None:
            start, level = when, value
        elif value < 1.0 and start is not None:
            level = min(level, value)
        elif value >= 1.0 and start is not None:
            out.append(Throttle(start, when, level, cause))
            start = None
    if start is not None:
        out.append(Throttle(start, math.inf, level, cause))
    return out


@dataclass
class _Path:
    """Piecewise inputs of the thermal integration on the substep grid."""

    edges: np.ndarray  # substep boundaries, s
    power: np.ndarray  # W per substep
    r_mult: np.ndarray  # thermal resistance / R0 per substep
    cap: np.ndarray  # governor's ceiling per substep, C (inf: none)


def _substeps(t: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Substep edges covering [t[0], t[-1]] and each substep's power (its window's mean power)."""
    edges = [float(t[0])]
    pw: list[float] = []
    for k in range(1, len(t)):
        span = float(t[k] - t[k - 1])
        m = max(1, math.ceil(span / THERMAL_SUBSTEP_S - 1e-9))
        edges.extend(float(t[k - 1]) + span * (j + 1) / m for j in range(m))
        pw.extend([float(power[k])] * m)
    return np.asarray(edges), np.asarray(pw)


def _integrate(path: _Path, lo: int, hi: int, temp0: float, spec: ThermalSpec, gpu: GPUProfile,
               out: np.ndarray | None = None) -> float:
    """Temperature at edge `hi` starting from temp0 at edge `lo` (exact per substep); fills `out[lo..hi]`."""
    r0, cap_j = spec.r0(gpu), spec.capacity(gpu)
    temp = temp0
    if out is not None:
        out[lo] = temp
    for j in range(lo, hi):
        r = r0 * path.r_mult[j]
        steady = spec.inlet_c + r * path.power[j]
        h = path.edges[j + 1] - path.edges[j]
        temp = steady + (temp - steady) * math.exp(-h / (r * cap_j))
        temp = min(temp, path.cap[j])
        if out is not None:
            out[j + 1] = temp
    return temp


def _integrate_uncapped(path: _Path, lo: int, hi: int, temp0: float, spec: ThermalSpec, gpu: GPUProfile) -> float:
    """_integrate's end temperature where no governor caps it, in closed form: T_hi = T_lo * prod(a) +
    sum_j steady_j * (1 - a_j) * prod_{k > j} a_k, with a_j = exp(-h_j / (R_j C))."""
    if hi <= lo:
        return temp0
    r = spec.r0(gpu) * path.r_mult[lo:hi]
    steady = spec.inlet_c + r * path.power[lo:hi]
    a = np.exp(-np.diff(path.edges[lo:hi + 1]) / (r * spec.capacity(gpu)))
    after = np.concatenate([np.cumprod(a[::-1])[::-1][1:], [1.0]])  # prod of a over the later substeps
    return float(temp0 * np.prod(a) + np.sum(steady * (1.0 - a) * after))


def temperature_c(t: np.ndarray, power: np.ndarray, busy: np.ndarray, gpu: GPUProfile, spec: ThermalSpec,
                  throttles: Sequence[Throttle] = ()) -> np.ndarray:
    """GPU temperature at each scrape, C, from the window powers through the one-lump thermal model.

    The run opens at the steady temperature of the first window's power. A thermal throttle is a cooling
    failure: the cooler's thermal resistance rises linearly over a lead time before the clock drops, chosen so
    the GPU reaches the temperature its governor holds (max operating for a software slowdown, slowdown for a
    hardware one) exactly when the engine's clock drops; from then until the throttle ends the resistance stays
    high enough that even the throttled GPU would run HOLD_MARGIN_C above it, and the governor holds it there.
    A power-capped GPU just runs at its lower power. Heating is bounded by P / C, cooling by (T - inlet) / tau."""
    t = np.asarray(t, dtype=float)
    power = np.asarray(power, dtype=float)
    n = len(t)
    if n == 0:
        return np.zeros(0)
    if n == 1:
        return np.array([spec.inlet_c + spec.r0(gpu) * power[0]])
    edges, pw = _substeps(t, power)
    path = _Path(edges, pw, np.ones(len(pw)), np.full(len(pw), math.inf))
    mids = 0.5 * (edges[:-1] + edges[1:])
    r0 = spec.r0(gpu)
    temp_path = np.empty(len(edges))
    temp_path[0] = spec.inlet_c + r0 * power[1]
    done = 0  # temp_path is final up to this edge
    for th in sorted((x for x in throttles if x.cause == "thermal"), key=lambda x: x.start_s):
        a = int(np.searchsorted(edges, th.start_s, side="left"))  # first edge at or after the clock drop
        if a >= len(edges) or th.end_s <= edges[0]:
            continue
        b = int(np.searchsorted(edges, th.end_s, side="left"))
        hold = th.hold_c(spec)
        inside = (mids >= th.start_s) & (mids < th.end_s)
        # resistance during the throttle: the throttled GPU at its typical working power settles just above hold
        k_in = (t[1:] > th.start_s) & (t[:-1] < th.end_s)
        k_busy = k_in & (np.asarray(busy, dtype=float)[1:] >= 0.5)
        sel = power[1:][k_busy] if k_busy.any() else power[1:][k_in] if k_in.any() else power[1:]
        p_ref = max(float(np.mean(sel)), gpu.idle_w)
        mult = max(1.0, (hold + HOLD_MARGIN_C - spec.inlet_c) / (r0 * p_ref))
        path.r_mult[inside] = mult
        path.cap[inside] = hold
        start_edge = max(done, int(np.searchsorted(edges, th.start_s - PRE_HEAT_MAX_S, side="left")))
        _integrate(path, done, start_edge, temp_path[done], spec, gpu, temp_path)
        temp_start = temp_path[start_edge]
        if a <= start_edge or temp_start >= hold:
            # no time to warm up inside the window: the cooler failed before it opened
            temp_path[start_edge] = max(temp_start, hold) if a <= start_edge else temp_start
        else:
            _pre_heat(path, start_edge, a, temp_start, hold, mult, mids, th.start_s, spec, gpu)
        hi = min(b, len(edges) - 1)
        _integrate(path, start_edge, hi, temp_path[start_edge], spec, gpu, temp_path)
        done = hi
    _integrate(path, done, len(edges) - 1, temp_path[done], spec, gpu, temp_path)
    return np.interp(t, edges, temp_path)


def _pre_heat(path: _Path, lo: int, a: int, temp0: float, hold: float, mult: float, mids: np.ndarray,
              start_s: float, spec: ThermalSpec, gpu: GPUProfile) -> None:
    """Set the resistance ramp over the lead before a thermal throttle (substeps lo..a) so the GPU reaches
    `hold` at edge a: a linear ramp from R0 to `mult` x R0 over a lead found by bisection (a longer lead
    heats more); if even the longest lead falls short, the ramp's peak is raised instead."""
    span = path.edges[a] - path.edges[lo]

    def ramp(lead: float, peak: float) -> None:
        frac = np.clip((mids[lo:a] - (start_s - lead)) / max(lead, 1e-9), 0.0, 1.0)
        path.r_mult[lo:a] = 1.0 + (peak - 1.0) * frac

    def reached(lead: float, peak: float) -> float:
        ramp(lead, peak)
        return _integrate_uncapped(path, lo, a, temp0, spec, gpu)

    if reached(span, mult) >= hold:
        low, high = 0.0, span
        for _ in range(30):
            mid = 0.5 * (low + high)
            if reached(mid, mult) >= hold:
                high = mid
            else:
                low = mid
        ramp(high, mult)
        return
    low, high = mult, mult * 2.0
    while reached(span, high) < hold and high < 1e4:
        low, high = high, high * 2.0
    for _ in range(30):
        mid = 0.5 * (low + high)
        if reached(span, mid) >= hold:
            high = mid
        else:
            low = mid
    ramp(span, high)


# ----- one replica's GPU trace --------------------------------------------------------------------
@dataclass(frozen=True)
class GpuTrace:
    """What dcgm-exporter reads from one GPU at each scrape (arrays over the scrapes)."""

    busy: np.ndarray  # share of the window a kernel ran (un-clipped; <= 1 by construction)
    tensor: np.ndarray  # tensor-pipe active share
    dram: np.ndarray  # HBM interface active share
    sm_clock_mhz: np.ndarray
    power_w: np.ndarray
    temp_c: np.ndarray
    reasons: np.ndarray  # DCGM_FI_DEV_CLOCKS_EVENT_REASONS bitmask (int64)


def gpu_trace(t: np.ndarray, shares: np.ndarray, clock_factor: np.ndarray, gpu: GPUProfile,
              throttles: Sequence[Throttle] = (), rng: np.random.Generator | None = None) -> GpuTrace:
    """One replica's GPU over its scrapes. `shares` is window_shares of (busy, tensor, memory) seconds (a GPU
    whose engine is down does no work, so it idles), `clock_factor` the window-mean clock factor the engine
    ran with. Reasons: GPU_IDLE while the GPU idles down; a throttle's reasons while it works throttled (a
    window counts when most of it lies inside the throttle). `rng` adds sensor noise (None: none)."""
    t = np.asarray(t, dtype=float)
    spec = thermal_spec(gpu)
    busy, tensor, dram = (np.asarray(shares[:, j], dtype=float) for j in range(3))
    cf = np.asarray(clock_factor, dtype=float)
    clock = sm_clock_mhz(gpu, spec, busy, cf)
    power = power_w(gpu, busy, tensor, dram, cf)
    temp = temperature_c(t, power, busy, gpu, spec, throttles)
    working = clocked_up_share(busy) >= 0.5
    reasons = np.where(working, 0, REASON_GPU_IDLE).astype(np.int64)
    for th in throttles:
        on = (_overlap(t, th.start_s, th.end_s) > 0.5) & working
        reasons = np.where(on, reasons | th.reasons(), reasons)
    if rng is not None:
        power = power + rng.normal(0.0, 0.005 * gpu.tdp_w, len(t))
        temp = temp + rng.normal(0.0, 0.3, len(t))
    return GpuTrace(busy, tensor, dram, clock, power, temp, reasons)


def _overlap(t: np.ndarray, start: float, end: float) -> np.ndarray:
    """Share of each window (t[k-1], t[k]] inside [start, end); row 0: whether t[0] is inside."""
    out = np.zeros(len(t))
    if len(t) == 0:
        return out
    out[0] = 1.0 if start <= t[0] < end else 0.0
    lo, hi = t[:-1], t[1:]
    span = hi - lo
    inside = np.clip(np.minimum(hi, end) - np.maximum(lo, start), 0.0, None)
    out[1:] = np.where(span > 0, inside / np.where(span > 0, span, 1.0), 0.0)
    return out


# ----- error counters -----------------------------------------------------------------------------
# Correctable (single-bit) ECC errors a degraded HBM stack throws, per second at full bandwidth loss and a
# fully busy memory interface; they scale with the loss (1 - bandwidth factor) and with traffic (estimate:
# enough to stand out against the zero of a healthy GPU within one scrape, as an SBE storm does).
SBE_PER_S = 40.0
SBE_BACKGROUND = 0.1  # share of the rate at an idle memory interface (refresh, scrubbing)
REMAP_FIRST_S = 20.0  # the first row remap (Xid 63) follows the errors' onset this soon
REMAP_EVERY_S = 600.0  # then one more per this many seconds at full loss (fewer at milder loss)
# NVLink flow-control CRC errors per second at full loss with the link busy (estimate); each one costs a
# replay. A GPU whose collectives do not use the link (tensor parallel 1) sees a trickle.
NVLINK_CRC_PER_S = 200.0
IDLE_LINK_TRAFFIC = 0.02
PCIE_REPLAY_PER_S = 20.0  # PCIe replays on a degraded PCIe link at full loss, busy (estimate)

# Xid messages as the NVIDIA driver logs them (NVIDIA Xid catalogue; serving-facts.md section 3).
XID_TEXT: dict[int, str] = {
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.",
    63: "Row Remapper: New row ({row}) marked for remapping, reset gpu to activate.",
    74: "NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
}
# PCI addresses of the eight GPUs of an HGX H100 board (as a DGX H100 enumerates them); replica i gets i mod 8.
PCI_BUS_IDS = ("0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00",
               "0000:9a:00", "0000:ab:00", "0000:ba:00", "0000:db:00")


@dataclass(frozen=True)
class Xid:
    """One Xid the driver logged: time (s), code, and the message after the code."""

    t: float
    code: int
    detail: str


@dataclass(frozen=True)
class ErrorTrace:
    """Cumulative error counters of one GPU at each scrape, and the Xids behind them."""

    sbe: np.ndarray  # DCGM_FI_DEV_ECC_SBE_VOL_TOTAL
    dbe: np.ndarray  # DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
    remapped_correctable: np.ndarray  # DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS
    remapped_uncorrectable: np.ndarray  # DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
    nvlink_crc: np.ndarray  # DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
    nvlink_replay: np.ndarray  # DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
    pcie_replay: np.ndarray  # DCGM_FI_DEV_PCIE_REPLAY_COUNTER
    last_xid: np.ndarray  # DCGM_FI_DEV_XID_ERRORS: the last Xid's code (0: none yet)
    xids: tuple[Xid, ...]


def error_trace(t: np.ndarray, busy: np.ndarray, dram: np.ndarray, hbm_changes: Sequence[tuple[float, float]],
                link_changes: Sequence[tuple[float, float]], nvlink: bool, uses_link: bool,
                crash_xids: Sequence[tuple[float, int]], rng: np.random.Generator) -> ErrorTrace:
    """Error counters of one GPU: correctable ECC errors and row remaps (each one an Xid 63) while its HBM is
    degraded, NVLink CRC errors and replays (an Xid 74 when the link degrades) or PCIe replays on a degraded
    link, and the Xids of crashes. Counts are Poisson draws from `rng` at rates that grow with the loss and
    the traffic."""
    t = np.asarray(t, dtype=float)
    n = len(t)
    dt = np.diff(t, prepend=t[0])
    hbm_loss = 1.0 - window_mean(t, hbm_changes, 1.0)
    link_loss = 1.0 - window_mean(t, link_changes, 1.0)
    sbe_rate = SBE_PER_S * hbm_loss * (SBE_BACKGROUND + (1.0 - SBE_BACKGROUND) * np.clip(dram, 0.0, 1.0))
    sbe = np.cumsum(rng.poisson(np.maximum(sbe_rate * dt, 0.0)))
    traffic = np.clip(busy, 0.0, 1.0) if uses_link else IDLE_LINK_TRAFFIC * np.clip(busy, 0.0, 1.0)
    link_rate = np.maximum(link_loss * traffic * dt, 0.0)
    zeros = np.zeros(n)
    if nvlink:
        crc = np.cumsum(rng.poisson(NVLINK_CRC_PER_S * link_rate))
        replay = crc + np.cumsum(rng.poisson(0.02 * NVLINK_CRC_PER_S * link_rate))  # data CRC errors replay too
        pcie = zeros
    else:
        crc = replay = zeros
        pcie = np.cumsum(rng.poisson(PCIE_REPLAY_PER_S * link_rate))
    xids: list[Xid] = []
    remaps = _remap_times(hbm_changes, float(t[-1]) if n else 0.0)
    for when in remaps:
        row = int(rng.integers(1 << 20, 1 << 36))
        xids.append(Xid(when, 63, XID_TEXT[63].format(row=f"0x{row:016x}")))
    if nvlink:
        for when, _ in _onsets(link_changes):
            xids.append(Xid(when, 74, XID_TEXT[74].format(link=int(rng.integers(0, 18)))))
    for when, code in crash_xids:
        xids.append(Xid(when, code, XID_TEXT.get(code, "")))
    xids.sort(key=lambda x: (x.t, x.code))
    remapped = np.searchsorted(np.asarray(remaps, dtype=float), t, side="right").astype(float)
    last = np.zeros(n)
    for x in xids:
        last[t >= x.t] = x.code
    dbe = np.array([sum(1 for x in xids if x.code == 48 and x.t <= s) for s in t], dtype=float)
    return ErrorTrace(sbe.astype(float), dbe, remapped, zeros, crc.astype(float), replay.astype(float),
                      pcie.astype(float), last, tuple(xids))


def _onsets(changes: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(start, end) of each stretch where a factor is below 1 (end inf: to the end)."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    for when, value in changes:
        if value < 1.0 and start is None:
            start = when
        elif value >= 1.0 and start is not None:
            out.append((start, when))
            start = None
    if start is not None:
        out.append((start, math.inf))
    return out


def _remap_times(hbm_changes: Sequence[tuple[float, float]], horizon: float) -> list[float]:
    """When a degraded HBM marks rows for remapping: REMAP_FIRST_S into each degraded stretch, then every
    REMAP_EVERY_S / loss seconds while it lasts (within the scrapes' horizon)."""
    out: list[float] = []
    level = {when: value for when, value in hbm_changes}
    for start, end in _onsets(hbm_changes):
        loss = max(1e-6, 1.0 - level.get(start, 1.0))
        when = start + REMAP_FIRST_S
        while when < min(end, horizon):
            out.append(when)
            when += REMAP_EVERY_S / loss
    return sorted(out)


# ----- framebuffer ----------------------------------------------------------------------------------
def fb_used_bytes(t: np.ndarray, up: np.ndarray, used: np.ndarray, total: np.ndarray, held: np.ndarray,
                  limit: np.ndarray, ooms: Sequence[tuple[float, float]] = ()) -> np.ndarray:
    """Framebuffer bytes the engine process holds at each scrape, as the OOM message counts them.

    The engine reports `used` = what it holds at zero leak (`held`: weights, KV pool, graph pool, non-torch
    memory, the activation reserve) plus what leaked, capped at `total`. A step's activation workspace is
    allocated from the last `limit` bytes (activation reserve + headroom), and the allocator hands its cached
    workspace back before it gives up, so the memory in use is total - limit + leak, and free is limit - leak:
    the OOM message's "in use" and "free" exactly. Where the cap hid the leak, the leak is interpolated in
    time between the nearest exact readings of the same engine life: uncapped scrapes and OOMs (time, leaked
    bytes); past the last one, extrapolated at the last rate. A down engine holds nothing."""
    t = np.asarray(t, dtype=float)
    up = np.asarray(up, dtype=bool)
    used = np.asarray(used, dtype=float)
    total = np.asarray(total, dtype=float)
    held = np.asarray(held, dtype=float)
    limit = np.asarray(limit, dtype=float)
    leak = np.where(up, np.maximum(used - held, 0.0), 0.0)
    capped = up & (used >= total)
    if capped.any():
        oom_t = np.array([o[0] for o in ooms], dtype=float)
        oom_leak = np.array([o[1] for o in ooms], dtype=float)
        for lo, hi in _runs(up):
            sel = np.arange(lo, hi)
            if not capped[sel].any():
                continue
            end_t = t[hi] if hi < len(t) else math.inf
            known_t = [float(t[k]) for k in sel if not capped[k]]
            known_v = [float(leak[k]) for k in sel if not capped[k]]
            in_life = (oom_t > t[lo]) & (oom_t <= end_t)
            known_t += oom_t[in_life].tolist()
            known_v += oom_leak[in_life].tolist()
            if not known_t:
                continue
            order = np.argsort(known_t, kind="stable")
            kt, kv = np.asarray(known_t)[order], np.asarray(known_v)[order]
            for k in sel[capped[sel]]:
                leak[k] = _interpolate(kt, kv, float(t[k]))
    leak = np.where(up, np.clip(leak, 0.0, np.maximum(limit, 0.0)), 0.0)
    return np.where(up, total - limit + leak, 0.0)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) index ranges where `mask` is True."""
    out: list[tuple[int, int]] = []
    lo: int | None = None
    for k, m in enumerate(mask):
        if m and lo is None:
            lo = k
        elif not m and lo is not None:
            out.append((lo, k))
            lo = None
    if lo is not None:
        out.append((lo, len(mask)))
    return out


def _interpolate(kt: np.ndarray, kv: np.ndarray, x: float) -> float:
    """Linear through the known points; beyond them, the slope of the last two (never decreasing)."""
    if len(kt) == 1:
        return float(kv[0])
    if x <= kt[-1]:
        return float(np.interp(x, kt, kv))
    span = kt[-1] - kt[-2]
    slope = max(0.0, (kv[-1] - kv[-2]) / span) if span > 0 else 0.0
    return float(kv[-1] + slope * (x - kt[-1]))
