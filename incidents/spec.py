"""The incident format: pydantic models for one incident file.

An incident is plain data. Times are simulated seconds from t=0 (the wall-clock instant
`window.start`, UTC); token counts are tokens; rates are per second. Every model forbids
unknown keys so a typo is an error rather than a silently ignored field.

Two layers of checking:
- the models check structure and field-local rules (types, ranges, required partners);
- `cross_check` (incidents.crosscheck) checks what spans sections (ids, engine knobs, fault kinds
  and their parameters, tables and columns, times against the run length, replica references).
  It works on raw YAML data as well as on dumped models, so the loader can report it even when
  the structure is broken.

The format is split by job: this module holds the incident and its sections (fleet, workload,
claims, hypotheses, signals); incidents.fault_spec the faults and noise; incidents.spec_common the
shared base pieces; incidents.telemetry_columns the queryable tables; incidents.crosscheck the
cross-reference rules. Every public name of those is importable from here too.

Regenerate `incidents/schema.json` after changing a model: `python -m incidents.spec`.

Why one module of ~680 lines: it is the incident format as one pydantic model tree, from which the JSON Schema
for editors is generated; fault, shared and column definitions already live in fault_spec.py, spec_common.py
and telemetry_schema.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from incidents.crosscheck import (
    STANDARD_APP_TENANTS,
    Issue,
    authoring_issues,
    cross_check,
    did_you_mean,
    format_loc,
    known_models_and_gpus,
    replica_index,
)
from incidents.fault_spec import (
    NOISE_KINDS,
    ConfigChangeNoise,
    DeployEvent,
    FaultSpec,
    FractionScope,
    NoiseEvent,
    ReplicaRestart,
    ReplicaScope,
    Scope,
    Step,
    TrafficBurstNoise,
)
from incidents.spec_common import (
    DEFAULT_LIKELIHOOD,
    ID_RE,
    MIN_HYPOTHESES,
    MIN_SIGNALS,
    REPLICA_NAME_RE,
    SLUG_RE,
    ReplicaRef,
    Seconds,
    WindowPair,
    _knob_properties,
    _str_enum,
    _Strict,
)
from incidents.telemetry_columns import (
    COLUMN_TYPES,
    NUMERIC_AGGREGATES,
    NUMERIC_TYPES,
    OPTIONAL_COLUMNS,
    TABLE_COLUMNS,
    TIME_AGGREGATES,
    TWO_SIDED,
    Aggregate,
    Compare,
)

SCHEMA_PATH = Path(__file__).resolve().parent / "schema.json"

RouterPolicy = Literal["round_robin", "least_outstanding", "affinity"]

__all__ = [
    "COLUMN_TYPES",
    "DEFAULT_LIKELIHOOD",
    "ID_RE",
    "MIN_HYPOTHESES",
    "MIN_SIGNALS",
    "NOISE_KINDS",
    "NUMERIC_AGGREGATES",
    "NUMERIC_TYPES",
    "OPTIONAL_COLUMNS",
    "REPLICA_NAME_RE",
    "SCHEMA_PATH",
    "SLUG_RE",
    "STANDARD_APP_TENANTS",
    "TABLE_COLUMNS",
    "TIME_AGGREGATES",
    "TWO_SIDED",
    "Aggregate",
    "Compare",
    "ConfigChangeNoise",
    "DeployEvent",
    "FaultSpec",
    "FractionScope",
    "Incident",
    "Issue",
    "NoiseEvent",
    "ReplicaRef",
    "ReplicaRestart",
    "ReplicaScope",
    "Scope",
    "Seconds",
    "Step",
    "TrafficBurstNoise",
    "WindowPair",
    "authoring_issues",
    "cross_check",
    "did_you_mean",
    "format_loc",
    "incident_json_schema",
    "known_models_and_gpus",
    "replica_index",
    "schema_text",
    "write_schema",
]


class Briefing(_Strict):
    """The page the player receives. It describes symptoms, never the cause."""

    reported_by: str = Field(min_length=1, description="Who paged (a team or a person).")
    since: str = Field(min_length=1, description="When the reporter noticed, in their own words.")
    summary: str = Field(min_length=1, description="What the reporter sees, a paragraph.")
    evidence: list[str] = Field(default_factory=list, description="Things the reporter attached or noticed.")


class Window(_Strict):
    """The simulated span: t=0 is `start`; telemetry covers [0, duration_s)."""

    start: datetime = Field(description="Wall-clock instant of t=0, ISO-8601 in UTC, e.g. 2025-03-04T09:00:00Z.")
    duration_s: float = Field(gt=0, le=7 * 86400, description="Length of the simulated run in seconds.")
    scrape_interval_s: float = Field(10.0, gt=0, le=300, description="Seconds between metric scrapes.")

    @field_validator("start")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        # telemetry timestamps are naive UTC, so store t0 the same way
        if value.tzinfo is not None:
            offset = value.utcoffset()
            if offset is not None and offset.total_seconds() != 0:
                raise ValueError("window.start must be in UTC: end it with Z (e.g. 2025-03-04T09:00:00Z)")
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value


class Fallback(_Strict):
    """Where the router spills traffic when the main pool's queue grows too long."""

    model: str = Field(description="Fallback model name (engine_model.profiles.MODELS).")
    gpu: str = Field(description="Fallback GPU name (engine_model.profiles.GPUS).")
    replicas: int = Field(ge=1, description="Number of fallback replicas.")
    queue_threshold: int = Field(ge=0, description="Waiting requests above which traffic spills over.")


