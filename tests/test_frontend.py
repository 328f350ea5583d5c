"""The API server stage in front of each engine: intake queueing, output streaming, and handover."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine_model.config import EngineConfig
from engine_model.faults import Fault
from engine_model.frontend import (
    FIXED_S,
    LATENCY_S,
    PER_OUTPUT_TOKEN_S,
    PER_PROMPT_TOKEN_S,
    Frontend,
    FrontendConfig,
)
from engine_model.profiles import get_gpu, get_model
from engine_model.replica import Replica
from engine_model.request import Request
from engine_model.scheduler import Sequence
from engine_model.simulation import FleetSpec, PoolSpec, simulate

NO_FRONTEND = FrontendConfig(0.0, 0.0, 0.0, 0.0)
DEFAULT = FrontendConfig()


def fleet(frontend: FrontendConfig = DEFAULT, **knobs: object) -> FleetSpec:
    return FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 1, EngineConfig().with_changes(**knobs),
                                      frontend=frontend))


def burst(n: int, at: float, prompt: int, output: int, first_id: int = 0, **kw: object) -> list[Request]:
    return [Request(request_id=first_id + i, arrival_s=at, prompt_tokens=prompt, output_tokens=output,
                    prompt_hash=90_000 + first_id + i, **kw) for i in range(n)]  # type: ignore[arg-type]


def col(run, name: str) -> np.ndarray:
    return np.asarray(run.requests[name], dtype=float)


def intake_s(prompt: int) -> float:
    """CPU seconds of one request's intake."""
    return FIXED_S + PER_PROMPT_TOKEN_S * prompt


def reach_s(prompt: int) -> float:
    """Seconds from arrival to the engine's queue on an idle server: intake, then the hand-off latency."""
    return intake_s(prompt) + LATENCY_S


def test_output_closed_form_matches_the_step_by_step_queue() -> None:
    """A run's output is charged at once; it must leave the server exactly as n steps of it would."""
    rng = np.random.default_rng(0)
    # the explicit Lindley recursion, free_k = max(free_{k-1}, t0 + k d) + w
    for _ in range(300):
        cfg = FrontendConfig(0.0, 0.0, float(rng.uniform(1e-6, 1e-3)))
        free0 = float(rng.uniform(0.0, 2.0))
        n = int(rng.integers(1, 40))
        t0 = float(rng.uniform(0.0, 1.0))
        d = float(rng.uniform(1e-4, 0.05))
        per_step = float(rng.integers(1, 300))
        fe = Frontend(cfg)
        fe.free_at = free0
        got = fe.output(per_step * n, n, t0, t0 + n * d)
        f = free0
        for k in range(1, n + 1):
            f = max(f, t0 + k * d) + per_step * cfg.per_output_token_s
        assert got == pytest.approx(f, rel=1e-12, abs=1e-12)
        assert fe.free_at == got
        # the same run with intakes of zero cost in between: charging steps as they end changes nothing
        fe = Frontend(cfg)
        fe.free_at = free0
        fe.begin_run(t0, t0 + n * d, n, per_step)
        for t in np.sort(rng.uniform(t0, t0 + n * d, 5)):
            fe.catch_up(float(t))
        assert fe.output(per_step * n, n, t0, t0 + n * d) == pytest.approx(f, rel=1e-12, abs=1e-12)
        assert fe.busy_s_total == pytest.approx(n * per_step * cfg.per_output_token_s, rel=1e-12)


def test_a_burst_queues_in_front_of_the_engine() -> None:
    """A thousand requests sent at once take seconds to get through one API server: the k-th reaches
    the engine no earlier than k intakes after the burst."""
    reqs = burst(1000, 1.0, 500, 20)
    run = simulate(fleet(), reqs, [], 5.0)
    queue = np.sort(col(run, "first_scheduled_s") - col(run, "arrival_s"))
    each = intake_s(500)
    assert each * 1000 > 2.0  # seconds, as in a real server
    assert queue[-1] >= 1000 * each - 1e-9
    k = np.arange(1, 1001)
    assert np.all(queue >= k * each - 1e-9)
    # without the API server the engine sees the whole burst at once
    bare = simulate(fleet(NO_FRONTEND), reqs, [], 5.0)
    assert np.min(col(bare, "first_scheduled_s")) == 1.0


def test_requests_arriving_together_are_scheduled_together() -> None:
    """Eight requests reach an idle engine at the same instant: one step takes them all (vLLM's engine
    core drains its input queue before scheduling), not the first alone."""
    reqs = burst(8, 2.0, 200, 5)
    run = simulate(fleet(NO_FRONTEND), reqs, [], 5.0)
    assert set(col(run, "first_scheduled_s")) == {2.0}
    assert set(run.requests["batch_at_first_token"]) == {8}
    assert len(set(col(run, "first_token_s"))) == 1


