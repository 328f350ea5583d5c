"""spec_acceptance_drop: the scoped replicas' speculative-decoding acceptance rate falls."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class SpecAcceptanceDrop(FaultKind):
    name = "spec_acceptance_drop"
    description = "speculative acceptance rate falls"
    gradual = True
    params: ClassVar[dict[str, Param]] = {
        "acceptance_rate": Param("new rate at intensity 1", default=0.3, minimum=0.0, maximum=1.0),
    }

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        for rep in host.targets(fault):
            if start:
                rep.base_acceptance = rep.config.spec_acceptance_rate
                rate = fault.scaled(rep.config.spec_acceptance_rate, float(self.param(fault, "acceptance_rate")))
            else:
                rate = rep.base_acceptance
            rep.set_spec_acceptance(rate)
            rep.log(host.now, "spec_acceptance", rate=rate)
            host.interrupt(rep)
