"""router_skew: a load-balancing bug sends a fixed share of all arrivals to the scoped replicas."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import FaultHost, FaultKind, Param, register

if TYPE_CHECKING:
    from engine_model.faults import Fault


@register
class RouterSkew(FaultKind):
    name = "router_skew"
    description = "a load-balancing bug sends extra traffic to the scoped replicas"
    acts_on = "router"
    gradual = True
    needs_partial_scope = True
    params: ClassVar[dict[str, Param]] = {
        "share": Param("fraction of all arrivals the scoped replicas get together, at intensity 1 (e.g. 0.5 for 2 "
                       "of 6)", default=0.5, minimum=0.0, maximum=1.0),
    }

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        # the scoped replicas together get `share` of the arrivals (their natural share k/n at intensity 0),
        # the others the rest, each group balanced by the normal policy
        scoped = tuple(r.index for r in host.targets(fault))
        n = len(host.primary)
        if start and 0 < len(scoped) < n and fault.intensity > 0.0:
            share = fault.scaled(len(scoped) / n, float(self.param(fault, "share")))
            host.router.set_skew(scoped, min(1.0, max(0.0, share)))
        else:
            host.router.set_skew((), -1.0)
