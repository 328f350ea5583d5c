"""Behaviour of the event-driven fleet simulation: physics that would fail on a wrong model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine_model.config import EngineConfig
from engine_model.faults import Fault
from engine_model.kv_cache import KVCache
from engine_model.replica import ITL_BUCKETS
from engine_model.request import Request
from engine_model.scheduler import Scheduler, Sequence
from engine_model.simulation import FleetSpec, PoolSpec, Simulation, simulate

pytestmark = pytest.mark.slow  # runs the engine model on fleets for minutes of simulated time


def poisson_requests(rate: float, duration: float, prompt: int, output: int, seed: int = 0, *,
                     prefix_key: int = 0, prefix_tokens: int = 0, jitter: bool = True) -> list[Request]:
    rng = np.random.default_rng(seed)
    t, out, i = 0.0, [], 0
    while True:
        t += rng.exponential(1.0 / rate)
        if t >= duration:
            return out
        p = int(prompt * rng.uniform(0.5, 1.5)) if jitter else prompt
        o = int(output * rng.uniform(0.5, 1.5)) if jitter else output
        out.append(Request(request_id=i, arrival_s=t, prompt_tokens=max(p, prefix_tokens + 1), output_tokens=max(o, 1),
                           prefix_key=prefix_key, prefix_tokens=prefix_tokens, prompt_hash=10_000 + i,
                           session_key=1 + i % 50))
        i += 1


def fleet(n: int = 1, model: str = "Llama-3.1-8B", gpu: str = "H100-SXM", **knobs: object) -> FleetSpec:
    return FleetSpec(primary=PoolSpec(model, gpu, n, EngineConfig().with_changes(**knobs)))


def cols(run, name):
    return np.asarray(run.requests[name], dtype=float)


def ttft(run) -> np.ndarray:
    return cols(run, "first_token_s") - cols(run, "arrival_s")


def itl(run) -> np.ndarray:
    out = cols(run, "output_tokens")
    return (cols(run, "finish_s") - cols(run, "first_token_s")) / np.maximum(out - 1, 1)


def test_every_request_finishes_ok_under_light_load() -> None:
    reqs = poisson_requests(4, 120, 800, 120)
    run = simulate(fleet(1), reqs, [], 120)
    assert run.num_requests == len(reqs)
    assert set(run.requests["status"]) == {"ok"}
    got = dict(zip(run.requests["request_id"], run.requests["output_tokens"], strict=True))
    assert got == {r.request_id: r.output_tokens for r in reqs}
    # ttft = queue + prefill and every timestamp is ordered
    a, s, f, e = (cols(run, k) for k in ("arrival_s", "first_scheduled_s", "first_token_s", "finish_s"))
    assert np.all(a <= s) and np.all(s < f) and np.all(f <= e)


def test_same_inputs_give_identical_results() -> None:
    reqs = poisson_requests(10, 60, 1000, 200, seed=3)
    a = simulate(fleet(2), reqs, [], 60)
    b = simulate(fleet(2), reqs, [], 60)
    # by repr: NaN (no logprobs asked for) never equals itself, and == on lists trusts identity only
    assert repr(a.requests) == repr(b.requests)
    assert repr(a.samples) == repr(b.samples)
    assert a.num_requests == len(reqs)


def test_littles_law_holds() -> None:
    """Mean number in system (time average of scraped running + waiting) = arrival rate x mean latency."""
    duration = 600.0
    reqs = poisson_requests(12, duration, 1500, 250, seed=5)
    run = simulate(fleet(1), reqs, [], duration, sample_interval_s=1.0)
    lam = len(reqs) / duration
    w = float(np.mean(cols(run, "finish_s") - cols(run, "arrival_s")))
    n_sampled = np.asarray(run.samples["running"]) + np.asarray(run.samples["waiting"])
    # skip the warm-up so the sample average sees the steady state
    n_mean = float(np.mean(n_sampled[60:]))
    assert n_mean == pytest.approx(lam * w, rel=0.12)


def test_chunked_prefill_off_stalls_concurrent_decodes() -> None:
    """Long prompts prefilled whole stall the running decodes; chunking spreads them over steps."""
    short = poisson_requests(6, 120, 200, 300, seed=1)
    long_ = [Request(request_id=10_000 + i, arrival_s=5.0 + 4.0 * i, prompt_tokens=24_000, output_tokens=20,
                     prompt_hash=99_000 + i) for i in range(25)]
    reqs = sorted(short + long_, key=lambda r: r.arrival_s)
    on = simulate(fleet(1, max_num_batched_tokens=2048), reqs, [], 120)
    off = simulate(fleet(1, enable_chunked_prefill=False, max_num_batched_tokens=32768), reqs, [], 120)

    def slow_gaps(run) -> int:
        """Inter-token gaps above 0.25 s, from the engine's ITL histogram."""
        counts = np.asarray(run.samples["itl_counts"][-1])
        return int(counts[ITL_BUCKETS.index(0.3):].sum())

    assert slow_gaps(on) == 0
    assert slow_gaps(off) > 100


