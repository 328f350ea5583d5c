"""The fault registry (engine_model.fault_kinds) and what every fault knob does.

Every kind is one module in the registry; every knob the incident format accepts must change the
simulation (shown here with and without it), or be refused by the validator. Intensity 0 means no
effect for every kind: the telemetry's digest equals the fault-free one."""

from __future__ import annotations

import copy
import random
from typing import Any, ClassVar

import pytest

from engine_model.config import EngineConfig
from engine_model.fault_kinds import REGISTRY, FaultKind, Param, get_kind, register
from engine_model.faults import FAULT_KINDS, WORKLOAD_FAULTS, Fault, ramp
from engine_model.request import Request
from engine_model.simulation import FleetSpec, PoolSpec, simulate
from incidents.spec import Incident, cross_check
from telemetry_gen.runner import build_telemetry

SEED = 3
AT = 200.0
DURATION = 600.0

BASE: dict[str, Any] = {
    "id": "fault-registry-fixture",
    "title": "Fixture for fault knobs",
    "difficulty": 1,
    "briefing": {"reported_by": "tests", "since": "never", "summary": "A small fleet for fault tests."},
    "window": {"start": "2026-01-05T10:00:00Z", "duration_s": DURATION, "scrape_interval_s": 10},
    "fleet": {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "replicas": 3, "model_version": "v1",
              "engine": {"num_speculative_tokens": 3, "spec_acceptance_rate": 0.7},
              "router": {"policy": "least_outstanding",
                         "fallback": {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "replicas": 1,
                                      "queue_threshold": 50}}},
    "workload": {
        "base_rps": 3.0,
        "apps": [
            {"name": "chat", "weight": 3, "prompt": {"kind": "lognormal", "median": 600, "sigma": 0.5, "max": 6000},
             "output": {"kind": "lognormal", "median": 120, "sigma": 0.5, "max": 800}, "tenants": 6,
             "system_prompts": 2, "system_prompt_tokens": 200, "rate_shape": "flat", "temperature": 0.7,
             "seeded_fraction": 0.5},
        ],
    },
    "faults": [],
    "hypotheses": [
        {"id": "nothing", "title": "Nothing", "explanation": "Nothing is wrong.", "true": True},
        *({"id": f"h{i}", "title": f"H{i}", "explanation": "Something else.",
           "world": [{"kind": "gpu_throttle", "at_s": AT}]} for i in range(3)),
    ],
    "signals": [
        {"id": f"s{i}", "shows": "rows exist", "reveals": [{"table": "requests", "columns": ["ttft_s"]}],
         "query": "SELECT count(*) AS n FROM requests", "expect": {"column": "n", "op": ">", "value": 0}}
        for i in range(3)
    ],
    "debrief": {"summary": "Nothing happened.", "causal_chain": ["nothing"], "mitigation": "none"},
}

# one fault of every kind, with params that make it bite on the fixture at intensity 1
EXAMPLES: dict[str, dict[str, Any]] = {
    "batch_invariance_off": {"scope": {"replicas": [0]}},
    "client_change": {"params": {"timeout_s": 0.5, "max_attempts": 4, "backoff_s": 0.0}},
    "config_change": {"params": {"max_num_seqs": 4}, "scope": {"replicas": [0]}},
    "eval_harness_change": {"params": {"eval_deltas": {"gsm8k": -0.1}}},
    "fallback_routing": {"params": {"queue_threshold": 0}},
    "gateway_latency": {"params": {"delay_s": 0.5}},
    "gpu_throttle": {"params": {"clock_factor": 0.4}, "scope": {"replicas": [0]}},
    "hbm_degradation": {"params": {"bw_factor": 0.4}, "scope": {"replicas": [0]}},
    "host_contention": {"params": {"overhead_factor": 5.0}, "scope": {"replicas": [0]}},
    "link_degradation": {"params": {"link_factor": 0.1}, "scope": {"replicas": [0]}},
    "memory_leak": {"params": {"bytes_per_s": 2**30}, "scope": {"replicas": [0]}},
    "model_rollout": {"params": {"version": "v2", "output_scale": 1.5}, "scope": {"replicas": [0]}},
    "moe_imbalance": {"params": {"skew": 3.0}},  # on the MoE fleet: see `data`
    "replica_crash": {"scope": {"replicas": [0]}},
    "router_drain": {"scope": {"replicas": [0]}},
    "router_policy": {"params": {"policy": "round_robin"}},
    "router_skew": {"params": {"share": 0.8}, "scope": {"replicas": [0]}},
    "seeds_unpinned": {"scope": {"replicas": [0]}},
    "spec_acceptance_drop": {"params": {"acceptance_rate": 0.1}},
    "sticky_sessions": {"params": {"key": "tenant", "share": 0.9}, "scope": {"replicas": [0]}},
    "traffic_surge": {"params": {"factor": 2.0}},
    "workload_shift": {"params": {"prompt_scale": 2.0}},
}