class Router(_Strict):
    policy: RouterPolicy = Field("round_robin", description="Load-balancing policy.")
    fallback: Fallback | None = Field(None, description="Optional overflow pool.")


class Fleet(_Strict):
    """The serving fleet: identical replicas of one model on one GPU type behind a router."""

    model: str = Field(description="Model name (engine_model.profiles.MODELS).")
    gpu: str = Field(description="GPU name (engine_model.profiles.GPUS).")
    replicas: int = Field(ge=1, le=256, description="Number of engine replicas, named vllm-0 .. vllm-(N-1).")
    tensor_parallel: int = Field(1, ge=1, le=64, description="GPUs per replica for tensor parallelism.")
    pipeline_parallel: int = Field(1, ge=1, le=64, description="Pipeline stages per replica.")
    engine: dict[str, bool | int | float | str] = Field(
        default_factory=dict,
        description="Engine knobs that differ from EngineConfig defaults.",
        json_schema_extra=_knob_properties(),
    )
    router: Router = Field(default_factory=lambda: Router.model_validate({}),
                           description="Router in front of the replicas.")
    model_version: str = Field("v1", min_length=1, description="Version label the fleet starts with.")


class Burst(_Strict):
    start_s: Seconds
    duration_s: float = Field(gt=0, description="Seconds the burst lasts.")
    factor: float = Field(gt=0, description="Arrival-rate multiplier during the burst.")


class Ramp(_Strict):
    start_s: Seconds
    duration_s: float = Field(gt=0, description="Seconds over which the rate moves to to_factor.")
    to_factor: float = Field(gt=0, description="Rate multiplier reached at the end; it stays there afterwards.")


class LengthDist(_Strict):
    """A token-length distribution. Sampled lengths are multiplied by `scale`, then clipped to [min, max].

    kind=trace draws from a recorded trace (the prompt side of a trace gives prompt lengths, the
    output side output lengths); kind=lognormal draws median * exp(sigma * N(0, 1));
    kind=fixed always gives `median`.
    """

    kind: Literal["trace", "lognormal", "fixed"] = Field(description="Distribution family.")
    trace: Literal["conv", "code", "arxiv"] | None = Field(
        None, description="Trace for kind=trace: conv, code (Splitwise) or arxiv (summarisation)."
    )
    median: float | None = Field(None, gt=0, description="Median tokens (lognormal) or the value (fixed).")
    sigma: float | None = Field(None, ge=0, le=5, description="Log-space standard deviation (lognormal).")
    scale: float = Field(1.0, gt=0, description="Multiplier applied to every sampled length.")
    min: int = Field(1, ge=1, description="Lower clip, tokens.")
    max: int | None = Field(None, ge=1, description="Upper clip, tokens.")

    @model_validator(mode="after")
    def _complete(self) -> LengthDist:
        if self.kind == "trace" and self.trace is None:
            raise ValueError("kind 'trace' needs `trace`: conv, code or arxiv")
        if self.kind == "lognormal" and (self.median is None or self.sigma is None):
            raise ValueError("kind 'lognormal' needs both `median` and `sigma`")
        if self.kind == "fixed" and self.median is None:
            raise ValueError("kind 'fixed' needs `median` (the fixed length in tokens)")
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


