"""Workload generation: arrival statistics, app mix, lengths, prefix/session identity, determinism."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_model.request import Request
from telemetry_gen.workload import (
    AppSpec,
    Burst,
    LengthDist,
    Ramp,
    RateCurve,
    WorkloadColumns,
    WorkloadSpec,
    expected_rate,
    generate_columns,
    generate_requests,
    load_trace,
    prefix_key_for,
    standard_apps,
    standard_workload,
)

FIXED_PROMPT = LengthDist("fixed", median=100)
FIXED_OUTPUT = LengthDist("fixed", median=10)


def _app(name: str = "a", weight: float = 1.0, **kw: object) -> AppSpec:
    kw.setdefault("prompt", FIXED_PROMPT)
    kw.setdefault("output", FIXED_OUTPUT)
    return AppSpec(name=name, weight=weight, **kw)  # type: ignore[arg-type]


def _spec(duration_s: float, curve: RateCurve, *apps: AppSpec) -> WorkloadSpec:
    return WorkloadSpec(duration_s=duration_s, rate=curve, apps=apps or (_app(),))


def _integral(curve: RateCurve, a: float, b: float, scale: float = 1.0) -> float:
    """Integrate curve.rate over [a, b) with a fine trapezoid, independently of the generator's grid."""
    t = np.linspace(a, b, max(2, int((b - a) * 20)) + 1)
    return scale * float(np.trapezoid(curve.rate(t), t))


def _count(times: np.ndarray, a: float, b: float) -> int:
    return int(np.count_nonzero((times >= a) & (times < b)))


def _assert_poisson(observed: int, expected: float, sigmas: float = 4.0) -> None:
    assert abs(observed - expected) <= sigmas * math.sqrt(expected), (observed, expected)


# --------------------------------------------------------------------------------------- arrivals


def test_window_counts_follow_the_integrated_rate() -> None:
    # 05:00-09:00 with a strong diurnal swing: the morning climb nearly doubles the rate
    curve = RateCurve(base_rps=20.0, daily_amplitude=0.6, peak_hour=14.0, start_hour=5.0)
    spec = _spec(4 * 3600.0, curve, _app("a", 2.0), _app("b", 1.0))
    times = generate_columns(spec, seed=11).arrival_s
    edges = np.arange(0.0, spec.duration_s + 1, 300.0)
    chi2 = 0.0
    for a, b in itertools.pairwise(edges):
        expected = _integral(curve, a, b)
        observed = _count(times, a, b)
        _assert_poisson(observed, expected, 4.5)
        chi2 += (observed - expected) ** 2 / expected
    dof = edges.size - 1
    assert chi2 < dof + 5 * math.sqrt(2 * dof)
    # the curve really moved: late windows carry far more than early ones
    assert _count(times, 3 * 3600, 4 * 3600) > 1.5 * _count(times, 0, 3600)


def test_expected_rate_sums_the_apps() -> None:
    curve = RateCurve(base_rps=10.0, daily_amplitude=0.4)
    spec = _spec(3600.0, curve, _app("d", 3.0), _app("f", 1.0, rate_shape="flat"))
    t = np.array([0.0, 1800.0, 3599.0])
    np.testing.assert_allclose(expected_rate(spec, t), 10.0 * (0.75 * curve.diurnal(t) + 0.25))


def test_burst_multiplies_the_count_in_its_window() -> None:
    curve = RateCurve(base_rps=10.0, daily_amplitude=0.0, bursts=(Burst(1200.0, 300.0, 3.0),))
    times = generate_columns(_spec(3600.0, curve), seed=3).arrival_s
    _assert_poisson(_count(times, 0, 1200), 10.0 * 1200)
    _assert_poisson(_count(times, 1200, 1500), 3 * 10.0 * 300)
    _assert_poisson(_count(times, 1500, 3600), 10.0 * 2100)
    # the edges are sharp: the 10 s on either side of the start are at 1x and 3x
    _assert_poisson(_count(times, 1190, 1200), 100.0)
    _assert_poisson(_count(times, 1200, 1210), 300.0)


