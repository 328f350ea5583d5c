"""Event-driven simulation of a fleet: arrivals, engine steps, faults, scrapes.

Time jumps from event to event. A run of decode steps with nothing else to do is one
event (timed in closed form by the step cost model) and is cut short only when a request
reaches the engine or a fault needs the scheduler, so the work grows with the number of
requests rather than with steps times batch size.

A request reaches a replica's API server (`frontend.Frontend`) when the router picks it, and the
engine's queue when the API server has taken it in. A busy engine picks up whatever has reached its
queue at its next step boundary; an idle one is woken when the next intake ends, and takes every
request that has reached its queue by then (requests that arrive together are scheduled together).

The events come from seven sources (engine_model.sources: arrivals, closed-loop sends, retries,
handovers, step ends, client timeouts, timers); each says when its next event is and fires it, and
the order of events at one instant is written once, there. This module holds the run's loop, the
handlers the sources call back into, and the hooks the fault kinds act through (engine_model.
fault_kinds); the closed-loop and retry clients live in clients.py and retries.py. An optional trace
(engine_model.trace) records every event fired, for debugging a run.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mypy_extensions import mypyc_attr

from engine_model.clients import ClosedLoops
from engine_model.config import EngineConfig
from engine_model.fault_kinds import REGISTRY
from engine_model.faults import Fault
from engine_model.frontend import FrontendConfig
from engine_model.profiles import get_gpu, get_model
from engine_model.records import frozen_reduce
from engine_model.replica import Deploy, Outcome, Replica
from engine_model.request import Request
from engine_model.results import REQUEST_FIELDS, SAMPLE_FIELDS, EngineEvent, SimResult, empty_columns
from engine_model.retries import Clients
from engine_model.router import Router
from engine_model.scheduler import Sequence
from engine_model.sources import (
    DEPLOY,
    DRAIN_DEADLINE,
    FAULT,
    FAULT_END,
    HEALTH,
    RESTART,
    SAMPLE,
    ClientTimeouts,
    EventSource,
    Handovers,
    LoopSends,
    RequestList,
    Retries,
    StepEnds,
    TimerHandler,
    Timers,
)

if TYPE_CHECKING:
    from engine_model.trace import EventTrace


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

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)


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

    def __reduce__(self) -> tuple[Any, ...]:
        return frozen_reduce(self)


def replica_names(pool: PoolSpec) -> list[str]:
    return [f"{pool.name_prefix}-{i}" for i in range(pool.replicas)]


@mypyc_attr(serializable=True, allow_interpreted_subclasses=True)
class Simulation:
    """One run. Build it, call `run()`, get a SimResult.

    `trace`: an EventTrace to record every event fired into (engine_model.trace); None, the default,
    records nothing and costs nothing.
    """

    def __init__(self, fleet: FleetSpec, requests: list[Request], faults: list[Fault], duration_s: float,
                 *, sample_interval_s: float = 10.0, drain_s: float = 600.0,
                 progress: Callable[[float], None] | None = None, clients: Clients | None = None,
                 trace: EventTrace | None = None) -> None:
        self.fleet = fleet
        # closed-loop clients: their held requests (arrival_s inf) leave the list and are sent when an
        # earlier request of their pool ends
        self.loops = ClosedLoops(requests)
        open_loop = [r for r in requests if not (r.loop >= 0 and math.isinf(r.arrival_s))] if self.loops \
            else requests
        self.faults = faults
        self.duration_s = duration_s
        self.sample_interval_s = sample_interval_s
        # after the window, run until every request has finished or its client has given up
        self.drain_s = max(drain_s, max((r.timeout_s for r in requests), default=0.0))
        self.progress = progress
        self.trace = trace
        # clients that retry (None: none do)
        self.clients = clients
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
        self.req_cols = empty_columns(REQUEST_FIELDS)  # a column per field, filled by _record
        self._req_col_list = [self.req_cols[name] for name in REQUEST_FIELDS]  # the same lists, in order
        self.samples = empty_columns(SAMPLE_FIELDS)
        self.now = 0.0
        self.n_events = 0
        self._started = False
        self._ended = False
        self._wall0 = time.perf_counter()
        self._actions: list[tuple[Replica, Fault, bool]] = []
        # replica index -> seconds its restart takes once drained, when the deploy draining it says so
        self._restart_after_drain: dict[int, float] = {}
        self.retries = Retries()
        self.step_ends = StepEnds(self.replicas)
        self.timeouts = ClientTimeouts()
        self.timers = Timers(TIMER_HANDLERS)
        self.sources = self._sources(open_loop)

    def _sources(self, requests: list[Request]) -> list[EventSource]:
        """The run's event sources in tie-break order (engine_model.sources.SOURCE_ORDER), leaving out those
        that can never fire (closed loops without clients, retries without retrying clients)."""
        out: list[EventSource] = [RequestList(requests, self.duration_s)]
        if self.loops:
            out.append(LoopSends(self.loops, self.duration_s))
        if self.clients is not None:
            out.append(self.retries)
        out += [Handovers(self.replicas), self.step_ends, self.timeouts, self.timers]
        return out

    @staticmethod
    def _make_pool(pool: PoolSpec, role: str, offset: int) -> list[Replica]:
        model, gpu = get_model(pool.model), get_gpu(pool.gpu)
        return [
            Replica(name, offset + i, model, gpu, pool.config, model_version=pool.model_version, pool=role,
                    frontend=pool.frontend)
            for i, name in enumerate(replica_names(pool))
        ]

    # ----- main loop ------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Simulate to the end of the window (plus the drain); the result holds every request."""
        self.advance(math.inf)
        return self.result()

    def advance(self, until_s: float) -> None:
        """Fire every event before `until_s` seconds (all of them: math.inf). The run can then be amended
        (`amend_faults`, `shed`), copied (a Simulation pickles whole, without a progress callback or a
        trace), advanced further, or finished with `result()`. Advancing in parts fires the same events in
        the same order as one call does."""
        # The run allocates millions of short-lived, acyclic tuples and objects; the cyclic collector's
        # passes over the growing live set cost about a seventh of the run and never find garbage.
        gc_on = gc.isenabled()
        gc.disable()
        try:
            if not self._started:
                self._start()
            if not self._ended:
                self._loop(until_s)
            if not self._ended:  # paused: what a copy of the run carries is only what is still to come
                for src in self.sources:
                    if isinstance(src, RequestList):
                        src.forget_sent()
        finally:
            # What the run kept sits in the youngest generation, which the next collection would walk
            # whole (~0.1 s); freeze + unfreeze moves it to the oldest in O(1), where it waits for a full
            # collection like any other long-lived data (cycles among it are still found then).
            gc.freeze()
            gc.unfreeze()
            if gc_on:
                gc.enable()

    def _start(self) -> None:
        self._started = True
        self._wall0 = time.perf_counter()
        self._schedule_faults()
        self.timers.push(0.0, SAMPLE)
        if self.trace is not None:
            for rep in self.replicas:
                self.trace.name_replica(rep.index, rep.name)

    def detach_rows(self) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        """Take the rows recorded so far out of the run: (request columns, sample columns), each a column per
        field. They are plain numbers and strings, which a list copy copies far faster than pickle (the
        standard fleet's hour: 54 MB pickled with them, 38 MB without); `attach_rows` puts copies back before
        the run goes on."""
        rows = (self.req_cols, self.samples)
        self.req_cols, self.samples = empty_columns(REQUEST_FIELDS), empty_columns(SAMPLE_FIELDS)
        self._req_col_list = [self.req_cols[name] for name in REQUEST_FIELDS]
        return rows

    def attach_rows(self, requests: dict[str, list[Any]], samples: dict[str, list[Any]]) -> None:
        """Give the run copies of rows `detach_rows` took (of this run or of a copy of it)."""
        self.req_cols = {name: list(requests[name]) for name in REQUEST_FIELDS}
        self.samples = {name: list(samples[name]) for name in SAMPLE_FIELDS}
        self._req_col_list = [self.req_cols[name] for name in REQUEST_FIELDS]

    def amend_faults(self, faults: list[Fault]) -> None:
        """Change the run's faults from now on (a paused run: see `advance`): `faults` is the current list,
        each fault either unchanged or ended earlier (its end moved to now or later, its steps past the new
        end dropped), then new faults, none starting before now. What already happened stays as it was;
        the run goes on as if it had been given `faults` from the start, the new timers at one instant
        ordered after those already scheduled for it. ValueError when `faults` is not such a list."""
        if not self._started:  # nothing is scheduled yet: the run starts with these
            self.faults = list(faults)
            return
        old = self.faults
        if len(faults) < len(old):
            raise ValueError(f"amended faults must keep the run's {len(old)} faults, got {len(faults)}")
        now = self.now
        ended: dict[int, float] = {}
        for i, (was, new) in enumerate(zip(old, faults, strict=False)):
            if new == was:
                continue
            if replace(was, end_s=new.end_s) != new or new.end_s is None or new.end_s < now \
                    or (was.end_s is not None and was.end_s <= now):
                raise ValueError(f"fault {i} ({was.kind}): an amendment may only end a fault still in force, "
                                 f"at or after now ({now:g} s)")
            ended[i] = new.end_s
        for f in faults[len(old):]:
            if f.start_s < now:
                raise ValueError(f"a new {f.kind} fault cannot start at {f.start_s:g} s, before now ({now:g} s)")
        if ended:
            # the old end (and any later step) of each fault ended earlier never fires
            self.timers.drop(lambda kind, t, a, b: a in ended and (
                kind == FAULT_END or (kind == FAULT and b > 0 and t >= ended[a])))
        self.faults = list(faults)
        for i, end in ended.items():
            self.timers.push(end, FAULT_END, i)
        for i in range(len(old), len(faults)):
            self._schedule_fault(i, faults[i])

    def shed(self, tenants: frozenset[str]) -> int:
        """Requests of `tenants` not yet sent (open-loop arrivals still to come, closed-loop clients' held
        requests) are never sent: a gateway rejecting the tenant from now on. How many were dropped."""
        if not tenants:
            return 0
        dropped = 0
        for src in self.sources:
            if isinstance(src, RequestList):
                dropped += src.drop_pending(lambda r: r.tenant in tenants)
        if self.loops:
            dropped += self.loops.drop_held(lambda r: r.tenant in tenants)
        return dropped

    def _schedule_faults(self) -> None:
        """A timer for each fault's start, each later step of a gradual fault, and each end."""
        for i, fault in enumerate(self.faults):
            self._schedule_fault(i, fault)

    def _schedule_fault(self, i: int, fault: Fault) -> None:
        self.timers.push(fault.start_s, FAULT, i)
        for k, (t_step, _) in enumerate(fault.steps, 1):  # a gradual fault's later intensities
            self.timers.push(t_step, FAULT, i, k)
        if fault.end_s is not None:
            self.timers.push(fault.end_s, FAULT_END, i)

    def _loop(self, until_s: float) -> None:
        """Fire the earliest next event of all sources (at equal times: the one listed first) until none is
        left, or a bounded source's next event lies past the horizon (the run has ended), or the next event
        is at or after `until_s` (paused)."""
        sources = self.sources
        horizon = self.duration_s + self.drain_s
        duration, progress, trace = self.duration_s, self.progress, self.trace
        inf = math.inf
        while True:
            t = inf
            src: EventSource | None = None
            for s in sources:
                ts = s.next_time()
                if ts < t:
                    t, src = ts, s
            if src is None:
                self._ended = True
                return
            if t >= until_s:
                return
            self.n_events += 1
            if progress is not None and self.n_events % 20000 == 0:
                progress(min(1.0, self.now / duration))
            if src.bounded and t > horizon:
                self._ended = True
                return
            if trace is not None:
                src.record(trace, t)
            self.now = t
            src.fire(self, t)

    def result(self) -> SimResult:
        """The run's requests (as columns), samples, events and counters (call once the run has ended)."""
        if not self._ended:
            raise RuntimeError("the run has not ended: advance it to math.inf first")
        return self._result(self._wall0)

    def _result(self, wall0: float) -> SimResult:
        """The run's requests (as columns), samples, events and counters; `wall0`: perf_counter at the start."""
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

    # ----- what the sources call back into -----------------------------------------------------
    def arrival(self, req: Request) -> None:
        """`req` reaches the router now: into the chosen replica's API server, or rejected."""
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
            self.step_ends.timed(rep)
        # the client's clock started when it sent the request, gateway_s before it reached the router
        # (a client that gave up while the request sat in the gateway is noticed on arrival)
        deadline = self.now + req.timeout_s - req.gateway_s
        self.timeouts.add(req.timeout_s, max(deadline, self.now), rep.index, seq)

    def client_gave_up(self, rep: Replica, seq: Sequence) -> None:
        """A request's client timed out: the replica aborts it, and replans its batch without it."""
        self._record(rep.abort(seq, self.now))
        if rep.busy:
            self.interrupt(rep)
        else:
            self.kick(rep)  # a draining replica may now be empty

    def kick(self, rep: Replica) -> None:
        """Start the replica's next step if it is idle."""
        if rep.plan is not None or rep.state == "down":  # busy or down
            return
        res = rep.start_step(self.now)  # takes the requests that reached the engine's queue by now
        if res is None:
            if rep.drained():
                self._shutdown_for_restart(rep)
        elif isinstance(res, list):  # OOM: the replica crashed
            self.record_all(res)
            self.timers.push(self.now + self.fleet.health_check_s, HEALTH, rep.index)
            self.timers.push(self.now + self.fleet.restart_s, RESTART, rep.index)
        else:  # timed: the step ends at rep.plan_end
            self.step_ends.timed(rep)

    def _shutdown_for_restart(self, rep: Replica) -> None:
        rep.go_down(self.now, "shutdown")
        self.timers.push(self.now + self._restart_after_drain.pop(rep.index, self.fleet.restart_s), RESTART,
                         rep.index)

    # ----- timers: Timers calls these by kind with (time in seconds, a, b) ------------------------
    def _on_sample(self, t: float, a: int, b: int) -> None:
        """Scrape every replica; the next scrape one interval later, while within the window."""
        cols = self.samples
        for rep in self.replicas:
            row = rep.sample(t)
            for k, v in row.items():
                cols[k].append(v)
        nxt = t + self.sample_interval_s
        if nxt <= self.duration_s + 1e-9:
            self.timers.push(nxt, SAMPLE)

    def _on_fault(self, t: float, a: int, b: int) -> None:
        """Fault `a` starts (b = 0) or a gradual fault's b-th step begins."""
        self._apply_fault(self.faults[a] if b == 0 else self.faults[a].at_step(b), start=True)

    def _on_fault_end(self, t: float, a: int, b: int) -> None:
        """Fault `a` ends."""
        self._apply_fault(self.faults[a], start=False)

    def _on_restart(self, t: float, a: int, b: int) -> None:
        """Replica `a` starts serving again, or, when its new config cannot start, tries again later."""
        rep = self.replicas[a]
        try:
            rep.restart(t)
        except ValueError as exc:  # the new config cannot start: vLLM exits, k8s retries
            rep.log(t, "startup_failed", error=str(exc))
            self.timers.push(t + self.fleet.restart_s, RESTART, rep.index)
        else:
            self.kick(rep)

    def _on_deploy(self, t: float, a: int, b: int) -> None:
        """Redeploy action `a` (see `redeploy`) reaches its replica: it starts draining."""
        self._start_deploy(a)

    def _on_health_check(self, t: float, a: int, b: int) -> None:
        """The router's health check notices replica `a` when it is down."""
        rep = self.replicas[a]
        if rep.state == "down":
            rep.noticed_down = True

    def _on_drain_deadline(self, t: float, a: int, b: int) -> None:
        """Replica `a` still draining with drain token `b` at its deadline: its requests fail, it restarts."""
        rep = self.replicas[a]
        if rep.state == "draining" and b == rep.drain_token:
            self.record_all(rep.crash(t, reason="drain_timeout"))
            rep.noticed_down = True
            self.timers.push(t + self._restart_after_drain.pop(rep.index, self.fleet.restart_s), RESTART, rep.index)

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
            self.step_ends.timed(rep)

    def crash(self, rep: Replica, xid: int, restart_s: float | None) -> None:
        """`rep`'s engine process dies now with GPU Xid `xid`; it serves again after `restart_s` (default: the
        fleet's) and the router notices at its next health check."""
        now = self.now
        self.record_all(rep.crash(now, reason="xid", xid=xid))
        self.timers.push(now + self.fleet.health_check_s, HEALTH, rep.index)
        self.timers.push(now + (self.fleet.restart_s if restart_s is None else restart_s), RESTART, rep.index)

    def redeploy(self, rep: Replica, fault: Fault, start: bool, at: float) -> None:
        """Schedule a rolling restart of `rep` into the fault's config (or back to the original at its end)."""
        self._actions.append((rep, fault, start))
        self.timers.push(at, DEPLOY, len(self._actions) - 1)

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
            self.timers.push(self.now + self.fleet.drain_timeout_s, DRAIN_DEADLINE, rep.index, rep.drain_token)
            self.kick(rep)

    # ----- outcomes --------------------------------------------------------------------------
    def record_all(self, outs: list[Outcome]) -> None:
        """Record every outcome in `outs` (see `_record`)."""
        for out in outs:
            self._record(out)

    def _record(self, out: Outcome) -> None:
        # One row per request in REQUEST_FIELDS order, its fields appended to their columns at once, while
        # the row and its values are still in cache. (Keeping the rows and transposing them at the end of
        # run() read every field again from memory, cold: ~3 % of the standard fleet's run, 106,793 rows.)
        seq, req = out.seq, out.seq.req
        retried = False
        if self.clients is not None and out.status != "ok":
            sent = self._unscaled.pop(req.request_id, req) if self._unscaled else req
            retried = self._client_retry(sent, out)
        if req.loop >= 0 and not retried:
            # its client sends its next request (a client that retries sends it when the retries end)
            self.loops.ended(req, out.finish_s)
        row: tuple[Any, ...] = (
            req.request_id,
            req.arrival_s,
            req.gateway_s,
            seq.engine_arrival_s if seq.engine_arrival_s >= 0 else math.nan,
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
        )
        cols = self._req_col_list
        for j in range(len(cols)):
            cols[j].append(row[j])
        if self.clients is not None and out.status == "ok" and self._unscaled:
            self._unscaled.pop(req.request_id, None)

    def _client_retry(self, req: Request, out: Outcome) -> bool:
        """The client of a failed or timed-out attempt may send it again after a backoff; whether it will."""
        assert self.clients is not None
        nxt = self.clients.retry(req, out.status, out.finish_s)
        if nxt is None:
            return False
        self.retries.push(nxt)
        return True

    def _record_rejected(self, req: Request, rep: Replica | None, route: str) -> None:
        """The router had no live replica, or sent the request to a crashed one it has not noticed yet."""
        seq = Sequence(req=req, seq_id=-1, prefill_len=req.prompt_tokens)
        pool = self.fleet.primary
        name = rep.name if rep is not None else ""
        self._record(Outcome(seq, self.now, "error", "error", "", name, pool.model, pool.model_version, route))


TIMER_HANDLERS: dict[int, TimerHandler] = {
    RESTART: Simulation._on_restart, HEALTH: Simulation._on_health_check,
    DRAIN_DEADLINE: Simulation._on_drain_deadline, DEPLOY: Simulation._on_deploy, FAULT: Simulation._on_fault,
    FAULT_END: Simulation._on_fault_end, SAMPLE: Simulation._on_sample,
}
"""What each timer kind does (engine_model.sources.Timers calls it with the simulation)."""


def simulate(fleet: FleetSpec, requests: list[Request], faults: list[Fault], duration_s: float,
             **kw: Any) -> SimResult:
    """Run a fleet over `requests` (sorted by arrival) with `faults`; see Simulation."""
    return Simulation(fleet, requests, faults, duration_s, **kw).run()
