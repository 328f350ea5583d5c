"""client_change: a client rollout or config change, how long an app's clients wait and how they retry
(engine_model.retries; telemetry_gen.clients turns the fault into a ClientChange the simulation follows)."""

from __future__ import annotations

from typing import ClassVar

from engine_model.fault_kinds.base import FaultKind, Param, register


@register
class ClientChange(FaultKind):
    name = "client_change"
    description = "a client rollout or config change: how long an app's clients wait, and how they retry"
    acts_on = "workload"
    scoped = False
    params: ClassVar[dict[str, Param]] = {
        "app": Param("only this app's clients change (default: every app)", type="str"),
        "timeout_s": Param("seconds a client waits for the whole response at intensity 1",
                           minimum=0.0, above=True),
        "max_attempts": Param("attempts per request, the first included, at intensity 1", type="int",
                              minimum=1, maximum=20),
        "backoff_s": Param("seconds before the first retry (doubling per attempt) at intensity 1", minimum=0.0),
        "backoff_max_s": Param("cap on the backoff, seconds, at intensity 1", minimum=0.0),
        "jitter": Param("largest random fraction taken off each backoff at intensity 1 (0: lockstep retries)",
                        minimum=0.0, maximum=1.0),
        "version": Param("client version label the change log records for the rollout", type="str"),
    }
