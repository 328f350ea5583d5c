"""hbm_degradation: the scoped replicas' HBM bandwidth drops."""

from __future__ import annotations

from typing import ClassVar

from engine_model.fault_kinds.base import HardwareFactor, Param, register


@register
class HbmDegradation(HardwareFactor):
    name = "hbm_degradation"
    description = "HBM bandwidth degraded"
    attr = "hbm_bw_factor"
    factor = "bw_factor"
    params: ClassVar[dict[str, Param]] = {
        "bw_factor": Param("bandwidth / nominal at intensity 1", default=0.5, minimum=0.0, above=True),
    }