MAX_LOOP_CLIENTS = 100_000
MAX_SHAPE_REQUESTS = 2_000_000  # requests of one closed loop or burst (a long incident's whole traffic)


class ClosedLoopArrival(_Strict):
    """A closed loop: `clients` clients start at start_s together; each sends its next request
    think_time_s after its last one ended (answered, failed or timed out), until `requests` are sent or the
    window ends. At most `clients` requests of the app are ever in flight (load tests, a pool of users)."""

    kind: Literal["closed_loop"]
    clients: int = Field(ge=1, le=MAX_LOOP_CLIENTS, description="Concurrent clients (requests in flight at most).")
    requests: int = Field(ge=1, le=MAX_SHAPE_REQUESTS, description="Requests the clients send in all.")
    think_time_s: float = Field(0.0, ge=0, le=3600, description="Seconds a client waits after a response ends.")
    start_s: Seconds = 0.0


class BurstArrival(_Strict):
    """`requests` requests sent at the one instant at_s (a batch job dumping its queue, a retry storm)."""

    kind: Literal["burst"]
    at_s: Seconds
    requests: int = Field(ge=1, le=MAX_SHAPE_REQUESTS, description="Requests sent at at_s.")


def _trace_path(value: str) -> str:
    path = Path(value)
    if path.is_absolute() or value.startswith(("/", "\\", "~")):
        raise ValueError("a trace path is relative to the incident file's folder, not absolute")
    if ".." in path.parts or "\\" in value:
        raise ValueError("a trace path must stay inside the incident file's folder (no '..')")
    if path.suffix.lower() not in (".jsonl", ".csv"):
        raise ValueError(f"a trace is a .jsonl or .csv file, not {path.suffix or 'a file without suffix'}")
    return value


class ReplayArrival(_Strict):
    """Replay a recorded request trace: each row's arrival time and prompt and output tokens (see
    docs/authoring.md, "Workload shapes", for the file format)."""

    kind: Literal["replay"]
    path: Annotated[str, AfterValidator(_trace_path)] = Field(
        min_length=1, max_length=300,
        description="JSONL or CSV file, relative to the incident file's folder (inside it).",
    )
    start_s: Seconds = Field(0.0, description="Simulated second at which the trace's first request arrives.")
    time_scale: float = Field(
        1.0, gt=0, le=1000, description="Multiplies the trace's times: 0.5 replays it at twice the rate."
    )
    # the file's rows once the loader has read it (incidents.traces.TraceRows); not part of the YAML
    _rows: Any = PrivateAttr(default=None)


Arrival = Annotated[ClosedLoopArrival | BurstArrival | ReplayArrival, Field(discriminator="kind")]


class Retry(_Strict):
    """How clients retry a request that failed (error) or that they gave up waiting for (timeout).

    The retry is a new request sent after a backoff of backoff_s * 2**(attempt - 1) seconds, capped at
    backoff_max_s and shortened by a random fraction of up to `jitter` of itself. The defaults are the
    OpenAI Python client's (3 attempts, 0.5 s doubling to at most 8 s, jitter 0.25).
    """

    max_attempts: int = Field(3, ge=1, le=20, description="Attempts per request, the first included (1: never "
                              "retries).")
    backoff_s: float = Field(0.5, ge=0, description="Seconds before the first retry (doubles per attempt).")
    backoff_max_s: float = Field(8.0, ge=0, description="Cap on the backoff, seconds.")
    jitter: float = Field(0.25, ge=0, le=1, description="Largest random fraction taken off each backoff (1: 'full "
                          "jitter', 0: every client retries in lockstep).")
    on_timeout: bool = Field(True, description="Retry when the client gave up waiting.")
    on_error: bool = Field(True, description="Retry an error response.")