def test_requests_reaching_a_busy_engine_go_in_together_at_the_step_boundary() -> None:
    """A long prefill step is running; five requests finish their intake during it. They wait for the
    step to end and are then scheduled in one step."""
    long_ = Request(request_id=0, arrival_s=1.0, prompt_tokens=8000, output_tokens=2, prompt_hash=1)
    # (they arrive after the long one's hand-off reached the engine, else they would go with it)
    short = [Request(request_id=1 + i, arrival_s=1.06 + 0.004 * i, prompt_tokens=100, output_tokens=5,
                     prompt_hash=2 + i) for i in range(5)]
    run = simulate(fleet(max_num_batched_tokens=8192), [long_, *short], [], 5.0)
    sched = dict(zip(run.requests["request_id"], col(run, "first_scheduled_s"), strict=True))
    first = dict(zip(run.requests["request_id"], col(run, "first_token_s"), strict=True))
    long_step_end = first[0] - PER_OUTPUT_TOKEN_S  # its first token left the server one token later
    assert long_step_end > 1.06 + 0.004 * 4 + reach_s(100)  # all five were in the queue by then
    assert len({sched[i] for i in range(1, 6)}) == 1
    assert sched[1] == pytest.approx(long_step_end, abs=1e-12)


def test_a_request_reaches_a_decoding_engine_at_the_next_step_boundary() -> None:
    """During a run of decode steps a request is scheduled at the first step boundary after its
    intake ends: not before (it is still being tokenised), and not at the end of the run."""
    decoder = Request(request_id=0, arrival_s=0.0, prompt_tokens=100, output_tokens=3000, prompt_hash=1)
    late = Request(request_id=1, arrival_s=3.0, prompt_tokens=1000, output_tokens=5, prompt_hash=2)
    run = simulate(fleet(), [decoder, late], [], 60.0)
    sched = col(run, "first_scheduled_s")[np.asarray(run.requests["request_id"]) == 1][0]
    ready = 3.0 + reach_s(1000)
    assert ready <= sched < ready + 0.02  # one decode step of one sequence is a few ms


def test_first_token_and_finish_leave_through_the_api_server() -> None:
    """One request on an idle replica: TTFT gains its intake plus streaming its first token; the finish
    gains the intake plus streaming its last token; decoding in between is as fast as before."""
    req = [Request(request_id=0, arrival_s=1.0, prompt_tokens=1000, output_tokens=100, prompt_hash=1)]
    bare = simulate(fleet(NO_FRONTEND), req, [], 5.0)
    run = simulate(fleet(), req, [], 5.0)
    d_first = col(run, "first_token_s")[0] - col(bare, "first_token_s")[0]
    d_finish = col(run, "finish_s")[0] - col(bare, "finish_s")[0]
    assert d_first == pytest.approx(reach_s(1000) + PER_OUTPUT_TOKEN_S, rel=1e-6)
    assert d_finish == pytest.approx(reach_s(1000) + PER_OUTPUT_TOKEN_S, rel=1e-6)
    assert col(run, "first_scheduled_s")[0] - 1.0 == pytest.approx(reach_s(1000), rel=1e-9)


def test_the_server_does_every_intake_and_every_token_exactly_once() -> None:
    """Its busy time is the sum of the intakes plus one streaming cost per output token."""
    rng = np.random.default_rng(4)
    reqs = [Request(request_id=i, arrival_s=float(t), prompt_tokens=int(p), output_tokens=int(o), prompt_hash=5 + i)
            for i, (t, p, o) in enumerate(zip(np.sort(rng.uniform(0, 60, 400)), rng.integers(50, 3000, 400),
                                              rng.integers(1, 400, 400), strict=True))]
    run = simulate(fleet(), reqs, [], 60.0)
    assert set(run.requests["status"]) == {"ok"}
    want = sum(intake_s(r.prompt_tokens) + PER_OUTPUT_TOKEN_S * r.output_tokens for r in reqs)
    assert run.stats["frontend_busy_s"] == pytest.approx(want, rel=1e-9)


def test_the_hand_off_latency_holds_no_resource() -> None:
    """Ten requests sent together with a latency but no CPU cost all reach the engine one latency later,
    together, and the server's CPU stays idle: a latency delays each request, it does not queue them."""
    reqs = burst(10, 1.0, 300, 5)
    run = simulate(fleet(FrontendConfig(0.0, 0.0, 0.0, 0.05)), reqs, [], 5.0)
    sched = col(run, "first_scheduled_s")
    assert len(set(sched)) == 1 and sched[0] == pytest.approx(1.05)
    assert run.stats["frontend_busy_s"] == 0.0
    # with a CPU cost as well, the intakes queue (the k-th is done after k of them), and every one done while
    # the first hand-off is on its way goes with it: all ten reach the engine at the first's intake plus the
    # latency (one wait per hand-off, issue 33), together
    run = simulate(fleet(FrontendConfig(2e-3, 0.0, 0.0, 0.05)), reqs, [], 5.0)
    got = col(run, "first_scheduled_s") - 1.0
    assert np.allclose(got, 0.052, rtol=1e-9)
    assert run.stats["frontend_busy_s"] == pytest.approx(10 * 2e-3)
    # an intake longer than the latency misses the hand-off before it: each waits its own k intakes + latency
    run = simulate(fleet(FrontendConfig(2e-3, 0.0, 0.0, 1e-3)), reqs, [], 5.0)
    got = np.sort(col(run, "engine_arrival_s") - 1.0)
    assert np.allclose(got, np.arange(1, 11) * 2e-3 + 1e-3, rtol=1e-9)


