"""Typed, time-scoped faults: each changes an engine parameter or the hardware of some replicas.

A fault never writes telemetry. It only changes what the engine model computes with;
every symptom has to emerge from the simulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# kind -> (description, parameters with their meaning). The incident validator reads this table.
FAULT_KINDS: dict[str, tuple[str, dict[str, str]]] = {
    "config_change": ("redeploy with engine knobs changed", {"<knob>": "new value of any EngineConfig knob"}),
    "gpu_throttle": ("SM clock throttled (thermal or power cap)", {
        "clock_factor": "clock / nominal at intensity 1",
        "cause": "thermal (default: its cooling failed, the GPU runs hot and slows itself down) or power "
                 "(a lowered power limit caps it); only the GPU's telemetry shows which"}),
    "hbm_degradation": ("HBM bandwidth degraded", {"bw_factor": "bandwidth / nominal at intensity 1"}),
    "link_degradation": ("interconnect (NVLink/PCIe) degraded", {"link_factor": "bandwidth / nominal at intensity 1"}),
    "host_contention": ("host CPU contention slows scheduling and launches", {"overhead_factor": "host overhead x"}),
    "memory_leak": ("GPU memory leaks outside the KV pool", {
        "bytes_per_s": "steady leak rate at intensity 1 (default 1 MiB/s unless bytes_per_request is given)",
        "bytes_per_request": "bytes leaked per completed prefill at intensity 1 (grows with traffic)"}),
    "replica_crash": ("the engine process dies", {"restart_s": "seconds until it serves again"}),
    "model_rollout": (
        "a new model version (possibly quantized)",
        {
            "version": "model version label",
            "weight_dtype": "bf16|fp8|int4",
            "kv_cache_dtype": "auto|fp8",
            "output_scale": "mean output length multiplier",
            "eval_deltas": "task -> score change (quality is not simulated per token)",
        },
    ),
    "batch_invariance_off": ("batch-invariant kernels disabled", {}),
    "seeds_unpinned": ("per-request sampling seeds no longer honoured", {}),
    "spec_acceptance_drop": ("speculative acceptance rate falls", {"acceptance_rate": "new rate at intensity 1"}),
    "moe_imbalance": ("MoE router sends tokens to a few hot experts", {"skew": "hot-expert load / mean - 1"}),
    "router_policy": (
        "the router's load-balancing policy changes",
        {"policy": "round_robin|least_outstanding|affinity"},
    ),
    "fallback_routing": (
        "overflow traffic goes to a fallback model",
        {"queue_threshold": "waiting requests above which traffic spills", "model": "fallback model name"},
    ),
    "router_skew": (
        "a load-balancing bug sends extra traffic to the scoped replicas",
        {"share": "fraction of all arrivals the scoped replicas get together, at intensity 1 (e.g. 0.5 for 2 of 6)"},
    ),
    "gateway_latency": (
        "the API gateway in front of the engines adds latency (requests reach the router later)",
        {"delay_s": "mean seconds added per request at intensity 1",
         "jitter": "relative spread of the added delay (log-normal sigma, default 0.3)"},
    ),
    "traffic_surge": (
        "more arrivals than usual",
        {"factor": "arrival-rate multiplier at intensity 1 (> 1)",
         "app": "only this app's traffic grows (default: every app)"},
    ),
    "workload_shift": (
        "clients changed what they send: longer or shorter prompts and answers",
        {"app": "only this app's requests change (default: every app)",
         "prompt_scale": "multiplier on prompt tokens (beyond the shared system prompt) at intensity 1",
         "output_scale": "multiplier on output tokens at intensity 1"},
    ),
    "client_change": (
        "a client rollout or config change: how long an app's clients wait, and how they retry",
        {"app": "only this app's clients change (default: every app)",
         "timeout_s": "seconds a client waits for the whole response at intensity 1",
         "max_attempts": "attempts per request, the first included, at intensity 1",
         "backoff_s": "seconds before the first retry (doubling per attempt) at intensity 1",
         "backoff_max_s": "cap on the backoff, seconds, at intensity 1",
         "jitter": "largest random fraction taken off each backoff at intensity 1 (0: lockstep retries)",
         "version": "client version label the change log records for the rollout"},
    ),
    "eval_harness_change": (
        "the offline eval harness changed: every version in service is re-scored, unrelated to the model",
        {"eval_deltas": "task -> score change at intensity 1"},
    ),
}

# Kinds that act before the engines: on the requests clients send (telemetry_gen.runner changes the
# workload; client_change reaches the simulation as its `clients`, engine_model.retries) or on the offline
# evaluations. The simulation's fault handling ignores them.
WORKLOAD_FAULTS: frozenset[str] = frozenset(
    {"gateway_latency", "traffic_surge", "workload_shift", "eval_harness_change", "client_change"}
)


@dataclass(frozen=True)
class Fault:
    """One fault. Times are simulated seconds from the start of the run.

    `replicas` None means every replica. `intensity` in 0..1 scales the fault's
    effect linearly between no change (0) and the stated parameters (1).
    """

    kind: str
    start_s: float
    end_s: float | None = None
    replicas: tuple[int, ...] | None = None
    intensity: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if not 0.0 <= self.intensity <= 1.0:
            raise ValueError("intensity must be within 0..1")

    def applies_to(self, replica: int) -> bool:
        return self.replicas is None or replica in self.replicas

    def scaled(self, nominal: float, faulty: float) -> float:
        """Interpolate a factor between its nominal value and the fault's value by intensity."""
        return nominal + (faulty - nominal) * self.intensity
