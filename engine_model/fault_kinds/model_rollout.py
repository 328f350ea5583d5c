"""model_rollout: the scoped replicas are redeployed, one after another, with a new model version."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from engine_model.config import KV_DTYPES, WEIGHT_DTYPES
from engine_model.fault_kinds.base import Param, Redeploy, WorkloadHost, register
from engine_model.profiles import MODELS, get_model

if TYPE_CHECKING:
    from engine_model.faults import Fault
    from engine_model.replica import Deploy


@register
class ModelRollout(Redeploy):
    name = "model_rollout"
    description = "a new model version (possibly quantized)"
    graded = True  # intensity scales output_scale and eval_deltas; the rest happens at any intensity above 0
    params: ClassVar[dict[str, Param]] = {
        "version": Param("model version label (default: the fleet's with -next)", type="str"),
        "weight_dtype": Param("bf16|fp8|int4", type="str", choices=WEIGHT_DTYPES),
        "kv_cache_dtype": Param("auto|fp8", type="str", choices=KV_DTYPES),
        "model": Param("the model the new version is (default: the same model)", type="str", choices=tuple(MODELS)),
        "output_scale": Param("mean output length multiplier at intensity 1", default=1.0, minimum=0.0, above=True),
        "eval_deltas": Param("task -> score change at intensity 1 (quality is not simulated per token; "
                             "telemetry_gen's offline evaluations read it)", type="mapping"),
        **Redeploy.ROLLOUT_PARAMS,
    }

    def deploy(self, base: Deploy, fault: Fault) -> Deploy:
        from engine_model.replica import Deploy

        p = fault.params
        cfg = base.config.with_changes(**{k: p[k] for k in ("weight_dtype", "kv_cache_dtype") if k in p})
        version = str(p.get("version", base.model_version + "-next"))
        model = get_model(str(p["model"])) if "model" in p else base.model
        scale = 1.0 + (float(p.get("output_scale", 1.0)) - 1.0) * fault.intensity
        return Deploy(cfg, version, model, scale)

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        # the new version's offline evaluation, before it rolls out
        version = self.param(fault, "version")
        raw = self.param(fault, "eval_deltas") or {}
        host.evaluate_version(fault, None if version is None else str(version),
                              {str(task): float(v) * fault.intensity for task, v in raw.items()})
