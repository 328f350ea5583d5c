"""Clients that time out and retry: retries add load, and a retry storm emerges from the feedback loop."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine_model.config import EngineConfig
from engine_model.faults import Fault
from engine_model.request import Request
from engine_model.results import SimResult
from engine_model.retries import NO_RETRY, ClientChange, Clients, RetryPolicy, uniform
from engine_model.simulation import FleetSpec, PoolSpec, simulate


def requests(rate: float, duration: float, prompt: int, output: int, *, timeout_s: float = 600.0,
             seed: int = 0) -> list[Request]:
    rng = np.random.default_rng(seed)
    t, out, i = 0.0, [], 0
    while True:
        t += rng.exponential(1.0 / rate)
        if t >= duration:
            return out
        out.append(Request(request_id=i, arrival_s=t, prompt_tokens=int(prompt * rng.uniform(0.5, 1.5)),
                           output_tokens=max(1, int(output * rng.uniform(0.5, 1.5))), prompt_hash=10_000 + i,
                           timeout_s=timeout_s))
        i += 1


def fleet(n: int = 1) -> FleetSpec:
    return FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", n, EngineConfig()))


def clients(policy: RetryPolicy, *, changes: tuple[ClientChange, ...] = (), until: float = 300.0,
            seed: int = 1) -> Clients:
    return Clients({}, policy, changes, seed=seed, send_until=until)


def column(run: SimResult, name: str) -> np.ndarray:
    return np.asarray(run.requests[name])


def amplification(run: SimResult) -> float:
    """Requests the engines saw per request a user made."""
    ids, first = column(run, "request_id"), column(run, "first_request_id")
    return len(ids) / len(set(np.where(first >= 0, first, ids).tolist()))


def goodput(run: SimResult, window: float) -> int:
    """User requests answered within the window (any attempt)."""
    ok = (column(run, "status") == "ok") & (column(run, "finish_s").astype(float) <= window)
    return int(ok.sum())


# ----- the policy ---------------------------------------------------------------------------------------
def test_backoff_doubles_up_to_its_cap_and_jitter_only_shortens_it() -> None:
    p = RetryPolicy(max_attempts=6, backoff_s=0.5, backoff_max_s=8.0, jitter=0.25)
    assert [p.delay(a, 0.0) for a in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert p.delay(3, 0.999) == pytest.approx(2.0 * (1 - 0.25 * 0.999))
    full = RetryPolicy(jitter=1.0)
    assert 0.0 <= full.delay(2, 0.7) <= 1.0


def test_jitter_draws_are_uniform_and_fixed_by_seed_request_and_attempt() -> None:
    u = np.array([uniform(7, rid, 1) for rid in range(20_000)])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(np.mean(u < 0.25) - 0.25) < 0.01
    assert uniform(7, 5, 2) == uniform(7, 5, 2) and uniform(7, 5, 2) != uniform(8, 5, 2)


def test_a_client_change_sets_the_timeout_and_policy_only_while_in_force() -> None:
    storm = RetryPolicy(max_attempts=5, backoff_s=1.0, jitter=0.0)
    c = Clients({}, NO_RETRY, (ClientChange(100.0, 200.0, "chat", 15.0, storm),), base_timeouts={"chat": 600.0})
    assert c.policy_at("chat", 150.0) is storm and c.policy_at("chat", 250.0) is NO_RETRY
    assert c.policy_at("code", 150.0) is NO_RETRY
    req = Request(1, 150.0, 100, 10, app="chat")
    assert c.on_send(req).timeout_s == 15.0
    assert c.on_send(dataclasses.replace(req, arrival_s=50.0)).timeout_s == 600.0
    # a retry sent after the change ended waits the app's own timeout again, and is not retried
    retry = c.retry(dataclasses.replace(req, timeout_s=15.0), "timeout", 199.9)
    assert retry is not None and retry.attempt == 2 and retry.first_request_id == 1
    assert retry.timeout_s == 600.0 and retry.arrival_s == pytest.approx(200.9)
    assert c.retry(retry, "timeout", 260.0) is None


# ----- the fleet ----------------------------------------------------------------------------------------
def test_clients_that_never_need_to_retry_change_nothing() -> None:
    """Light load, the default timeout: the same run with or without retrying clients."""
    reqs = requests(4, 120, 600, 120)
    plain = simulate(fleet(), reqs, [], 120)
    retrying = simulate(fleet(), reqs, [], 120, clients=clients(RetryPolicy(max_attempts=5), until=120))
    assert repr(plain.requests) == repr(retrying.requests)
    assert repr(plain.samples) == repr(retrying.samples)
    assert retrying.stats["retries"] == 0.0


def test_retries_of_a_crash_arrive_after_their_backoff_as_new_attempts() -> None:
    reqs = requests(8, 120, 600, 200, seed=2)
    crash = Fault("replica_crash", 60.0, replicas=(0,), params={"restart_s": 30.0})
    # the router keeps sending to the dead engine until its health check (5 s): four attempts with backoffs
    # of at least 1.5, 3 and 6 s outlast that
    policy = RetryPolicy(max_attempts=4, backoff_s=2.0, backoff_max_s=8.0, jitter=0.25)
    run = simulate(fleet(2), reqs, [crash], 120, clients=clients(policy, until=120))
    status, attempt = column(run, "status"), column(run, "attempt")
    first, rid = column(run, "first_request_id"), column(run, "request_id")
    arrival, finish = column(run, "arrival_s").astype(float), column(run, "finish_s").astype(float)
    assert run.stats["retries"] > 0 and attempt.max() >= 2
    assert np.all((attempt == 1) == (first < 0))
    by_id = {int(r): k for k, r in enumerate(rid)}
    for k in np.nonzero(attempt > 1)[0]:
        # the attempt before it failed, and the retry went out at least 0.75 x its backoff later
        prev = [j for j in range(len(rid)) if (first[j] == first[k] or rid[j] == first[k])
                and attempt[j] == attempt[k] - 1]
        assert len(prev) == 1 and status[prev[0]] in ("error", "timeout")
        wait = 2.0 * 2.0 ** (attempt[k] - 2)
        assert arrival[k] - finish[prev[0]] >= 0.75 * wait - 1e-9
        assert int(first[k]) in by_id and attempt[by_id[int(first[k])]] == 1
    # every user request that failed on the crashed engine got through on a retry
    users_ok = {int(first[k]) if first[k] >= 0 else int(rid[k]) for k in np.nonzero(status == "ok")[0]}
    assert users_ok == {r.request_id for r in reqs}


def overload(policy: RetryPolicy) -> SimResult:
    """One replica that serves 8 requests/s with a short queue (1000-token prompts, 400-token answers), a
    30 s spike to 24 requests/s, clients that wait 15 s."""
    reqs = requests(8, 240, 1000, 400, timeout_s=15.0, seed=5)
    spike = [dataclasses.replace(r, request_id=100_000 + r.request_id, arrival_s=30.0 + r.arrival_s)
             for r in requests(16, 30, 1000, 400, timeout_s=15.0, seed=6)]
    reqs = sorted(reqs + spike, key=lambda r: r.arrival_s)
    return simulate(fleet(), reqs, [], 240, clients=clients(policy, until=240))


@pytest.fixture(scope="module")
def storm_runs() -> dict[str, SimResult]:
    return {
        "none": overload(NO_RETRY),
        "eager": overload(RetryPolicy(max_attempts=6, backoff_s=0.0, backoff_max_s=0.0, jitter=0.0)),
        "backoff": overload(RetryPolicy(max_attempts=6, backoff_s=5.0, backoff_max_s=60.0, jitter=1.0)),
    }


@pytest.mark.slow  # shares the three overloaded fleets of storm_runs: ~10 s
def test_eager_retries_under_overload_multiply_attempts_and_cut_goodput(storm_runs: dict[str, SimResult]) -> None:
    none, eager = storm_runs["none"], storm_runs["eager"]
    assert amplification(none) == 1.0
    assert amplification(eager) > 2.0
    # without retries the spike's excess times out and the fleet recovers; with them it never does
    assert goodput(eager, 240) < 0.5 * goodput(none, 240)
    late = column(eager, "finish_s").astype(float) > 180
    assert not np.any(late & (column(eager, "status") == "ok"))
    # the extra load shows in the engine: a longer queue than the same traffic without retries
    waiting = {k: float(np.mean(run.samples["waiting"])) for k, run in storm_runs.items()}
    assert waiting["eager"] > 10 * waiting["none"]


@pytest.mark.slow  # shares the three overloaded fleets of storm_runs: ~10 s
def test_backoff_with_jitter_damps_the_storm(storm_runs: dict[str, SimResult]) -> None:
    """Fewer attempts and more answers, but it does not end the storm: once the queue outlasts the timeout
    every new request fails too, and backoff only delays each one's retries."""
    eager, backoff = storm_runs["eager"], storm_runs["backoff"]
    assert amplification(backoff) < 0.9 * amplification(eager)
    assert goodput(backoff, 240) > 1.05 * goodput(eager, 240)
    assert np.mean(backoff.samples["waiting"]) < 0.8 * np.mean(eager.samples["waiting"])


