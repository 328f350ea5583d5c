"""workload_shift: clients send longer or shorter prompts and answers (telemetry_gen.runner.shift_workload)."""

from __future__ import annotations

from typing import ClassVar

from engine_model.fault_kinds.base import FaultKind, Param, register


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
