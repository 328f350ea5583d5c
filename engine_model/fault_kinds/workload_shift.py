"""workload_shift: clients send longer or shorter prompts and answers (telemetry_gen.runner.shift_workload)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultKind, Param, WorkloadHost, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class WorkloadShift(FaultKind):
    name = "workload_shift"
    description = "clients changed what they send: longer or shorter prompts and answers"
    acts_on = "workload"
    scoped = False
    params: ClassVar[dict[str, Param]] = {
        "app": Param("only this app's requests change (default: every app)", type="str"),
        "prompt_scale": Param("multiplier on prompt tokens (beyond the shared system prompt) at intensity 1",
                              default=1.0, minimum=0.0, above=True),
        "output_scale": Param("multiplier on output tokens at intensity 1", default=1.0, minimum=0.0, above=True),
    }

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        host.reshape(fault, self.app(fault), self.scaled_param(fault, "prompt_scale", 1.0),
                     self.scaled_param(fault, "output_scale", 1.0))
