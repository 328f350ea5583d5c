"""Typed, time-scoped faults: each changes an engine parameter or the hardware of some replicas.

A fault never writes telemetry. It only changes what the engine model computes with;
every symptom has to emerge from the simulation.

What each kind takes and does lives in the fault registry, engine_model.fault_kinds (one module per
kind); this module holds the Fault record the simulation runs with, and the registry's tables in the
shape the rest of the project reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from engine_model.fault_kinds import REGISTRY
from engine_model.records import frozen_reduce

# kind -> (description, parameters with their meaning), from the registry. The incident validator and
# the debrief read this table.
FAULT_KINDS: dict[str, tuple[str, dict[str, str]]] = {
    name: (kind.description, {p: spec.description for p, spec in kind.params.items()})
    for name, kind in REGISTRY.items()
}

# Kinds that act before the engines: on the requests clients send (telemetry_gen.runner changes the
# workload) or on the offline evaluations. The simulation ignores them.
WORKLOAD_FAULTS: frozenset[str] = frozenset(name for name, kind in REGISTRY.items() if kind.acts_on == "workload")

RAMP_STEPS = 8
"""A ramp is this many equal steps: fine enough that each step moves the effect by an eighth, coarse enough
that each costs one fault event (and one interrupt of the scoped replicas' running steps)."""


def ramp(start_s: float, ramp_s: float, intensity: float, n: int = RAMP_STEPS
         ) -> tuple[float, tuple[tuple[float, float], ...]]:
    """A linear rise from 0 at start_s to `intensity` at start_s + ramp_s as n equal steps, the first at start_s:
    (intensity at start_s, the later (time, intensity) steps)."""
    steps = tuple((start_s + ramp_s * k / n, intensity * (k + 1) / n) for k in range(1, n))
    return intensity / n, steps


@dataclass(frozen=True)
class Fault:
    """One fault. Times are simulated seconds from the start of the run.

    `replicas` None means every replica. `intensity` in 0..1 scales the fault's
    effect linearly between no change (0) and the stated parameters (1).
    `steps`: (time, intensity) pairs, in time order after `start_s`, at which a gradual fault's
    intensity changes (a ramp is a series of steps); empty for a fault that holds one intensity.
    """

    kind: str
    start_s: float
    end_s: float | None = None
    replicas: tuple[int, ...] | None = None
    intensity: float = 1.0
    params: dict[str, Any] = field(default_factory=dict)
    steps: tuple[tuple[float, float], ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)

    def __post_init__(self) -> None:
        if self.kind not in REGISTRY:
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if not all(0.0 <= x <= 1.0 for x in (self.intensity, *(i for _, i in self.steps))):
            raise ValueError("intensity must be within 0..1")
        if self.steps and not REGISTRY[self.kind].gradual:
            raise ValueError(f"{self.kind} cannot change gradually")

    def applies_to(self, replica: int) -> bool:
        return self.replicas is None or replica in self.replicas

    def scaled(self, nominal: float, faulty: float) -> float:
        """Interpolate a factor between its nominal value and the fault's value by intensity."""
        return nominal + (faulty - nominal) * self.intensity

    def is_null(self) -> bool:
        """Whether the fault has no effect at all: intensity 0 throughout."""
        return self.intensity == 0.0 and all(i == 0.0 for _, i in self.steps)

    def at_step(self, k: int) -> Fault:
        """The fault as it is from its k-th step on (k >= 1): the same fault with that step's intensity."""
        return replace(self, intensity=self.steps[k - 1][1])
