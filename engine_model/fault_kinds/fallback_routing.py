"""fallback_routing: overflow traffic goes to the fleet's fallback pool once a replica's queue is this long."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, ParamIssue, register
from engine_model.results import EngineEvent

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class FallbackRouting(FaultKind):
    name = "fallback_routing"
    description = "overflow traffic goes to the fallback pool (fleet.router.fallback)"
    acts_on = "router"
    graded = False
    scoped = False
    params: ClassVar[dict[str, Param]] = {
        "queue_threshold": Param("waiting requests above which traffic spills", type="int", default=8, minimum=0),
    }

    def check_fleet(self, fault: Mapping[str, Any], fleet: Mapping[str, Any]) -> list[ParamIssue]:
        router = fleet.get("router")
        if not (isinstance(router, Mapping) and router.get("fallback")):
            return [ParamIssue(("kind",), "fallback_routing spills to the fleet's fallback pool, and this fleet has "
                               "none", "add fleet.router.fallback (model, gpu, replicas, queue_threshold)")]
        return []

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        old = host.router.fallback_threshold
        new = int(self.param(fault, "queue_threshold")) if start else host.fleet.fallback_threshold
        host.router.fallback_threshold = new
        host.router_events.append(EngineEvent(host.now, "router", "fallback_policy",
                                              {"old": old, "new": host.router.fallback_threshold}))
