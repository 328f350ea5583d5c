"""spec_acceptance_drop: the scoped replicas' speculative-decoding acceptance rate falls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, ParamIssue, register

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

    def check_fleet(self, fault: Mapping[str, Any], fleet: Mapping[str, Any]) -> list[ParamIssue]:
        engine = fleet.get("engine")
        if isinstance(engine, Mapping) and not engine.get("num_speculative_tokens"):
            return [ParamIssue(("kind",), "spec_acceptance_drop needs speculative decoding: the fleet's engine has "
                               "num_speculative_tokens 0", "set fleet.engine.num_speculative_tokens")]
        return []

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
