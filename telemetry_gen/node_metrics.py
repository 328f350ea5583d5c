"""The host a replica runs on, as node_exporter reports it: CPU time by mode, load average, CPU pressure.

One node (or node slice) per replica, with VCPUS_PER_GPU vCPUs per GPU. The serving processes' CPU demand
follows the engine's work (its loop while it has requests, tensor-parallel workers polling, the API server
tokenising and streaming). Host contention is another tenant's runnable threads: the engine's host work takes
`host_overhead_factor` x as long because it gets 1/x of a core, which on a fair scheduler means x runnable
threads per core: the CPUs are saturated, the load average climbs to x times the vCPU count, and tasks wait
for a CPU most of the time (PSI). Counters are sums over the node's CPUs, in seconds since boot.
Window k is (t[k-1], t[k]]; row 0 reports what window 1 shows, as in gpu_state.
"""

from __future__ import annotations

import math

import numpy as np

# AWS p5.48xlarge: 192 vCPUs for 8 H100 (24 per GPU); p4d.24xlarge: 96 for 8 A100. A replica's share of its node.
VCPUS_PER_GPU = 24
# CPU the serving stack spends (estimates, cores or core-seconds):
API_CPU_PER_REQUEST_S = 2e-3  # HTTP handling, chat template and tokenising one prompt
API_CPU_PER_TOKEN_S = 40e-6  # detokenising and streaming one output token
ENGINE_LOOP_CORES = 1.0  # the engine core process's scheduling loop while it has requests
WORKER_SPIN_CORES = 0.9  # each tensor-parallel worker polling its message queue while the engine works
RESTART_CORES = 1.5  # a restarting engine loading weights and capturing graphs
DAEMON_CORES = 0.25  # kubelet, exporters, log shipping
SYSTEM_SHARE = 0.15  # kernel time as a share of user time (syscalls, networking)
IOWAIT_CORES = 0.02
NEIGHBOUR_SYSTEM_SHARE = 0.10  # the contending tenant's kernel share
SATURATED_IDLE = 0.005  # share of CPUs still idle on a saturated node (scheduler gaps)
LOAD_TAU_S = 60.0  # node_load1: the kernel's exponentially damped one-minute average of runnable tasks
PSI_QUIET = 0.002  # share of time some task waits for a CPU on an uncontended node (node_pressure_cpu_*)
UPTIME_DAYS = (3.0, 40.0)  # how long the nodes have been up when the window opens (drawn per node)

CPU_MODES = ("user", "system", "iowait", "idle")


def first_order(t: np.ndarray, target: np.ndarray, tau_s: float, x0: float) -> np.ndarray:
    """x at each time of a first-order lag (time constant tau_s) following `target`, constant over each
    window (t[k-1], t[k]] at target[k], starting from x0 at t[0]. Exact for that input."""
    t = np.asarray(t, dtype=float)
    out = np.empty(len(t))
    if len(t) == 0:
        return out
    x = float(x0)
    out[0] = x
    for k in range(1, len(t)):
        a = math.exp(-max(0.0, float(t[k] - t[k - 1])) / tau_s)
        x = float(target[k]) + (x - float(target[k])) * a
        out[k] = x
    return out


def per_window(t: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Rate of a cumulative counter over each window (per second, never negative); row 0 repeats row 1."""
    t = np.asarray(t, dtype=float)
    c = np.asarray(counter, dtype=float)
    out = np.zeros(len(t))
    if len(t) < 2:
        return out
    dt = np.diff(t)
    out[1:] = np.where(dt > 0, np.maximum(np.diff(c), 0.0) / np.where(dt > 0, dt, 1.0), 0.0)
    out[0] = out[1]
    return out


def node_series(t: np.ndarray, active: np.ndarray, requests_per_s: np.ndarray, tokens_per_s: np.ndarray,
                host_factor: np.ndarray, up: np.ndarray, gpus: int, rng: np.random.Generator
                ) -> dict[str, np.ndarray]:
    """node_exporter series of one replica's node at each scrape, by metric name.

    active: share of each window the engine had requests (0..1); requests_per_s / tokens_per_s: requests
    finished and output tokens generated per second; host_factor: window-mean host_overhead_factor the engine
    ran with (1 = no contention); up: whether the engine was up at each scrape."""
    t = np.asarray(t, dtype=float)
    n = len(t)
    vcpus = float(VCPUS_PER_GPU * max(1, gpus))
    a = np.clip(np.asarray(active, dtype=float), 0.0, 1.0)
    workers = WORKER_SPIN_CORES * gpus if gpus > 1 else 0.0
    serving = np.where(
        np.asarray(up, dtype=bool),
        (ENGINE_LOOP_CORES + workers) * a
        + API_CPU_PER_REQUEST_S * np.asarray(requests_per_s, dtype=float)
        + API_CPU_PER_TOKEN_S * np.asarray(tokens_per_s, dtype=float),
        RESTART_CORES,
    )
    # the serving stack's demand wanders a little from window to window
    own_user = (serving + DAEMON_CORES) * (rng.normal(1.0, 0.02, n) if n else 1.0)
    own_system = SYSTEM_SHARE * own_user
    h = np.maximum(np.asarray(host_factor, dtype=float), 1.0)
    contended = h > 1.0 + 1e-9
    busy_cap = vcpus * (1.0 - SATURATED_IDLE) - IOWAIT_CORES
    # a contending tenant fills every CPU the serving stack leaves
    neighbour = np.where(contended, np.maximum(busy_cap - own_user - own_system, 0.0), 0.0)
    user = np.minimum(own_user + (1.0 - NEIGHBOUR_SYSTEM_SHARE) * neighbour, busy_cap)
    system = np.minimum(own_system + NEIGHBOUR_SYSTEM_SHARE * neighbour, busy_cap - user)
    iowait = np.full(n, IOWAIT_CORES)
    idle = np.maximum(vcpus - user - system - iowait, 0.0)  # the modes add up to the CPUs' count
    runnable = np.where(contended, h * vcpus, own_user + own_system + 0.3)
    pressure = np.where(contended, np.maximum(1.0 - 1.0 / h, PSI_QUIET), PSI_QUIET)

    dt = np.diff(t, prepend=t[0]) if n else np.zeros(0)
    uptime = 86400.0 * rng.uniform(*UPTIME_DAYS)
    out: dict[str, np.ndarray] = {}
    for mode, rate in zip(CPU_MODES, (user, system, iowait, idle), strict=True):
        start = uptime * float(rate[0]) if n else 0.0
        out[f'node_cpu_seconds_total{{mode="{mode}"}}'] = start + np.cumsum(rate * dt)
    load = first_order(t, runnable, LOAD_TAU_S, float(runnable[0]) if n else 0.0)
    out["node_load1"] = np.maximum(load + (rng.normal(0.0, 0.05, n) if n else 0.0), 0.0)
    out["node_pressure_cpu_waiting_seconds_total"] = uptime * PSI_QUIET + np.cumsum(pressure * dt)
    return out
