"""An incident's clients as the engine model sees them: retry policies per app and client_change faults.

The requests table gains two columns (attempt, first_request_id) exactly when the incident's clients can
retry: a retry policy in the workload or an app, or a client_change fault anywhere in the file (its faults
or a hypothesis's world). That keeps every world of one incident on one schema, and leaves the tables of an
incident without retries byte-for-byte as they were.
"""

from __future__ import annotations

from typing import Any

from engine_model.retries import NO_RETRY, ClientChange, Clients, RetryPolicy
from incidents.spec import FaultSpec, Incident, Retry

CLIENT_FAULT = "client_change"
RETRY_KNOBS = ("max_attempts", "backoff_s", "backoff_max_s", "jitter")


def _policy(r: Retry | None) -> RetryPolicy:
    if r is None:
        return NO_RETRY
    return RetryPolicy(r.max_attempts, r.backoff_s, r.backoff_max_s, r.jitter, r.on_timeout, r.on_error)


def declares_clients(inc: Incident) -> bool:
    """True when any client of the incident may retry, in any of its worlds."""
    w = inc.workload
    if w.retry is not None or (not isinstance(w.apps, str) and any(a.retry is not None for a in w.apps)):
        return True
    worlds = [inc.faults] + [h.world or [] for h in inc.hypotheses]
    # intensity 0 is no fault at all: it must not add the retry columns either
    return any(fs.kind == CLIENT_FAULT and fs.intensity > 0 for faults in worlds for fs in faults)


def _scaled(base: float, new: Any, intensity: float) -> float:
    return base + (float(new) - base) * intensity


def _change(fs: FaultSpec, policies: dict[str, RetryPolicy], default: RetryPolicy,
            timeouts: dict[str, float]) -> ClientChange:
    """A client_change fault as a ClientChange: each given knob moves from the app's own value towards the
    fault's by `intensity` (the default app's when the fault names none)."""
    p, k = fs.params, fs.intensity
    app = str(p["app"]) if p.get("app") is not None else None
    base = policies.get(app, default) if app is not None else default
    policy: RetryPolicy | None = None
    if any(name in p for name in RETRY_KNOBS):
        policy = RetryPolicy(
            max_attempts=max(1, round(_scaled(base.max_attempts, p.get("max_attempts", base.max_attempts), k))),
            backoff_s=max(0.0, _scaled(base.backoff_s, p.get("backoff_s", base.backoff_s), k)),
            backoff_max_s=max(0.0, _scaled(base.backoff_max_s, p.get("backoff_max_s", base.backoff_max_s), k)),
            jitter=min(1.0, max(0.0, _scaled(base.jitter, p.get("jitter", base.jitter), k))),
            on_timeout=base.on_timeout, on_error=base.on_error,
        )
    timeout = None
    if "timeout_s" in p:
        own = timeouts.get(app, 600.0) if app is not None else max(timeouts.values(), default=600.0)
        timeout = max(0.001, _scaled(own, p["timeout_s"], k))
    return ClientChange(fs.at_s, fs.until_s, app, timeout, policy)


def client_model(inc: Incident, seed: int, app_timeouts: dict[str, float], *, ablate: bool = False
                 ) -> Clients | None:
    """The incident's clients (None when none can retry, so the engine runs exactly as without clients).
    `app_timeouts`: each app's own client timeout, seconds. Ablated: the client_change faults are gone."""
    if not declares_clients(inc):
        return None
    w = inc.workload
    default = _policy(w.retry)
    policies: dict[str, RetryPolicy] = {}
    if not isinstance(w.apps, str):
        policies = {a.name: _policy(a.retry) for a in w.apps if a.retry is not None}
    changes = () if ablate else tuple(
        _change(fs, policies, default, app_timeouts) for fs in inc.faults if fs.kind == CLIENT_FAULT
    )
    # the retry jitter's own stream: a 63-bit seed from the run's (the workload's draws stay as they were)
    mixed = (seed * 0x9E3779B97F4A7C15 + 0x636C69656E7473) & ((1 << 63) - 1)  # "clients"
    return Clients(policies, default, changes, base_timeouts=dict(app_timeouts), seed=mixed,
                   send_until=inc.window.duration_s)


def client_deploys(inc: Incident, *, ablate: bool = False) -> list[tuple[float, str, str]]:
    """(t, component, detail) of every client_change fault that names a `version`: the rollout a change log
    records (it says which version, not what the new client does)."""
    if ablate:
        return []
    out = []
    for fs in inc.faults:
        if fs.kind == CLIENT_FAULT and fs.params.get("version") is not None:
            app = str(fs.params.get("app") or "api")
            out.append((fs.at_s, f"{app}-client", f"{app}-client deployed version {fs.params['version']}"))
    return out
