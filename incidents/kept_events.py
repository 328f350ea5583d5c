"""Events of the truth's story that a false hypothesis keeps (`hypotheses[].keeps`).

A rival often shares part of the truth's story: the config change was applied in a rolling restart,
and the rival says the restart itself (cold prefix caches, a replica down at a time) did the harm, not
the new knob. `keeps: [k]` gives each world of that rival's family the rolling restart of `faults[k]`
without its change: the same replicas drain and restart at the same times (and again at until_s, when
the truth rolls back), with the same stagger and restart time, and no knob or version changed. In the
change log the restarts are there and the config change is not.

Only a redeploy kind (acts_on "deploy": config_change, model_rollout, ...) has a restart to keep; the
crosscheck refuses any other. The kept restart runs as a config_change with no knob, which is what a
routine restart (noise `replica_restart`) is to the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine_model.fault_kinds import REGISTRY
from incidents.fault_spec import FaultSpec

RESTART_PARAMS = ("stagger_s", "restart_s")
"""The parameters of a rollout that a kept restart keeps: its timing, never its change."""


def keepable_kinds() -> list[str]:
    """Fault kinds whose rolling restart a rival can keep (the redeploy kinds), sorted."""
    return sorted(name for name, kind in REGISTRY.items() if kind.acts_on == "deploy")


def kept_restart(fault: FaultSpec) -> FaultSpec:
    """The rolling restart of `fault` (a redeploy kind) with nothing changed."""
    params = {k: v for k, v in fault.params.items() if k in RESTART_PARAMS}
    return fault.model_copy(update={"kind": "config_change", "params": params})


def kept_restarts(faults: Sequence[FaultSpec], keeps: Iterable[int]) -> list[FaultSpec]:
    """The restarts `keeps` names (indices into `faults`; the crosscheck has checked them)."""
    return [kept_restart(faults[k]) for k in keeps if 0 <= k < len(faults)]
