"""Closed-loop clients: a pool of N clients, each sending its next request when its last one ends.

A closed loop is how load tests drive a server (`vllm bench serve --max-concurrency N`, a fixed pool
of users): the offered load follows the server's speed instead of a clock. Its requests are prepared
in advance, with every length and sampling parameter fixed; only their send times depend on the run.

Encoding in a request list (so `Simulation` keeps taking one sorted list):
- `Request.loop` names the pool (>= 0; -1 is an open-loop request, sent at its own `arrival_s`);
- a pool's first requests carry finite `arrival_s` (each client's first send, e.g. all at t=0): they
  are ordinary arrivals; every other request of the pool has `arrival_s = inf` and is *held*;
- when any request of the pool ends, for the client as the client sees it (its last token streamed, an
  error, or its own timeout), the pool releases its next held request in list order: sent `think_s`
  later (the request's own think time), at the router `gateway_s` after that.
So each pool keeps at most as many requests in flight as it started with, and a pool whose held
requests run out simply stops. Sends at or after the end of the run's window are not made.

Invariants: every held request is released at most once, in list order per pool; release times are
>= the time of the end that released them. Deterministic: no randomness here.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

from mypy_extensions import mypyc_attr

from engine_model.request import Request


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ClosedLoops:
    """The held requests of every closed-loop pool, and the releases not yet delivered (a heap)."""

    def __init__(self, requests: list[Request]) -> None:
        self.held: dict[int, deque[Request]] = {}
        for r in requests:
            if r.loop >= 0 and math.isinf(r.arrival_s):
                self.held.setdefault(r.loop, deque()).append(r)
        # (time at the router, release order, request): release order breaks ties deterministically
        self.heap: list[tuple[float, int, Request]] = []
        self._order = 0
        self.released = 0

    def __bool__(self) -> bool:
        return bool(self.held)

    def next_time(self) -> float:
        """When the next released request reaches the router (seconds; inf if none is pending)."""
        return self.heap[0][0] if self.heap else math.inf

    def ended(self, req: Request, t: float) -> None:
        """Request `req` ended for its client at `t` (seconds): release its pool's next held request."""
        queue = self.held.get(req.loop)
        if not queue:
            return
        nxt = queue.popleft()
        nxt.arrival_s = t + nxt.think_s + nxt.gateway_s
        self._order += 1
        self.released += 1
        heapq.heappush(self.heap, (nxt.arrival_s, self._order, nxt))

    def drop_held(self, drop: Callable[[Request], bool]) -> int:
        """Remove the held and released-but-unsent requests for which `drop` is true (a pool then releases its
        next request that is kept); how many."""
        n = 0
        for loop, queue in list(self.held.items()):
            kept = deque(r for r in queue if not drop(r))
            n += len(queue) - len(kept)
            self.held[loop] = kept
        heap = [e for e in self.heap if not drop(e[2])]
        n += len(self.heap) - len(heap)
        heapq.heapify(heap)
        self.heap = heap
        return n

    def pop(self) -> Request:
        """The earliest released request (call only when next_time() is finite)."""
        return heapq.heappop(self.heap)[2]