def test_prefix_caching_cuts_prefill_work_and_ttft() -> None:
    reqs = poisson_requests(8, 180, 3000, 50, seed=2, prefix_key=7, prefix_tokens=2800)
    cached = simulate(fleet(1), reqs, [], 180)
    uncached = simulate(fleet(1, enable_prefix_caching=False), reqs, [], 180)
    hit = cols(cached, "cached_tokens")
    assert np.mean(hit) > 2000  # most of the shared prefix is reused
    assert np.all(cols(uncached, "cached_tokens") == 0)
    assert np.median(ttft(uncached)) > 2 * np.median(ttft(cached))
    last = {k: v[-1] for k, v in cached.samples.items()}
    assert last["prefix_hits_total"] > 0.8 * last["prefix_queries_total"] * 2800 / 3000 * 0.9


def test_kv_exhaustion_causes_preemptions() -> None:
    """Long outputs on a small KV pool: blocks run out mid-decode and the newest sequences are preempted."""
    reqs = poisson_requests(1, 120, 6000, 1500, seed=4)
    tight = simulate(fleet(1, gpu_memory_utilization=0.3), reqs, [], 120)
    roomy = simulate(fleet(1), reqs, [], 120)
    assert sum(tight.requests["num_preemptions"]) > 0
    assert sum(roomy.requests["num_preemptions"]) == 0
    assert max(tight.samples["kv_usage"]) > 0.9
    # preempted requests still finish with their full output
    assert set(tight.requests["status"]) == {"ok"}


def test_throttled_replica_is_slower() -> None:
    reqs = poisson_requests(16, 300, 2000, 150, seed=6)
    run = simulate(fleet(2, ), reqs, [Fault("gpu_throttle", 0.0, None, (1,), 1.0, {"clock_factor": 0.5})], 300)
    rep = np.asarray(run.requests["replica"])
    prefill = cols(run, "first_token_s") - cols(run, "first_scheduled_s")
    slow, fast = np.median(prefill[rep == "vllm-1"]), np.median(prefill[rep == "vllm-0"])
    assert slow > 1.4 * fast  # prefill is compute-bound: half the clock, nearly twice the time
    clocks = {r: c for r, c in zip(run.samples["replica"], run.samples["clock_factor"], strict=True)}
    assert clocks["vllm-1"] == 0.5 and clocks["vllm-0"] == 1.0


def test_crash_fails_in_flight_requests_and_restarts_cold() -> None:
    reqs = poisson_requests(10, 300, 1200, 400, seed=7, prefix_key=3, prefix_tokens=1000)
    spec = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 2, EngineConfig()), restart_s=30.0)
    run = Simulation(spec, reqs, [Fault("replica_crash", 100.0, None, (0,), 1.0, {})], 300).run()
    status = np.asarray(run.requests["status"])
    rep = np.asarray(run.requests["replica"])
    assert np.sum((status == "error") & (rep == "vllm-0")) > 0
    assert np.all(status[rep == "vllm-1"] == "ok")
    kinds = [(e.replica, e.kind) for e in run.events]
    assert ("vllm-0", "crash") in kinds and ("vllm-0", "engine_ready") in kinds
    ready = next(e.t for e in run.events if e.kind == "engine_ready")
    assert ready == pytest.approx(130.0)
    # after the restart vllm-0 serves again, its first requests miss the (now empty) prefix cache
    arr = cols(run, "arrival_s")
    after = (rep == "vllm-0") & (arr > ready) & (status == "ok")
    assert after.sum() > 0
    first_after = np.argmin(np.where(after, arr, np.inf))
    assert cols(run, "cached_tokens")[first_after] == 0


def test_high_memory_utilization_ooms_at_peak() -> None:
    """0.98 of memory to the engine with a large max_num_seqs: the peak batch no longer fits."""
    reqs = poisson_requests(60, 120, 400, 400, seed=8)
    risky = simulate(fleet(1, gpu_memory_utilization=0.98, max_num_seqs=1024), reqs, [], 120)
    safe = simulate(fleet(1, gpu_memory_utilization=0.90, max_num_seqs=1024), reqs, [], 120)
    assert any(e.kind == "crash" and e.detail.get("reason") == "oom" for e in risky.events)
    assert not any(e.kind == "crash" for e in safe.events)


def _first_oom(run) -> float:
    return min((e.t for e in run.events if e.kind == "crash" and e.detail.get("reason") == "oom"), default=np.inf)


