"""Event-driven simulation of a fleet: arrivals, engine steps, faults, scrapes.

Time jumps from event to event. A run of decode steps with nothing else to do is one
event (timed in closed form by the step cost model) and is cut short only when a request
reaches the engine or a fault needs the scheduler, so the work grows with the number of
requests rather than with steps times batch size.

A request reaches a replica's API server (`frontend.Frontend`) when the router picks it, and the
engine's queue when the API server has taken it in. A busy engine picks up whatever has reached its
queue at its next step boundary; an idle one is woken when the next intake ends, and takes every
request that has reached its queue by then (requests that arrive together are scheduled together).

Why one module a little over 500 lines: it is the event loop and the fault hooks it calls back into; the
loop's ordering rules (which of arrival, retry, handover, step end or deadline goes first) only read correctly
in one place. The faults themselves live in engine_model/fault_kinds/, the closed-loop and retry clients in
clients.py and retries.py.
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any

from engine_model.clients import ClosedLoops
from engine_model.config import EngineConfig
from engine_model.fault_kinds import REGISTRY
from engine_model.faults import Fault
from engine_model.frontend import FrontendConfig
from engine_model.profiles import get_gpu, get_model
from engine_model.replica import Deploy, Outcome, Replica
from engine_model.request import Request
from engine_model.results import REQUEST_FIELDS, SAMPLE_FIELDS, EngineEvent, SimResult, empty_columns
from engine_model.retries import Clients
from engine_model.router import Router
from engine_model.scheduler import Sequence

# Kinds of heap event, ordered so that at equal times the earlier kind goes first. Step ends are not
# heap events: each replica's pending step end is its live `plan_end`, found by a scan (a fleet has a
# few replicas), so a step cut short leaves no stale entry behind. Client deadlines (request timeouts)
# are queues of their own, one per timeout value: arrivals come in time order, so each queue is sorted
# but for the few ms by which gateway times differ (an arrival inserts behind the last earlier deadline)
# and needs no heap. At equal times: arrivals, step ends (in the order they were timed), client
# deadlines (in deadline order, ties in arrival order), then heap events by kind.
_RESTART, _HEALTH, _DRAIN_DEADLINE, _DEPLOY, _FAULT, _FAULT_END, _SAMPLE = range(1, 8)
# sequence states a client can still abandon ("frontend": in the API server's intake)
_LIVE = frozenset(("frontend", "waiting", "prefilling", "decoding"))


@dataclass(frozen=True)
class PoolSpec:
    """A group of identical replicas."""

    model: str
    gpu: str
    replicas: int
    config: EngineConfig = field(default_factory=EngineConfig)
    model_version: str = "v1"
    name_prefix: str = "vllm"
    frontend: FrontendConfig = field(default_factory=FrontendConfig)  # each replica's API server


@dataclass(frozen=True)
class FleetSpec:
    """Replicas behind one router. Times in seconds."""

    primary: PoolSpec
    fallback: PoolSpec | None = None
    router_policy: str = "least_outstanding"
    fallback_threshold: int | None = None
    health_check_s: float = 5.0  # interval of the router's health check
    restart_s: float = 45.0  # process start + weight load + graph capture after a crash or deploy
    deploy_stagger_s: float = 60.0  # a rolling redeploy starts the next replica this much later
    drain_timeout_s: float = 120.0


def replica_names(pool: PoolSpec) -> list[str]:
    return [f"{pool.name_prefix}-{i}" for i in range(pool.replicas)]


class Simulation:
    """One run. Build it, call `run()`, get a SimResult."""

    def __init__(self, fleet: FleetSpec, requests: list[Request], faults: list[Fault], duration_s: float,
                 *, sample_interval_s: float = 10.0, drain_s: float = 600.0,
                 progress: Callable[[float], None] | None = None, clients: Clients | None = None) -> None:
        self.fleet = fleet
        # closed-loop clients: their held requests (arrival_s inf) leave the list and are sent when an
        # earlier request of their pool ends
        self.loops = ClosedLoops(requests)
        self.requests = [r for r in requests if not (r.loop >= 0 and math.isinf(r.arrival_s))] if self.loops \
            else requests
        self.faults = faults
        self.duration_s = duration_s
        self.sample_interval_s = sample_interval_s
        # after the window, run until every request has finished or its client has given up
        self.drain_s = max(drain_s, max((r.timeout_s for r in requests), default=0.0))
        self.progress = progress
        # clients that retry (None: none do): their retries arrive from a heap of (arrival, order, request)
        self.clients = clients
        self._retry_q: list[tuple[float, int, Request]] = []
        self._retry_n = 0
        self._unscaled: dict[int, Request] = {}  # request id -> request as sent, when a replica rescaled it
        if clients is not None:
            self.drain_s = max(self.drain_s, clients.max_timeout())
        self.primary = self._make_pool(fleet.primary, "primary", 0)
        self.fallback = (
            self._make_pool(fleet.fallback, "fallback", len(self.primary)) if fleet.fallback else []
        )
        self.replicas = self.primary + self.fallback
        self.router = Router(self.primary, self.fallback, fleet.router_policy, fleet.fallback_threshold)
        self.router_events: list[EngineEvent] = []
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self._timed_at = [0] * len(self.replicas)  # _seq when each replica's pending step end was set
        # timeout_s -> (arrival + timeout, replica index, sequence) of every request a replica took, in
        # arrival order
        self._deadlines: dict[float, deque[tuple[float, int, Sequence]]] = {}
        self.req_cols = empty_columns(REQUEST_FIELDS)  # filled from _req_rows at the end of run()
        self._req_rows: list[tuple[Any, ...]] = []
        self.samples = empty_columns(SAMPLE_FIELDS)
        self.now = 0.0
        self.n_events = 0
        self._actions: list[tuple[Replica, Fault, bool]] = []
        # replica index -> seconds its restart takes once drained, when the deploy draining it says so
        self._restart_after_drain: dict[int, float] = {}

    @staticmethod
    def _make_pool(pool: PoolSpec, role: str, offset: int) -> list[Replica]:
        model, gpu = get_model(pool.model), get_gpu(pool.gpu)
        return [
            Replica(name, offset + i, model, gpu, pool.config, model_version=pool.model_version, pool=role,
                    frontend=pool.frontend)
            for i, name in enumerate(replica_names(pool))
        ]

    def _push(self, t: float, kind: int, a: int = 0, b: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, a, b))

    # ----- main loop ------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Simulate to the end of the window (plus the drain); the result holds every request."""
        # The run allocates millions of short-lived, acyclic tuples and objects; the cyclic collector's
        # passes over the growing live set cost about a seventh of the run and never find garbage.
        gc_on = gc.isenabled()
        gc.disable()
        try:
            return self._run()
        finally:
            # What the run kept sits in the youngest generation, which the next collection would walk
            # whole (~0.1 s); freeze + unfreeze moves it to the oldest in O(1), where it waits for a full
            # collection like any other long-lived data (cycles among it are still found then).
            gc.freeze()
            gc.unfreeze()
            if gc_on:
                gc.enable()

    def _run(self) -> SimResult:
        wall0 = time.perf_counter()
        for i, fault in enumerate(self.faults):
            self._push(fault.start_s, _FAULT, i)
            for k, (t_step, _) in enumerate(fault.steps, 1):  # a gradual fault's later intensities
                self._push(t_step, _FAULT, i, k)
            if fault.end_s is not None:
                self._push(fault.end_s, _FAULT_END, i)
        self._push(0.0, _SAMPLE)
        reqs = self.requests
        n_req = len(reqs)
        i = 0
        horizon = self.duration_s + self.drain_s
        heap = self._heap
        replicas = self.replicas
        duration, progress = self.duration_s, self.progress

        def arrival_time(i: int) -> float:
            """Time of request i at the router, or infinity once none was sent within the run (a request
            the gateway delayed may reach the router after the window, and is served)."""
            if i >= n_req:
                return math.inf
            req = reqs[i]
            t = req.arrival_s
            return math.inf if t - req.gateway_s >= duration else t

        timed_at, deadlines = self._timed_at, self._deadlines
        retry_q = self._retry_q
        inf = math.inf
        t_list = arrival_time(i)
        loops = self.loops
        has_loops = bool(loops)
        while True:
            # the next arrival: the request list's, or a closed-loop client's released request (its send
            # must fall inside the window, like the list's)
            t_arr = t_list
            if has_loops:
                t_late = loops.next_time()
                while t_late < inf and t_late - loops.heap[0][2].gateway_s >= duration:
                    loops.pop()
                    t_late = loops.next_time()
                if t_late < t_arr:
                    t_arr = t_late
            t_ev = heap[0][0] if heap else inf
            # a client's retry goes first when it is strictly earlier than the next arrival
            t_in, from_retry = t_arr, False
            if retry_q and retry_q[0][0] < t_arr:
                t_in, from_retry = retry_q[0][0], True
            # the earliest pending step end (ties: the one timed first), and the earliest end of an
            # intake on an idle replica (a busy one picks its requests up at its next step boundary)
            t_step = inf
            stepper: Replica | None = None
            t_hand = inf
            hander: Replica | None = None
            for rep in replicas:
                if rep.plan is not None:
                    end = rep.plan_end
                    if end < t_step or (end == t_step and stepper is not None
                                        and timed_at[rep.index] < timed_at[stepper.index]):
                        t_step, stepper = end, rep
                elif rep.frontend.pending:
                    h = rep.frontend.pending[0][0]
                    if h < t_hand:
                        t_hand, hander = h, rep
            # A client deadline goes first if it falls before the next arrival, handover and step end and
            # no later than the next heap event. Only deadlines that early are looked at: most requests
            # finished long before theirs, and their entries are dropped when reached.
            t_first = t_in if t_in < t_step else t_step
            if t_hand < t_first:
                t_first = t_hand
            t_dl = inf
            due: deque[tuple[float, int, Sequence]] | None = None
            for queue in deadlines.values():
                while queue:
                    head = queue[0]
                    if head[0] >= t_first or head[0] > t_ev:
                        break  # not due yet
                    if head[2].state in _LIVE:
                        if head[0] < t_dl:
                            t_dl, due = head[0], queue
                        break
                    queue.popleft()  # finished, failed or aborted already
            if t_in == inf and t_ev == inf and stepper is None and hander is None and due is None:
                break
            self.n_events += 1
            if progress is not None and self.n_events % 20000 == 0:
                progress(min(1.0, self.now / duration))
            if due is not None:
                if t_dl > horizon:
                    break
                _, idx, seq = due.popleft()
                self.now = t_dl
                self._client_gave_up(replicas[idx], seq)
                continue
            if t_in <= t_ev and t_in <= t_step and t_in <= t_hand:
                self.now = t_in
                if from_retry:
                    self._arrival(heapq.heappop(retry_q)[2])
                elif t_arr == t_list:
                    self._arrival(reqs[i])
                    i += 1
                    t_list = arrival_time(i)
                else:
                    self._arrival(loops.pop())
                continue
            if hander is not None and t_hand <= t_step and t_hand <= t_ev:
                if t_hand > horizon:
                    break
                # every request whose intake has ended by now reaches the engine's queue, then one step
                # is planned for all of them
                self.now = t_hand
                self._kick(hander)
                continue
            if stepper is not None and t_step <= t_ev:
                if t_step > horizon:
                    break
                self.now = t_step
                outs = stepper.finish_step(t_step)
                if outs:
                    self._record_all(outs)
                self._kick(stepper)
                continue
            t, kind, _, a, b = heapq.heappop(heap)
            if t > horizon:
                break
            self.now = t
            if kind == _SAMPLE:
                self._sample(t)
            elif kind == _FAULT:
                self._apply_fault(self.faults[a] if b == 0 else self.faults[a].at_step(b), start=True)
            elif kind == _FAULT_END:
                self._apply_fault(self.faults[a], start=False)
            elif kind == _RESTART:
                rep = self.replicas[a]
                try:
                    rep.restart(t)
                except ValueError as exc:  # the new config cannot start: vLLM exits, k8s retries
                    rep.log(t, "startup_failed", error=str(exc))
                    self._push(t + self.fleet.restart_s, _RESTART, rep.index)
                else:
                    self._kick(rep)
            elif kind == _DEPLOY:
                self._start_deploy(a)
            elif kind == _HEALTH:
                rep = self.replicas[a]
                if rep.state == "down":
                    rep.noticed_down = True
            elif kind == _DRAIN_DEADLINE:
                rep = self.replicas[a]
                if rep.state == "draining" and b == rep.drain_token:
                    self._record_all(rep.crash(t, reason="drain_timeout"))
                    rep.noticed_down = True
                    self._push(t + self._restart_after_drain.pop(rep.index, self.fleet.restart_s), _RESTART, rep.index)
        rows = self._req_rows
        for j, name in enumerate(REQUEST_FIELDS):  # column by column: no transposed copy of all rows
            self.req_cols[name].extend(map(itemgetter(j), rows))
        rows.clear()
        events = [e for r in self.replicas for e in r.events] + self.router_events
        events.sort(key=lambda e: e.t)
        stats = {
            "wall_s": time.perf_counter() - wall0,
            "events": float(self.n_events),
            "steps": float(sum(r.steps_total for r in self.replicas)),
            "fallback_routed": float(self.router.fallback_routed),
            # requests still on an engine at the horizon (none: the drain outlasts every client timeout)
            "unfinished": float(sum(r.outstanding for r in self.replicas)),
            "frontend_busy_s": sum(r.frontend.busy_s_total for r in self.replicas),
        }
        if self.clients is not None:
            stats["retries"] = float(self.clients.retries_sent)
        return SimResult(
            requests=self.req_cols,
            samples=self.samples,
            events=events,
            replicas=[r.name for r in self.replicas],
            duration_s=self.duration_s,
            sample_interval_s=self.sample_interval_s,
            stats=stats,
        )

    # ----- handlers -------------------------------------------------------------------------
    def _arrival(self, req: Request) -> None:
        if self.clients is not None and req.attempt == 1:
            req = self.clients.on_send(req)
        rep, route = self.router.choose(req)
        if rep is None or rep.state == "down":
            self._record_rejected(req, rep, route)
            return
        if rep.output_scale != 1.0:
            if self.clients is not None:
                self._unscaled[req.request_id] = req
            scaled = max(1, min(req.max_tokens, round(req.output_tokens * rep.output_scale)))
            req = replace(req, output_tokens=scaled)
        end = rep.plan_end if rep.plan is not None else -1.0
        # into the API server; a decode run in progress is cut to end when the request reaches the engine
        seq = rep.enqueue(req, self.now)
        if rep.plan is not None and rep.plan_end != end:
            self._seq += 1
            self._timed_at[rep.index] = self._seq
        queue = self._deadlines.get(req.timeout_s)
        if queue is None:
            queue = self._deadlines[req.timeout_s] = deque()
        # the client's clock started when it sent the request, gateway_s before it reached the router
        # (a client that gave up while the request sat in the gateway is noticed on arrival)
        deadline = self.now + req.timeout_s - req.gateway_s
        if deadline < self.now:
            deadline = self.now
        entry = (deadline, rep.index, seq)
        if queue and queue[-1][0] > deadline:
            # gateway times differ by request, so a deadline can fall before the last few queued: keep the
            # queue sorted (the displaced entries are few and at its end)
            k = len(queue) - 1
            while k > 0 and queue[k - 1][0] > deadline:
                k -= 1
            queue.insert(k, entry)
        else:
            queue.append(entry)

    def _client_gave_up(self, rep: Replica, seq: Sequence) -> None:
        """A request's client timed out: the replica aborts it, and replans its batch without it."""
        self._record(rep.abort(seq, self.now))
        if rep.busy:
            self.interrupt(rep)
        else:
            self._kick(rep)  # a draining replica may now be empty

    def _kick(self, rep: Replica) -> None:
        """Start the replica's next step if it is idle."""
        if rep.plan is not None or rep.state == "down":  # busy or down
            return
        res = rep.start_step(self.now)  # takes the requests that reached the engine's queue by now
        if res is None:
            if rep.drained():
                self._shutdown_for_restart(rep)
        elif isinstance(res, list):  # OOM: the replica crashed
            self._record_all(res)
            self._push(self.now + self.fleet.health_check_s, _HEALTH, rep.index)
            self._push(self.now + self.fleet.restart_s, _RESTART, rep.index)
        else:  # timed: the step ends at rep.plan_end
            self._seq += 1
            self._timed_at[rep.index] = self._seq

    def _shutdown_for_restart(self, rep: Replica) -> None:
        rep.go_down(self.now, "shutdown")
        self._push(self.now + self._restart_after_drain.pop(rep.index, self.fleet.restart_s), _RESTART, rep.index)

    def _sample(self, t: float) -> None:
        cols = self.samples
        for rep in self.replicas:
            row = rep.sample(t)
            for k, v in row.items():
                cols[k].append(v)
        nxt = t + self.sample_interval_s
        if nxt <= self.duration_s + 1e-9:
            self._push(nxt, _SAMPLE)

    # ----- faults: the registry's kinds (engine_model.fault_kinds) act through these -----------
    def _apply_fault(self, fault: Fault, *, start: bool) -> None:
        if fault.is_null():
            return  # intensity 0 means no effect, for every kind
        REGISTRY[fault.kind].apply(self, fault, start)

    def targets(self, fault: Fault) -> list[Replica]:
        """The primary replicas a fault hits."""
        return [r for r in self.primary if fault.applies_to(r.index)]

    def interrupt(self, rep: Replica) -> None:
        """Cut `rep`'s running step short so the next one is timed with what the fault changed."""
        if rep.interrupt(self.now) is not None:
            self._seq += 1
            self._timed_at[rep.index] = self._seq

    def crash(self, rep: Replica, xid: int, restart_s: float | None) -> None:
        """`rep`'s engine process dies now with GPU Xid `xid`; it serves again after `restart_s` (default: the
        fleet's) and the router notices at its next health check."""
        now = self.now
        self._record_all(rep.crash(now, reason="xid", xid=xid))
        self._push(now + self.fleet.health_check_s, _HEALTH, rep.index)
        self._push(now + (self.fleet.restart_s if restart_s is None else restart_s), _RESTART, rep.index)

    def redeploy(self, rep: Replica, fault: Fault, start: bool, at: float) -> None:
        """Schedule a rolling restart of `rep` into the fault's config (or back to the original at its end)."""
        self._actions.append((rep, fault, start))
        self._push(at, _DEPLOY, len(self._actions) - 1)

    def _deploy_for(self, rep: Replica, fault: Fault, start: bool) -> Deploy:
        """What `rep` restarts into: the fault applied on top of any deploy it is already waiting for."""
        base = rep.pending or Deploy(rep.config, rep.model_version, rep.model, rep.output_scale)
        if not start:
            pool = self.fleet.primary
            return Deploy(pool.config, pool.model_version, get_model(pool.model), 1.0)
        return REGISTRY[fault.kind].deploy(base, fault)

    def _start_deploy(self, idx: int) -> None:
        rep, fault, start = self._actions[idx]
        if rep.begin_drain(self.now, self._deploy_for(rep, fault, start)):
            restart = REGISTRY[fault.kind].restart_s(fault)
            if restart is not None:
                self._restart_after_drain[rep.index] = restart
            self._push(self.now + self.fleet.drain_timeout_s, _DRAIN_DEADLINE, rep.index, rep.drain_token)
            self._kick(rep)

    def _record_all(self, outs: list[Outcome]) -> None:
        for out in outs:
            self._record(out)

    def _record(self, out: Outcome) -> None:
        # one tuple per request in REQUEST_FIELDS order, turned into columns once at the end of run()
        # (23 column appends per request cost more)
        seq, req = out.seq, out.seq.req
        retried = False
        if self.clients is not None and out.status != "ok":
            sent = self._unscaled.pop(req.request_id, req) if self._unscaled else req
            retried = self._client_retry(sent, out)
        if req.loop >= 0 and not retried:
            # its client sends its next request (a client that retries sends it when the retries end)
            self.loops.ended(req, out.finish_s)
        self._req_rows.append((
            req.request_id,
            req.arrival_s,
            req.gateway_s,
            seq.first_scheduled_s if seq.first_scheduled_s >= 0 else math.nan,
            seq.first_token_s if seq.first_token_s >= 0 else math.nan,
            out.finish_s,
            req.prompt_tokens,
            seq.cached_tokens,
            seq.generated,
            seq.preemptions,
            out.replica,
            out.route,
            out.model,
            out.model_version,
            out.status,
            out.finish_reason,
            out.output_hash,
            seq.batch_at_first_token,
            req.app,
            req.tenant,
            req.temperature,
            req.seed,
            req.prompt_hash,
            out.first_logprob,
            req.attempt,
            req.first_request_id,
            req.lora,
        ))
        if self.clients is not None and out.status == "ok" and self._unscaled:
            self._unscaled.pop(req.request_id, None)

    def _client_retry(self, req: Request, out: Outcome) -> bool:
        """The client of a failed or timed-out attempt may send it again after a backoff; whether it will."""
        assert self.clients is not None
        nxt = self.clients.retry(req, out.status, out.finish_s)
        if nxt is None:
            return False
        self._retry_n += 1
        heapq.heappush(self._retry_q, (nxt.arrival_s, self._retry_n, nxt))
        return True

    def _record_rejected(self, req: Request, rep: Replica | None, route: str) -> None:
        """The router had no live replica, or sent the request to a crashed one it has not noticed yet."""
        seq = Sequence(req=req, seq_id=-1, prefill_len=req.prompt_tokens)
        pool = self.fleet.primary
        name = rep.name if rep is not None else ""
        self._record(Outcome(seq, self.now, "error", "error", "", name, pool.model, pool.model_version, route))


def simulate(fleet: FleetSpec, requests: list[Request], faults: list[Fault], duration_s: float,
             **kw: Any) -> SimResult:
    """Run a fleet over `requests` (sorted by arrival) with `faults`; see Simulation."""
    return Simulation(fleet, requests, faults, duration_s, **kw).run()
