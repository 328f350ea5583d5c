"""gateway_latency: the API gateway in front of the engines adds latency (telemetry_gen.runner.gateway_transit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultKind, Param, WorkloadHost, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class GatewayLatency(FaultKind):
    name = "gateway_latency"
    description = "the API gateway in front of the engines adds latency (requests reach the router later)"
    acts_on = "workload"
    scoped = False  # the gateway is in front of the router
    params: ClassVar[dict[str, Param]] = {
        "delay_s": Param("mean seconds added per request at intensity 1", default=0.5, minimum=0.0),
        "jitter": Param("relative spread of the added delay (log-normal sigma, default 0.3)", default=0.3,
                        minimum=0.0),
        "app": Param("only this app's requests are delayed (a route of their own through the gateway; "
                     "default: every app)", type="str"),
    }

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        host.delay(fault, float(self.param(fault, "delay_s")) * fault.intensity, float(self.param(fault, "jitter")),
                   self.app(fault))