class ZipfPopularity(_Strict):
    """Adapter k (1 the most popular) is named with probability proportional to k^-skew."""

    kind: Literal["zipf"]
    skew: float = Field(1.0, gt=0, le=4, description="Zipf exponent: 0.5 a flat tail, 1 typical, 2 a few hot "
                        "adapters take most requests.")


class UniformPopularity(_Strict):
    """Every adapter is named alike."""

    kind: Literal["uniform"]


Popularity = Annotated[ZipfPopularity | UniformPopularity, Field(discriminator="kind")]


class Adapters(_Strict):
    """LoRA adapters an app's requests name as their model (vLLM --enable-lora; the fleet's engine must set
    max_loras >= 1). Adapter k is `<app>-lora-<k>`, as in requests.adapter."""

    count: int = Field(ge=1, le=1000, description="Distinct adapters the app's requests name.")
    rank: int = Field(16, ge=1, le=512, description="LoRA rank of every adapter (at most the engine's "
                      "max_lora_rank): it sizes the weights a load copies into a GPU slot.")
    popularity: Popularity = Field(
        default_factory=lambda: ZipfPopularity(kind="zipf", skew=1.0),
        description="Which adapter a request names: {kind: zipf, skew: 1.0} (default) or {kind: uniform}.",
    )
    share: float = Field(1.0, gt=0, le=1, description="Fraction of the app's requests that name an adapter "
                         "(the others go to the base model).")


class App(_Strict):
    """One client application: its share of traffic, request shapes and sampling settings."""

    name: str = Field(pattern=ID_RE, description="App name, as in requests.app.")
    weight: float = Field(1.0, gt=0, description="Relative share of the arrival rate (open-loop apps only).")
    prompt: LengthDist | None = Field(
        None, description="Prompt length distribution (tokens); required unless arrival replays a trace."
    )
    output: LengthDist | None = Field(
        None, description="Output length distribution (tokens); required unless arrival replays a trace."
    )
    arrival: Arrival | None = Field(
        None, description="How requests are sent: absent = open loop at the workload's rate (see rate_shape); "
        "closed_loop, burst or replay."
    )
    length_correlation: float = Field(
        0.0, ge=-1, le=1, description="Correlation of prompt and output length (Gaussian copula on their normal "
        "scores: for two lognormals, the correlation of log lengths). 0: independent."
    )
    tenants: int = Field(1, ge=1, description="Number of tenants sending this app's traffic.")
    system_prompts: int = Field(1, ge=0, description="Distinct shared system prompts (prefix-cache reuse).")
    system_prompt_tokens: int = Field(0, ge=0, description="Tokens in each system prompt.")
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature.")
    seeded_fraction: float = Field(0.0, ge=0, le=1, description="Fraction of requests that pass a seed.")
    n: int = Field(1, ge=1, le=16, description="Completions per request.")
    priority: int = Field(0, description="Scheduling priority (lower is served first under priority policy).")
    max_tokens: int = Field(4096, ge=1, description="max_tokens sent with each request.")
    timeout_s: float = Field(
        600.0, gt=0, description="Seconds a client waits for the whole response before it gives up (the engine "
        "then aborts the request: status timeout). 600 is the OpenAI Python client's default."
    )
    rate_shape: Literal["daily", "flat", "batch"] = Field(
        "daily", description="daily follows the diurnal curve, flat ignores it, batch arrives in bulk."
    )
    batch_period_s: float = Field(900.0, gt=0, le=86400, description="rate_shape batch: seconds between jobs.")
    batch_duration_s: float = Field(
        90.0, gt=0, le=86400, description="rate_shape batch: seconds over which one job submits its requests."
    )
    batch_size_sigma: float = Field(
        0.3, ge=0, le=3, description="rate_shape batch: log-space std of job sizes (mean size: the app's rate "
        "times batch_period_s)."
    )
    retry: Retry | None = Field(None, description="How this app's clients retry (default: workload.retry).")
    adapters: Adapters | None = Field(
        None, description="LoRA adapters the app's requests name (absent: all go to the base model)."
    )

    @model_validator(mode="after")
    def _shape(self) -> App:
        replay = isinstance(self.arrival, ReplayArrival)
        if not replay and (self.prompt is None or self.output is None):
            raise ValueError("an app needs `prompt` and `output` length distributions (unless it replays a trace)")
        if replay and (self.prompt is not None or self.output is not None):
            raise ValueError("a replayed trace brings its own lengths: drop `prompt` and `output`")
        if replay and self.length_correlation != 0.0:
            raise ValueError("a replayed trace brings its own lengths: drop `length_correlation`")
        if self.batch_duration_s > self.batch_period_s:
            raise ValueError(
                f"batch_duration_s ({self.batch_duration_s:g}) exceeds batch_period_s ({self.batch_period_s:g})"
            )
        return self