def test_heavy_streaming_slows_intake() -> None:
    """The API server is one resource: while it streams many tokens, a new request waits longer to be
    taken in than on a quiet server."""
    streams = burst(200, 0.0, 100, 4000)
    probe = Request(request_id=999, arrival_s=20.0, prompt_tokens=100, output_tokens=5, prompt_hash=7)
    busy = simulate(fleet(FrontendConfig(per_output_token_s=2e-4)), [*streams, probe], [], 60.0)
    quiet = simulate(fleet(FrontendConfig(per_output_token_s=0.0)), [*streams, probe], [], 60.0)

    def probe_queue(run) -> float:
        i = list(run.requests["request_id"]).index(999)
        return col(run, "first_scheduled_s")[i] - col(run, "arrival_s")[i]

    assert probe_queue(busy) > probe_queue(quiet) + 1e-3


def test_a_client_that_gives_up_during_intake_times_out_and_nothing_vanishes() -> None:
    patient = burst(300, 1.0, 2000, 10)
    hasty = burst(50, 1.0, 100, 10, first_id=1000, timeout_s=0.1)
    reqs = patient + hasty
    run = simulate(fleet(), reqs, [], 5.0)
    assert sorted(run.requests["request_id"]) == sorted(r.request_id for r in reqs)
    status = dict(zip(run.requests["request_id"], run.requests["status"], strict=True))
    sched = dict(zip(run.requests["request_id"], col(run, "first_scheduled_s"), strict=True))
    # the hasty ones sit behind 300 intakes of ~5.5 ms: they give up before reaching the engine
    assert all(status[r.request_id] == "timeout" and math.isnan(sched[r.request_id]) for r in hasty)
    assert all(status[r.request_id] == "ok" for r in patient)


def test_a_crash_fails_the_requests_still_in_intake() -> None:
    reqs = burst(400, 1.0, 1000, 10)
    crash = Fault("replica_crash", 1.2, None, None, 1.0, {"restart_s": 30.0})
    run = simulate(fleet(), reqs, [crash], 40.0)
    assert run.num_requests == 400
    status = np.asarray(run.requests["status"])
    never_scheduled = np.isnan(col(run, "first_scheduled_s"))
    # ~36 intakes fit in the 0.2 s before the crash; the rest were still queued in the API server
    assert never_scheduled.sum() > 300
    assert set(status[never_scheduled]) == {"error"}
    assert np.all(col(run, "finish_s")[never_scheduled] == 1.2)


def test_host_contention_slows_the_api_server_too() -> None:
    reqs = burst(300, 10.0, 1000, 5)
    slow = simulate(fleet(), reqs, [Fault("host_contention", 5.0, None, None, 1.0, {"overhead_factor": 3.0})], 30.0)
    base = simulate(fleet(), reqs, [], 30.0)

    def last_handover(run) -> float:
        return float(np.max(col(run, "first_scheduled_s") - col(run, "arrival_s")))

    assert last_handover(base) >= 300 * intake_s(1000) - 1e-9
    assert last_handover(slow) >= 3 * 300 * intake_s(1000) - 1e-9


def test_requests_in_intake_count_as_outstanding_but_not_as_waiting() -> None:
    """The router sees them on the replica; the engine's waiting gauge does not (vLLM counts a request
    only once the engine core has it)."""
    rep = Replica("vllm-0", 0, get_model("Llama-3.1-8B"), get_gpu("H100-SXM"), EngineConfig(), model_version="v1")
    two, late = burst(2, 0.0, 500, 5), burst(1, 0.03, 500, 5, first_id=2)
    seqs: list[Sequence] = [rep.enqueue(r, 0.0) for r in two] + [rep.enqueue(late[0], 0.03)]
    assert rep.outstanding == 3 and rep.sched.num_waiting == 0
    # the second's intake ends while the first's hand-off is on its way, so they reach the engine together; the
    # third arrives after that hand-off reached the engine (22.5 ms) and makes its own
    assert rep.handover_at() == pytest.approx(reach_s(500))
    assert rep.take_ready(reach_s(500) + 1e-12) == 2
    assert rep.outstanding == 3 and rep.sched.num_waiting == 2
    assert [s.state for s in seqs] == ["waiting", "waiting", "frontend"]
