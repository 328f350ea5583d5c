"""Mitigation runs: the incident simulated again past its window with the player's actions applied.

The run is the incident's own run made longer: the same seed, the same requests in the window, the same
faults and noise, its duration extended by the mitigation's horizon. The traffic after the window is
drawn from the same seed over the longer span and only its part past the window kept (ids offset by
TAIL_ID_BASE), so the window's requests are exactly those the player already queried; the system prompts
and tenants keep their identities across the boundary. The actions become the engine's own timed changes
(engine_model.fault_kinds records) at the decision time:

* rollback: every deploy-kind change in force at the decision (config_change, model_rollout, in faults
  and noise) ends then, which rolls the replicas back into the fleet's original release, one after another;
* set KNOB=V: a config_change of every replica at the decision (a rolling redeploy);
* restart vllm-N / all: a config_change with no knob (a restart into the same release), as a routine
  restart is;
* drain vllm-N: a router_drain of the replica from the decision on (out of the router's pool, pinned clients
  included; several drains add up; draining every replica is refused);
* router P: a router_policy change at the decision, which also ends session affinity (sticky_sessions) in
  force then, as a load balancer's policy setting replaces its affinity;
* shed T: the tenant's requests arriving after the decision never reach the router (counted as shed).

The simulation is causal, so every event before the decision, and every row that is complete before it,
is the same as the unmitigated run's (tests/test_mitigation.py holds that byte for byte). So the run without
actions is simulated to the decision once and paused there (`paused_at_decision`, kept in memory; the game
prepares it while the player reads the debrief), and each action list continues a copy of it with its
changes scheduled at the decision: the same run as one given those changes from the start
(tests/test_paused_runs.py), for the cost of what follows the decision.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from engine_model.config import ENGINE_KNOBS
from engine_model.fault_kinds import REGISTRY
from engine_model.faults import Fault
from engine_model.profiles import get_gpu
from engine_model.request import Request
from engine_model.simulation import Simulation
from incidents.claims import ClaimResult, evaluate_symptom
from incidents.mitigation import Action, ActionError, check_against
from incidents.spec import Incident
from telemetry_gen import tables as T
from telemetry_gen.clients import client_deploys, client_model, declares_clients
from telemetry_gen.runner import (
    Telemetry,
    client_requests,
    engine_faults,
    engine_setups,
    eval_suites,
    external_events,
    fleet_spec,
    probe_requests,
    throttle_causes,
    workload_spec,
)
from telemetry_gen.store import table_digest
from telemetry_gen.workload import adapter_names

if TYPE_CHECKING:
    import duckdb

    from telemetry_gen.cache import BuildInfo

TAIL_ID_BASE = 100_000_000
"""Request ids of the traffic after the window start here (the window's own ids stay below)."""
DEFAULT_HORIZON_S = 1200.0


@dataclass
class MitigatedRun:
    """One mitigation run: its telemetry (the window and the continuation), the decision, what it cost."""

    telemetry: Telemetry
    actions: list[Action]
    decision_s: float
    end_s: float
    shed_requests: int
    faults: list[Fault] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return self.telemetry.digest


def extended(inc: Incident, end_s: float) -> Incident:
    """The incident with its window running to `end_s` (nothing else changed; not re-validated)."""
    return inc.model_copy(update={"window": inc.window.model_copy(update={"duration_s": end_s})})


def _is_deploy(fault: Fault) -> bool:
    """A change of release: a deploy-kind fault that changes something (not a plain restart)."""
    if REGISTRY[fault.kind].acts_on != "deploy":
        return False
    return fault.kind != "config_change" or any(k in ENGINE_KNOBS or k == "version" for k in fault.params)


def compile_actions(inc: Incident, actions: list[Action], decision_s: float) -> list[Fault]:
    """The incident's engine-side changes with the actions added at `decision_s` (ActionError when an
    action cannot act on this incident: rollback with no release to roll back)."""
    faults = engine_faults(inc)
    out = list(faults)
    n = inc.fleet.replicas
    for action in actions:
        check_against(action, replicas=n, allowed=_allowed(inc))
        if action.verb == "rollback":
            rolled = 0
            for i, f in enumerate(out):
                if _is_deploy(f) and f.start_s < decision_s and (f.end_s is None or f.end_s > decision_s):
                    out[i] = replace(f, end_s=decision_s)
                    rolled += 1
            if not rolled:
                raise ActionError("nothing was deployed before the decision: there is no release to roll back",
                                  hint="restart, drain or set an engine knob instead")
        elif action.verb == "set":
            out.append(Fault("config_change", decision_s, None, None, 1.0, dict(action.knobs)))
        elif action.verb == "restart":
            scope = None if action.replica is None else (action.replica,)
            out.append(Fault("config_change", decision_s, None, scope, 1.0, {}))
        elif action.verb == "drain":
            assert action.replica is not None
            out.append(Fault("router_drain", decision_s, None, (action.replica,), 1.0, {}))
        elif action.verb == "router":
            out.append(Fault("router_policy", decision_s, None, None, 1.0, {"policy": action.policy}))
            # a load balancer's policy setting replaces its session affinity: pins in force end with it
            for i, f in enumerate(out):
                if f.kind == "sticky_sessions" and f.start_s < decision_s and (f.end_s is None or f.end_s > decision_s):
                    out[i] = replace(f, end_s=decision_s)
    drained = {a.replica for a in actions if a.verb == "drain"}
    if len(drained) >= n:
        raise ActionError(f"draining all {n} replicas leaves nothing to serve the traffic",
                          hint="drain the replicas that are at fault; the others take their share")
    return out


def _allowed(inc: Incident) -> list[str] | None:
    mit = inc.mitigation
    return None if mit is None or mit.actions is None else list(mit.actions)


def horizon_of(inc: Incident) -> float:
    return inc.mitigation.horizon_s if inc.mitigation is not None else DEFAULT_HORIZON_S


def continued_requests(inc: Incident, seed: int, end_s: float) -> list[Request]:
    """The window's requests as the unmitigated run has them, then the traffic from the window's end to
    `end_s` (drawn from the same seed over the longer span, ids offset), with the probes, sorted."""
    window_end = inc.window.duration_s
    before = client_requests(inc, seed)
    after = [r for r in client_requests(extended(inc, end_s), seed)
             if r.arrival_s >= window_end and not (r.loop >= 0 and math.isinf(r.arrival_s))]
    for r in after:
        r.request_id += TAIL_ID_BASE
        if r.first_request_id >= 0:
            r.first_request_id += TAIL_ID_BASE
    probes = probe_requests(end_s)
    reqs = before + after + probes
    return sorted(reqs, key=lambda r: (r.arrival_s, r.request_id))


def tenants(inc: Incident, seed: int) -> list[str]:
    """The tenants that send traffic in the window, sorted."""
    return sorted({r.tenant for r in client_requests(inc, seed)})


@dataclass(frozen=True)
class PausedRun:
    """A run paused at a decision: the simulation pickled without its rows, and its rows so far (request and
    sample columns), which `resume` copies as lists (far faster than unpickling them)."""

    state: bytes
    requests: dict[str, list[Any]]
    samples: dict[str, list[Any]]

    def resume(self) -> Simulation:
        """A copy of the paused run, of its own, ready to be amended and advanced."""
        sim: Simulation = pickle.loads(self.state)
        sim.attach_rows(self.requests, self.samples)
        return sim

    @classmethod
    def of(cls, sim: Simulation) -> PausedRun:
        """Pause `sim` (which gives up its rows to the result; resume a copy to go on)."""
        requests, samples = sim.detach_rows()
        return cls(pickle.dumps(sim, protocol=pickle.HIGHEST_PROTOCOL), requests, samples)


_PAUSED_KEEP = 1
"""Paused runs kept in memory: the game's incident. The standard fleet's hour is a 17 MB pickle and 107k rows,
whose lists and values take at most about 57 MB (measured with tracemalloc, 2026-12-07)."""
_paused: OrderedDict[tuple[str, int, float, float], PausedRun] = OrderedDict()
_paused_lock = threading.Lock()


def _paused_key(inc: Incident, seed: int, decision: float, end: float) -> tuple[str, int, float, float]:
    from telemetry_gen.cache import incident_key

    return (incident_key(inc, seed), seed, decision, end)


def paused_at_decision(inc: Incident, seed: int, decision: float, end: float) -> PausedRun:
    """The incident's run continued to `end` seconds without actions, paused just before its first event at
    or after `decision`. Simulated once per (incident, seed, decision, end) and kept in memory (the last
    _PAUSED_KEEP); a second caller waits for the first's result (`prepare_mitigation` makes it while the
    player reads the debrief)."""
    key = _paused_key(inc, seed, decision, end)
    with _paused_lock:
        hit = _paused.get(key)
        if hit is not None:
            _paused.move_to_end(key)
            return hit
        reqs = continued_requests(inc, seed, end)
        timeouts = {a.name: a.timeout_s for a in workload_spec(inc).apps}
        sim = Simulation(fleet_spec(inc), reqs, engine_faults(inc), end, sample_interval_s=inc.window.scrape_interval_s,
                         clients=client_model(extended(inc, end), seed, timeouts))
        sim.advance(decision)
        paused = _paused[key] = PausedRun.of(sim)
        while len(_paused) > _PAUSED_KEEP:
            _paused.popitem(last=False)
        return paused


def build_mitigated(inc: Incident, seed: int, actions: list[Action], *, decision_s: float | None = None,
                    horizon_s: float | None = None) -> MitigatedRun:
    """Simulate the incident at `seed` past its window with `actions` applied at `decision_s` (default: the
    window's end) for `horizon_s` more seconds (default: the incident's mitigation horizon). No actions: the
    unmitigated continuation. Deterministic in (incident, seed, actions, decision, horizon).

    The run without actions is simulated to the decision once (`paused_at_decision`); each action list
    continues a copy of it from there, its changes scheduled then (`Simulation.amend_faults`, `shed`)."""
    wall0 = time.perf_counter()
    window_end = inc.window.duration_s
    decision = window_end if decision_s is None else float(decision_s)
    if not 0.0 < decision <= window_end:
        raise ActionError(f"the decision time must lie within the window (0, {window_end:g}] s, got {decision:g}")
    end = window_end + (horizon_of(inc) if horizon_s is None else float(horizon_s))
    faults = compile_actions(inc, actions, decision)
    shed_tenants = frozenset(a.tenant for a in actions if a.verb == "shed")
    if shed_tenants:
        known = tenants(inc, seed)
        for a in actions:
            if a.verb == "shed":
                check_against(a, replicas=inc.fleet.replicas, tenants=known)
    sim = paused_at_decision(inc, seed, decision, end).resume()
    sim.amend_faults(faults)
    shed = sim.shed(shed_tenants)
    sim.advance(math.inf)
    run = sim.result()
    ctx = T.TelemetryContext(
        t0=inc.window.start, gpu=get_gpu(inc.fleet.gpu),
        gpus_per_replica=inc.fleet.tensor_parallel * inc.fleet.pipeline_parallel,
        seed=seed, evals=eval_suites(inc, False), engines=engine_setups(sim.fleet),
        external_events=external_events(inc) + [
            T.ExternalEvent(t, "deploy", part, detail) for t, part, detail in client_deploys(inc)
        ] + [T.ExternalEvent(decision, "mitigation", "on-call", a.text()) for a in actions],
        throttle_causes=throttle_causes(inc), client_columns=declares_clients(inc),
        adapter_names=adapter_names(workload_spec(inc)), window_s=window_end,
    )
    tables = T.build_tables(run, ctx)
    tel = Telemetry(tables, table_digest(tables), run, time.perf_counter() - wall0)
    return MitigatedRun(tel, list(actions), decision, end, shed, faults)


def prepare_mitigation(inc: Incident, seed: int) -> None:
    """Make what `act` at the window's end needs before the player acts: the run paused at the decision and
    the database of the run without actions (its score's baseline). For a background thread."""
    if inc.mitigation is not None:
        mitigated_database(inc, seed, [])


def actions_digest(actions: list[Action]) -> str:
    """A short name of an action list (its written forms), for cache keys and journals."""
    return hashlib.sha256("\n".join(a.text() for a in actions).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Recovery:
    """Each recovery claim's result on one mitigation run, and whether all hold."""

    results: list[tuple[str, ClaimResult]]

    @property
    def recovered(self) -> bool:
        return bool(self.results) and all(r.holds for _, r in self.results)


def recovery(inc: Incident, run: MitigatedRun) -> Recovery:
    """The incident's recovery claims evaluated on the run's tables."""
    import duckdb

    con = duckdb.connect()
    try:
        for name, df in run.telemetry.tables.items():
            con.register(name, df)
        return recovery_on(con, inc)
    finally:
        con.close()


def recovery_on(con: duckdb.DuckDBPyConnection, inc: Incident) -> Recovery:
    """The incident's recovery claims evaluated on an open database of a mitigation run."""
    assert inc.mitigation is not None
    return Recovery([(s.id, evaluate_symptom(con, s, inc.window.start)) for s in inc.mitigation.recovery])


_build_lock = threading.Lock()  # one build at a time in a process: a second caller finds the first's result


def mitigated_database(inc: Incident, seed: int, actions: list[Action], *, decision_s: float | None = None
                       ) -> tuple[BuildInfo, int]:
    """The mitigation run's database (built once per incident, seed, decision and action list, in the build
    cache) and how many requests it shed."""
    with _build_lock:
        return _mitigated_database(inc, seed, actions, decision_s)


def _mitigated_database(inc: Incident, seed: int, actions: list[Action], decision_s: float | None
                        ) -> tuple[BuildInfo, int]:
    from telemetry_gen.cache import BuildInfo, cache_dir, incident_key
    from telemetry_gen.store import write_database

    decision = inc.window.duration_s if decision_s is None else float(decision_s)
    key = hashlib.sha256(f"{incident_key(inc, seed)}|{decision!r}|{horizon_of(inc)!r}|"
                         f"{actions_digest(actions)}".encode()).hexdigest()[:24]
    folder = cache_dir()
    db = folder / f"{inc.id}-mitigated-{key}.duckdb"
    meta = db.with_suffix(".json")
    if db.exists() and meta.exists():
        data = json.loads(meta.read_text())
        return BuildInfo(**data["build"]), int(data["shed"])
    folder.mkdir(parents=True, exist_ok=True)
    run = build_mitigated(inc, seed, actions, decision_s=decision)
    write_database(db, run.telemetry.tables)  # atomic: a temp file of its own, then renamed
    info = BuildInfo(incident=inc.id, seed=seed, path=str(db), digest=run.digest,
                     rows=run.telemetry.row_counts(), span_s=run.end_s, start=inc.window.start.isoformat(),
                     cached=False, build_s=round(run.telemetry.wall_s, 3))
    tmp = meta.with_name(f"{meta.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"build": info.to_dict(), "shed": run.shed_requests}))
    tmp.replace(meta)
    return info, run.shed_requests
