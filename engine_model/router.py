"""The router in front of the replicas: load balancing, health checks, an optional fallback pool."""

from __future__ import annotations

import bisect
import hashlib

from mypy_extensions import mypyc_attr

from engine_model.replica import Replica
from engine_model.request import Request

POLICIES = ("round_robin", "least_outstanding", "affinity")
_VNODES = 64


def _hash64(*parts: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Router:
    """Chooses a replica per request.

    Health checks remove a crashed replica only once noticed (`Replica.noticed_down`), so a
    request that lands between the crash and the next check fails. Overflow goes to the
    fallback pool when its primary choice has at least `fallback_threshold` requests waiting.
    """

    def __init__(self, primary: list[Replica], fallback: list[Replica], policy: str = "least_outstanding",
                 fallback_threshold: int | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown router policy {policy!r}; known: {', '.join(POLICIES)}")
        self.primary = primary
        self.fallback = fallback
        self.policy = policy
        self.fallback_threshold = fallback_threshold
        self._rr = 0
        self._ring = sorted((_hash64(r.name, v), i) for i, r in enumerate(primary) for v in range(_VNODES))
        self._ring_keys = [k for k, _ in self._ring]
        self.fallback_routed = 0
        # a load-balancing bug (fault router_skew): the replicas in skew_to get skew_share of the arrivals
        # together; skew_share < 0 means no skew
        self.skew_to: frozenset[int] = frozenset()
        self.skew_share = -1.0
        self._skew_rr = [0, 0]  # round-robin positions within the two groups
        # session affinity (fault sticky_sessions): "" is off, else what a pin follows: "tenant" or "session".
        # A client whose coin is below sticky_honoured keeps the replica of its first request (pins: client ->
        # replica index) while that is routable; with sticky_share >= 0, a new pin goes to the sticky_hot
        # replicas for that share of the clients (a fixed per-client coin) and to the others for the rest.
        self.sticky_key = ""
        self.sticky_honoured = 1.0
        self.sticky_hot: frozenset[int] = frozenset()
        self.sticky_share = -1.0
        self.pins: dict[str, int] = {}
        # replicas taken out of the pool (fault router_drain, the `drain` action): never chosen, pinned or
        # not; what they hold finishes
        self.drained: frozenset[int] = frozenset()

    def set_skew(self, replicas: tuple[int, ...], share: float) -> None:
        """Send `share` of all arrivals to `replicas` (indices) and the rest to the others; share < 0 ends it."""
        self.skew_to = frozenset(replicas) if share >= 0.0 else frozenset()
        self.skew_share = share if share >= 0.0 else -1.0

    def set_sticky(self, key: str, honoured: float, hot: tuple[int, ...], share: float) -> None:
        """Pin clients by `key` ("tenant" or "session"; "" ends it and forgets every pin). `honoured`: the
        fraction of clients pinned; `share` >= 0 sends that fraction of new pins to the `hot` replicas."""
        self.sticky_key = key
        self.sticky_honoured = honoured
        self.sticky_hot = frozenset(hot)
        self.sticky_share = share
        self.pins = {}

    def set_drained(self, replicas: tuple[int, ...]) -> None:
        """Take `replicas` (indices) out of the pool (an empty tuple puts every one back)."""
        self.drained = frozenset(replicas)

    def _routable(self, r: Replica) -> bool:
        # a crashed replica keeps receiving traffic until the health check notices
        return (r.state == "up" or (r.state == "down" and not r.noticed_down)) and r.index not in self.drained

    def choose(self, req: Request) -> tuple[Replica | None, str]:
        """Return (replica, route) with route "primary" or "fallback"; (None, ...) if nothing can serve."""
        if self.sticky_key:
            pick = self._pick_sticky(req)
        else:
            pick = self._pick_primary(req) if self.skew_share < 0.0 else self._pick_skewed(req)
        if (
            self.fallback
            and self.fallback_threshold is not None
            and (pick is None or pick.sched.num_waiting >= self.fallback_threshold)
        ):
            alive = [r for r in self.fallback if r.state == "up"]
            if alive:
                self.fallback_routed += 1
                return min(alive, key=lambda r: (r.outstanding, r.index)), "fallback"
        return pick, "primary"

    def _pick_primary(self, req: Request) -> Replica | None:
        reps = self.primary
        n = len(reps)
        if self.policy == "affinity":
            key = req.session_key or req.prefix_key or req.request_id
            i = bisect.bisect(self._ring_keys, _hash64(key)) % len(self._ring)
            for step in range(len(self._ring)):
                r = reps[self._ring[(i + step) % len(self._ring)][1]]
                if self._routable(r):
                    return r
            return None
        if self.policy == "round_robin":
            for step in range(n):
                r = reps[(self._rr + step) % n]
                if self._routable(r):
                    self._rr = (self._rr + step + 1) % n
                    return r
            return None
        best: Replica | None = None
        best_load = 1 << 60
        start = self._rr
        self._rr = (start + 1) % n  # rotate ties so no replica is favoured
        drained = self.drained
        for k in range(start, start + n):  # reps[start:] + reps[:start], without building three lists
            r = reps[k - n if k >= n else k]
            state = r.state
            if state != "up" and (state != "down" or r.noticed_down):  # not self._routable(r), inlined
                continue
            if drained and r.index in drained:
                continue
            sched = r.sched
            load = len(sched.prefilling) + len(sched.decoding) + len(sched.waiting)  # r.outstanding
            if load < best_load:
                best, best_load = r, load
        return best

    def _pick_skewed(self, req: Request) -> Replica | None:
        """The skew's decision: a fixed per-request coin picks the group (so a larger share only moves more
        requests over), then the normal policy picks within it; if the group has no routable replica, the
        normal policy over all of them."""
        coin = _hash64("router_skew", req.request_id, req.prompt_hash) / 18446744073709551616.0  # / 2**64
        inside = coin < self.skew_share
        group = [r for r in self.primary if (r.index in self.skew_to) == inside]
        pick = self._pick_within(req, group, 1 if inside else 0)
        return pick if pick is not None else self._pick_primary(req)

    def _pick_within(self, req: Request, group: list[Replica], slot: int) -> Replica | None:
        """The policy restricted to `group` (round-robin position `slot` of _skew_rr)."""
        if not group:
            return None
        if self.policy == "affinity":
            members = frozenset(r.index for r in group)
            key = req.session_key or req.prefix_key or req.request_id
            i = bisect.bisect(self._ring_keys, _hash64(key)) % len(self._ring)
            for step in range(len(self._ring)):
                r = self.primary[self._ring[(i + step) % len(self._ring)][1]]
                if r.index in members and self._routable(r):
                    return r
            return None
        n = len(group)
        start = self._skew_rr[slot] % n
        if self.policy == "round_robin":
            for step in range(n):
                r = group[(start + step) % n]
                if self._routable(r):
                    self._skew_rr[slot] = (start + step + 1) % n
                    return r
            return None
        self._skew_rr[slot] = (start + 1) % n  # rotate ties so no replica is favoured
        best: Replica | None = None
        best_load = 1 << 60
        for r in group[start:] + group[:start]:
            if not self._routable(r):
                continue
            load = r.outstanding
            if load < best_load:
                best, best_load = r, load
        return best

    def _pick_sticky(self, req: Request) -> Replica | None:
        """A pinned client's replica while it is routable; else a new pin (by the share's coin and the normal
        policy within the chosen group); a client whose pin is not honoured goes by the normal policy."""
        client = req.tenant if self.sticky_key == "tenant" else f"s{req.session_key or req.request_id}"
        if self.sticky_honoured < 1.0 and _hash64("sticky", client) / 18446744073709551616.0 >= self.sticky_honoured:
            return self._pick_primary(req) if self.skew_share < 0.0 else self._pick_skewed(req)
        idx = self.pins.get(client)
        if idx is not None and self._routable(self.primary[idx]):
            return self.primary[idx]
        pick: Replica | None = None
        if self.sticky_share >= 0.0:
            coin = _hash64("sticky_share", client) / 18446744073709551616.0  # / 2**64
            inside = coin < self.sticky_share
            group = [r for r in self.primary if (r.index in self.sticky_hot) == inside]
            pick = self._pick_within(req, group, 1 if inside else 0)
        if pick is None:
            pick = self._pick_primary(req) if self.skew_share < 0.0 else self._pick_skewed(req)
        if pick is not None:
            self.pins[client] = pick.index
        return pick