class RateChange(_Strict):
    """One app's, or one of its tenants', open-loop arrival rate multiplied by `factor` from start_s on
    (for duration_s seconds, or to the end of the run). Other apps and tenants keep their traffic."""

    app: str = Field(pattern=ID_RE, description="App whose traffic changes.")
    tenant: str | None = Field(
        None, min_length=1, description='Only this tenant of the app ("<app>-t<i>" for a listed app; the '
        "standard mix's tenant names, e.g. acme). Absent: the whole app."
    )
    start_s: Seconds
    factor: float = Field(ge=0, le=1000, description="Rate multiplier (0 stops the traffic, 2 doubles it).")
    duration_s: float | None = Field(None, gt=0, description="Seconds the change lasts; absent: to the end.")


def _apps_tag(value: Any) -> str:
    return "apps_standard" if isinstance(value, str) else "apps_list"


class Workload(_Strict):
    """Arrival process: a diurnal base rate with bursts and ramps, split over apps."""

    base_rps: float = Field(gt=0, description="Mean arrival rate, requests per second.")
    daily_amplitude: float = Field(0.0, ge=0, le=1, description="Relative amplitude of the daily cycle.")
    peak_hour: float = Field(14.0, ge=0, lt=24, description="Local hour of the daily peak.")
    start_hour: float = Field(10.0, ge=0, lt=24, description="Local hour at t=0.")
    bursts: list[Burst] = Field(default_factory=list, description="Temporary rate multipliers.")
    ramps: list[Ramp] = Field(default_factory=list, description="Lasting rate changes reached gradually.")
    rate_changes: list[RateChange] = Field(
        default_factory=list, description="Rate changes of one app or one tenant at a time."
    )
    apps: Annotated[
        Annotated[Literal["standard"], Tag("apps_standard")] | Annotated[list[App], Tag("apps_list")],
        Discriminator(_apps_tag),
    ] = Field("standard", description='"standard" for the built-in app mix, or a list of apps.')
    retry: Retry | None = Field(None, description="How every app's clients retry unless the app says otherwise "
                                "(absent: clients never retry).")



class Metric(_Strict):
    table: str = Field(description="Telemetry table.", json_schema_extra=_str_enum(TABLE_COLUMNS))
    column: str = Field(description="Column to aggregate.")
    where: str | None = Field(None, description="SQL boolean over the table's columns, applied to both sides.")


class Side(_Strict):
    """One side of a comparison: a time window and/or a row filter."""

    window: WindowPair | None = None
    where: str | None = Field(None, description="SQL boolean over the table's columns for this side only.")


