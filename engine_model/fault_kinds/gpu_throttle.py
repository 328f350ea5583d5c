"""gpu_throttle: the scoped replicas' SM clock drops (thermal or power cap)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import HardwareFactor, Param, WorkloadHost, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class GpuThrottle(HardwareFactor):
    name = "gpu_throttle"
    description = "SM clock throttled (thermal or power cap)"
    attr = "clock_factor"
    factor = "clock_factor"
    params: ClassVar[dict[str, Param]] = {
        "clock_factor": Param("clock / nominal at intensity 1", default=0.5, minimum=0.0, above=True),
        # only the GPU's telemetry reads it (telemetry_gen.runner.throttle_causes)
        "cause": Param("thermal (default: its cooling failed, the GPU runs hot and slows itself down) or power "
                       "(a lowered power limit caps it); only the GPU's telemetry shows which",
                       type="str", default="thermal", choices=("thermal", "power")),
    }

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        cause = str(self.param(fault, "cause"))
        if cause not in self.params["cause"].choices:
            raise ValueError(f"{self.name}: cause {cause!r} is not one of {', '.join(self.params['cause'].choices)}")
        host.throttle_cause(fault, cause)
