"""traffic_surge: more arrivals than usual (telemetry_gen.runner.surge_requests)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultKind, Param, WorkloadHost, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class TrafficSurge(FaultKind):
    name = "traffic_surge"
    description = "more arrivals than usual"
    acts_on = "workload"
    scoped = False
    params: ClassVar[dict[str, Param]] = {
        "factor": Param("arrival-rate multiplier at intensity 1 (> 1)", default=2.0, minimum=1.0, above=True),
        "app": Param("only this app's traffic grows (default: every app)", type="str"),
    }

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        host.add_requests(fault, self.app(fault), (float(self.param(fault, "factor")) - 1.0) * fault.intensity)