class Symptom(_Strict):
    """A claim the briefing makes, checkable against the built telemetry.

    Two sides: the compared quantity is agg(a)/agg(b) (ratio_*) or agg(a)-agg(b) (difference_*).
    One side: agg(a) itself is compared with `value` (at_least / at_most).
    """

    id: str = Field(pattern=ID_RE)
    claim: str = Field(min_length=1, description="The sentence as the briefing states it.")
    briefed: bool = Field(
        True,
        description="The page states this claim, so every hypothesis's world must show it too (no strawman "
        "distractor). false: a finding the player has to dig out; only the true world must show it.",
    )
    context: bool = Field(
        False,
        description="A fact of the situation rather than an effect of the fault (no crash before the patch, "
        "clocks nominal, it healed by itself): it must hold with the faults and without them. Evidence claims "
        "(the default) must hold with the faults and not without.",
    )
    metric: Metric
    aggregate: Aggregate = Field(
        description="rate = count / window seconds; increase = max - min of a counter within the side; "
        "distinct = number of different values of the column; first / last = seconds after t=0 of the side's "
        "first / last row (column ts)."
    )
    a: Side
    b: Side | None = None
    compare: Compare
    value: float = Field(description="Threshold the compared quantity is checked against.")

    @field_validator("a", "b")
    @classmethod
    def _rate_needs_window(cls, side: Side | None, info: ValidationInfo) -> Side | None:
        if side is not None and info.data.get("aggregate") == "rate" and side.window is None:
            raise ValueError(f"aggregate 'rate' divides by the window length: give side {info.field_name} a window")
        return side

    @field_validator("compare")
    @classmethod
    def _sides_match(cls, compare: str, info: ValidationInfo) -> str:
        has_b = info.data.get("b") is not None
        if compare in TWO_SIDED and not has_b and "b" in info.data:
            raise ValueError(f"compare '{compare}' compares two sides: add side b")
        if compare not in TWO_SIDED and has_b:
            raise ValueError(f"compare '{compare}' checks side a alone: remove side b or use ratio_*/difference_*")
        return compare


class Hypothesis(_Strict):
    id: str = Field(pattern=ID_RE)
    title: str = Field(min_length=1, description="Short name the player sees on the board.")
    explanation: str = Field(min_length=1, description="A paragraph: the mechanism and what it would show.")
    true: bool = Field(False, description="Whether this is (part of) the real cause.")
    aliases: list[str] = Field(default_factory=list, description="Other ids accepted for this hypothesis "
                               "(give every hypothesis aliases or none: aliases on the truth alone point at it).")
    world: list[FaultSpec] | None = Field(
        None,
        description="The faults that would make this hypothesis true. The incident is simulated once per "
        "hypothesis with these in place of `faults` (same seed, workload and noise), and a query is evidence "
        "against this hypothesis when its result there differs from the real one. Required on every false "
        "hypothesis; a true hypothesis's world is the incident's own `faults`, so it has none.",
    )
    members: list[list[FaultSpec]] = Field(
        default_factory=list,
        description="Other forms this false hypothesis could have taken, which the player cannot know: a "
        "milder or stronger severity, another onset, another replica. Each is a fault list like `world`; "
        "the hypothesis's family of worlds is `world` on the player's traffic and on another draw, then one "
        "world per member on a draw of its own. Every member must show the page (`validate --deep`), and a "
        "query rules the hypothesis out only when what the player saw lies outside everything the family "
        "produced; with members, the size of a level counts too (docs/authoring.md, 'Families').",
    )
    keeps: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=list,
        description="Indices into `faults` of the truth's rolling restarts (a config_change, model_rollout, "
        "seeds_unpinned or batch_invariance_off) that this false hypothesis's worlds keep without their change: "
        "the same replicas restart at the same times (and back at until_s) with no knob or version changed, as "
        "a planned restart would. Every world of the family (world and members) keeps them; with `keeps`, "
        "`world` may be empty.",
    )


class Reveal(_Strict):
    """The telemetry a signal lives in: querying it counts as having seen the signal."""

    table: str = Field(json_schema_extra=_str_enum(TABLE_COLUMNS))
    columns: list[str] = Field(min_length=1)
    replica: ReplicaRef | None = None
    window: WindowPair | None = None
    counts: bool = Field(False, description="The signal is in how many rows there are (arrivals, requests "
                         "per replica): the query must also count this table's rows (count(*) or count(col)).")


class ExpectValue(_Strict):
    """The reference query's cell at (row, column) compared with value (== on floats is approximate)."""

    column: str
    op: Literal[">=", "<=", ">", "<", "==", "!="]
    value: bool | int | float | str
    row: int = Field(0, ge=0)


class ExpectRows(_Strict):
    rows_at_least: int = Field(ge=0, description="The reference query returns at least this many rows.")