def test_a_per_request_leak_ooms_sooner_under_more_traffic_and_a_steady_one_does_not() -> None:
    """A leak per prefill (bytes) crashes a busy engine first; a leak per second ignores the load."""
    def crash_at(rate: float, params: dict[str, float]) -> float:
        reqs = poisson_requests(rate, 900, 600, 100, seed=3)
        run = simulate(fleet(1), reqs, [Fault("memory_leak", 0.0, None, None, 1.0, params)], 900)
        return _first_oom(run)

    per_request = {"bytes_per_request": 12 * 2**20}
    quiet, busy = crash_at(4, per_request), crash_at(8, per_request)
    assert busy < quiet < np.inf
    assert busy == pytest.approx(quiet / 2, rel=0.25)  # twice the prefills per second, half the time
    steady = {"bytes_per_s": 20 * 2**20}
    assert crash_at(8, steady) == pytest.approx(crash_at(4, steady), abs=15.0)


def test_redeploy_applies_new_config_after_drain() -> None:
    reqs = poisson_requests(6, 400, 1000, 100, seed=9)
    spec = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 2, EngineConfig()), restart_s=20.0,
                     deploy_stagger_s=30.0)
    fault = Fault("config_change", 100.0, None, None, 1.0, {"max_num_batched_tokens": 512})
    run = Simulation(spec, reqs, [fault], 400).run()
    ready = [e for e in run.events if e.kind == "engine_ready"]
    assert [e.replica for e in ready] == ["vllm-0", "vllm-1"]
    assert ready[0].detail["changes"] == {"max_num_batched_tokens": [8192, 512]}
    assert ready[1].t > ready[0].t  # rolling, not all at once
    assert set(run.requests["status"]) == {"ok"}  # draining loses nothing


def test_least_outstanding_balances_and_affinity_sticks() -> None:
    reqs = poisson_requests(20, 120, 800, 100, seed=10)
    lo = simulate(fleet(4), reqs, [], 120)
    counts = np.unique(np.asarray(lo.requests["replica"]), return_counts=True)[1]
    assert counts.min() > 0.8 * counts.max()
    aff = simulate(FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 4), router_policy="affinity"), reqs, [], 120)
    by_session: dict[int, set[str]] = {}
    ids = {r.request_id: r.session_key for r in reqs}
    for rid, rep in zip(aff.requests["request_id"], aff.requests["replica"], strict=True):
        by_session.setdefault(ids[rid], set()).add(rep)
    assert all(len(v) == 1 for v in by_session.values())


def test_fallback_pool_takes_overflow_and_says_so() -> None:
    reqs = poisson_requests(40, 120, 3000, 300, seed=11)
    spec = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "L40S", 1),
                     fallback=PoolSpec("Qwen2.5-7B", "H100-SXM", 1, name_prefix="fallback"), fallback_threshold=4)
    run = simulate(spec, reqs, [], 120)
    route = np.asarray(run.requests["route"])
    model = np.asarray(run.requests["model"])
    assert np.any(route == "fallback")
    assert set(model[route == "fallback"]) == {"Qwen2.5-7B"}
    assert set(model[route == "primary"]) == {"Llama-3.1-8B"}


def test_speculative_decoding_counters_and_speedup_at_low_batch() -> None:
    reqs = poisson_requests(1, 120, 500, 400, seed=12)
    base = simulate(fleet(1), reqs, [], 120)
    spec = simulate(fleet(1, num_speculative_tokens=4, spec_acceptance_rate=0.8), reqs, [], 120)
    assert np.median(itl(spec)) < 0.7 * np.median(itl(base))
    last = {k: v[-1] for k, v in spec.samples.items()}
    assert last["spec_accepted_tokens_total"] / last["spec_draft_tokens_total"] == pytest.approx(
        ((1 - 0.8**5) / (1 - 0.8) - 1) / 4, rel=0.02)


def test_simultaneous_config_changes_merge_into_one_restart() -> None:
    reqs = poisson_requests(4, 300, 800, 100, seed=13)
    spec = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 1, EngineConfig()), restart_s=20.0)
    faults = [Fault("config_change", 60.0, None, None, 1.0, {"enable_prefix_caching": False}),
              Fault("config_change", 60.0, None, None, 1.0, {"max_num_seqs": 384})]
    run = Simulation(spec, reqs, faults, 300).run()
    ready = [e for e in run.events if e.kind == "engine_ready"]
    assert len(ready) == 1
    assert ready[0].detail["changes"] == {"enable_prefix_caching": [True, False], "max_num_seqs": [256, 384]}


# ----- client timeouts ---------------------------------------------------------------------------
def _with_timeout(reqs: list[Request], timeout_s: float) -> list[Request]:
    return [dataclasses.replace(r, timeout_s=timeout_s) for r in reqs]


