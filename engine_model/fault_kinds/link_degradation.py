"""link_degradation: the scoped replicas' interconnect (NVLink/PCIe) bandwidth drops."""

from __future__ import annotations

from typing import ClassVar

from engine_model.fault_kinds.base import HardwareFactor, Param, register


@register
class LinkDegradation(HardwareFactor):
    name = "link_degradation"
    description = "interconnect (NVLink/PCIe) degraded"
    attr = "link_factor"
    factor = "link_factor"
    params: ClassVar[dict[str, Param]] = {
        "link_factor": Param("bandwidth / nominal at intensity 1", default=0.1, minimum=0.0, above=True),
    }