def test_ramp_moves_the_rate_and_stays() -> None:
    curve = RateCurve(base_rps=10.0, daily_amplitude=0.0, ramps=(Ramp(1200.0, 1200.0, 2.5),))
    assert curve.rate(np.array([1800.0]))[0] == pytest.approx(10.0 * 1.75)
    times = generate_columns(_spec(3600.0, curve), seed=4).arrival_s
    _assert_poisson(_count(times, 0, 1200), 12000.0)
    _assert_poisson(_count(times, 1200, 2400), 12000.0 * (1 + 2.5) / 2)
    _assert_poisson(_count(times, 2400, 3600), 12000.0 * 2.5)
    # within the ramp the second half is busier than the first
    assert _count(times, 1800, 2400) > _count(times, 1200, 1800) * 1.2


@pytest.mark.parametrize("peak_hour", [9.0, 14.0, 20.5])
def test_daily_curve_peaks_at_peak_hour_and_averages_to_base(peak_hour: float) -> None:
    curve = RateCurve(base_rps=7.0, daily_amplitude=0.35, peak_hour=peak_hour, start_hour=3.0)
    t = np.arange(0.0, 86400.0, 10.0)
    rate = curve.rate(t)
    hour_of_max = (3.0 + t[np.argmax(rate)] / 3600.0) % 24
    assert abs(hour_of_max - peak_hour) < 0.05
    assert rate.mean() == pytest.approx(7.0, rel=1e-3)
    assert (rate.max() - rate.min()) / 7.0 == pytest.approx(2 * 0.35, rel=1e-3)


def test_generated_day_peaks_near_peak_hour() -> None:
    curve = RateCurve(base_rps=1.0, daily_amplitude=0.5, peak_hour=16.0, start_hour=5.0)
    times = generate_columns(_spec(86400.0, curve), seed=5).arrival_s
    hours = (5.0 + times / 3600.0) % 24
    counts = np.bincount(hours.astype(int), minlength=24)
    # phase of the first Fourier harmonic of the hourly counts
    angle = 2 * np.pi * (np.arange(24) + 0.5) / 24
    fitted = (np.angle(np.sum(counts * np.exp(1j * angle))) / (2 * np.pi) * 24) % 24
    assert abs((fitted - 16.0 + 12) % 24 - 12) < 0.5
    assert counts.max() > 1.8 * counts.min()


def test_rate_noise_overdisperses_counts_but_keeps_the_mean() -> None:
    quiet = RateCurve(base_rps=1.0, daily_amplitude=0.0)
    noisy = replace(quiet, noise=0.25, noise_tau_s=300.0)
    day = 86400.0
    edges = np.arange(0.0, day + 1, 600.0)
    dispersion = {}
    for name, curve in (("quiet", quiet), ("noisy", noisy)):
        times = generate_columns(_spec(day, curve), seed=21).arrival_s
        counts, _ = np.histogram(times, edges)
        dispersion[name] = counts.var() / counts.mean()
        # std of the day's mean under this noise is 0.25 * sqrt(2 * 300 / 86400) = 2 %
        assert times.size == pytest.approx(day, rel=0.1)
    assert 0.6 < dispersion["quiet"] < 1.4
    assert dispersion["noisy"] > 5.0


