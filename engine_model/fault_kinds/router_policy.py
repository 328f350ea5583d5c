"""router_policy: the router's load-balancing policy changes for the whole fleet."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register
from engine_model.results import EngineEvent
from engine_model.router import POLICIES

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class RouterPolicy(FaultKind):
    name = "router_policy"
    description = "the router's load-balancing policy changes"
    acts_on = "router"
    graded = False  # a policy is in force or not
    scoped = False  # one router in front of every replica
    params: ClassVar[dict[str, Param]] = {
        "policy": Param("|".join(POLICIES), type="str", default="round_robin", choices=POLICIES),
    }

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        old = host.router.policy
        host.router.policy = str(self.param(fault, "policy")) if start else host.fleet.router_policy
        host.router_events.append(EngineEvent(host.now, "router", "router_policy",
                                              {"old": old, "new": host.router.policy}))