def fault(kind: str, **changes: Any) -> dict[str, Any]:
    out = {"kind": kind, "at_s": AT, **copy.deepcopy(EXAMPLES[kind])}
    out.update(changes)
    return out


def data(*faults: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    out["faults"] = list(faults)
    if any(f["kind"] == "moe_imbalance" for f in faults):  # experts need a mixture-of-experts model
        out["fleet"]["model"] = "Mixtral-8x7B"
        out["fleet"]["tensor_parallel"] = 2  # 94 GB of bf16 weights
    return out


def incident(*faults: dict[str, Any]) -> Incident:
    return Incident.model_validate(data(*faults), context={"skip_cross_checks": True})


def issues(*faults: dict[str, Any]) -> list[str]:
    return [str(i) for i in cross_check(data(*faults)) if i.loc[:1] == ("faults",)]


@pytest.fixture(scope="module")
def clean_digest() -> str:
    return build_telemetry(incident(), SEED).digest


@pytest.fixture(scope="module")
def clean_moe_digest() -> str:
    inc = Incident.model_validate(data({"kind": "moe_imbalance", "at_s": AT, "intensity": 0}),
                                  context={"skip_cross_checks": True})
    return build_telemetry(inc.model_copy(update={"faults": []}), SEED).digest


# ---------------------------------------------------------------- the registry


def test_every_kind_is_one_registered_record_and_the_old_tables_derive_from_it() -> None:
    assert set(EXAMPLES) == set(REGISTRY), "add an example for a new kind here"
    for name, kind in REGISTRY.items():
        assert kind.name == name and kind.description
        assert FAULT_KINDS[name] == (kind.description, {p: s.description for p, s in kind.params.items()})
        assert get_kind(name) is kind
    assert {n for n, k in REGISTRY.items() if k.acts_on == "workload"} == WORKLOAD_FAULTS
    with pytest.raises(KeyError, match="known: "):
        get_kind("no_such_kind")


def test_every_example_validates(clean_digest: str) -> None:
    for kind in EXAMPLES:
        assert issues(fault(kind)) == [], kind


def test_a_kind_is_registered_once_and_needs_a_name() -> None:
    class Twice(FaultKind):
        name = "gpu_throttle"

    with pytest.raises(ValueError, match="registered twice"):
        register(Twice)

    class Nameless(FaultKind):
        params: ClassVar[dict[str, Param]] = {}

    with pytest.raises(ValueError, match="no name"):
        register(Nameless)


def test_params_are_checked_by_the_registry() -> None:
    (msg,) = issues(fault("gpu_throttle", params={"clock": 0.5}))
    assert "gpu_throttle has no parameter 'clock'" in msg and "clock_factor" in msg
    (msg,) = issues(fault("gpu_throttle", params={"clock_factor": "slow"}))
    assert "takes a number" in msg
    (msg,) = issues(fault("router_skew", params={"share": 1.5}))
    assert "share must be at most 1" in msg
    (msg,) = issues(fault("model_rollout", params={"weight_dtype": "fp4"}))
    assert "weight_dtype must be one of bf16, fp8, int4" in msg
    (msg,) = issues(fault("config_change", params={"max_num_seq": 4}))
    assert "unknown engine knob 'max_num_seq'" in msg and "max_num_seqs" in msg
    (msg,) = issues(fault("config_change", params={"version": "v2"}))
    assert "needs params" in msg


# ---------------------------------------------------------------- intensity 0 means no effect


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_intensity_zero_changes_nothing_and_one_changes_something(kind: str, clean_digest: str,
                                                                 clean_moe_digest: str) -> None:
    if kind == "moe_imbalance":
        clean_digest = clean_moe_digest
    assert build_telemetry(incident(fault(kind, intensity=0)), SEED).digest == clean_digest
    assert build_telemetry(incident(fault(kind)), SEED).digest != clean_digest


# ---------------------------------------------------------------- knobs that did nothing are refused


def test_n_completions_per_request_is_refused_it_is_not_simulated() -> None:
    d = data()
    d["workload"]["apps"][0]["n"] = 2
    (issue,) = [i for i in cross_check(d) if i.loc[:1] == ("workload",)]
    assert issue.loc == ("workload", "apps", 0, "n") and "not simulated" in issue.message


def test_whole_fleet_kinds_refuse_a_scope_and_on_off_kinds_a_partial_intensity() -> None:
    (msg,) = issues(fault("router_policy", scope={"replicas": [1]}))
    assert "takes no scope" in msg
    (msg,) = issues(fault("router_policy", intensity=0.5))
    assert "intensity is 0 (no effect) or 1" in msg
    for kind in ("replica_crash", "config_change", "batch_invariance_off", "fallback_routing"):
        assert any("intensity is 0" in m for m in issues(fault(kind, intensity=0.3))), kind
    (msg,) = issues(fault("traffic_surge", scope={"replicas": [1]}))
    assert "takes no scope" in msg
    (msg,) = issues(fault("router_skew", scope="all"))
    assert "needs a scope" in msg


def test_kinds_that_cannot_act_on_the_fleet_are_refused() -> None:
    d = data(fault("spec_acceptance_drop"))
    d["fleet"]["engine"] = {}
    assert any("needs speculative decoding" in i.message for i in cross_check(d))
    d = data(fault("moe_imbalance"))
    d["fleet"]["model"] = "Llama-3.1-8B"
    assert any("needs a mixture-of-experts model" in i.message for i in cross_check(d))


def test_fallback_routing_needs_a_fallback_pool() -> None:
    d = data(fault("fallback_routing"))
    del d["fleet"]["router"]["fallback"]
    assert any("has none" in i.message for i in cross_check(d))


# ---------------------------------------------------------------- engine-level effects


def _requests(n: int = 400, rps: float = 4.0, tenants: int = 8) -> list[Request]:
    """Evenly spaced requests of `tenants` tenants in a fixed pseudo-random order (a periodic order would
    meet the router's round-robin tie-break in step and pin tenants by itself)."""
    rng = random.Random(7)
    return [Request(request_id=i, arrival_s=i / rps, prompt_tokens=400 + 37 * (i % 11), output_tokens=60,
                    tenant=f"t{rng.randrange(tenants)}", session_key=1 + rng.randrange(60), prompt_hash=i + 1)
            for i in range(n)]


def _fleet(replicas: int = 3) -> FleetSpec:
    return FleetSpec(PoolSpec("Llama-3.1-8B", "H100-SXM", replicas, EngineConfig()))


def _events(faults: list[Fault], kind: str, replicas: int = 3) -> list[Any]:
    run = simulate(_fleet(replicas), _requests(), faults, 100.0)
    return [e for e in run.events if e.kind == kind]


def test_replica_crash_logs_the_xid_it_is_given() -> None:
    for xid in (48, 79):
        (crash,) = _events([Fault("replica_crash", 30.0, None, (1,), 1.0, {"xid": xid})], "crash")
        assert crash.detail["xid"] == xid and crash.replica == "vllm-1"
    assert any("xid must be one of 48, 74, 79" in m for m in issues(fault("replica_crash", params={"xid": 13})))


def test_rollout_stagger_and_restart_time_are_set_per_fault() -> None:
    params = {"max_num_seqs": 64, "stagger_s": 7.0, "restart_s": 3.0}
    drains = _events([Fault("config_change", 20.0, None, None, 1.0, params)], "drain_start")
    assert [round(e.t, 6) for e in drains] == [20.0, 27.0, 34.0]
    run = simulate(_fleet(), _requests(), [Fault("config_change", 20.0, None, None, 1.0, params)], 100.0)
    down = {e.replica: e.t for e in run.events if e.kind == "shutdown"}
    ready = {e.replica: e.t for e in run.events if e.kind == "engine_ready" and e.t > 20.0}
    assert {r: round(ready[r] - down[r], 6) for r in down} == {"vllm-0": 3.0, "vllm-1": 3.0, "vllm-2": 3.0}
    # the defaults are the fleet's: 60 s apart, 45 s to restart
    drains = _events([Fault("config_change", 20.0, None, None, 1.0, {"max_num_seqs": 64})], "drain_start")
    assert [round(e.t, 6) for e in drains] == [20.0, 80.0, 140.0]


def test_a_ramp_raises_the_throttle_in_equal_steps() -> None:
    first, steps = ramp(10.0, 40.0, 0.8)
    assert first == pytest.approx(0.1) and len(steps) == 7 and steps[-1] == (45.0, pytest.approx(0.8))
    f = Fault("gpu_throttle", 10.0, 90.0, (0,), first, {"clock_factor": 0.5}, steps)
    clocks = [(round(e.t, 6), round(e.detail["clock_factor"], 6)) for e in _events([f], "hardware")]
    assert clocks[0] == (10.0, 0.95) and clocks[-2] == (45.0, 0.6) and clocks[-1] == (90.0, 1.0)
    assert [c for _, c in clocks[:-1]] == sorted((c for _, c in clocks[:-1]), reverse=True)
    with pytest.raises(ValueError, match="cannot change gradually"):
        Fault("replica_crash", 10.0, None, None, 1.0, {}, ((20.0, 0.5),))


def test_ramp_and_steps_are_validated() -> None:
    assert issues(fault("gpu_throttle", ramp_s=60)) == []
    assert issues(fault("gpu_throttle", steps=[{"at_s": 300, "intensity": 0.5}])) == []
    (msg,) = issues(fault("replica_crash", ramp_s=60))
    assert "cannot change gradually" in msg
    (msg,) = issues(fault("gpu_throttle", steps=[{"at_s": 100, "intensity": 0.5}]))
    assert "not after 200" in msg
    (msg,) = issues(fault("gpu_throttle", until_s=250, ramp_s=100))
    assert "after until_s" in msg


def test_steps_change_the_telemetry_of_a_held_fault(clean_digest: str) -> None:
    held = build_telemetry(incident(fault("gpu_throttle")), SEED).digest
    stepped = build_telemetry(incident(fault("gpu_throttle", intensity=0.3,
                                             steps=[{"at_s": 400, "intensity": 1.0}])), SEED).digest
    assert len({held, stepped, clean_digest}) == 3


# ---------------------------------------------------------------- sticky sessions


def _routing(faults: list[Fault], replicas: int = 4) -> dict[str, set[str]]:
    """tenant -> replicas its requests went to after the fault started (t > 20 s: an arrival at 20 s exactly
    is routed before the fault, as arrivals go first at equal times)."""
    run = simulate(_fleet(replicas), _requests(n=600, rps=6.0, tenants=12), faults, 100.0)
    cols = run.requests
    out: dict[str, set[str]] = {}
    for t, tenant, replica in zip(cols["arrival_s"], cols["tenant"], cols["replica"], strict=True):
        if t > 20.0:
            out.setdefault(tenant, set()).add(replica)
    return out


def _load(routing: dict[str, set[str]]) -> dict[str, int]:
    """replica -> tenants pinned there (for a sticky run every tenant has one replica)."""
    out: dict[str, int] = {}
    for reps in routing.values():
        for r in reps:
            out[r] = out.get(r, 0) + 1
    return out


def test_sticky_sessions_pin_every_tenant_to_one_replica() -> None:
    balanced = _routing([])
    assert all(len(reps) == 4 for reps in balanced.values())  # least outstanding spreads every tenant
    sticky = _routing([Fault("sticky_sessions", 20.0, None, None, 1.0, {"key": "tenant"})])
    assert all(len(reps) == 1 for reps in sticky.values())
    # half the pins honoured: some tenants stay spread, some are pinned
    half = _routing([Fault("sticky_sessions", 20.0, None, None, 0.5, {"key": "tenant"})])
    assert {len(reps) for reps in half.values()} == {1, 4}
    # pins end with the fault: every tenant spreads again
    ended = simulate(_fleet(4), _requests(n=600, rps=6.0, tenants=12),
                     [Fault("sticky_sessions", 20.0, 50.0, None, 1.0, {"key": "tenant"})], 100.0)
    late = {r for t, tenant, r in zip(ended.requests["arrival_s"], ended.requests["tenant"], ended.requests["replica"],
                                      strict=True) if t >= 60.0 and tenant == "t0"}
    assert len(late) == 4


def test_a_drained_replica_gets_no_request_pinned_or_not_and_drains_combine() -> None:
    sticky = Fault("sticky_sessions", 20.0, None, None, 1.0, {"key": "tenant"})
    drains = [Fault("router_drain", 50.0, None, (1,), 1.0, {}), Fault("router_drain", 50.0, None, (2,), 1.0, {})]
    run = simulate(_fleet(4), _requests(n=600, rps=6.0, tenants=12), [sticky, *drains], 100.0)
    after = [(tenant, r) for t, tenant, r in zip(run.requests["arrival_s"], run.requests["tenant"],
                                                 run.requests["replica"], strict=True) if t >= 50.5]
    assert after and {r for _, r in after} <= {"vllm-0", "vllm-3"}  # both drains hold; pins moved off them
    pinned = {}
    for tenant, r in after:
        pinned.setdefault(tenant, set()).add(r)
    assert all(len(reps) == 1 for reps in pinned.values())  # still pinned, to a replica in the pool
    back = simulate(_fleet(4), _requests(n=600, rps=6.0, tenants=12),
                    [Fault("router_drain", 20.0, 50.0, (1,), 1.0, {})], 100.0)
    during = {r for t, r in zip(back.requests["arrival_s"], back.requests["replica"], strict=True) if 20.5 <= t < 50}
    late = {r for t, r in zip(back.requests["arrival_s"], back.requests["replica"], strict=True) if t >= 51}
    assert "vllm-1" not in during and "vllm-1" in late  # back in the pool when the drain ends


def test_sticky_share_skews_how_many_clients_land_on_the_scoped_replica() -> None:
    skewed = _load(_routing([Fault("sticky_sessions", 20.0, None, (0,), 1.0, {"key": "tenant", "share": 0.7})]))
    even = _load(_routing([Fault("sticky_sessions", 20.0, None, (0,), 1.0, {"key": "tenant", "share": 0.0})]))
    assert skewed.get("vllm-0", 0) >= 6 > 3 > even.get("vllm-0", 0)
    assert sum(skewed.values()) == sum(even.values()) == 12


def test_sticky_sessions_by_session_follow_conversations_not_tenants() -> None:
    by_session = _routing([Fault("sticky_sessions", 20.0, None, None, 1.0, {"key": "session"})])
    assert any(len(reps) > 1 for reps in by_session.values())  # a tenant's conversations spread


def test_sticky_share_needs_a_scope_and_a_scope_needs_a_share() -> None:
    (msg,) = issues(fault("sticky_sessions", scope="all"))
    assert "give it a scope" in msg
    (msg,) = issues(fault("sticky_sessions", params={"key": "tenant"}))
    assert "ignores its scope" in msg
    assert issues(fault("sticky_sessions", params={"key": "session"}, scope="all")) == []


def test_the_runner_names_no_fault_kind() -> None:
    """Adding a kind is one file: what a kind changes outside the engines it declares in its workload hook, so
    the runner (the translation from an incident to a run) never spells a kind's name."""
    import ast
    from pathlib import Path

    import telemetry_gen.runner as runner

    tree = ast.parse(Path(runner.__file__).read_text())
    named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in REGISTRY}
    assert not named, f"telemetry_gen/runner.py names fault kinds {sorted(named)}: give the kind a workload hook"


