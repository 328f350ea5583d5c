"""moe_imbalance: the MoE router of the scoped replicas sends tokens to a few hot experts."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class MoeImbalance(FaultKind):
    name = "moe_imbalance"
    description = "MoE router sends tokens to a few hot experts"
    gradual = True
    params: ClassVar[dict[str, Param]] = {"skew": Param("hot-expert load / mean - 1", default=2.0, minimum=0.0)}

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        for rep in host.targets(fault):
            rep.set_expert_skew(float(self.param(fault, "skew")) * fault.intensity if start else 0.0)
            host.interrupt(rep)
