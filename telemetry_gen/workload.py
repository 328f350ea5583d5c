"""Synthetic request workload: arrival times, application mix, token lengths and sampling parameters.

Every request comes from one application (`AppSpec`). Each app has its own arrival
process, a non-homogeneous Poisson process whose intensity is its weight share of a
fleet-wide `RateCurve` (diurnal shape x bursts x ramps, optionally modulated by slow
random noise, times the app's own `RateChange`s), or, for batch apps, scheduled jobs that
each dump a block of requests. An app can instead be a closed loop of clients
(engine_model.clients sends its requests as earlier ones end), a burst at one instant, or
the replay of a recorded trace (`ReplayTrace`). Lengths are resampled from real traces
(Splitwise conversation/code, arXiv summarization; see `data/README.md`) or drawn from
simple parametric laws, independently or through a Gaussian copula (`length_correlation`).
Everything is vectorised per app and deterministic from one integer seed.

Why one module of ~950 lines: the workload generator draws every app's arrivals, lengths and attributes from
seeded streams in a fixed order, and that order is what makes the telemetry reproducible; keeping the spec
dataclasses and the draws together keeps the order visible in one place (changing it changes every digest).
"""

from __future__ import annotations

import gc
import math
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from engine_model.request import Request

DATA_DIR = Path(__file__).parent / "data"
TRACE_FILES: dict[str, str] = {
    "conv": "splitwise_conv.csv",
    "code": "splitwise_code.csv",
    "arxiv": "arxiv_summarization.csv",
}
LENGTH_KINDS = ("trace", "lognormal", "fixed")
LENGTH_COLUMNS = ("prompt", "output")
RATE_SHAPES = ("daily", "flat", "batch")
# how an app's requests are sent: "open" (a rate curve, see rate_shape), "closed" (a closed loop of
# `clients` clients, engine_model.clients), "burst" (`requests` requests at one instant `start_s`),
# "replay" (the arrival times and lengths of a recorded trace, `ReplayTrace`)
ARRIVAL_KINDS = ("open", "closed", "burst", "replay")
DEFAULT_MAX_MODEL_LEN = 32768

# Multiplicative log-normal jitter on trace draws: it smears the trace's exact integers so that
# 100k draws from 20k rows do not show visible repeated values, while moving quantiles by <1%.
_TRACE_JITTER_SIGMA = 0.04
# Second harmonic of the diurnal curve. Positive values flatten the daytime plateau and deepen
# the night trough, as user-facing traffic does; below 0.25 the curve keeps a single maximum.
_DIURNAL_SECOND_HARMONIC = 0.2
_GRID_STEP_S = 1.0
_MASK63 = np.uint64((1 << 63) - 1)
_STREAM_ARRIVALS = 1
_STREAM_ATTRIBUTES = 2
_STREAM_LENGTHS = 3  # correlated lengths
_STREAM_THIN = 4  # per-tenant thinning
_STREAM_ADAPTERS = 5  # which LoRA adapter each request names
ADAPTER_POPULARITY = ("zipf", "uniform")
_NO_SEED = -1


# --------------------------------------------------------------------------------------- lengths