def test_clients_give_up_on_an_overloaded_engine_and_no_request_vanishes() -> None:
    """max_num_seqs=2 cannot keep up: the queue grows until clients time out. Every request still gets
    exactly one row; the abandoned ones at their deadline, with status timeout."""
    reqs = _with_timeout(poisson_requests(6, 120, 400, 300, seed=4), 20.0)
    sim = Simulation(fleet(1, max_num_seqs=2), reqs, [], 120)
    run = sim.run()
    assert sorted(run.requests["request_id"]) == [r.request_id for r in reqs]
    assert run.stats["unfinished"] == 0
    status = np.asarray(run.requests["status"])
    timeout = status == "timeout"
    assert 0 < timeout.sum() < len(reqs) and set(status) == {"ok", "timeout"}
    assert set(np.asarray(run.requests["finish_reason"])[timeout]) == {"abort"}
    e2e = cols(run, "finish_s") - cols(run, "arrival_s")
    assert np.allclose(e2e[timeout], 20.0) and np.all(e2e[~timeout] <= 20.0 + 1e-9)
    # some were cut off mid-stream (a first token, fewer tokens than asked), some never started
    asked = {r.request_id: r.output_tokens for r in reqs}
    got = dict(zip(run.requests["request_id"], run.requests["output_tokens"], strict=True))
    first = cols(run, "first_token_s")
    cut = [rid for rid, t, f in zip(run.requests["request_id"], timeout, first, strict=True) if t and f == f]
    assert cut and all(got[rid] < asked[rid] for rid in cut)
    assert np.isnan(first[timeout]).any()
    # the aborted requests' blocks went back: nothing is left on the engine
    rep = sim.replicas[0]
    assert rep.sched.num_outstanding() == 0 and rep.kv.num_in_use == 0
    rep.kv.check_invariants()


def test_timeouts_free_the_engine_for_the_clients_still_waiting() -> None:
    reqs = poisson_requests(6, 120, 400, 300, seed=4)
    patient = simulate(fleet(1, max_num_seqs=2), _with_timeout(reqs, 10_000.0), [], 120)
    impatient = simulate(fleet(1, max_num_seqs=2), _with_timeout(reqs, 20.0), [], 120)
    assert set(patient.requests["status"]) == {"ok"}
    ok = np.asarray(impatient.requests["status"]) == "ok"
    # abandoned work is not done, so the requests that are served wait less than when nobody leaves
    q_patient = np.median(cols(patient, "first_scheduled_s") - cols(patient, "arrival_s"))
    q_served = np.median((cols(impatient, "first_scheduled_s") - cols(impatient, "arrival_s"))[ok])
    assert q_served < q_patient / 2


def test_a_timeout_after_the_response_changes_nothing() -> None:
    reqs = poisson_requests(4, 60, 800, 120, seed=2)
    a = simulate(fleet(1), reqs, [], 60)
    b = simulate(fleet(1), _with_timeout(reqs, 300.0), [], 60)
    assert repr(a.requests) == repr(b.requests)


def test_abort_frees_a_sequence_in_every_live_state() -> None:
    cfg = EngineConfig().with_changes(max_num_batched_tokens=512, max_num_seqs=2)
    kv = KVCache(64, 16)
    sched = Scheduler(cfg, kv)
    seqs = [Sequence(Request(request_id=i, arrival_s=float(i), prompt_tokens=p, output_tokens=50), i, p)
            for i, p in enumerate((100, 700, 100))]
    for s in seqs:
        sched.add(s)
    plan = sched.plan()  # the first prompt whole, the first 412 tokens of the second; the third waits
    assert plan is not None and [s.state for s in seqs] == ["prefilling", "prefilling", "waiting"]
    sched.commit(plan, 1, 0.1)
    assert [s.state for s in seqs] == ["decoding", "prefilling", "waiting"]
    for s in (seqs[1], seqs[2], seqs[0]):  # mid-prefill, queued, decoding
        sched.abort(s)
        assert s.state == "aborted"
    assert sched.num_outstanding() == 0 and kv.num_in_use == 0
    assert seqs[0].generated == 1  # the token it had streamed
    kv.check_invariants()
    assert sched.plan() is None
    with pytest.raises(ValueError):
        sched.abort(seqs[0])


def test_the_run_lasts_until_the_most_patient_client_is_done() -> None:
    """A client willing to wait longer than the default drain still gets its answer recorded."""
    reqs = _with_timeout(poisson_requests(6, 60, 400, 300, seed=4), 5000.0)
    run = simulate(fleet(1, max_num_seqs=1), reqs, [], 60)
    assert run.num_requests == len(reqs) and run.stats["unfinished"] == 0
    assert set(run.requests["status"]) == {"ok"}
    assert float(np.max(cols(run, "finish_s"))) > 60 + 600  # past the default drain