def _expect_tag(value: Any) -> str:
    rows = isinstance(value, ExpectRows) or (isinstance(value, Mapping) and "rows_at_least" in value)
    return "expect_rows" if rows else "expect_value"


Expect = Annotated[
    Annotated[ExpectValue, Tag("expect_value")] | Annotated[ExpectRows, Tag("expect_rows")],
    Discriminator(_expect_tag),
]


class Signal(_Strict):
    """Evidence the player can find, and how likely it is under each hypothesis."""

    id: str = Field(pattern=ID_RE)
    shows: str = Field(min_length=1, description="What the signal looks like, one sentence.")
    reveals: list[Reveal] = Field(min_length=1)
    query: str = Field(min_length=1, description="Reference SQL that exhibits the signal.")
    expect: Expect
    likelihoods: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict,
        description=f"P(signal | hypothesis) by hypothesis id; omitted ids get {DEFAULT_LIKELIHOOD}.",
    )

    def likelihood(self, hypothesis_id: str) -> float:
        """P(this signal's pattern is seen | hypothesis), DEFAULT_LIKELIHOOD when not listed."""
        return self.likelihoods.get(hypothesis_id, DEFAULT_LIKELIHOOD)


class HintSpec(_Strict):
    text: str = Field(min_length=1)
    cost: int = Field(ge=0, description="Score points the hint costs.")


class Debrief(_Strict):
    summary: str = Field(min_length=1)
    causal_chain: list[str] = Field(min_length=1, description="Cause to symptom, one step per entry.")
    settling_queries: list[str] = Field(default_factory=list, description="SQL that settles the diagnosis.")
    mitigation: str = Field(min_length=1)