@cache
def load_trace(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output token counts (int64, one entry per traced request) of trace `name`.

    The arrays are cached and read-only; rows are aligned (row i is one real request).
    """
    if name not in TRACE_FILES:
        raise KeyError(f"unknown trace {name!r}; known: {', '.join(TRACE_FILES)}")
    # numpy reads these two-column integer files directly; pandas.read_csv gave the same arrays but its
    # import alone (~0.3 s) was a tenth of a standard-fleet run (`servedrill bench engine`)
    path = DATA_DIR / TRACE_FILES[name]
    with path.open() as f:
        header = f.readline().strip().split(",")
    data = np.loadtxt(path, dtype=np.int64, delimiter=",", skiprows=1, ndmin=2)
    prompt = data[:, header.index("num_prefill_tokens")].copy()
    output = data[:, header.index("num_decode_tokens")].copy()
    prompt.setflags(write=False)
    output.setflags(write=False)
    return prompt, output


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution.

    kind "trace" resamples column `prompt` or `output` of trace `trace` with light jitter;
    "lognormal" has median `median` tokens and log-space std `sigma`; "fixed" always gives
    `median`. Draws are multiplied by `scale`, rounded and clipped to [min, max] tokens.
    """

    kind: str
    trace: str | None = None
    median: float = 0.0
    sigma: float = 0.0
    scale: float = 1.0
    min: int = 1
    max: int = 32768

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ValueError(f"LengthDist.kind must be one of {LENGTH_KINDS}, got {self.kind!r}")
        if self.kind == "trace" and self.trace not in TRACE_FILES:
            raise ValueError(f"LengthDist.trace must be one of {tuple(TRACE_FILES)}, got {self.trace!r}")
        if self.kind != "trace" and self.median <= 0:
            raise ValueError("LengthDist.median must be > 0 for lognormal and fixed lengths")
        if self.sigma < 0 or self.scale <= 0:
            raise ValueError("LengthDist.sigma must be >= 0 and scale > 0")
        if not 1 <= self.min <= self.max:
            raise ValueError("LengthDist needs 1 <= min <= max")

    def sample(
        self,
        rng: np.random.Generator,
        size: int,
        column: str = "prompt",
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        """Draw `size` lengths in tokens (int64, each within [min, max]).

        `column` picks the trace column ("prompt" or "output") for trace draws; `rows`
        (indices into the trace) lets a caller draw prompt and output from the same traced
        requests so that their correlation survives.
        """
        if column not in LENGTH_COLUMNS:
            raise ValueError(f"column must be one of {LENGTH_COLUMNS}")
        if self.kind == "trace":
            assert self.trace is not None
            values = load_trace(self.trace)[LENGTH_COLUMNS.index(column)]
            if rows is None:
                rows = rng.integers(0, values.size, size=size)
            raw = values[rows] * np.exp(_TRACE_JITTER_SIGMA * rng.standard_normal(size))
        elif self.kind == "lognormal":
            raw = self.median * np.exp(self.sigma * rng.standard_normal(size))
        else:
            raw = np.full(size, self.median)
        return np.clip(np.rint(raw * self.scale), self.min, self.max).astype(np.int64)

    def from_scores(self, rng: np.random.Generator, z: np.ndarray, column: str = "prompt") -> np.ndarray:
        """Lengths (int64 tokens within [min, max]) that are monotone in the standard-normal scores `z`.

        The Gaussian-copula draw behind correlated prompt and output lengths: lognormal gives
        median * exp(sigma * z) exactly; a trace gives the order statistic of its column at the rank
        of each score among `z` (an empirical quantile, so the trace's marginal is kept); fixed
        ignores z.
        """
        size = z.size
        if self.kind == "trace":
            assert self.trace is not None
            values = np.sort(load_trace(self.trace)[LENGTH_COLUMNS.index(column)])
            rank = np.argsort(np.argsort(z, kind="stable"), kind="stable")
            idx = np.minimum(((rank + rng.random(size)) / size * values.size).astype(np.int64), values.size - 1)
            raw = values[idx] * np.exp(_TRACE_JITTER_SIGMA * rng.standard_normal(size))
        elif self.kind == "lognormal":
            raw = self.median * np.exp(self.sigma * z)
        else:
            raw = np.full(size, self.median)
        return np.clip(np.rint(raw * self.scale), self.min, self.max).astype(np.int64)


@dataclass(frozen=True, eq=False)
class ReplayTrace:
    """A recorded request trace to replay: arrival times (seconds from the trace's start, sorted) and
    prompt and output token counts (int64 >= 1), aligned row by row. `source` names the file."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        n = self.arrival_s.size
        if self.prompt_tokens.size != n or self.output_tokens.size != n:
            raise ValueError("ReplayTrace columns must have the same length")
        if n and (np.any(np.diff(self.arrival_s) < 0) or self.arrival_s[0] < 0):
            raise ValueError("ReplayTrace arrival times must be sorted and >= 0")
        if n and (self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1):
            raise ValueError("ReplayTrace token counts must be >= 1")


@dataclass(frozen=True)
class RateChange:
    """One app's (or one of its tenants') arrival rate multiplied by `factor` for start_s <= t <
    start_s + duration_s (seconds; duration inf: to the end of the run). tenant None: the whole app."""

    start_s: float
    factor: float
    duration_s: float = math.inf
    tenant: str | None = None

    def __post_init__(self) -> None:
        if self.factor < 0 or self.duration_s <= 0 or self.start_s < 0:
            raise ValueError("RateChange needs factor >= 0, duration_s > 0 and start_s >= 0")

    def factor_at(self, t: np.ndarray) -> np.ndarray:
        """The multiplier at times t (seconds): factor inside the change, 1 outside."""
        t = np.asarray(t, dtype=float)
        return np.where((t >= self.start_s) & (t < self.start_s + self.duration_s), self.factor, 1.0)


# -------------------------------------------------------------------------------------- adapters


@dataclass(frozen=True)
class AdapterMix:
    """The LoRA adapters an app's requests name (as their `model`): `count` adapters of rank `rank`,
    `<app>-lora-1` .. `<app>-lora-<count>`. A request names one with probability `share` (else the base
    model); which one follows `popularity`: "zipf" picks adapter k with probability proportional to
    k^-`skew` (a few hot adapters, a long tail), "uniform" picks each alike."""

    count: int
    rank: int = 16
    popularity: str = "zipf"
    skew: float = 1.0
    share: float = 1.0

    def __post_init__(self) -> None:
        if self.count < 1 or self.rank < 1:
            raise ValueError("AdapterMix needs count >= 1 and rank >= 1")
        if self.popularity not in ADAPTER_POPULARITY:
            raise ValueError(f"AdapterMix.popularity must be one of {ADAPTER_POPULARITY}")
        if self.skew < 0 or not 0 < self.share <= 1:
            raise ValueError("AdapterMix needs skew >= 0 and 0 < share <= 1")

    def names(self, app: str) -> tuple[str, ...]:
        return tuple(f"{app}-lora-{k}" for k in range(1, self.count + 1))


def adapter_names(spec: WorkloadSpec) -> tuple[str, ...]:
    """Every adapter of the workload, in app order: request.lora = i + 1 names adapter_names[i]."""
    return tuple(n for a in spec.apps if a.adapters is not None for n in a.adapters.names(a.name))


def _adapter_base(spec: WorkloadSpec, app: AppSpec) -> int:
    """Adapters of the apps before `app` (its adapter k has id base + k)."""
    base = 0
    for a in spec.apps:
        if a is app or a.name == app.name:
            return base
        base += a.adapters.count if a.adapters is not None else 0
    raise ValueError(f"app {app.name} is not in the workload")


# ------------------------------------------------------------------------------------------ apps


@dataclass(frozen=True)
class AppSpec:
    """One application: its traffic share, lengths, tenants, shared prompts and sampling parameters.

    `weight` is the app's share of traffic over a whole day (normalised over apps).
    `system_prompts` distinct system prompts of `system_prompt_tokens` tokens each are
    prepended to the drawn prompt length; their popularity falls as rank^-`popularity_skew`.
    `repeat_fraction` of requests resend an earlier request's exact prompt. Users' sessions
    hold `session_requests` requests on average, all within one `session_window_s` window.
    A "batch" app submits a job every `batch_period_s` seconds whose requests arrive over
    `batch_duration_s` seconds; job sizes vary log-normally with log-std `batch_size_sigma`.

    `arrival` picks how requests are sent (weight and rate_shape apply to "open" only):
    "closed": `clients` clients send `requests` requests in all, each client its next one `think_time_s`
    after its last one ended (engine_model.clients), all starting at `start_s`; "burst": `requests`
    requests at the one instant `start_s`; "replay": the rows of `replay`, shifted by `start_s`, with the
    trace's own lengths. `length_correlation` is the correlation of the normal scores of prompt and
    output length (a Gaussian copula: for two lognormals, the correlation of log lengths); 0 draws them
    independently. `rate_changes` multiply the app's (or one tenant's) open-loop rate over a span.
    `adapters`: the LoRA adapters its requests name (None: all go to the base model).
    """

    name: str
    weight: float
    prompt: LengthDist
    output: LengthDist
    tenants: tuple[str, ...] = ("default",)
    system_prompts: int = 0
    system_prompt_tokens: int = 0
    temperature: float = 0.0
    seeded_fraction: float = 0.0
    n: int = 1
    priority: int = 0
    max_tokens: int = 4096
    rate_shape: str = "daily"
    timeout_s: float = 600.0  # client timeout, seconds (see Request.timeout_s)
    repeat_fraction: float = 0.0
    popularity_skew: float = 1.0
    session_requests: float = 4.0
    session_window_s: float = 300.0
    batch_period_s: float = 900.0
    batch_duration_s: float = 90.0
    batch_size_sigma: float = 0.3
    arrival: str = "open"
    clients: int = 0
    think_time_s: float = 0.0
    requests: int = 0
    start_s: float = 0.0
    replay: ReplayTrace | None = None
    length_correlation: float = 0.0
    rate_changes: tuple[RateChange, ...] = ()
    adapters: AdapterMix | None = None

    def __post_init__(self) -> None:
        if not self.name or self.weight < 0:
            raise ValueError("AppSpec needs a name and a weight >= 0")
        if not self.tenants:
            raise ValueError(f"app {self.name}: at least one tenant")
        if self.system_prompts < 0 or self.system_prompt_tokens < 0:
            raise ValueError(f"app {self.name}: system prompt counts must be >= 0")
        if self.system_prompts > 0 and self.system_prompt_tokens == 0:
            raise ValueError(f"app {self.name}: system prompts need system_prompt_tokens > 0")
        if not (0 <= self.seeded_fraction <= 1 and 0 <= self.repeat_fraction <= 1):
            raise ValueError(f"app {self.name}: fractions must be within 0..1")
        if self.temperature < 0 or self.n < 1 or self.max_tokens < 1 or self.timeout_s <= 0:
            raise ValueError(f"app {self.name}: temperature >= 0, n >= 1, max_tokens >= 1 and timeout_s > 0")
        if self.rate_shape not in RATE_SHAPES:
            raise ValueError(f"app {self.name}: rate_shape must be one of {RATE_SHAPES}")
        if self.session_requests < 1 or self.session_window_s <= 0:
            raise ValueError(f"app {self.name}: session_requests >= 1 and session_window_s > 0")
        if self.batch_period_s <= 0 or not 0 < self.batch_duration_s <= self.batch_period_s:
            raise ValueError(f"app {self.name}: need 0 < batch_duration_s <= batch_period_s")
        if self.batch_size_sigma < 0:
            raise ValueError(f"app {self.name}: batch_size_sigma must be >= 0")
        if self.arrival not in ARRIVAL_KINDS:
            raise ValueError(f"app {self.name}: arrival must be one of {ARRIVAL_KINDS}")
        if self.arrival == "closed" and (self.clients < 1 or self.requests < 1):
            raise ValueError(f"app {self.name}: a closed loop needs clients >= 1 and requests >= 1")
        if self.arrival == "burst" and self.requests < 1:
            raise ValueError(f"app {self.name}: a burst needs requests >= 1")
        if self.arrival == "replay" and self.replay is None:
            raise ValueError(f"app {self.name}: arrival 'replay' needs a ReplayTrace")
        if self.think_time_s < 0 or self.start_s < 0:
            raise ValueError(f"app {self.name}: think_time_s and start_s must be >= 0")
        if not -1.0 <= self.length_correlation <= 1.0:
            raise ValueError(f"app {self.name}: length_correlation must be within -1..1")
        if self.rate_changes and self.arrival != "open":
            raise ValueError(f"app {self.name}: rate changes apply to open-loop apps only")
        for change in self.rate_changes:
            if change.tenant is not None and change.tenant not in self.tenants:
                raise ValueError(f"app {self.name}: rate change for unknown tenant {change.tenant!r}")


# ------------------------------------------------------------------------------------------ rate


@dataclass(frozen=True)
class Burst:
    """Rate multiplied by `factor` for start_s <= t < start_s + duration_s (seconds)."""

    start_s: float
    duration_s: float
    factor: float

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.factor < 0:
            raise ValueError("Burst needs duration_s > 0 and factor >= 0")


@dataclass(frozen=True)
class Ramp:
    """Rate factor moves linearly from 1 to `to_factor` over [start_s, start_s + duration_s], then stays."""

    start_s: float
    duration_s: float
    to_factor: float

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.to_factor < 0:
            raise ValueError("Ramp needs duration_s > 0 and to_factor >= 0")


@dataclass(frozen=True)
class RateCurve:
    """Fleet request rate over simulated time t (seconds from the start of the run).

    rate(t) = base_rps x diurnal(t) x events(t). The diurnal factor has mean 1 over a day,
    its maximum at `peak_hour` and a peak-to-trough swing of 2 x `daily_amplitude`;
    simulated t=0 is wall-clock `start_hour`. `noise` > 0 modulates each app's realised
    rate by a slow log-normal factor (mean 1, relative std `noise`, correlation time
    `noise_tau_s`), so that counts are over-dispersed like real traffic; rate() is its mean.
    """

    base_rps: float
    daily_amplitude: float = 0.3
    peak_hour: float = 14.0
    start_hour: float = 10.0
    bursts: tuple[Burst, ...] = ()
    ramps: tuple[Ramp, ...] = ()
    noise: float = 0.0
    noise_tau_s: float = 300.0

    def __post_init__(self) -> None:
        if self.base_rps < 0 or self.daily_amplitude < 0 or self.noise < 0 or self.noise_tau_s <= 0:
            raise ValueError("RateCurve needs base_rps, daily_amplitude, noise >= 0 and noise_tau_s > 0")

    def diurnal(self, t: np.ndarray) -> np.ndarray:
        """Time-of-day factor (>= 0, mean 1 over 24 h) at simulated times t (seconds)."""
        phase = 2 * np.pi * (self.start_hour + np.asarray(t, dtype=float) / 3600.0 - self.peak_hour) / 24.0
        shape = np.cos(phase) - _DIURNAL_SECOND_HARMONIC * np.cos(2 * phase)
        return np.maximum(1.0 + self.daily_amplitude * shape, 0.0)

    def events(self, t: np.ndarray) -> np.ndarray:
        """Product of burst and ramp factors at simulated times t (seconds)."""
        t = np.asarray(t, dtype=float)
        factor = np.ones_like(t)
        for b in self.bursts:
            factor *= np.where((t >= b.start_s) & (t < b.start_s + b.duration_s), b.factor, 1.0)
        for r in self.ramps:
            factor *= 1.0 + (r.to_factor - 1.0) * np.clip((t - r.start_s) / r.duration_s, 0.0, 1.0)
        return factor

    def rate(self, t: np.ndarray) -> np.ndarray:
        """Expected requests/s at simulated times t (seconds) for traffic with the daily shape."""
        return self.base_rps * self.diurnal(t) * self.events(t)

    def edges(self) -> np.ndarray:
        """Times (seconds) where events(t) jumps or changes slope."""
        points = [x for b in self.bursts for x in (b.start_s, b.start_s + b.duration_s)]
        points += [x for r in self.ramps for x in (r.start_s, r.start_s + r.duration_s)]
        return np.asarray(points, dtype=float)


@dataclass(frozen=True)
class WorkloadSpec:
    """A run's traffic: `duration_s` seconds of the apps' requests under one rate curve."""

    duration_s: float
    rate: RateCurve
    apps: tuple[AppSpec, ...]

    def __post_init__(self) -> None:
        if self.duration_s <= 0:
            raise ValueError("WorkloadSpec.duration_s must be > 0")
        open_weight = sum(a.weight for a in self.apps if a.arrival == "open")
        if not self.apps or (open_weight <= 0 and all(a.arrival == "open" for a in self.apps)):
            raise ValueError("WorkloadSpec needs apps with a positive total weight")
        names = [a.name for a in self.apps]
        if len(set(names)) != len(names):
            raise ValueError("app names must be unique")

    def share(self, app: AppSpec) -> float:
        """The app's normalised weight (fraction of a day's open-loop requests; 0 for other arrivals)."""
        if app.arrival != "open":
            return 0.0
        return app.weight / sum(a.weight for a in self.apps if a.arrival == "open")


def app_rate(spec: WorkloadSpec, app: AppSpec, t: np.ndarray) -> np.ndarray:
    """Expected requests/s of one app at simulated times t (seconds); batch apps give their mean."""
    curve = spec.rate
    shaped = curve.diurnal(t) if app.rate_shape == "daily" else np.ones_like(np.asarray(t, dtype=float))
    rate = spec.share(app) * curve.base_rps * shaped * curve.events(t)
    for change in app.rate_changes:
        if change.tenant is None:
            rate = rate * change.factor_at(t)
    return rate


def _tenant_envelope(app: AppSpec, t: np.ndarray) -> np.ndarray:
    """max(1, every tenant change's factor) at times t: the app's arrivals are drawn at this multiple of
    its rate, then thinned per tenant (`_tenant_keep`), so a tenant's rate change moves that tenant only."""
    env = np.ones_like(np.asarray(t, dtype=float))
    for change in app.rate_changes:
        if change.tenant is not None:
            env = np.maximum(env, change.factor_at(t))
    return env


def _tenant_keep(rng: np.random.Generator, app: AppSpec, t: np.ndarray, tenant: np.ndarray) -> np.ndarray:
    """Which arrivals drawn under the envelope to keep: tenant k's at probability f_k(t) / envelope(t)."""
    factor = np.ones(t.size)
    for change in app.rate_changes:
        if change.tenant is not None:
            k = app.tenants.index(change.tenant)
            factor = np.where(tenant == k, factor * change.factor_at(t), factor)
    return rng.random(t.size) * _tenant_envelope(app, t) < factor


def expected_rate(spec: WorkloadSpec, t: np.ndarray) -> np.ndarray:
    """Expected total requests/s over all apps at simulated times t (seconds)."""
    return sum((app_rate(spec, a, t) for a in spec.apps), start=np.zeros_like(np.asarray(t, dtype=float)))


# ----------------------------------------------------------------------------------------- hashes


def _mix63(x: np.ndarray) -> np.ndarray:
    """A bijection of [0, 2^63) that scatters nearby inputs; 0 maps to 0 only."""
    x = np.asarray(x, dtype=np.uint64) & _MASK63
    x ^= x >> np.uint64(31)
    x = (x * np.uint64(0x7FB5D329728EA185)) & _MASK63
    x ^= x >> np.uint64(27)
    x = (x * np.uint64(0x01A6A7C3C9F5E2B7)) & _MASK63
    x ^= x >> np.uint64(33)
    return x


def _name_salt(name: str) -> int:
    return zlib.crc32(name.encode()) + 1


def prefix_key_for(app_name: str, prompt_index: int) -> int:
    """Stable non-zero key of system prompt `prompt_index` of app `app_name` (same in every run)."""
    return int(_mix63(np.array([(_name_salt(app_name) << 24) + prompt_index + 1]))[0])


# ------------------------------------------------------------------------------------- generation


@dataclass
class WorkloadColumns:
    """A generated workload as aligned numpy columns, sorted by arrival (row i = request_id i).

    `app` and `tenant` index into `app_names` and `tenant_names`; `seed` is -1 where the
    request passes no seed. Times are seconds, lengths tokens.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    app: np.ndarray
    tenant: np.ndarray
    prefix_key: np.ndarray
    prefix_tokens: np.ndarray
    session_key: np.ndarray
    prompt_hash: np.ndarray
    priority: np.ndarray
    temperature: np.ndarray
    seed: np.ndarray
    n: np.ndarray
    max_tokens: np.ndarray
    timeout_s: np.ndarray
    loop: np.ndarray
    think_s: np.ndarray
    lora: np.ndarray | None = None  # adapter id (0: base model), None when no app serves adapters
    lora_rank: np.ndarray | None = None
    app_names: tuple[str, ...] = ()
    tenant_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def to_requests(self) -> list[Request]:
        """Build Request objects (request_id = row index)."""
        seeds = self.seed.astype(object)
        seeds[self.seed == _NO_SEED] = None
        _, inverse, counts = np.unique(self.prompt_hash, return_inverse=True, return_counts=True)
        recurs = (counts[inverse] > 1).tolist()
        collecting = gc.isenabled()
        # 100k+ fresh objects would otherwise trigger repeated full collections over the whole heap
        gc.disable()
        try:
            reqs = list(
                map(
                    Request,
                    range(len(self)),
                    self.arrival_s.tolist(),
                    self.prompt_tokens.tolist(),
                    self.output_tokens.tolist(),
                    np.array(self.app_names, dtype=object)[self.app].tolist(),
                    np.array(self.tenant_names, dtype=object)[self.tenant].tolist(),
                    self.prefix_key.tolist(),
                    self.prefix_tokens.tolist(),
                    self.session_key.tolist(),
                    self.prompt_hash.tolist(),
                    self.priority.tolist(),
                    self.temperature.tolist(),
                    seeds.tolist(),
                    self.n.tolist(),
                    self.max_tokens.tolist(),
                    recurs,
                    self.timeout_s.tolist(),
                )
            )
            for i in np.flatnonzero(self.loop >= 0).tolist():
                reqs[i].loop = int(self.loop[i])
                reqs[i].think_s = float(self.think_s[i])
            if self.lora is not None and self.lora_rank is not None:
                for i in np.flatnonzero(self.lora > 0).tolist():
                    reqs[i].lora = int(self.lora[i])
                    reqs[i].lora_rank = int(self.lora_rank[i])
            return reqs
        finally:
            if collecting:
                gc.enable()


def _rng(seed: int, app_name: str, stream: int) -> np.random.Generator:
    # One stream per (app, purpose): adding an app or changing its lengths leaves other apps' draws alone.
    entropy = [seed % (1 << 64), _name_salt(app_name), stream]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


def _time_grid(duration_s: float, curve: RateCurve) -> np.ndarray:
    edges = curve.edges()
    inside = edges[(edges > 0) & (edges < duration_s)]
    return np.unique(np.concatenate((np.arange(0.0, duration_s, _GRID_STEP_S), inside, [duration_s])))


def _noise_factor(rng: np.random.Generator, curve: RateCurve, t: np.ndarray, duration_s: float) -> np.ndarray:
    """Mean-1 log-normal rate multiplier driven by an Ornstein-Uhlenbeck process, evaluated at t."""
    step = curve.noise_tau_s / 4.0
    knots = np.arange(0.0, duration_s + step, step)
    rho = math.exp(-step / curve.noise_tau_s)
    kicks = rng.standard_normal(knots.size)
    ou = np.empty(knots.size)
    ou[0] = kicks[0]
    for k in range(1, knots.size):
        ou[k] = rho * ou[k - 1] + math.sqrt(1.0 - rho * rho) * kicks[k]
    s = math.sqrt(math.log1p(curve.noise**2))
    return np.exp(s * np.interp(t, knots, ou) - 0.5 * s * s)


def _poisson_arrivals(rng: np.random.Generator, grid: np.ndarray, cell_rate: np.ndarray) -> np.ndarray:
    """Sorted arrival times of a Poisson process whose rate is constant on each grid cell."""
    mass = cell_rate * np.diff(grid)
    cum = np.concatenate(([0.0], np.cumsum(mass)))
    count = rng.poisson(cum[-1])
    u = np.sort(rng.uniform(0.0, cum[-1], size=count))
    cell = np.clip(np.searchsorted(cum, u, side="right") - 1, 0, mass.size - 1)
    offset = np.divide(u - cum[cell], cell_rate[cell], out=np.zeros(count), where=cell_rate[cell] > 0)
    return grid[cell] + offset


def _batch_arrivals(rng: np.random.Generator, spec: WorkloadSpec, app: AppSpec) -> np.ndarray:
    """Jobs start every batch_period_s (random phase, small start jitter); each job carries the
    expected requests of one period and submits them uniformly over batch_duration_s."""
    period, span = app.batch_period_s, app.batch_duration_s
    phase = rng.uniform(0.0, period)
    starts = phase - period + period * np.arange(math.ceil(spec.duration_s / period) + 2)
    starts = starts[starts < spec.duration_s]
    samples = max(1, round(period / _GRID_STEP_S))
    mids = starts[:, None] + period * (np.arange(samples) + 0.5) / samples
    mass = (app_rate(spec, app, mids) * _tenant_envelope(app, mids)).mean(axis=1) * period
    sigma = app.batch_size_sigma
    size_factor = np.exp(sigma * rng.standard_normal(starts.size) - 0.5 * sigma * sigma)
    counts = rng.poisson(mass * size_factor)
    jitter = np.abs(rng.normal(0.0, 0.02 * period, size=starts.size))
    times = np.repeat(starts + jitter, counts) + span * rng.random(int(counts.sum()))
    return np.sort(times[(times >= 0.0) & (times < spec.duration_s)])


def _arrivals(seed: int, spec: WorkloadSpec, app: AppSpec, grid: np.ndarray) -> np.ndarray:
    """Sorted send times (seconds) of one app; a closed loop's held requests are inf (engine_model.clients)."""
    if app.arrival == "closed":
        first = min(app.clients, app.requests) if app.start_s < spec.duration_s else 0
        return np.concatenate((np.full(first, app.start_s), np.full(app.requests - first, np.inf)))
    if app.arrival == "burst":
        return np.full(app.requests if app.start_s < spec.duration_s else 0, app.start_s)
    if app.arrival == "replay":
        assert app.replay is not None
        t = app.replay.arrival_s + app.start_s
        return t[t < spec.duration_s]
    rng = _rng(seed, app.name, _STREAM_ARRIVALS)
    if app.rate_shape == "batch":
        return _batch_arrivals(rng, spec, app)
    mids = 0.5 * (grid[1:] + grid[:-1])
    cell_rate = app_rate(spec, app, mids)
    if app.rate_changes:
        cell_rate = cell_rate * _tenant_envelope(app, mids)
    if spec.rate.noise > 0:
        cell_rate = cell_rate * _noise_factor(rng, spec.rate, mids, spec.duration_s)
    return _poisson_arrivals(rng, grid, cell_rate)


def _zipf(rng: np.random.Generator, k: int, skew: float, size: int) -> np.ndarray:
    """Ranks 0..k-1 drawn with probability proportional to (rank + 1)^-skew."""
    weights = (np.arange(k) + 1.0) ** -skew
    return rng.choice(k, size=size, p=weights / weights.sum())


def _sessions(rng: np.random.Generator, app: AppSpec, t: np.ndarray, tenant: np.ndarray, salt: int) -> np.ndarray:
    """Group each (tenant, time window) into ~session_requests-sized sessions; return non-zero keys."""
    window = np.floor((t + rng.uniform(0.0, app.session_window_s)) / app.session_window_s).astype(np.int64)
    group = window * (int(tenant.max(initial=0)) + 1) + tenant
    counts = np.bincount(group)
    slots = np.maximum(1, np.rint(counts / app.session_requests)).astype(np.int64)
    slot = (rng.random(t.size) * slots[group]).astype(np.int64)
    key = _mix63(np.uint64(salt) ^ _mix63(group.astype(np.uint64)))
    key = _mix63(key ^ (slot.astype(np.uint64) + np.uint64(1)))
    return (key | np.uint64(1)).astype(np.int64)


def _repeat_sources(rng: np.random.Generator, fraction: float, size: int) -> np.ndarray:
    """Index of the request whose prompt each request reuses (itself unless it is a repeat)."""
    src = np.arange(size)
    if fraction <= 0 or size < 2:
        return src
    repeat = rng.random(size) < fraction
    repeat[0] = False
    earlier = (rng.random(size) * src).astype(np.int64)
    src = np.where(repeat, earlier, src)
    # A repeat of a repeat resolves to the original; src[i] <= i so this converges in a few rounds.
    while True:
        nxt = src[src]
        if np.array_equal(nxt, src):
            return src
        src = nxt


def _app_columns(seed: int, app: AppSpec, t: np.ndarray, hash_base: int, max_model_len: int,
                 loop: int = -1) -> dict[str, np.ndarray]:
    """Per-request columns of one app, aligned with its sorted arrival times t; tenant is local to the app.
    `loop` is the closed-loop pool id its requests carry (closed-loop apps only)."""
    rng = _rng(seed, app.name, _STREAM_ATTRIBUTES)
    size = t.size
    n_tenants = len(app.tenants)

    prompt_idx = np.zeros(size, dtype=np.int64)
    if app.system_prompts == 0:
        tenant = _zipf(rng, n_tenants, app.popularity_skew, size)
    elif app.system_prompts >= n_tenants:
        # each tenant owns the prompts congruent to its index, so popular prompts make big tenants
        prompt_idx = _zipf(rng, app.system_prompts, app.popularity_skew, size)
        tenant = prompt_idx % n_tenants
    else:
        tenant = _zipf(rng, n_tenants, app.popularity_skew, size)
        prompt_idx = tenant % app.system_prompts

    if app.replay is not None and app.arrival == "replay":
        # the trace's own lengths, row by row (its arrivals are t, the rows before the window's end)
        user, output = app.replay.prompt_tokens[:size].copy(), app.replay.output_tokens[:size].copy()
    elif app.length_correlation != 0.0:
        # Gaussian copula on a stream of its own, so apps without a correlation draw as before
        crng = _rng(seed, app.name, _STREAM_LENGTHS)
        z1, z2 = crng.standard_normal(size), crng.standard_normal(size)
        rho = app.length_correlation
        user = app.prompt.from_scores(crng, z1, "prompt")
        output = app.output.from_scores(crng, rho * z1 + math.sqrt(1.0 - rho * rho) * z2, "output")
    else:
        rows = None
        if app.prompt.kind == "trace" and app.output.kind == "trace" and app.prompt.trace == app.output.trace:
            assert app.prompt.trace is not None
            rows = rng.integers(0, load_trace(app.prompt.trace)[0].size, size=size)
        user = app.prompt.sample(rng, size, "prompt", rows)
        output = app.output.sample(rng, size, "output", rows)

    prefix_tokens = np.full(size, app.system_prompt_tokens if app.system_prompts else 0, dtype=np.int64)
    prompt = np.minimum(user + prefix_tokens, max_model_len - 1)
    output = np.minimum(np.minimum(output, app.max_tokens), max_model_len - prompt)

    if app.system_prompts:
        keys = np.array([prefix_key_for(app.name, j) for j in range(app.system_prompts)], dtype=np.int64)
        prefix_key = keys[prompt_idx]
    else:
        prefix_key = np.zeros(size, dtype=np.int64)

    seeded = rng.random(size) < app.seeded_fraction
    seeds = np.where(seeded, rng.integers(0, 1 << 31, size=size), _NO_SEED)
    hashes = _mix63(np.uint64(hash_base) + np.arange(1, size + 1, dtype=np.uint64)).astype(np.int64)

    # a repeat copies everything that defines the prompt and its sampling, but keeps its own session
    src = _repeat_sources(rng, app.repeat_fraction, size)
    tenant = tenant[src]
    # a closed loop's held requests have no send time yet: their sessions group as if sent at the start
    t_known = np.where(np.isfinite(t), t, app.start_s)
    sessions = _sessions(rng, app, t_known, tenant, _name_salt(app.name) ^ (seed % (1 << 32)))
    cols = {
        "arrival_s": t,
        "prompt_tokens": prompt[src],
        "output_tokens": output[src],
        "tenant": tenant,
        "prefix_key": prefix_key[src],
        "prefix_tokens": prefix_tokens[src],
        "session_key": sessions,
        "prompt_hash": hashes[src],
        "seed": seeds[src],
        "loop": np.full(size, loop if app.arrival == "closed" else -1, dtype=np.int64),
        "think_s": np.full(size, app.think_time_s if app.arrival == "closed" else 0.0),
    }
    if app.adapters is not None:
        cols["lora"], cols["lora_rank"] = _adapter_columns(_rng(seed, app.name, _STREAM_ADAPTERS), app.adapters,
                                                           size, src)
    if any(c.tenant is not None for c in app.rate_changes):
        keep = _tenant_keep(_rng(seed, app.name, _STREAM_THIN), app, t, tenant)
        cols = {name: col[keep] for name, col in cols.items()}
    return cols


def _adapter_columns(rng: np.random.Generator, mix: AdapterMix, size: int,
                     src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Adapter (1..count within the app, 0: the base model) and rank of each request; a repeat names the
    adapter its original named. On a stream of its own, so the app's other columns draw as without it."""
    named = rng.random(size) < mix.share
    if mix.popularity == "zipf":
        pick = _zipf(rng, mix.count, mix.skew, size) + 1
    else:
        pick = rng.integers(1, mix.count + 1, size=size)
    lora = np.where(named, pick, 0).astype(np.int64)[src]
    return lora, np.where(lora > 0, mix.rank, 0).astype(np.int64)


def _generate_parts(
    spec: WorkloadSpec, seed: int, max_model_len: int
) -> list[tuple[int, AppSpec, dict[str, np.ndarray]]]:
    """(index in spec.apps, app, its columns) for every app with a positive weight."""
    for app in spec.apps:
        if app.system_prompts and app.system_prompt_tokens + 2 > max_model_len:
            raise ValueError(f"app {app.name}: system prompt does not fit max_model_len={max_model_len}")
    # the rate grid (one cell a second) only serves open-loop apps; a closed loop's window may be very long
    grid = _time_grid(spec.duration_s, spec.rate) if any(a.arrival == "open" for a in spec.apps) else np.zeros(0)
    # request hashes are the bijective mix of distinct counters, hence unique and non-zero
    hash_base = int(_mix63(np.array([seed % (1 << 63)]))[0]) & ((1 << 62) - 1)
    serves_adapters = any(a.adapters is not None for a in spec.apps)
    parts = []
    for index, app in enumerate(spec.apps):
        if app.arrival == "open" and app.weight <= 0:
            continue
        t = _arrivals(seed, spec, app, grid)
        cols = _app_columns(seed, app, t, hash_base, max_model_len, loop=index)
        if serves_adapters:
            if app.adapters is None:
                cols["lora"] = cols["lora_rank"] = np.zeros(cols["arrival_s"].size, dtype=np.int64)
            else:
                base = _adapter_base(spec, app)
                cols["lora"] = np.where(cols["lora"] > 0, cols["lora"] + base, 0)
        parts.append((index, app, cols))
        hash_base += t.size
    return parts


def generate_columns(spec: WorkloadSpec, seed: int, max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> WorkloadColumns:
    """Generate the workload as numpy columns sorted by arrival time (seconds in [0, duration_s)).

    Invariants: 1 <= output_tokens <= max_tokens; prompt_tokens + output_tokens <= max_model_len;
    prefix_tokens < prompt_tokens where prefix_key != 0, else prefix_tokens == 0; prompt_hash is
    non-zero and unique except for deliberate repeats, which copy the original's lengths, prefix,
    tenant and seed. Identical (spec, seed, max_model_len) give identical columns.
    """
    parts = _generate_parts(spec, seed, max_model_len)
    # each app's times are already sorted, and the stable sort (timsort) merges sorted runs cheaply
    order = np.argsort(np.concatenate([cols["arrival_s"] for _, _, cols in parts]), kind="stable")
    tenant_base = np.cumsum([0] + [len(app.tenants) for _, app, _ in parts])[:-1]
    columns = {
        name: np.concatenate([cols[name] for _, _, cols in parts])[order] for name in parts[0][2] if name != "tenant"
    }
    tenant = np.concatenate([cols["tenant"] + base for (_, _, cols), base in zip(parts, tenant_base, strict=True)])
    app = np.concatenate([np.full(cols["arrival_s"].size, i, dtype=np.int64) for i, _, cols in parts])[order]

    def per_app(attr: str, dtype: type) -> np.ndarray:
        return np.array([getattr(a, attr) for a in spec.apps], dtype=dtype)[app]

    return WorkloadColumns(
        **columns,
        app=app,
        tenant=tenant[order],
        priority=per_app("priority", np.int64),
        temperature=per_app("temperature", float),
        n=per_app("n", np.int64),
        max_tokens=per_app("max_tokens", np.int64),
        timeout_s=per_app("timeout_s", float),
        app_names=tuple(a.name for a in spec.apps),
        tenant_names=tuple(name for _, a, _ in parts for name in a.tenants),
    )


def generate_requests(spec: WorkloadSpec, seed: int, max_model_len: int = DEFAULT_MAX_MODEL_LEN) -> list[Request]:
    """Requests sorted by arrival_s, request_id 0..N-1 in arrival order (invariants: see generate_columns)."""
    return generate_columns(spec, seed, max_model_len).to_requests()


# -------------------------------------------------------------------------------------- standard


def standard_apps() -> tuple[AppSpec, ...]:
    """The default application mix.

    chat: conversation-trace lengths behind per-tenant system prompts (prefix caching pays);
    rag: long retrieved-context prompts; summarize: arXiv papers submitted by batch jobs;
    code: Splitwise code-completion lengths; reasoning: short prompts, long and highly
    variable outputs that sometimes hit max_tokens.
    """
    return (
        AppSpec(
            name="chat",
            weight=0.45,
            prompt=LengthDist("trace", trace="conv", max=16384),
            output=LengthDist("trace", trace="conv"),
            tenants=("acme", "globex", "initech", "umbrella", "hooli", "stark"),
            system_prompts=18,
            system_prompt_tokens=640,
            temperature=0.7,
            seeded_fraction=0.05,
            max_tokens=2048,
            repeat_fraction=0.02,
            session_requests=5.0,
        ),
        AppSpec(
            name="rag",
            weight=0.2,
            prompt=LengthDist("lognormal", median=4000.0, sigma=0.5, min=500, max=24000),
            output=LengthDist("lognormal", median=220.0, sigma=0.6, min=8, max=2048),
            tenants=("acme", "globex", "initech", "wayne"),
            system_prompts=4,
            system_prompt_tokens=320,
            temperature=0.1,
            seeded_fraction=0.02,
            max_tokens=1024,
            session_requests=3.0,
        ),
        AppSpec(
            name="code",
            weight=0.22,
            prompt=LengthDist("trace", trace="code"),
            output=LengthDist("trace", trace="code"),
            tenants=("acme", "initech", "hooli"),
            system_prompts=3,
            system_prompt_tokens=192,
            temperature=0.2,
            max_tokens=512,
            session_requests=8.0,
        ),
        AppSpec(
            name="summarize",
            weight=0.07,
            prompt=LengthDist("trace", trace="arxiv"),
            output=LengthDist("trace", trace="arxiv"),
            tenants=("globex", "wayne"),
            system_prompts=2,
            system_prompt_tokens=96,
            max_tokens=1024,
            priority=1,
            rate_shape="batch",
            batch_period_s=600.0,
            batch_duration_s=120.0,
            session_requests=20.0,
        ),
        AppSpec(
            name="reasoning",
            weight=0.06,
            prompt=LengthDist("lognormal", median=380.0, sigma=0.9, min=16, max=8192),
            output=LengthDist("lognormal", median=2000.0, sigma=0.85, min=64),
            tenants=("acme", "stark"),
            system_prompts=2,
            system_prompt_tokens=128,
            temperature=0.6,
            seeded_fraction=0.1,
            max_tokens=16384,
            rate_shape="flat",
            session_requests=2.0,
        ),
    )


def standard_workload(duration_s: float = 3600.0, base_rps: float = 30.0) -> WorkloadSpec:
    """The default run: `standard_apps()` from 10:00 with a 14:00 daily peak and mild rate noise.

    Here `base_rps` is the expected mean request rate over the run itself (so 30 req/s for
    3600 s expects 108,000 requests); the curve's daily-mean rate is scaled to make it so.
    """
    unit = RateCurve(base_rps=1.0, daily_amplitude=0.3, peak_hour=14.0, start_hour=10.0, noise=0.08)
    apps = standard_apps()
    probe = WorkloadSpec(duration_s=duration_s, rate=unit, apps=apps)
    grid = _time_grid(duration_s, unit)
    run_mean = float(np.sum(expected_rate(probe, 0.5 * (grid[1:] + grid[:-1])) * np.diff(grid))) / duration_s
    curve = RateCurve(base_rps=base_rps / run_mean, daily_amplitude=0.3, peak_hour=14.0, start_hour=10.0, noise=0.08)
    return WorkloadSpec(duration_s=duration_s, rate=curve, apps=apps)
