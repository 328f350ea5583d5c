"""moe_imbalance: the MoE router of the scoped replicas sends tokens to a few hot experts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, ParamIssue, register
from engine_model.profiles import MODELS

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class MoeImbalance(FaultKind):
    name = "moe_imbalance"
    description = "MoE router sends tokens to a few hot experts"
    gradual = True
    params: ClassVar[dict[str, Param]] = {"skew": Param("hot-expert load / mean - 1", default=2.0, minimum=0.0)}

    def check_fleet(self, fault: Mapping[str, Any], fleet: Mapping[str, Any]) -> list[ParamIssue]:
        model = MODELS.get(str(fleet.get("model")))
        if model is not None and not model.is_moe:
            return [ParamIssue(("kind",), f"moe_imbalance needs a mixture-of-experts model; {model.name} is dense",
                               "MoE models: " + ", ".join(m.name for m in MODELS.values() if m.is_moe))]
        return []

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        for rep in host.targets(fault):
            rep.set_expert_skew(float(self.param(fault, "skew")) * fault.intensity if start else 0.0)
            host.interrupt(rep)
