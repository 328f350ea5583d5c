"""seeds_unpinned: the scoped replicas are redeployed with per-request sampling seeds no longer honoured."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import Param, Redeploy, register

if TYPE_CHECKING:
    from engine_model.faults import Fault
    from engine_model.replica import Deploy


@register
class SeedsUnpinned(Redeploy):
    name = "seeds_unpinned"
    description = "per-request sampling seeds no longer honoured"
    params: ClassVar[dict[str, Param]] = dict(Redeploy.ROLLOUT_PARAMS)

    def deploy(self, base: Deploy, fault: Fault) -> Deploy:
        from engine_model.replica import Deploy

        return Deploy(base.config.with_changes(seed_pinned=False), base.model_version, base.model, base.output_scale)
