"""batch_invariance_off: the scoped replicas are redeployed without batch-invariant kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.fault_kinds.base import Param, Redeploy, register

if TYPE_CHECKING:
    from engine_model.faults import Fault
    from engine_model.replica import Deploy


@register
class BatchInvarianceOff(Redeploy):
    name = "batch_invariance_off"
    description = "batch-invariant kernels disabled"
    params: ClassVar[dict[str, Param]] = dict(Redeploy.ROLLOUT_PARAMS)

    def deploy(self, base: Deploy, fault: Fault) -> Deploy:
        from engine_model.replica import Deploy

        return Deploy(base.config.with_changes(batch_invariant=False), base.model_version, base.model,
                      base.output_scale)
