"""eval_harness_change: the offline eval harness re-scores every version (telemetry_gen.runner.eval_suites)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultKind, Param, WorkloadHost, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class EvalHarnessChange(FaultKind):
    name = "eval_harness_change"
    description = "the offline eval harness changed: every version in service is re-scored, unrelated to the model"
    acts_on = "workload"
    scoped = False
    params: ClassVar[dict[str, Param]] = {"eval_deltas": Param("task -> score change at intensity 1", type="mapping")}

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        raw = self.param(fault, "eval_deltas") or {}
        host.rescore(fault, {str(task): float(v) * fault.intensity for task, v in raw.items()})
