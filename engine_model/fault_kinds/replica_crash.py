"""replica_crash: the scoped replicas' engine processes die (a GPU Xid) and restart after restart_s."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register

if TYPE_CHECKING:
    from engine_model.faults import Fault

# Xids that take the GPU down with the process, as the driver logs them (NVIDIA "XID Errors" catalog,
# r555): 48 double-bit ECC error, 74 NVLink error, 79 GPU fallen off the bus. telemetry_gen.gpu_state has
# their log text.
FATAL_XIDS = (48, 74, 79)


@register
class ReplicaCrash(FaultKind):
    name = "replica_crash"
    description = "the engine process dies"
    graded = False
    params: ClassVar[dict[str, Param]] = {
        "restart_s": Param("seconds until it serves again (default: the fleet's, 45)", minimum=0.0, above=True),
        "xid": Param("the Xid the driver logs as the process dies: 48 (double-bit ECC), 74 (NVLink) or 79 "
                     "(fallen off the bus, the default)", type="int", default=79, choices=FATAL_XIDS),
    }

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        if not start:
            return
        restart = fault.params.get("restart_s")
        for rep in host.targets(fault):
            if rep.state == "down":
                continue
            host.crash(rep, int(self.param(fault, "xid")), None if restart is None else float(restart))
