"""Workload shapes: closed loops, bursts, trace replay, correlated lengths, per-app and per-tenant rate
changes; their YAML keys and the errors bad values give."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from engine_model.frontend import FrontendConfig
from engine_model.simulation import FleetSpec, PoolSpec, simulate
from incidents.loader import IncidentError, check_incident_file, load_incident
from incidents.spec import STANDARD_APP_TENANTS
from incidents.traces import TraceProblem, TraceRows, read_trace
from telemetry_gen.cache import incident_key
from telemetry_gen.runner import build_telemetry, client_requests
from telemetry_gen.workload import (
    AppSpec,
    LengthDist,
    RateChange,
    RateCurve,
    ReplayTrace,
    WorkloadSpec,
    generate_columns,
    generate_requests,
    standard_apps,
)

DATA = Path(__file__).parent / "data" / "incidents"
FIXED_PROMPT = LengthDist("fixed", median=400)
FIXED_OUTPUT = LengthDist("fixed", median=60)
NO_FRONTEND = FrontendConfig(0.0, 0.0, 0.0, 0.0)


def _spec(*apps: AppSpec, duration_s: float = 600.0, rps: float = 2.0) -> WorkloadSpec:
    return WorkloadSpec(duration_s=duration_s, rate=RateCurve(base_rps=rps, daily_amplitude=0.0), apps=apps)


DEFAULT_FRONTEND = FrontendConfig()


def _fleet(replicas: int = 1, frontend: FrontendConfig = DEFAULT_FRONTEND) -> FleetSpec:
    return FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", replicas, frontend=frontend))


def _in_flight_max(sent: np.ndarray, finish: np.ndarray) -> int:
    events = sorted([(t, 1) for t in sent] + [(t, -1) for t in finish], key=lambda e: (e[0], e[1]))
    level = peak = 0
    for _, d in events:
        level += d
        peak = max(peak, level)
    return peak


# ---- closed loop ------------------------------------------------------------------------------------
def test_closed_loop_keeps_at_most_n_in_flight_and_waits_its_think_time() -> None:
    app = AppSpec("load", 1.0, FIXED_PROMPT, FIXED_OUTPUT, arrival="closed", clients=5, requests=60,
                  think_time_s=0.25)
    reqs = generate_requests(_spec(app), seed=3)
    assert sum(math.isfinite(r.arrival_s) for r in reqs) == 5 and {r.loop for r in reqs} == {0}
    run = simulate(_fleet(), reqs, [], 600.0)
    r = run.requests
    assert r["status"].count("ok") == 60  # every prepared request was sent once and answered
    assert len(set(r["request_id"])) == 60
    sent = np.array(r["arrival_s"]) - np.array(r["gateway_s"])
    finish = np.array(r["finish_s"])
    assert _in_flight_max(sent, finish) == 5
    # each send after the first five follows an end by exactly the think time (a client's previous one)
    later = np.sort(sent)[5:]
    ends = np.sort(finish)
    gaps = later[:, None] - (ends[None, :] + 0.25)
    assert np.all(np.min(np.abs(gaps), axis=1) < 1e-9)


def test_closed_loop_offered_load_follows_the_server() -> None:
    """A slower server gets fewer requests from the same clients in the same window (open loop would not)."""
    app = AppSpec("load", 1.0, LengthDist("fixed", median=2000), LengthDist("fixed", median=400),
                  arrival="closed", clients=8, requests=5000)
    sent = {}
    for gpu in ("H100-SXM", "A100-80GB"):
        fleet = FleetSpec(primary=PoolSpec("Llama-3.1-8B", gpu, 1))
        run = simulate(fleet, generate_requests(_spec(app, duration_s=120.0), seed=0), [], 120.0)
        sent[gpu] = len(run.requests["request_id"])
    assert sent["A100-80GB"] < 0.8 * sent["H100-SXM"]
    assert sent["H100-SXM"] < 5000  # the window ended before the clients ran out


# ---- burst ------------------------------------------------------------------------------------------
def test_burst_arrives_in_one_instant_and_is_admitted_together() -> None:
    burst = AppSpec("dump", 1.0, FIXED_PROMPT, FIXED_OUTPUT, arrival="burst", requests=20, start_s=30.0)
    reqs = generate_requests(_spec(burst, duration_s=120.0), seed=1)
    assert len(reqs) == 20 and {r.arrival_s for r in reqs} == {30.0}
    run = simulate(_fleet(frontend=NO_FRONTEND), reqs, [], 120.0)
    # 20 x 400 prompt tokens fit one 8192-token step: the engine takes the whole burst into its first step
    assert set(run.requests["first_scheduled_s"]) == {30.0}
    # spread over 20 s instead, the same requests are scheduled one by one
    for i, r in enumerate(reqs):
        r.arrival_s = 30.0 + i
    run = simulate(_fleet(frontend=NO_FRONTEND), reqs, [], 120.0)
    assert len(set(run.requests["first_scheduled_s"])) == 20


# ---- trace replay -----------------------------------------------------------------------------------
def _write_trace(path: Path, rows: list[tuple[float, int, int]]) -> None:
    if path.suffix == ".csv":
        path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                        + "".join(f"{t},{p},{o}\n" for t, p, o in rows))
    else:
        path.write_text("".join(json.dumps({"arrival_s": t, "prompt_tokens": p, "output_tokens": o}) + "\n"
                                for t, p, o in rows))


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_trace_replay_reproduces_arrival_times_and_lengths(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(5)
    times = np.cumsum(rng.exponential(0.7, 300)) + 1000.0  # absolute times: shifted to start at 0
    rows = [(round(float(t), 6), int(p), int(o)) for t, p, o in
            zip(times, rng.integers(10, 3000, 300), rng.integers(1, 800, 300), strict=True)]
    path = tmp_path / f"trace{suffix}"
    _write_trace(path, rows)
    trace = read_trace(path)
    assert isinstance(trace, TraceRows)
    app = AppSpec("replay", 1.0, FIXED_PROMPT, FIXED_OUTPUT, arrival="replay", start_s=5.0,
                  replay=ReplayTrace(trace.arrival_s, trace.prompt_tokens, trace.output_tokens))
    duration = 120.0
    cols = generate_columns(_spec(app, duration_s=duration), seed=0)
    expect = [(t - rows[0][0] + 5.0, p, o) for t, p, o in rows if t - rows[0][0] + 5.0 < duration]
    assert len(cols) == len(expect) > 100
    np.testing.assert_allclose(cols.arrival_s, [e[0] for e in expect], rtol=0, atol=1e-9)
    assert cols.prompt_tokens.tolist() == [e[1] for e in expect]
    assert cols.output_tokens.tolist() == [e[2] for e in expect]


def test_vidur_trace_reads_in_place_of_a_copy() -> None:
    """The real Splitwise trace format (Vidur's processed traces) is read as is."""
    shared = Path(__file__).resolve().parents[2] / "shared" / "reference" / "vidur_profiling" / "data" / \
        "processed_traces" / "splitwise_conv.csv"
    if not shared.exists():
        pytest.skip("the shared reference copy is not on this machine")
    trace = read_trace(shared)
    assert isinstance(trace, TraceRows)
    assert trace.arrival_s.size == 19366 and trace.arrival_s[0] == 0.0
    assert int(np.median(trace.prompt_tokens)) == 1020 and int(np.median(trace.output_tokens)) == 129


@pytest.mark.parametrize(("text", "line", "fragment"), [
    ("arrived_at,num_prefill_tokens\n0,5\n", 1, "no output_tokens column"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,3\n1.5,abc,3\n", 3, "prompt_tokens is not a number"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,3\n-1,5,3\n", 3, "must be >= 0 seconds"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,0\n", 2, "within 1.."),
    ("arrival_s,prompt_tokens,output_tokens\n0,5.5,2\n", 2, "whole number"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5\n", 2, "2 fields where the header has 3"),
    ("arrival_s,prompt_tokens,output_tokens\n", 0, "no requests"),
])
def test_bad_csv_rows_give_file_and_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    problem = read_trace(path)
    assert isinstance(problem, TraceProblem)
    assert problem.line == line and fragment in problem.message and problem.path == str(path)


def test_bad_jsonl_rows_give_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}\n\n[1, 2]\n')
    problem = read_trace(path)
    assert isinstance(problem, TraceProblem) and problem.line == 3 and "object" in problem.message
    path.write_text('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 2}\n{"arrival_s": 1,\n')
    problem = read_trace(path)
    assert isinstance(problem, TraceProblem) and problem.line == 2 and "not valid JSON" in problem.message


# ---- correlated lengths -----------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [-0.4, 0.0, 0.7])
def test_length_correlation_is_near_the_configured_one(rho: float) -> None:
    app = AppSpec("a", 1.0, LengthDist("lognormal", median=600, sigma=0.8, max=10**6),
                  LengthDist("lognormal", median=150, sigma=0.6, max=10**6), length_correlation=rho)
    cols = generate_columns(_spec(app, duration_s=4000.0, rps=5.0), seed=2)
    assert len(cols) > 15000
    r = np.corrcoef(np.log(cols.prompt_tokens), np.log(cols.output_tokens))[0, 1]
    assert abs(r - rho) < 0.03
    # the marginals stay as configured
    assert abs(np.median(cols.prompt_tokens) / 600 - 1) < 0.05
    assert abs(np.std(np.log(cols.output_tokens)) / 0.6 - 1) < 0.05


def test_length_correlation_keeps_a_traces_marginal() -> None:
    app = AppSpec("a", 1.0, LengthDist("trace", trace="conv"), LengthDist("trace", trace="code"),
                  length_correlation=0.8)
    cols = generate_columns(_spec(app, duration_s=4000.0, rps=5.0), seed=2)
    free = generate_columns(_spec(AppSpec("a", 1.0, app.prompt, app.output), duration_s=4000.0, rps=5.0), seed=2)
    assert abs(np.median(cols.prompt_tokens) / np.median(free.prompt_tokens) - 1) < 0.05
    ranks = [np.argsort(np.argsort(c)) for c in (cols.prompt_tokens, cols.output_tokens)]
    assert np.corrcoef(*ranks)[0, 1] > 0.6  # two different traces, now rank-correlated


# ---- per-app and per-tenant rate changes ------------------------------------------------------------
def test_rate_change_of_one_app_leaves_the_others_alone() -> None:
    a = AppSpec("a", 1.0, FIXED_PROMPT, FIXED_OUTPUT, rate_shape="flat")
    b = AppSpec("b", 1.0, FIXED_PROMPT, FIXED_OUTPUT, rate_shape="flat")
    plain = generate_columns(_spec(a, b, duration_s=2000.0, rps=4.0), seed=4)
    changed_a = AppSpec("a", 1.0, FIXED_PROMPT, FIXED_OUTPUT, rate_shape="flat",
                        rate_changes=(RateChange(1000.0, 3.0),))
    changed = generate_columns(_spec(changed_a, b, duration_s=2000.0, rps=4.0), seed=4)
    # b's requests are exactly the same ones (its draws come from streams of its own)
    assert changed.arrival_s[changed.app == 1].tolist() == plain.arrival_s[plain.app == 1].tolist()
    before = np.sum((changed.app == 0) & (changed.arrival_s < 1000))
    after = np.sum((changed.app == 0) & (changed.arrival_s >= 1000))
    assert 2.6 < after / before < 3.4  # 2 req/s -> 6 req/s


def test_tenant_rate_change_moves_that_tenant_only() -> None:
    tenants = ("t0", "t1", "t2")
    base = AppSpec("a", 1.0, FIXED_PROMPT, FIXED_OUTPUT, rate_shape="flat", tenants=tenants)
    plain = generate_columns(_spec(base, duration_s=3000.0, rps=6.0), seed=6)
    stop = AppSpec("a", 1.0, FIXED_PROMPT, FIXED_OUTPUT, rate_shape="flat", tenants=tenants,
                   rate_changes=(RateChange(1000.0, 0.0, 1000.0, tenant="t1"),))
    stopped = generate_columns(_spec(stop, duration_s=3000.0, rps=6.0), seed=6)
    inside = (stopped.arrival_s >= 1000) & (stopped.arrival_s < 2000)
    assert not np.any(inside & (stopped.tenant == 1))
    # a factor below 1 only thins: every other request is the same as without the change
    keep = ~((plain.tenant == 1) & (plain.arrival_s >= 1000) & (plain.arrival_s < 2000))
    assert stopped.arrival_s.tolist() == plain.arrival_s[keep].tolist()
    grow = AppSpec("a", 1.0, FIXED_PROMPT, FIXED_OUTPUT, rate_shape="flat", tenants=tenants,
                   rate_changes=(RateChange(1500.0, 4.0, tenant="t2"),))
    grown = generate_columns(_spec(grow, duration_s=3000.0, rps=6.0), seed=6)
    for k, ratio in ((0, 1.0), (1, 1.0), (2, 4.0)):
        pre = np.sum((grown.tenant == k) & (grown.arrival_s < 1500))
        post = np.sum((grown.tenant == k) & (grown.arrival_s >= 1500))
        assert abs(post / pre / ratio - 1) < 0.2, (k, pre, post)


def test_standard_tenants_in_the_spec_match_the_generator() -> None:
    assert {a.name: a.tenants for a in standard_apps()} == STANDARD_APP_TENANTS


def test_open_loop_draws_are_unchanged_by_the_new_shapes() -> None:
    """Adding a burst app leaves the open-loop apps' requests as they were (streams per app, shares over
    open-loop apps only)."""
    a = AppSpec("a", 1.0, FIXED_PROMPT, FIXED_OUTPUT)
    plain = generate_columns(_spec(a), seed=9)
    burst = AppSpec("b", 5.0, FIXED_PROMPT, FIXED_OUTPUT, arrival="burst", requests=10, start_s=100.0)
    both = generate_columns(_spec(a, burst), seed=9)
    assert both.arrival_s[both.app == 0].tolist() == plain.arrival_s.tolist()


# ---- YAML -------------------------------------------------------------------------------------------
BASE = (DATA / "tui-mini.yaml").read_text()
PLAIN_WORKLOAD = """workload:
  base_rps: 1.5
  apps:
    - name: chat
      prompt: {kind: lognormal, median: 400, sigma: 0.5, max: 4000}
      output: {kind: lognormal, median: 120, sigma: 0.4, max: 400}
      rate_shape: flat
"""
assert PLAIN_WORKLOAD in BASE

SHAPES = """workload:
  base_rps: 1.5
  apps:
    - name: chat
      tenants: 2
      prompt: {kind: lognormal, median: 400, sigma: 0.5, max: 4000}
      output: {kind: lognormal, median: 120, sigma: 0.4, max: 400}
      length_correlation: 0.5
      rate_shape: flat
    - name: loadtest
      prompt: {kind: fixed, median: 500}
      output: {kind: fixed, median: 100}
      arrival: {kind: closed_loop, clients: 4, requests: 300, think_time_s: 1.0}
    - name: nightly
      prompt: {kind: fixed, median: 300}
      output: {kind: fixed, median: 50}
      rate_shape: batch
      batch_period_s: 120
      batch_duration_s: 10
      batch_size_sigma: 0
    - name: dump
      prompt: {kind: fixed, median: 300}
      output: {kind: fixed, median: 50}
      arrival: {kind: burst, at_s: 150, requests: 50}
    - name: replay
      arrival: {kind: replay, path: traces/t.csv, time_scale: 0.5}
  rate_changes:
    - {app: chat, tenant: chat-t1, start_s: 100, factor: 0}
"""


def _incident(tmp_path: Path, workload: str, trace: str | None = "0,100,20\n10,200,30\n") -> Path:
    path = tmp_path / "inc.yaml"
    path.write_text(BASE.replace(PLAIN_WORKLOAD, workload))
    if trace is not None:
        (tmp_path / "traces").mkdir(exist_ok=True)
        (tmp_path / "traces" / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + trace)
    return path


def test_yaml_shapes_load_and_generate(tmp_path: Path) -> None:
    inc = load_incident(_incident(tmp_path, SHAPES))
    reqs = client_requests(inc, 0)
    count = Counter(r.app for r in reqs)
    assert count["loadtest"] == 300 and count["dump"] == 50 and count["replay"] == 2
    assert sorted(r.arrival_s for r in reqs if r.app == "replay") == pytest.approx([0.0, 5.0])
    # batch jobs every 120 s, each submitting within 10 s of its start (plus the small start jitter)
    nightly = np.array(sorted(r.arrival_s for r in reqs if r.app == "nightly"))
    assert len(nightly) > 0 and np.all(np.diff(nightly)[np.diff(nightly) > 20] > 80)
    assert not any(r.tenant == "chat-t1" and r.arrival_s >= 100 for r in reqs if r.app == "chat")
    assert any(r.tenant == "chat-t1" and r.arrival_s < 100 for r in reqs if r.app == "chat")


def test_yaml_closed_loop_runs_end_to_end(tmp_path: Path) -> None:
    tel = build_telemetry(load_incident(_incident(tmp_path, SHAPES)), 0)
    req = tel.tables["requests"]
    load = req[req.app == "loadtest"]
    assert load.request_id.is_unique and 0 < len(load) <= 300
    sent = (load.ts - load.ts.min()).dt.total_seconds().to_numpy()
    assert _in_flight_max(sent, sent + load.e2e_s.to_numpy()) <= 4


@pytest.mark.parametrize(("old", "new", "fragment"), [
    ("clients: 4,", "clients: 0,", "greater than or equal to 1"),
    ("think_time_s: 1.0", "think_time_s: -1", "greater than or equal to 0"),
    ("kind: closed_loop", "kind: closed", "closed_loop"),
    ("at_s: 150, requests: 50", "at_s: 900, requests: 50", "at_s"),
    ("path: traces/t.csv", "path: ../t.csv", "inside"),
    ("path: traces/t.csv", "path: /etc/t.csv", "not absolute"),
    ("path: traces/t.csv", "path: traces/t.txt", ".jsonl or .csv"),
    ("path: traces/t.csv", "path: traces/none.csv", "no trace file"),
    ("length_correlation: 0.5", "length_correlation: 1.5", "less than or equal to 1"),
    ("batch_duration_s: 10", "batch_duration_s: 500", "exceeds batch_period_s"),
    ("tenant: chat-t1", "tenant: chat-t7", "no tenant 'chat-t7'"),
    ("{app: chat, tenant", "{app: chta, tenant", "did you mean 'chat'"),
    ("{app: chat, tenant: chat-t1", "{app: dump, tenant: chat-t1", "closed-loop, burst or replay"),
    ("      arrival: {kind: replay", "      prompt: {kind: fixed, median: 3}\n      arrival: {kind: replay",
     "brings its own lengths"),
])
def test_bad_shape_values_are_located(tmp_path: Path, old: str, new: str, fragment: str) -> None:
    assert SHAPES.count(old) == 1
    path = _incident(tmp_path, SHAPES.replace(old, new))
    with pytest.raises(IncidentError) as err:
        load_incident(path)
    found = [d for d in err.value.diagnostics if fragment in str(d)]
    assert found, [str(d) for d in err.value.diagnostics]
    line = BASE.replace(PLAIN_WORKLOAD, SHAPES.replace(old, new)).splitlines()[found[0].line - 1]
    # a field's problem points at its line; an app-wide rule (validator over several fields) at the app
    assert new.split("\n")[-1].strip()[:12] in line or line.strip().startswith("- name:")


def test_bad_trace_row_is_reported_at_the_traces_line(tmp_path: Path) -> None:
    path = _incident(tmp_path, SHAPES, trace="0,100,20\n10,-5,30\n")
    diags = check_incident_file(path)
    bad = [d for d in diags if d.path.endswith("t.csv")]
    assert len(bad) == 1 and bad[0].line == 3 and "prompt_tokens" in bad[0].message


def test_trace_behind_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n")
    folder = tmp_path / "inc"
    folder.mkdir()
    path = _incident(folder, SHAPES, trace=None)
    (folder / "traces").mkdir()
    (folder / "traces" / "t.csv").symlink_to(outside)
    with pytest.raises(IncidentError, match="outside the incident file's folder"):
        load_incident(path)


def test_editing_the_trace_changes_the_build_cache_key(tmp_path: Path) -> None:
    path = _incident(tmp_path, SHAPES)
    before = incident_key(load_incident(path), 0)
    assert incident_key(load_incident(path), 0) == before
    (tmp_path / "traces" / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,100,20\n10,201,30\n")
    assert incident_key(load_incident(path), 0) != before


def test_a_closed_loop_client_that_retries_sends_its_next_request_only_when_its_retries_end() -> None:
    """Clients with a timeout shorter than the service time: each attempt times out and is retried; a
    closed-loop client keeps one request (with its retries) in flight, never its next one beside it."""
    from engine_model.retries import Clients, RetryPolicy

    app = AppSpec("load", 1.0, FIXED_PROMPT, FIXED_OUTPUT, arrival="closed", clients=4, requests=40,
                  think_time_s=0.0)
    reqs = [dataclasses.replace(r, timeout_s=0.05) for r in generate_requests(_spec(app), seed=3)]
    policy = RetryPolicy(max_attempts=3, backoff_s=0.01, backoff_max_s=0.01, jitter=0.0)
    run = simulate(_fleet(), reqs, [], 600.0, clients=Clients({}, policy, (), seed=1, send_until=600.0))
    r = run.requests
    assert max(r["attempt"]) == 3  # retries happened
    sent = np.array(r["arrival_s"]) - np.array(r["gateway_s"])
    finish = np.array(r["finish_s"])
    # an attempt and its retry never overlap (the retry leaves after the failure), so a client has at most
    # one attempt in flight, and the pool at most four
    assert _in_flight_max(sent, finish) <= 4
