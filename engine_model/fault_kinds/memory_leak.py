"""memory_leak: GPU memory leaks outside the KV pool of the scoped replicas, until it runs out."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register

if TYPE_CHECKING:
    from engine_model.faults import Fault

MIB = 2**20


@register
class MemoryLeak(FaultKind):
    name = "memory_leak"
    description = "GPU memory leaks outside the KV pool"
    params: ClassVar[dict[str, Param]] = {
        "bytes_per_s": Param("steady leak rate at intensity 1 (default 1 MiB/s unless bytes_per_request is given)",
                             minimum=0.0),
        "bytes_per_request": Param("bytes leaked per completed prefill at intensity 1 (grows with traffic)",
                                   minimum=0.0),
    }

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        p = fault.params
        # a steady leak (bytes/s) unless the fault gives only a per-request one (bytes per prefill)
        per_s = float(p.get("bytes_per_s", 0.0 if "bytes_per_request" in p else MIB))
        per_request = float(p.get("bytes_per_request", 0.0))
        for rep in host.targets(fault):
            rep.leak_bytes_per_s = per_s * fault.intensity if start else 0.0
            rep.leak_bytes_per_request = per_request * fault.intensity if start else 0.0
            rep.leak_since = host.now
            rep.leak_requests = 0
