"""host_contention: host CPU contention multiplies the scoped replicas' scheduling and launch overhead."""

from __future__ import annotations

from typing import ClassVar

from engine_model.fault_kinds.base import HardwareFactor, Param, register


@register
class HostContention(HardwareFactor):
    name = "host_contention"
    description = "host CPU contention slows scheduling and launches"
    attr = "host_overhead_factor"
    factor = "overhead_factor"
    params: ClassVar[dict[str, Param]] = {
        "overhead_factor": Param("host overhead x", default=3.0, minimum=0.0, above=True),
    }