def test_batch_app_arrives_in_periodic_jobs_with_the_right_mean() -> None:
    curve = RateCurve(base_rps=5.0, daily_amplitude=0.0)
    batch = _app("b", rate_shape="batch", batch_period_s=600.0, batch_duration_s=60.0, batch_size_sigma=0.0)
    duration = 6 * 3600.0
    times = generate_columns(_spec(duration, curve, batch), seed=8).arrival_s
    assert times.size == pytest.approx(5.0 * duration, rel=0.06)
    busy_bins = np.unique((times // 10).astype(int)).size / (duration / 10)
    assert busy_bins < 0.2
    job_starts = times[np.concatenate(([0], np.flatnonzero(np.diff(times) > 100.0) + 1))]
    assert np.median(np.diff(job_starts)) == pytest.approx(600.0, rel=0.05)


# ------------------------------------------------------------------------------------------- mix


def test_app_shares_match_weights_on_a_flat_curve() -> None:
    curve = RateCurve(base_rps=20.0, daily_amplitude=0.0)
    apps = (_app("x", 5.0), _app("y", 3.0, rate_shape="flat"), _app("z", 2.0))
    cols = generate_columns(_spec(3600.0, curve, *apps), seed=2)
    total = len(cols)
    for index, share in enumerate((0.5, 0.3, 0.2)):
        observed = int(np.count_nonzero(cols.app == index))
        assert abs(observed - share * total) <= 4 * math.sqrt(total * share * (1 - share))


def test_weights_are_daily_shares_when_shapes_differ() -> None:
    curve = RateCurve(base_rps=1.0, daily_amplitude=0.5)
    apps = (_app("daily", 1.0), _app("flat", 1.0, rate_shape="flat"))
    cols = generate_columns(_spec(86400.0, curve, *apps), seed=9)
    total = len(cols)
    assert abs(np.count_nonzero(cols.app == 0) - total / 2) <= 4 * math.sqrt(total / 4)


# --------------------------------------------------------------------------------------- lengths

# Medians of the source traces: conv and code from the Vidur profiling README (prefill 1020 / decode 129,
# prefill 1469 / decode 13); arXiv from its CSV (num_prefill_tokens 2730 / num_decode_tokens 167).
TRACE_MEDIANS = {"conv": (1020, 129), "code": (1469, 13), "arxiv": (2730, 167)}


@pytest.mark.parametrize("trace", sorted(TRACE_MEDIANS))
def test_trace_lengths_track_trace_medians(trace: str) -> None:
    dist = LengthDist("trace", trace=trace)
    app = _app(trace, prompt=dist, output=dist, max_tokens=32768)
    cols = generate_columns(_spec(1200.0, RateCurve(base_rps=25.0, daily_amplitude=0.0), app), seed=1)
    assert len(cols) > 25000
    for values, median in zip((cols.prompt_tokens, cols.output_tokens), TRACE_MEDIANS[trace], strict=True):
        assert abs(np.median(values) - median) <= max(0.04 * median, 1.0)
    prompt_trace, output_trace = load_trace(trace)
    for values, source in ((cols.prompt_tokens, prompt_trace), (cols.output_tokens, output_trace)):
        assert np.quantile(values, 0.9) == pytest.approx(np.quantile(source, 0.9), rel=0.06)


def test_same_trace_keeps_prompt_output_correlation() -> None:
    # arXiv papers: longer inputs come with shorter summaries in this trace (log-corr about -0.48)
    dist = LengthDist("trace", trace="arxiv")
    app = _app(prompt=dist, output=dist, max_tokens=32768)
    cols = generate_columns(_spec(1000.0, RateCurve(base_rps=20.0, daily_amplitude=0.0), app), seed=6)
    corr = np.corrcoef(np.log(cols.prompt_tokens), np.log(cols.output_tokens))[0, 1]
    assert corr < -0.3


def test_lognormal_fixed_scale_and_clip() -> None:
    rng = np.random.default_rng(0)
    draws = LengthDist("lognormal", median=500.0, sigma=0.8).sample(rng, 50000)
    assert np.median(draws) == pytest.approx(500.0, rel=0.03)
    assert np.log(draws).std() == pytest.approx(0.8, rel=0.03)
    scaled = LengthDist("lognormal", median=500.0, sigma=0.8, scale=2.0).sample(rng, 50000)
    assert np.median(scaled) == pytest.approx(1000.0, rel=0.03)
    assert set(LengthDist("fixed", median=77).sample(rng, 100).tolist()) == {77}
    clipped = LengthDist("lognormal", median=1000.0, sigma=2.0, min=100, max=2000).sample(rng, 50000)
    assert clipped.min() == 100 and clipped.max() == 2000
    # P(Z > ln 2 / 2) = 0.364 of draws land on the upper clip
    assert np.mean(clipped == 2000) == pytest.approx(0.364, abs=0.01)


def test_system_prompt_is_added_to_the_user_length() -> None:
    app = _app(system_prompts=4, system_prompt_tokens=500)
    requests = generate_requests(_spec(120.0, RateCurve(base_rps=5.0), app), seed=1)
    assert requests
    assert {(r.prompt_tokens, r.prefix_tokens) for r in requests} == {(600, 500)}


def test_max_model_len_bounds_every_request() -> None:
    spec = standard_workload(300.0, 20.0)
    requests = generate_requests(spec, seed=3, max_model_len=4096)
    for r in requests:
        assert r.prompt_tokens + r.output_tokens <= 4096
        assert 1 <= r.output_tokens <= r.max_tokens
        assert r.prompt_tokens >= r.prefix_tokens + 1
    with pytest.raises(ValueError):
        generate_requests(spec, seed=3, max_model_len=256)


def test_output_stops_at_max_tokens() -> None:
    app = _app(output=LengthDist("lognormal", median=400.0, sigma=1.0), max_tokens=300)
    cols = generate_columns(_spec(300.0, RateCurve(base_rps=20.0), app), seed=1)
    assert cols.output_tokens.max() == 300
    # a draw reaches the cap when Z > ln(300 / 400)
    p_capped = 0.5 * math.erfc(math.log(300 / 400) / math.sqrt(2))
    assert np.mean(cols.output_tokens == 300) == pytest.approx(p_capped, abs=0.03)


# ------------------------------------------------------------------------------- prefix, sessions


@pytest.fixture(scope="module")
def standard_requests() -> list[Request]:
    return generate_requests(standard_workload(600.0, 30.0), seed=42)


def test_standard_requests_satisfy_the_request_invariants(standard_requests: list[Request]) -> None:
    apps = {a.name: a for a in standard_apps()}
    assert [r.request_id for r in standard_requests] == list(range(len(standard_requests)))
    arrivals = np.array([r.arrival_s for r in standard_requests])
    assert np.all(np.diff(arrivals) >= 0) and arrivals[0] >= 0 and arrivals[-1] < 600.0
    for r in standard_requests:
        app = apps[r.app]
        assert r.tenant in app.tenants
        assert (r.prefix_key == 0) == (r.prefix_tokens == 0) == (app.system_prompts == 0)
        assert r.prefix_tokens < r.prompt_tokens
        assert r.prefix_tokens in (0, app.system_prompt_tokens)
        assert 1 <= r.output_tokens <= app.max_tokens
        assert r.prompt_tokens + r.output_tokens <= 32768
        assert r.prompt_hash != 0 and r.session_key != 0
        assert (r.temperature, r.n, r.priority, r.max_tokens) == (app.temperature, app.n, app.priority, app.max_tokens)


def test_prefix_keys_repeat_within_an_app_and_differ_across_apps(standard_requests: list[Request]) -> None:
    keys: dict[str, list[int]] = defaultdict(list)
    for r in standard_requests:
        if r.prefix_key:
            keys[r.app].append(r.prefix_key)
    apps = {a.name: a for a in standard_apps()}
    for name, app_keys in keys.items():
        distinct = set(app_keys)
        assert distinct <= {prefix_key_for(name, j) for j in range(apps[name].system_prompts)}
        assert len(app_keys) > 5 * len(distinct)
    chat = np.unique(keys["chat"], return_counts=True)[1]
    # Zipf popularity: the hottest chat system prompt is well above a uniform share
    assert chat.max() > 2.0 * len(keys["chat"]) / apps["chat"].system_prompts
    names = sorted(keys)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not set(keys[a]) & set(keys[b])


def test_prefix_keys_are_stable_across_seeds() -> None:
    spec = standard_workload(120.0, 30.0)
    first = {r.prefix_key for r in generate_requests(spec, seed=1) if r.app == "chat"}
    second = {r.prefix_key for r in generate_requests(spec, seed=2) if r.app == "chat"}
    assert len(first & second) >= 5


def test_repeats_copy_an_earlier_prompt_exactly(standard_requests: list[Request]) -> None:
    by_hash: dict[int, list[Request]] = defaultdict(list)
    for r in standard_requests:
        by_hash[r.prompt_hash].append(r)
    groups = [g for g in by_hash.values() if len(g) > 1]
    assert groups
    for group in groups:
        assert {r.app for r in group} == {"chat"}
        signature = {(r.prompt_tokens, r.output_tokens, r.prefix_key, r.tenant, r.seed) for r in group}
        assert len(signature) == 1
    chat = sum(r.app == "chat" for r in standard_requests)
    repeats = sum(len(g) - 1 for g in groups)
    fraction = next(a.repeat_fraction for a in standard_apps() if a.name == "chat")
    assert abs(repeats - fraction * chat) <= 4 * math.sqrt(chat * fraction)


def test_seeds_temperature_and_n_follow_the_app() -> None:
    app = _app(temperature=0.9, seeded_fraction=0.3, n=3)
    requests = generate_requests(_spec(600.0, RateCurve(base_rps=10.0), app), seed=5)
    seeded = sum(r.seed is not None for r in requests)
    assert abs(seeded - 0.3 * len(requests)) <= 4 * math.sqrt(len(requests) * 0.21)
    assert all(0 <= r.seed < 2**31 for r in requests if r.seed is not None)
    assert len({r.seed for r in requests if r.seed is not None}) > 0.95 * seeded
    assert {(r.temperature, r.n) for r in requests} == {(0.9, 3)}


def test_sessions_hold_a_few_requests_of_one_tenant() -> None:
    app = _app(tenants=("t0", "t1", "t2"), session_requests=4.0, session_window_s=300.0)
    requests = generate_requests(_spec(1800.0, RateCurve(base_rps=5.0), app), seed=7)
    sessions: dict[int, list[Request]] = defaultdict(list)
    for r in requests:
        sessions[r.session_key].append(r)
    sizes = np.array([len(s) for s in sessions.values()])
    assert 3.0 < sizes.mean() < 5.0
    assert np.mean(sizes >= 2) > 0.7
    for members in sessions.values():
        assert len({r.tenant for r in members}) == 1
        assert members[-1].arrival_s - members[0].arrival_s <= 300.0


# ---------------------------------------------------------------------------------- determinism


def test_same_seed_same_requests_and_other_seed_differs() -> None:
    spec = standard_workload(120.0, 30.0)
    first = generate_requests(spec, seed=123)
    assert first == generate_requests(spec, seed=123)
    other = generate_requests(spec, seed=124)
    assert [r.arrival_s for r in first[:50]] != [r.arrival_s for r in other[:50]]


def test_columns_and_requests_agree() -> None:
    spec = standard_workload(60.0, 30.0)
    cols = generate_columns(spec, seed=9)
    assert isinstance(cols, WorkloadColumns)
    requests = generate_requests(spec, seed=9)
    assert len(requests) == len(cols)
    for i in (0, len(cols) // 2, len(cols) - 1):
        r = requests[i]
        assert r.arrival_s == cols.arrival_s[i] and r.prompt_hash == cols.prompt_hash[i]
        assert r.app == cols.app_names[cols.app[i]] and r.tenant == cols.tenant_names[cols.tenant[i]]
        assert (r.seed is None) == (cols.seed[i] == -1)


def test_changing_one_app_leaves_the_other_untouched() -> None:
    curve = RateCurve(base_rps=10.0)
    a = _app("a", output=LengthDist("lognormal", median=100.0, sigma=0.5))
    b = _app("b", output=LengthDist("lognormal", median=100.0, sigma=0.5))
    grown = replace(b, output=replace(b.output, scale=2.0))
    before = generate_requests(_spec(300.0, curve, a, b), seed=3)
    after = generate_requests(_spec(300.0, curve, a, grown), seed=3)

    def only(requests: list[Request], app: str) -> list[tuple[float, int, int]]:
        return [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in requests if r.app == app]

    assert only(before, "a") == only(after, "a")
    b_before, b_after = np.array(only(before, "b")), np.array(only(after, "b"))
    np.testing.assert_array_equal(b_before[:, 0], b_after[:, 0])
    assert np.median(b_after[:, 2]) == pytest.approx(2 * np.median(b_before[:, 2]), rel=0.05)


# ---------------------------------------------------------------------------------- standard mix


def test_standard_workload_mean_rate_is_base_rps() -> None:
    spec = standard_workload(3600.0, 30.0)
    t = np.arange(0.0, 3600.0, 0.5) + 0.25
    assert float(np.sum(expected_rate(spec, t)) * 0.5) == pytest.approx(108000.0, rel=1e-3)
    assert len(generate_columns(spec, seed=1)) == pytest.approx(108000.0, rel=0.08)


def test_standard_mix_has_the_promised_character(standard_requests: list[Request]) -> None:
    apps = {a.name: a for a in standard_apps()}
    assert set(apps) == {"chat", "rag", "summarize", "code", "reasoning"}
    assert apps["chat"].system_prompts > 1 and len(apps["chat"].tenants) > 1
    assert apps["summarize"].rate_shape == "batch" and apps["summarize"].prompt.trace == "arxiv"
    assert apps["code"].prompt.trace == "code" and apps["code"].output.trace == "code"

    def values(app: str, attr: str) -> np.ndarray:
        return np.array([getattr(r, attr) for r in standard_requests if r.app == app], dtype=float)

    assert np.median(values("rag", "prompt_tokens")) > 2 * np.median(values("chat", "prompt_tokens"))
    reasoning_out = values("reasoning", "output_tokens")
    assert np.median(reasoning_out) > 5 * np.median(values("chat", "output_tokens"))
    assert np.log(reasoning_out).std() > 0.6


# ------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "build",
    [
        lambda: LengthDist("bogus"),
        lambda: LengthDist("trace"),
        lambda: LengthDist("trace", trace="nope"),
        lambda: LengthDist("lognormal", median=0.0),
        lambda: LengthDist("fixed", median=10, min=5, max=4),
        lambda: _app(weight=-1.0),
        lambda: _app(rate_shape="weekly"),
        lambda: _app(system_prompts=2),
        lambda: _app(seeded_fraction=1.5),
        lambda: _app(batch_period_s=60.0, batch_duration_s=120.0),
        lambda: Burst(0.0, 0.0, 2.0),
        lambda: Ramp(0.0, 10.0, -1.0),
        lambda: RateCurve(base_rps=-1.0),
        lambda: WorkloadSpec(60.0, RateCurve(1.0), (_app("a"), _app("a"))),
        lambda: WorkloadSpec(60.0, RateCurve(1.0), (_app("a", 0.0),)),
        lambda: WorkloadSpec(0.0, RateCurve(1.0), (_app("a"),)),
    ],
)
def test_invalid_specs_are_refused(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


# ------------------------------------------------------------------------------------- properties

_lengths = st.one_of(
    st.builds(
        LengthDist,
        kind=st.just("lognormal"),
        median=st.floats(1.0, 20000.0),
        sigma=st.floats(0.0, 3.0),
        scale=st.floats(0.1, 4.0),
    ),
    st.builds(LengthDist, kind=st.just("trace"), trace=st.sampled_from(["conv", "code", "arxiv"])),
)
_apps = st.builds(
    AppSpec,
    name=st.text("abcdefgh", min_size=1, max_size=6),
    weight=st.floats(0.1, 5.0),
    prompt=_lengths,
    output=_lengths,
    system_prompts=st.integers(0, 5),
    system_prompt_tokens=st.integers(1, 3000),
    max_tokens=st.integers(1, 8192),
    repeat_fraction=st.floats(0.0, 0.5),
    rate_shape=st.sampled_from(["daily", "flat", "batch"]),
    batch_period_s=st.just(60.0),
    batch_duration_s=st.just(20.0),
)


@settings(max_examples=30, deadline=None)
@given(
    apps=st.lists(_apps, min_size=1, max_size=3, unique_by=lambda a: a.name),
    max_model_len=st.integers(3100, 40000),
    seed=st.integers(0, 2**32),
)
def test_any_spec_gives_valid_requests(apps: list[AppSpec], max_model_len: int, seed: int) -> None:
    spec = WorkloadSpec(120.0, RateCurve(base_rps=5.0), tuple(apps))
    requests = generate_requests(spec, seed, max_model_len=max_model_len)
    by_name = {a.name: a for a in apps}
    previous = 0.0
    for i, r in enumerate(requests):
        assert r.request_id == i and previous <= r.arrival_s < 120.0
        previous = r.arrival_s
        assert 0 <= r.prefix_tokens < r.prompt_tokens
        assert 1 <= r.output_tokens <= by_name[r.app].max_tokens
        assert r.prompt_tokens + r.output_tokens <= max_model_len