def test_workload_kinds_read_their_defaults_from_their_params() -> None:
    """A workload kind's hook without params declares the effect its Param defaults give (no second copy)."""
    from telemetry_gen.runner import WorkloadEffects

    host = WorkloadEffects()
    for name in ("traffic_surge", "workload_shift", "gateway_latency"):
        REGISTRY[name].workload(host, Fault(name, 0.0, None, intensity=1.0))
    surge, shift, delay = REGISTRY["traffic_surge"], REGISTRY["workload_shift"], REGISTRY["gateway_latency"]
    assert [extra for _, _, extra in host.surges] == [surge.params["factor"].default - 1.0]
    assert [(ps, os_) for *_, ps, os_ in host.shifts] == [
        (shift.params["prompt_scale"].default, shift.params["output_scale"].default)]
    assert [(mean, sigma) for _, _, mean, sigma, _ in host.delays] == [
        (delay.params["delay_s"].default, delay.params["jitter"].default)]


def test_a_gateway_delay_for_one_app_delays_only_its_requests_by_the_same_draws() -> None:
    """gateway_latency with `app` is a route of its own through the gateway: that app's requests reach the
    router exactly as late as with the delay on every app (the same draws), the others as with no delay."""
    from incidents.fault_spec import FaultSpec
    from telemetry_gen.runner import gateway_transit

    def sent(*faults: FaultSpec) -> list[Request]:
        reqs = _requests(200)
        for i, r in enumerate(reqs):
            r.app = ("chat", "assistant")[i % 2]
        gateway_transit([reqs], list(faults), seed=3)
        return reqs

    every = sent(FaultSpec(kind="gateway_latency", at_s=10.0, params={"delay_s": 0.4}))
    only = sent(FaultSpec(kind="gateway_latency", at_s=10.0, params={"delay_s": 0.4, "app": "assistant"}))
    none = sent()
    for e, o, n in zip(every, only, none, strict=True):
        assert (o.arrival_s, o.gateway_s) == ((e.arrival_s, e.gateway_s) if o.app == "assistant"
                                              else (n.arrival_s, n.gateway_s))
    late = [o.gateway_s - n.gateway_s for o, n in zip(only, none, strict=True)
            if o.app == "assistant" and o.arrival_s > 12]
    assert late and min(late) > 0.1
    assert issues(fault("gateway_latency", params={"delay_s": 0.4, "app": 3})), "the app is a name"


@pytest.mark.parametrize("kind", ["gateway_latency", "traffic_surge", "workload_shift"])
def test_a_fault_naming_an_app_the_workload_lacks_is_refused_with_the_near_name(kind: str) -> None:
    """A misspelt `app` would act on no request: the world would silently lack its cause."""
    found = issues(fault(kind, params={**EXAMPLES[kind].get("params", {}), "app": "chatt"}))
    assert any("no app 'chatt' in the workload" in i and "did you mean 'chat'" in i for i in found), found
    assert not issues(fault(kind, params={**EXAMPLES[kind].get("params", {}), "app": "chat"}))