class VariableSpec(_Strict):
    """A variable drawn per seed (incidents/variants.py): exactly one of choice, range, replica.

    Elsewhere in the file, a string that is exactly "{{name}}" becomes the drawn value with its
    type; inside longer text {{name}} is interpolated. Filters: {{name|replica}} -> vllm-<n>,
    {{name|ts}} -> SQL timestamp text of t0 + value seconds, {{name|hhmm}} -> HH:MM of that
    instant, {{name|pct}} -> a fraction as a percentage.
    """

    choice: list[Any] | None = Field(None, min_length=1, description="Draw one of these values.")
    range: tuple[float, float] | None = Field(
        None, description="[lo, hi], both included; ints when lo, hi (and step) are ints."
    )
    step: float | None = Field(None, gt=0, description="Range only: draw lo + k * step up to hi.")
    replica: Literal[True] | None = Field(None, description="true: any replica index of the fleet.")
    other_than: str | list[str] | None = Field(
        None, description="Choice, replica or stepped range: draw a value none of these variables drew (e.g. a "
        "different replica from another replica variable). Drawn after them.")

    @model_validator(mode="after")
    def _one_kind(self) -> VariableSpec:
        kinds = [k for k in ("choice", "range", "replica") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of choice, range, replica")
        if self.step is not None and self.range is None:
            raise ValueError("step belongs to a range")
        return self


class Inject(_Strict):
    """An update the player receives during the investigation, once, when it falls due.

    Due `after_s` wall-clock seconds after the investigation started, or once the player has
    run `after_queries` queries (exactly one of the two).
    """

    after_s: float | None = Field(None, ge=0, description="Wall-clock seconds into the investigation.")
    after_queries: int | None = Field(None, ge=1, description="Due once the player has run this many queries.")
    sender: str = Field(alias="from", min_length=1, description="Who sends the update (a person or a team).")
    text: str = Field(min_length=1, description="The update, in the sender's words.")

    @model_validator(mode="after")
    def _one_trigger(self) -> Inject:
        if (self.after_s is None) == (self.after_queries is None):
            raise ValueError("give exactly one of after_s (seconds) and after_queries (a query count)")
        return self


class Mitigation(_Strict):
    """After the diagnosis: what recovery means, which actions bring it and which plausible ones do not.

    The simulation continues `horizon_s` seconds past the decision (the end of the window) with the actions
    applied at the decision; `recovery` claims are read over that continuation (their windows are seconds
    from the window's start, so past `window.duration_s`). Actions are written as in line mode
    (incidents/mitigation.py): `rollback`, `set max_num_seqs=128`, `drain vllm-2`, `restart all`, ...
    """

    horizon_s: float = Field(1200.0, ge=300, le=3600, description="Seconds simulated after the decision.")
    actions: list[Literal["rollback", "set", "restart", "drain", "router", "shed"]] | None = Field(
        None, description="The actions this incident offers (absent: all of them).")
    recovery: list[Symptom] = Field(min_length=1, description="Claims that hold when the fleet has recovered "
                                    "(each must hold after every right action list and not after the wrong ones).")
    right: list[list[str]] = Field(min_length=1, description="Action lists that recover the fleet.")
    wrong: list[list[str]] = Field(min_length=1, description="Plausible action lists that do not.")
    cost_note: str | None = Field(None, description="What the debrief says about the wrong actions' cost.")

    @field_validator("right", "wrong")
    @classmethod
    def _lists_not_empty(cls, lists: list[list[str]]) -> list[list[str]]:
        # each action is checked where it is written (incidents.crosscheck), with its line and column
        if any(not actions for actions in lists):
            raise ValueError("an action list needs at least one action")
        return lists


class Incident(_Strict):
    """One incident: fleet, workload, faults and noise to simulate, and the puzzle built on top."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        title="servedrill incident",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    id: str = Field(pattern=SLUG_RE, description="Slug, equal to the file name without .yaml.")
    title: str = Field(min_length=1)
    difficulty: int = Field(ge=0, le=5)
    tags: list[str] = Field(default_factory=list, description="Symptom family and interview topics.")
    time_limit_s: float | None = Field(None, gt=0, description="Wall-clock seconds the player gets.")
    query_budget: int | None = Field(None, ge=1, description="Queries the player may run.")
    briefing: Briefing
    window: Window
    fleet: Fleet
    workload: Workload
    faults: list[FaultSpec] = Field(default_factory=list)
    noise: list[NoiseEvent] = Field(default_factory=list, description="Benign events that happen anyway.")
    symptoms: list[Symptom] = Field(default_factory=list)
    hypotheses: list[Hypothesis] = Field(description=f"At least {MIN_HYPOTHESES}, at least one true.")
    signals: list[Signal] = Field(description=f"At least {MIN_SIGNALS}.")
    hints: list[HintSpec] = Field(default_factory=list, description="Ordered: cheapest first is usual.")
    debrief: Debrief
    variables: dict[str, VariableSpec] = Field(
        default_factory=dict, description="Values drawn per seed; use them as {{name}} anywhere else in the file."
    )
    injects: list[Inject] = Field(
        default_factory=list, description="Updates delivered to the player during the investigation."
    )
    mitigation: Mitigation | None = Field(
        None, description="The mitigation phase after the diagnosis (docs/mitigation.md); absent: none."
    )

    @model_validator(mode="after")
    def _cross_references(self, info: ValidationInfo) -> Incident:
        # the loader reports these itself, with line numbers, so it switches this off
        if info.context and info.context.get("skip_cross_checks"):
            return self
        issues = cross_check(self.model_dump(mode="python"))
        if issues:
            raise ValueError("; ".join(str(i) for i in issues))
        return self

    def hypothesis_ids(self) -> dict[str, str]:
        """Every accepted name (id or alias) -> the hypothesis id it stands for."""
        names: dict[str, str] = {}
        for h in self.hypotheses:
            names[h.id] = h.id
            for alias in h.aliases:
                names[alias] = h.id
        return names

    def replica_names(self) -> list[str]:
        return [f"vllm-{i}" for i in range(self.fleet.replicas)]


# ---------------------------------------------------------------- JSON schema


def incident_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of an incident file, with field descriptions for editors."""
    return Incident.model_json_schema(mode="validation")


def schema_text() -> str:
    return json.dumps(incident_json_schema(), indent=2) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> None:
    """Write the JSON Schema to `path` (default incidents/schema.json)."""
    path.write_text(schema_text(), encoding="utf-8")


if __name__ == "__main__":
    write_schema()
    print(f"wrote {SCHEMA_PATH}")
