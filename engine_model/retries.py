"""Clients that time out and retry: each failed attempt may come back as a new request after a backoff.

A client sends a request and waits up to its timeout for the whole response. When the response is an
error (the engine died under it, or the router had no replica) or the client gives up waiting (the
engine then aborts the request, as vLLM does on disconnect), the client may send the same prompt again
after a backoff: `backoff_s * 2**(attempt - 1)` seconds, capped at `backoff_max_s`, shortened by a random
fraction of up to `jitter` of itself. The retry is a new request (its own id, a fresh KV allocation) that
carries its attempt number and the id of the first attempt, so the multiplication can be counted.

Defaults follow the OpenAI Python client (openai-python `_constants.py`: DEFAULT_MAX_RETRIES = 2, so three
attempts; INITIAL_RETRY_DELAY = 0.5 s; MAX_RETRY_DELAY = 8.0 s; `_base_client.py` multiplies the delay by
`1 - 0.25 * random()`), which retries timeouts, connection errors, 408/409/429 and 5xx responses.

Nothing here writes telemetry: the simulation sends the retries, and every symptom of a retry storm (more
arrivals than users, longer queues, more timeouts, less goodput) emerges from the engines serving them.
Jitter is drawn from a hash of (seed, first request id, attempt), so a run is reproducible and one
request's draws do not depend on the order in which others failed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from engine_model.request import Request

RETRY_ID_BASE = 30_000_000
"""Request ids of retries start here (the workload's run from 0, probes from 10M, surges from 20M)."""

_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of a 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def uniform(seed: int, first_id: int, attempt: int) -> float:
    """A uniform draw in [0, 1) fixed by (seed, first request id, attempt)."""
    h = _mix64(_mix64(_mix64(seed & _MASK64) ^ (first_id & _MASK64)) ^ attempt)
    return (h >> 11) / float(1 << 53)


@dataclass(frozen=True)
class RetryPolicy:
    """How one app's clients retry. Seconds throughout.

    Invariants: max_attempts >= 1 (1 never retries); 0 <= jitter <= 1; backoff_s, backoff_max_s >= 0.
    """

    max_attempts: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    jitter: float = 0.25
    on_timeout: bool = True  # retry when the client gave up waiting
    on_error: bool = True  # retry an error response (engine failure, no replica)

    def delay(self, attempt: int, u: float) -> float:
        """Seconds between the failure of attempt `attempt` (1-based) and the next send; u in [0, 1)."""
        base = min(self.backoff_max_s, self.backoff_s * 2.0 ** (attempt - 1))
        return base * (1.0 - self.jitter * u)

    def retries(self, status: str) -> bool:
        return (status == "timeout" and self.on_timeout) or (status == "error" and self.on_error)


NO_RETRY = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class ClientChange:
    """A client-side change in force from start_s until end_s (None: to the end): a new client library or
    config for one app (None: every app). None fields keep what the clients had."""

    start_s: float
    end_s: float | None
    app: str | None
    timeout_s: float | None = None
    policy: RetryPolicy | None = None

    def active(self, app: str, t: float) -> bool:
        in_force = self.start_s <= t and (self.end_s is None or t < self.end_s)
        return in_force and (self.app is None or self.app == app)


class Clients:
    """Every app's clients: their retry policy and timeout at each moment, and the retries they send.

    `policies` maps an app to its policy (apps not in it use `default`); `base_timeouts` an app to its
    clients' own timeout, which a retry sent after a change ended returns to (default: the failed
    attempt's); `changes` apply in order, a later one overriding an earlier one where both are in force.
    A retry is sent only before `send_until` (the end of the window: clients that fail later are not
    followed). The policy in force when an attempt fails decides whether and when it is retried."""

    def __init__(self, policies: dict[str, RetryPolicy], default: RetryPolicy = NO_RETRY,
                 changes: tuple[ClientChange, ...] = (), *, base_timeouts: dict[str, float] | None = None,
                 seed: int = 0, send_until: float = math.inf,
                 first_retry_id: int = RETRY_ID_BASE) -> None:
        self.policies = policies
        self.default = default
        self.changes = changes
        self.base_timeouts = base_timeouts or {}
        self.seed = seed
        self.send_until = send_until
        self._next_id = first_retry_id
        self.retries_sent = 0

    def policy_at(self, app: str, t: float) -> RetryPolicy:
        policy = self.policies.get(app, self.default)
        for ch in self.changes:
            if ch.policy is not None and ch.active(app, t):
                policy = ch.policy
        return policy

    def timeout_at(self, app: str, t: float, timeout_s: float) -> float:
        for ch in self.changes:
            if ch.timeout_s is not None and ch.active(app, t):
                timeout_s = ch.timeout_s
        return timeout_s

    def max_timeout(self) -> float:
        return max((ch.timeout_s for ch in self.changes if ch.timeout_s is not None), default=0.0)

    def on_send(self, req: Request) -> Request:
        """The request as its client sent it: with the timeout in force at its send time."""
        if not self.changes:
            return req
        timeout = self.timeout_at(req.app, req.arrival_s - req.gateway_s, req.timeout_s)
        return req if timeout == req.timeout_s else replace(req, timeout_s=timeout)

    def retry(self, req: Request, status: str, failed_s: float) -> Request | None:
        """The next attempt of `req`, which ended with `status` at `failed_s` as its client saw it, or None
        when the client does not retry (policy, attempts used up, or past `send_until`). The retry reaches
        the router `gateway_s` after it is sent, like the first attempt."""
        policy = self.policy_at(req.app, failed_s)
        if req.attempt >= policy.max_attempts or not policy.retries(status):
            return None
        first_id = req.first_request_id if req.first_request_id >= 0 else req.request_id
        sent = failed_s + policy.delay(req.attempt, uniform(self.seed, first_id, req.attempt))
        if sent >= self.send_until:
            return None
        rid = self._next_id
        self._next_id += 1
        self.retries_sent += 1
        timeout = self.timeout_at(req.app, sent, self.base_timeouts.get(req.app, req.timeout_s))
        return replace(req, request_id=rid, arrival_s=sent + req.gateway_s, attempt=req.attempt + 1,
                       first_request_id=first_id, timeout_s=timeout)
