"""router_drain: the scoped replicas are taken out of the router's pool (an operator's drain).

No request is routed to a drained replica from then on, whatever the policy and whatever session affinity
pinned to it; what it already holds finishes. The scope cannot be the whole fleet (nothing would serve), and
the mitigation's `drain` refuses draining every replica one by one."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register
from engine_model.results import EngineEvent

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class RouterDrain(FaultKind):
    name = "router_drain"
    description = "the scoped replicas are taken out of the router's pool"
    acts_on = "router"
    graded = False  # in the pool or not
    needs_partial_scope = True
    params: ClassVar[dict[str, Param]] = {}

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        scoped = tuple(r.index for r in host.targets(fault))
        old = host.router.drained
        host.router.set_drained(tuple(sorted(set(old) | set(scoped))) if start
                                else tuple(sorted(set(old) - set(scoped))))
        for r in host.targets(fault):
            host.router_events.append(EngineEvent(host.now, r.name, "router_drain",
                                                  {"old": str(r.index in old).lower(), "new": str(start).lower()}))
