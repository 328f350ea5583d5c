"""The event sources of a simulation run, and the one order in which events at the same instant fire.

A run (engine_model.simulation) jumps from event to event. Each event comes from one source, and every
source answers two questions: when is its next event (`next_time`, simulated seconds, infinity when it
has none) and what happens then (`fire`). The run fires the earliest next event of all sources. At
equal times the source earlier in this list goes first; `Simulation` builds its sources in this order
(`SOURCE_ORDER` names them) and the tie-break is written nowhere else:

1. `arrival`: the next request of the request list reaches the router.
2. `loop_send`: a closed-loop client, released by the end of its previous request, sends its next one.
3. `retry`: a client sends a failed or timed-out attempt again after its backoff.
4. `handover`: an idle replica's API server ends an intake, and the engine takes what has reached its
   queue (ties: the lowest replica index).
5. `step_end`: a replica's running step, or run of decode steps, ends (ties: the step timed first).
6. `client_timeout`: a client gives up on a request still in flight (ties: the queue of the smaller
   timeout value, then arrival order).
7. `timer`: scheduled fleet events (`Timers`: samples, faults, deploys, restarts, health checks, drain
   deadlines), ordered among themselves by kind, then by when they were scheduled.

Why this order: requests that arrive at an instant are in the API server's intake before anything
else at that instant is decided, so a replica that plans a step then sees them; a request that ends
exactly at its client's deadline ended in time (timeouts come after step ends); a scrape or a fault
at an instant sees the fleet after everything else that happened then (timers last).

Sources marked `bounded` end the run when their next event lies past the horizon (the window plus the
drain). Arrivals and retries are not: the window bounds the sends already.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from mypy_extensions import mypyc_attr

from engine_model.clients import ClosedLoops
from engine_model.replica import Replica
from engine_model.request import Request
from engine_model.scheduler import Sequence

if TYPE_CHECKING:
    from engine_model.simulation import Simulation
    from engine_model.trace import EventTrace

INF: Final = math.inf
SOURCE_ORDER: Final[tuple[str, ...]] = (
    "arrival", "loop_send", "retry", "handover", "step_end", "client_timeout", "timer",
)
"""Source names in tie-break order (see the module docstring)."""

# Timer kinds, ordered so that at equal times the earlier kind goes first.
RESTART: Final = 1
HEALTH: Final = 2
DRAIN_DEADLINE: Final = 3
DEPLOY: Final = 4
FAULT: Final = 5
FAULT_END: Final = 6
SAMPLE: Final = 7
TIMER_NAMES: Final[tuple[str, ...]] = ("", "restart", "health_check", "drain_deadline", "deploy", "fault", "fault_end",
                                "sample")
"""Name of each timer kind, by kind (index 0 unused)."""
# sequence states a client can still abandon ("frontend": in the API server's intake)
LIVE: Final = frozenset(("frontend", "waiting", "prefilling", "decoding"))

TimerHandler = Callable[["Simulation", float, int, int], None]
"""What a timer does when it fires: called with (the simulation, time in seconds, a, b), a and b the two ints
it was pushed with. A plain function (e.g. `Simulation._on_sample`), so no source holds the simulation."""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class EventSource:
    """One stream of a run's events. Subclasses override `next_time` and `fire` (and `record`)."""

    def __init__(self, name: str, bounded: bool) -> None:
        self.name = name
        self.bounded = bounded  # an event past the horizon ends the run

    def next_time(self) -> float:
        """Simulated seconds of this source's next event; infinity when it has none."""
        return INF

    def fire(self, sim: Simulation, t: float) -> None:
        """Handle the event `next_time` just returned, on `sim` (whose clock is already at `t` seconds)."""

    def record(self, trace: EventTrace, t: float) -> None:
        """Add the event about to fire at `t` seconds to `trace` (called only when tracing)."""
        trace.instant(self.name, t)


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class RequestList(EventSource):
    """The request list, sorted by arrival: each request reaches the router at its `arrival_s`, unless
    its client sent it at or after the end of the window (then neither it nor any later one is sent; a
    request the gateway delayed may still reach the router after the window, and is served)."""

    def __init__(self, requests: list[Request], window_s: float) -> None:
        super().__init__("arrival", bounded=False)
        self.requests = requests
        self.window_s = window_s
        self.i = 0
        self.t_next = self._time_of(0)

    def _time_of(self, i: int) -> float:
        if i >= len(self.requests):
            return INF
        req = self.requests[i]
        t = req.arrival_s
        return INF if t - req.gateway_s >= self.window_s else t

    def next_time(self) -> float:
        return self.t_next

    def forget_sent(self) -> None:
        """Let go of the requests already sent (the list then starts at the next one)."""
        self.requests = self.requests[self.i:]
        self.i = 0

    def drop_pending(self, drop: Callable[[Request], bool]) -> int:
        """Remove the requests not yet sent for which `drop` is true; how many."""
        rest = [r for r in self.requests[self.i:] if not drop(r)]
        n = len(self.requests) - self.i - len(rest)
        self.requests = self.requests[:self.i] + rest
        self.t_next = self._time_of(self.i)
        return n

    def fire(self, sim: Simulation, t: float) -> None:
        req = self.requests[self.i]
        sim.arrival(req)
        self.i += 1
        self.t_next = self._time_of(self.i)

    def record(self, trace: EventTrace, t: float) -> None:
        trace.instant(self.name, t, args={"request_id": self.requests[self.i].request_id})


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class LoopSends(EventSource):
    """Closed-loop clients' released requests (engine_model.clients); a send at or after the end of the
    window is not made."""

    def __init__(self, loops: ClosedLoops, window_s: float) -> None:
        super().__init__("loop_send", bounded=False)
        self.loops = loops
        self.window_s = window_s

    def next_time(self) -> float:
        loops = self.loops
        t = loops.next_time()
        while t < INF and t - loops.heap[0][2].gateway_s >= self.window_s:
            loops.pop()  # sent after the window: never sent
            t = loops.next_time()
        return t

    def fire(self, sim: Simulation, t: float) -> None:
        sim.arrival(self.loops.pop())

    def record(self, trace: EventTrace, t: float) -> None:
        trace.instant(self.name, t, args={"request_id": self.loops.heap[0][2].request_id})


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Retries(EventSource):
    """Retries clients scheduled (engine_model.retries): a heap of (arrival at the router, order, request)."""

    def __init__(self) -> None:
        super().__init__("retry", bounded=False)
        self.queue: list[tuple[float, int, Request]] = []
        self._n = 0

    def push(self, req: Request) -> None:
        """Schedule `req` (a retry) to reach the router at its `arrival_s`."""
        self._n += 1
        heapq.heappush(self.queue, (req.arrival_s, self._n, req))

    def next_time(self) -> float:
        return self.queue[0][0] if self.queue else INF

    def fire(self, sim: Simulation, t: float) -> None:
        sim.arrival(heapq.heappop(self.queue)[2])

    def record(self, trace: EventTrace, t: float) -> None:
        req = self.queue[0][2]
        trace.instant(self.name, t, args={"request_id": req.request_id, "attempt": req.attempt})


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Handovers(EventSource):
    """Idle replicas' API servers ending an intake (a busy replica picks its requests up at its next step
    boundary instead)."""

    def __init__(self, replicas: list[Replica]) -> None:
        super().__init__("handover", bounded=True)
        self.replicas = replicas
        self.due: Replica | None = None  # the replica of the next handover, set by next_time

    def next_time(self) -> float:
        t_next = INF
        due: Replica | None = None
        for rep in self.replicas:
            if rep.plan is None and rep.frontend.pending:
                h = rep.frontend.pending[0][0]
                if h < t_next:
                    t_next, due = h, rep
        self.due = due
        return t_next

    def fire(self, sim: Simulation, t: float) -> None:
        # every request whose intake has ended by now reaches the engine's queue; one step is planned for all
        assert self.due is not None
        sim.kick(self.due)

    def record(self, trace: EventTrace, t: float) -> None:
        assert self.due is not None
        trace.instant(self.name, t, self.due.index, {"requests": len(self.due.frontend.pending)})


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class StepEnds(EventSource):
    """Replicas' running steps. A replica's pending step end is its live `plan_end`, found by a scan (a
    fleet has a few replicas), so a step cut short leaves nothing stale behind. `timed_at[i]` orders the
    step ends of replica i and the others at equal times: the step timed first ends first."""

    def __init__(self, replicas: list[Replica]) -> None:
        super().__init__("step_end", bounded=True)
        self.replicas = replicas
        self.timed_at = [0] * len(replicas)
        self._n = 0
        self.due: Replica | None = None  # the replica whose step ends next, set by next_time

    def timed(self, rep: Replica) -> None:
        """`rep`'s pending step end was just set or moved."""
        self._n += 1
        self.timed_at[rep.index] = self._n

    def next_time(self) -> float:
        t_next = INF
        due: Replica | None = None
        timed_at = self.timed_at
        for rep in self.replicas:
            if rep.plan is not None:
                end = rep.plan_end
                if end < t_next or (end == t_next and due is not None and timed_at[rep.index] < timed_at[due.index]):
                    t_next, due = end, rep
        self.due = due
        return t_next

    def fire(self, sim: Simulation, t: float) -> None:
        rep = self.due
        assert rep is not None
        outs = rep.finish_step(t)
        if outs:
            sim.record_all(outs)
        sim.kick(rep)

    def record(self, trace: EventTrace, t: float) -> None:
        rep = self.due
        assert rep is not None and rep.plan is not None
        plan = rep.plan
        trace.span(plan.kind, rep.plan_start, t, rep.index,
                   {"steps": plan.n_steps, "decode_seqs": plan.decode_seqs, "prefill_tokens": plan.prefill_tokens})


