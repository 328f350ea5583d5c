"""sticky_sessions: the router pins each client (tenant or session) to the replica its first request went to.

Session affinity as load balancers do it (a cookie or a consistent hash on a header): a pinned client's
requests all go to its replica while it is routable, however loaded it is, so a few heavy clients pinned
together make one replica hot while the others idle. `share` skews where new pins land: the scoped
replicas get that fraction of the clients (by a fixed per-client coin), the rest go to the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, ParamIssue, register
from engine_model.results import EngineEvent

if TYPE_CHECKING:
    from engine_model.faults import Fault

STICKY_KEYS = ("tenant", "session")


@register
class StickySessions(FaultKind):
    name = "sticky_sessions"
    description = "the router pins each client to one replica (session affinity)"
    acts_on = "router"
    params: ClassVar[dict[str, Param]] = {
        "key": Param("what a pin follows: tenant (the API key; default) or session (a conversation)", type="str",
                     default="tenant", choices=STICKY_KEYS),
        "share": Param("fraction of the clients pinned to the scoped replicas (default: wherever the normal "
                       "policy sends a client's first request)", minimum=0.0, maximum=1.0),
    }

    def check(self, fault: Mapping[str, Any]) -> list[ParamIssue]:
        issues = super().check(fault)
        params = fault.get("params")
        has_share = isinstance(params, Mapping) and "share" in params
        if has_share and fault.get("scope", "all") == "all":
            issues.append(ParamIssue(("scope",), "sticky_sessions with a share pins that share of the clients to "
                                     "the scoped replicas: give it a scope", "write scope: {replicas: [vllm-0]}"))
        if not has_share and fault.get("scope", "all") != "all":
            issues.append(ParamIssue(("scope",), "without a share, sticky_sessions ignores its scope",
                                     "add params.share, or remove scope"))
        return issues

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        # intensity: the fraction of clients whose pin is honoured (the others are routed as before)
        share = fault.params.get("share")
        hot = tuple(r.index for r in host.targets(fault)) if share is not None else ()
        if start:
            host.router.set_sticky(str(self.param(fault, "key")), fault.intensity, hot,
                                   -1.0 if share is None else float(share))
        else:
            host.router.set_sticky("", 0.0, (), -1.0)
        host.router_events.append(EngineEvent(host.now, "router", "sticky_sessions",
                                              {"key": host.router.sticky_key or "off"}))