@pytest.mark.slow  # shares the three overloaded fleets of storm_runs: ~10 s
def test_a_storm_is_reproducible(storm_runs: dict[str, SimResult]) -> None:
    again = overload(RetryPolicy(max_attempts=6, backoff_s=0.0, backoff_max_s=0.0, jitter=0.0))
    assert repr(again.requests) == repr(storm_runs["eager"].requests)


# ----- the library's retry storm --------------------------------------------------------------------------
@pytest.mark.slow  # builds two worlds of a library incident: ~13 s
def test_the_retry_storm_incident_has_the_attempt_columns_in_both_worlds() -> None:
    """chat-fails-long-after-spike: its clients retry, so every world has attempt and first_request_id; the
    client release multiplies attempts, and without it nobody retries (nothing fails)."""
    from incidents.loader import find_incident, load_incident
    from incidents.spec import TABLE_COLUMNS
    from telemetry_gen.runner import build_telemetry

    inc = load_incident(find_incident("chat-fails-long-after-spike"), seed=0)
    truth, baseline = build_telemetry(inc, 0), build_telemetry(inc, 0, ablate=True)
    for tel in (truth, baseline):  # every column but adapter (its workload names no LoRA adapter)
        assert tuple(tel.tables["requests"].columns) == tuple(c for c in TABLE_COLUMNS["requests"] if c != "adapter")
    req = truth.tables["requests"]
    chat = req[req["app"] == "chat"]
    assert len(chat) / chat["first_request_id"].nunique() > 2.0
    assert (chat["attempt"] > 1).sum() > 1000
    assert set(baseline.tables["requests"]["attempt"]) == {1}
    # the release is in the change log only when it happened
    deploys = truth.tables["events"]
    assert deploys["detail"].str.contains("chat-client deployed version 4.0.0").any()
    assert not baseline.tables["events"]["detail"].str.contains("chat-client").any()