Deadline = tuple[float, int, Sequence]
"""(seconds when the client gives up, replica index, the request's sequence on that replica)"""


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class ClientTimeouts(EventSource):
    """Clients giving up on requests in flight. One queue per timeout value, in arrival order: arrivals
    come in time order, so each queue is sorted but for the few ms by which gateway times differ, and
    needs no heap. A request that finished, failed or was aborted leaves its entry behind, dropped when
    it reaches the head of its queue."""

    def __init__(self) -> None:
        super().__init__("client_timeout", bounded=True)
        self.queues: dict[float, deque[Deadline]] = {}
        self.due: deque[Deadline] | None = None  # the queue of the next timeout, set by next_time
        # next_time's last answer (seconds), still right while no queue changed (add and fire clear
        # _fresh) and the head of `due` is live: the run asks before every event, timeouts rarely fire
        self._t_next = INF
        self._fresh = False
        self._due_seq: Sequence | None = None  # the sequence at the head of `due` when _t_next was found

    def add(self, timeout_s: float, deadline: float, replica: int, seq: Sequence) -> None:
        """The client of `seq` gives up at `deadline` seconds unless it has ended by then."""
        self._fresh = False
        queue = self.queues.get(timeout_s)
        if queue is None:
            queue = self.queues[timeout_s] = deque()
        entry = (deadline, replica, seq)
        if queue and queue[-1][0] > deadline:
            # gateway times differ by request, so a deadline can fall before the last few queued: keep the
            # queue sorted (the displaced entries are few and at its end)
            k = len(queue) - 1
            while k > 0 and queue[k - 1][0] > deadline:
                k -= 1
            queue.insert(k, entry)
        else:
            queue.append(entry)

    def next_time(self) -> float:
        # The earliest head of all queues (ties: the first queue); a head whose request has ended is dropped
        # and the search starts again. Each queue is sorted, so this finds the earliest live entry while
        # testing the state of one request per event, not of every queue's head.
        # (the head's sequence is kept aside: reading it back out of the deque cost more than the test)
        head = self._due_seq
        if self._fresh and (head is None or head.state in LIVE):
            return self._t_next  # no queue changed since, and the head found then is still live
        while True:
            t_next = INF
            due = None
            for queue in self.queues.values():
                if queue:
                    head_t = queue[0][0]
                    if head_t < t_next:
                        t_next, due = head_t, queue
            head = None
            if due is not None:
                head = due[0][2]
                if head.state not in LIVE:
                    due.popleft()  # finished, failed or aborted already
                    continue
            self.due = due
            self._due_seq = head
            self._t_next = t_next
            self._fresh = True
            return t_next

    def fire(self, sim: Simulation, t: float) -> None:
        assert self.due is not None
        self._fresh = False
        _, idx, seq = self.due.popleft()
        sim.client_gave_up(sim.replicas[idx], seq)

    def record(self, trace: EventTrace, t: float) -> None:
        assert self.due is not None
        _, idx, seq = self.due[0]
        trace.instant(self.name, t, idx, {"request_id": seq.req.request_id})


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Timers(EventSource):
    """Scheduled fleet events: a heap of (time, kind, order, a, b), handled by the handler registered for
    the kind (`a`, `b`: the kind's own arguments, e.g. a replica index and a drain token)."""

    def __init__(self, handlers: dict[int, TimerHandler]) -> None:
        super().__init__("timer", bounded=True)
        self.heap: list[tuple[float, int, int, int, int]] = []
        self._n = 0
        self.handlers: list[TimerHandler | None] = [handlers.get(kind) for kind in range(len(TIMER_NAMES))]

    def push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        """Schedule a timer of `kind` at `t` seconds."""
        self._n += 1
        heapq.heappush(self.heap, (t, kind, self._n, a, b))

    def next_time(self) -> float:
        return self.heap[0][0] if self.heap else INF

    def drop(self, which: Callable[[int, float, int, int], bool]) -> None:
        """Unschedule every timer for which `which(kind, time, a, b)` is true."""
        self.heap = [e for e in self.heap if not which(e[1], e[0], e[3], e[4])]
        heapq.heapify(self.heap)

    def fire(self, sim: Simulation, t: float) -> None:
        _, kind, _, a, b = heapq.heappop(self.heap)
        handler = self.handlers[kind]
        assert handler is not None, f"no handler for timer kind {kind}"
        handler(sim, t, a, b)

    def record(self, trace: EventTrace, t: float) -> None:
        _, kind, _, a, b = self.heap[0]
        trace.instant(TIMER_NAMES[kind], t, args={"a": a, "b": b})
