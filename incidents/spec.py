"""The incident format: pydantic models for one incident file, plus cross-reference rules.

An incident is plain data. Times are simulated seconds from t=0 (the wall-clock instant
`window.start`, UTC); token counts are tokens; rates are per second. Every model forbids
unknown keys so a typo is an error rather than a silently ignored field.

Two layers of checking:
- the models check structure and field-local rules (types, ranges, required partners);
- `cross_check` checks what spans sections (ids, engine knobs, fault kinds, tables and
  columns, times against the run length, replica references). It works on raw YAML data as
  well as on dumped models, so the loader can report it even when the structure is broken.

Regenerate `incidents/schema.json` after changing a model: `python -m incidents.spec`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from engine_model.config import ENGINE_KNOBS, KV_DTYPES, WEIGHT_DTYPES, EngineConfig
from engine_model.faults import FAULT_KINDS

SCHEMA_PATH = Path(__file__).resolve().parent / "schema.json"

SLUG_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
ID_RE = r"^[a-z0-9][a-z0-9_-]*$"
REPLICA_NAME_RE = re.compile(r"^vllm-(\d+)$")

MIN_HYPOTHESES = 4
MIN_SIGNALS = 3
DEFAULT_LIKELIHOOD = 0.5
"""Likelihood a signal gets for a hypothesis it does not list: uninformative between 0 and 1."""

# Telemetry tables the player can query, with their columns. Must match telemetry_gen's output.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "requests": (
        "request_id",
        "ts",
        "app",
        "tenant",
        "replica",
        "model",
        "model_version",
        "route",
        "gateway_s",
        "queue_s",
        "prefill_s",
        "decode_s",
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "prompt_tokens",
        "cached_tokens",
        "output_tokens",
        "num_preemptions",
        "status",
        "finish_reason",
        "temperature",
        "seed",
        "output_hash",
        # only when the workload's clients retry (workload.retry, an app's retry, or a client_change fault)
        "attempt",
        "first_request_id",
    ),
    "metrics": ("ts", "replica", "name", "value"),
    "events": ("ts", "replica", "kind", "component", "detail", "old_value", "new_value"),
    "logs": ("ts", "replica", "level", "component", "message"),
    "evals": ("ts", "model_version", "task", "score", "n", "ci_low", "ci_high"),
    "probes": ("ts", "replica", "probe_id", "prompt_id", "batch_size", "output_hash", "logprob_drift"),
    # a view over DuckDB's own column list, made by telemetry_gen.store
    "catalog": ("table", "column", "type", "description", "table_description"),
}

OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {"requests": ("attempt", "first_request_id")}
"""Columns a table has only in some incidents: the clients' attempt columns exist when its clients can retry
(telemetry_gen.clients.declares_clients). Elsewhere the table holds TABLE_COLUMNS without these."""

# DuckDB type of each column name (one name means one type in every table). Used only to bind
# authors' SQL against empty tables, so a mismatch here can at worst hide a type error.
COLUMN_TYPES: dict[str, str] = {
    "request_id": "BIGINT",
    "ts": "TIMESTAMP",
    "app": "VARCHAR",
    "tenant": "VARCHAR",
    "replica": "VARCHAR",
    "model": "VARCHAR",
    "model_version": "VARCHAR",
    "route": "VARCHAR",
    "gateway_s": "DOUBLE",
    "queue_s": "DOUBLE",
    "prefill_s": "DOUBLE",
    "decode_s": "DOUBLE",
    "ttft_s": "DOUBLE",
    "tpot_s": "DOUBLE",
    "e2e_s": "DOUBLE",
    "prompt_tokens": "BIGINT",
    "cached_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "num_preemptions": "BIGINT",
    "status": "VARCHAR",
    "finish_reason": "VARCHAR",
    "temperature": "DOUBLE",
    "seed": "BIGINT",
    "output_hash": "VARCHAR",
    "attempt": "BIGINT",
    "first_request_id": "BIGINT",
    "name": "VARCHAR",
    "value": "DOUBLE",
    "kind": "VARCHAR",
    "component": "VARCHAR",
    "detail": "VARCHAR",
    "old_value": "VARCHAR",
    "new_value": "VARCHAR",
    "level": "VARCHAR",
    "message": "VARCHAR",
    "task": "VARCHAR",
    "score": "DOUBLE",
    "n": "BIGINT",
    "ci_low": "DOUBLE",
    "ci_high": "DOUBLE",
    "probe_id": "BIGINT",
    "prompt_id": "VARCHAR",
    "batch_size": "BIGINT",
    "logprob_drift": "DOUBLE",
    "table": "VARCHAR",
    "column": "VARCHAR",
    "type": "VARCHAR",
    "description": "VARCHAR",
    "table_description": "VARCHAR",
}

Aggregate = Literal[
    "mean", "p50", "p90", "p95", "p99", "max", "min", "sum", "count", "rate", "increase", "distinct", "first", "last"
]
NUMERIC_AGGREGATES: frozenset[str] = frozenset({"mean", "p50", "p90", "p95", "p99", "max", "min", "sum", "increase"})
"""Aggregates that compute on the column's values, so the column must hold numbers."""
TIME_AGGREGATES: frozenset[str] = frozenset({"first", "last"})
"""Aggregates that give the time of the side's first or last row (seconds after t=0), read off `ts`."""
NUMERIC_TYPES: frozenset[str] = frozenset({"DOUBLE", "BIGINT"})
Compare = Literal["ratio_at_least", "ratio_at_most", "difference_at_least", "difference_at_most", "at_least", "at_most"]
TWO_SIDED: frozenset[str] = frozenset({"ratio_at_least", "ratio_at_most", "difference_at_least", "difference_at_most"})
RouterPolicy = Literal["round_robin", "least_outstanding", "affinity"]
ROUTER_POLICIES: tuple[str, ...] = ("round_robin", "least_outstanding", "affinity")
NOISE_KINDS: tuple[str, ...] = ("deploy_event", "traffic_burst", "config_change", "replica_restart")

ReplicaRef = Annotated[
    int | str,
    Field(description='Replica index (0-based) or its name "vllm-<index>".'),
]
Seconds = Annotated[float, Field(ge=0, description="Simulated seconds from t=0.")]


def _str_enum(values: Iterable[str]) -> dict[str, Any]:
    return {"enum": list(values)}


def _type_name(annotation: object) -> str:
    """A dataclass field's type as written ("int"): the annotation string, or the class itself when
    engine_model is compiled (mypyc resolves annotations)."""
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def _knob_properties() -> dict[str, Any]:
    """JSON schema of an {engine knob: value} mapping, typed per knob for editor completion."""
    json_types = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}
    props = {f.name: {"type": json_types.get(_type_name(f.type), "string")} for f in fields(EngineConfig)}
    return {"properties": props, "additionalProperties": False}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _window_pair(value: tuple[float, float]) -> tuple[float, float]:
    start, end = value
    if start < 0:
        raise ValueError("a window starts at or after 0 s")
    if end <= start:
        raise ValueError(f"a window [start_s, end_s] needs end_s > start_s, got [{start:g}, {end:g}]")
    return value


WindowPair = Annotated[
    tuple[float, float],
    AfterValidator(_window_pair),
    Field(description="[start_s, end_s): simulated seconds from t=0, start inclusive, end exclusive."),
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
    router: Router = Field(default_factory=Router, description="Router in front of the replicas.")
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


class App(_Strict):
    """One client application: its share of traffic, request shapes and sampling settings."""

    name: str = Field(pattern=ID_RE, description="App name, as in requests.app.")
    weight: float = Field(1.0, gt=0, description="Relative share of the arrival rate.")
    prompt: LengthDist = Field(description="Prompt length distribution (tokens).")
    output: LengthDist = Field(description="Output length distribution (tokens).")
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
    retry: Retry | None = Field(None, description="How this app's clients retry (default: workload.retry).")


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
    apps: Annotated[
        Annotated[Literal["standard"], Tag("apps_standard")] | Annotated[list[App], Tag("apps_list")],
        Discriminator(_apps_tag),
    ] = Field("standard", description='"standard" for the built-in app mix, or a list of apps.')
    retry: Retry | None = Field(None, description="How every app's clients retry unless the app says otherwise "
                                "(absent: clients never retry).")


def _scope_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "scope_all"
    if isinstance(value, ReplicaScope):
        return "scope_replicas"
    if isinstance(value, FractionScope):
        return "scope_fraction"
    if isinstance(value, Mapping):
        if "replicas" in value:
            return "scope_replicas"
        if "fraction" in value:
            return "scope_fraction"
    return None


class ReplicaScope(_Strict):
    replicas: list[ReplicaRef] = Field(min_length=1, description="Replica indices or names.")


class FractionScope(_Strict):
    fraction: float = Field(gt=0, le=1, description="Fraction of replicas, the lowest indices first.")


Scope = Annotated[
    Annotated[Literal["all"], Tag("scope_all")]
    | Annotated[ReplicaScope, Tag("scope_replicas")]
    | Annotated[FractionScope, Tag("scope_fraction")],
    Discriminator(
        _scope_tag,
        custom_error_type="scope_form",
        custom_error_message='scope must be "all", {replicas: [...]} or {fraction: 0..1}',
    ),
]


class FaultSpec(_Strict):
    """A fault injected into the simulation: engine_model.faults.Fault in file form."""

    kind: str = Field(
        description="Fault kind (engine_model.faults.FAULT_KINDS).", json_schema_extra=_str_enum(FAULT_KINDS)
    )
    at_s: Seconds
    until_s: float | None = Field(None, description="Seconds when the fault ends; absent means never.")
    scope: Scope = Field("all", description="Which replicas the fault hits.")
    intensity: float = Field(1.0, ge=0, le=1, description="0 = no effect, 1 = the stated params.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Kind-specific parameters; for config_change, engine knobs and their new values.",
    )


class DeployEvent(_Strict):
    """A deploy of some service that shows up in the events table and changes nothing."""

    kind: Literal["deploy_event"]
    at_s: Seconds
    service: str = Field(min_length=1, description="Service that was deployed.")
    version: str = Field(min_length=1, description="Version label deployed.")
    replica: ReplicaRef | None = None


class TrafficBurstNoise(_Strict):
    """A harmless traffic burst the fleet absorbs."""

    kind: Literal["traffic_burst"]
    at_s: Seconds
    duration_s: float = Field(gt=0, description="Seconds the burst lasts.")
    factor: float = Field(gt=0, description="Arrival-rate multiplier.")


class ConfigChangeNoise(_Strict):
    """A config change with no material effect (the knobs must be engine knobs)."""

    kind: Literal["config_change"]
    at_s: Seconds
    params: dict[str, bool | int | float | str] = Field(
        min_length=1, description="Engine knobs and their new values.", json_schema_extra=_knob_properties()
    )
    scope: Scope = Field("all", description="Which replicas change.")


class ReplicaRestart(_Strict):
    """A routine restart of one replica."""

    kind: Literal["replica_restart"]
    at_s: Seconds
    replica: ReplicaRef


NoiseEvent = Annotated[
    DeployEvent | TrafficBurstNoise | ConfigChangeNoise | ReplicaRestart, Field(discriminator="kind")
]


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


class Incident(_Strict):
    """One incident: fleet, workload, faults and noise to simulate, and the puzzle built on top."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="servedrill incident",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    id: str = Field(pattern=SLUG_RE, description="Slug, equal to the file name without .yaml.")
    title: str = Field(min_length=1)
    difficulty: int = Field(ge=1, le=5)
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


# ---------------------------------------------------------------- cross references


@dataclass(frozen=True)
class Issue:
    """A cross-reference problem at `loc` (keys and list indices into the incident data).

    `on_key` means the mapping key at loc is wrong (point at the key, not its value).
    """

    loc: tuple[str | int, ...]
    message: str
    hint: str | None = None
    on_key: bool = False

    def __str__(self) -> str:
        where = format_loc(self.loc)
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} (hint: {self.hint})" if self.hint else text


def format_loc(loc: Iterable[str | int]) -> str:
    """('faults', 0, 'kind') -> 'faults[0].kind'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A 'did you mean ...?' hint for a misspelt name, or None when nothing is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=3, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


def replica_index(ref: Any) -> int | None:
    """Index of a replica reference (int index or "vllm-N" name); None if it is neither."""
    if isinstance(ref, bool):
        return None
    if isinstance(ref, int):
        return ref
    if isinstance(ref, str):
        match = REPLICA_NAME_RE.match(ref)
        if match:
            return int(match.group(1))
    return None


def known_models_and_gpus() -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(model names, GPU names) from engine_model.profiles, or None while that module is absent."""
    try:
        from engine_model import profiles
    except ImportError:
        return None
    return tuple(getattr(profiles, "MODELS", ())), tuple(getattr(profiles, "GPUS", ()))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


_KNOB_TYPES: dict[str, str] = {f.name: _type_name(f.type) for f in fields(EngineConfig)}


def _knob_type_ok(knob: str, value: Any) -> bool:
    expected = _KNOB_TYPES[knob]
    if expected == "bool":
        return isinstance(value, bool)
    if expected == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "float":
        return _num(value) is not None
    return isinstance(value, str)


def _check_knobs(knobs: dict[str, Any], loc: tuple[str | int, ...], validate: bool) -> list[Issue]:
    issues: list[Issue] = []
    good: dict[str, Any] = {}
    for knob, value in knobs.items():
        if knob not in ENGINE_KNOBS:
            hint = did_you_mean(knob, ENGINE_KNOBS) or "engine knobs are the fields of EngineConfig"
            issues.append(Issue((*loc, knob), f"unknown engine knob '{knob}'", hint, on_key=True))
        elif not _knob_type_ok(knob, value):
            issues.append(Issue((*loc, knob), f"engine knob '{knob}' takes a {_KNOB_TYPES[knob]}, got {value!r}"))
        else:
            good[knob] = value
    if validate and not issues:
        try:
            EngineConfig().with_changes(**good).validate()
        except ValueError as exc:
            issues.append(Issue(loc, f"invalid engine configuration: {exc}"))
    return issues


def _check_replica_ref(ref: Any, n_replicas: int | None, loc: tuple[str | int, ...]) -> list[Issue]:
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        return []  # wrong type: the models report it
    index = replica_index(ref)
    if index is None:
        return [Issue(loc, f"{ref!r} is not a replica: use an index or a name like 'vllm-0'")]
    if n_replicas is not None and not 0 <= index < n_replicas:
        last = f"vllm-{n_replicas - 1}"
        return [Issue(loc, f"replica {ref!r} does not exist: the fleet has vllm-0 .. {last}")]
    return []


def _check_time(value: Any, duration: float | None, loc: tuple[str | int, ...], what: str) -> list[Issue]:
    t = _num(value)
    if t is None or duration is None:
        return []
    if not 0 <= t <= duration:
        return [Issue(loc, f"{what} {value} s is outside the run [0, {duration:g}] s")]
    return []


def _check_window(value: Any, duration: float | None, loc: tuple[str | int, ...]) -> list[Issue]:
    pair = _list(value)
    if len(pair) != 2 or duration is None:
        return []
    end = _num(pair[1])
    if end is not None and end > duration:
        return [Issue(loc, f"window [{pair[0]}, {pair[1]}] ends after the run ({duration:g} s)")]
    return []


def _check_table_column(
    table: Any, columns: list[Any], loc: tuple[str | int, ...], column_loc: tuple[str | int, ...] | None = None
) -> list[Issue]:
    """column_loc: loc of a single `column` field, else columns are a list at loc + ('columns', i)."""
    if not isinstance(table, str):
        return []
    if table not in TABLE_COLUMNS:
        hint = did_you_mean(table, TABLE_COLUMNS) or "tables: " + ", ".join(TABLE_COLUMNS)
        return [Issue((*loc, "table"), f"unknown table '{table}'", hint)]
    issues = []
    known = TABLE_COLUMNS[table]
    for i, column in enumerate(columns):
        if isinstance(column, str) and column not in known:
            where = column_loc if column_loc is not None else (*loc, "columns", i)
            hint = did_you_mean(column, known) or f"{table} has: " + ", ".join(known)
            issues.append(Issue(where, f"table '{table}' has no column '{column}'", hint))
    return issues


def _check_hypotheses(hyps: list[Any], present: bool) -> tuple[list[Issue], set[str], dict[str, str]]:
    issues: list[Issue] = []
    ids: set[str] = set()
    alias_of: dict[str, str] = {}
    seen: dict[str, tuple[str | int, ...]] = {}
    any_true = False
    for i, raw in enumerate(hyps):
        h = _dict(raw)
        hid = h.get("id")
        any_true = any_true or h.get("true") is True
        if isinstance(hid, str):
            if hid in seen:
                issues.append(
                    Issue(("hypotheses", i, "id"), f"hypothesis id '{hid}' is already used at {format_loc(seen[hid])}")
                )
            else:
                seen[hid] = ("hypotheses", i, "id")
            ids.add(hid)
    for i, raw in enumerate(hyps):
        h = _dict(raw)
        for j, alias in enumerate(_list(h.get("aliases"))):
            if not isinstance(alias, str):
                continue
            loc = ("hypotheses", i, "aliases", j)
            if alias in seen:
                issues.append(
                    Issue(
                        loc,
                        f"alias '{alias}' collides with {format_loc(seen[alias])}",
                        "ids and aliases must be unique across all hypotheses",
                    )
                )
            else:
                seen[alias] = loc
                if isinstance(h.get("id"), str):
                    alias_of[alias] = h["id"]
    if not present:
        return issues, ids, alias_of
    with_aliases = [i for i, raw in enumerate(hyps) if _list(_dict(raw).get("aliases"))]
    if with_aliases and len(with_aliases) < len(hyps):
        first_without = next(i for i in range(len(hyps)) if i not in with_aliases)
        issues.append(Issue(("hypotheses", first_without), "some hypotheses have aliases and this one has none",
                            "give every hypothesis aliases or none: aliases on some only point at them",
                            on_key=True))
    for i, raw in enumerate(hyps):
        h = _dict(raw)
        world = h.get("world")
        if h.get("true") is True and world is not None:
            issues.append(Issue(("hypotheses", i, "world"), "a true hypothesis's world is the incident's own faults",
                                "remove `world` here; put the faults under the top-level `faults`", on_key=True))
        elif h.get("true") is not True and world is None:
            issues.append(Issue(("hypotheses", i), f"hypothesis '{h.get('id')}' has no world",
                                "add `world:` with the faults that would make it true (see docs/authoring.md)",
                                on_key=True))
        elif h.get("true") is not True and isinstance(world, list) and not world:
            issues.append(Issue(("hypotheses", i, "world"), "an empty world is the fault-free run, which must not "
                                "show the symptom", "list the faults that would make this hypothesis true"))
    if len(hyps) < MIN_HYPOTHESES:
        issues.append(
            Issue(
                ("hypotheses",),
                f"{len(hyps)} hypotheses; an incident needs at least "
                f"{MIN_HYPOTHESES} (the true cause and plausible distractors)",
                on_key=True,
            )
        )
    if hyps and not any_true:
        issues.append(Issue(("hypotheses",), "no hypothesis has `true: true`; mark the real cause", on_key=True))
    return issues, ids, alias_of


def _check_signals(
    signals: list[Any],
    present: bool,
    hyp_ids: set[str],
    alias_of: dict[str, str],
    n_replicas: int | None,
    duration: float | None,
) -> list[Issue]:
    issues: list[Issue] = []
    if present and len(signals) < MIN_SIGNALS:
        issues.append(
            Issue(("signals",), f"{len(signals)} signals; an incident needs at least {MIN_SIGNALS}", on_key=True)
        )
    seen: dict[str, int] = {}
    for i, raw in enumerate(signals):
        s = _dict(raw)
        sid = s.get("id")
        if isinstance(sid, str):
            if sid in seen:
                issues.append(Issue(("signals", i, "id"), f"signal id '{sid}' is already used by signals[{seen[sid]}]"))
            seen.setdefault(sid, i)
        for key in _dict(s.get("likelihoods")):
            if key in hyp_ids:
                continue
            loc = ("signals", i, "likelihoods", key)
            if key in alias_of:
                issues.append(
                    Issue(
                        loc,
                        f"'{key}' is an alias; likelihoods are keyed by hypothesis id",
                        f"use '{alias_of[key]}'",
                        on_key=True,
                    )
                )
            else:
                issues.append(
                    Issue(loc, f"likelihood for unknown hypothesis '{key}'", did_you_mean(key, hyp_ids), on_key=True)
                )
        for j, raw_reveal in enumerate(_list(s.get("reveals"))):
            reveal = _dict(raw_reveal)
            loc = ("signals", i, "reveals", j)
            issues += _check_table_column(reveal.get("table"), _list(reveal.get("columns")), loc)
            issues += _check_replica_ref(reveal.get("replica"), n_replicas, (*loc, "replica"))
            issues += _check_window(reveal.get("window"), duration, (*loc, "window"))
    return issues


def _check_symptoms(symptoms: list[Any], duration: float | None) -> list[Issue]:
    issues: list[Issue] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(symptoms):
        s = _dict(raw)
        sid = s.get("id")
        if isinstance(sid, str):
            if sid in seen:
                issues.append(
                    Issue(("symptoms", i, "id"), f"symptom id '{sid}' is already used by symptoms[{seen[sid]}]")
                )
            seen.setdefault(sid, i)
        metric = _dict(s.get("metric"))
        issues += _check_table_column(
            metric.get("table"),
            [metric.get("column")],
            ("symptoms", i, "metric"),
            column_loc=("symptoms", i, "metric", "column"),
        )
        issues += _check_aggregate_column(s.get("aggregate"), metric, ("symptoms", i, "metric", "column"))
        for side in ("a", "b"):
            window = _dict(s.get(side)).get("window")
            issues += _check_window(window, duration, ("symptoms", i, side, "window"))
    return issues


def _check_aggregate_column(aggregate: Any, metric: dict[str, Any], loc: tuple[str | int, ...]) -> list[Issue]:
    """An aggregate that cannot be computed on the column: it would only fail under `--deep`."""
    table, column = metric.get("table"), metric.get("column")
    if not isinstance(table, str) or table not in TABLE_COLUMNS or column not in TABLE_COLUMNS[table]:
        return []  # the table/column check reports it
    if aggregate in TIME_AGGREGATES and column != "ts":
        return [Issue(loc, f"aggregate '{aggregate}' is the time of the {aggregate} row, read off ts; "
                      f"'{column}' is not a time", "write `column: ts` and select the rows with `where`")]
    kind = COLUMN_TYPES.get(str(column))
    if aggregate in NUMERIC_AGGREGATES and kind not in NUMERIC_TYPES:
        return [Issue(loc, f"aggregate '{aggregate}' needs a numeric column; {table}.{column} is {kind}",
                      "count rows with `count`, different values with `distinct`, times with `first`/`last`")]
    return []


def authoring_issues(data: Mapping[str, Any]) -> list[Issue]:
    """What makes an incident unfit for the library though it loads and plays: checked by `servedrill
    validate` (incidents.loader.check_incident_file), not by load_incident, so a drill fixture with no
    claims still plays.

    An incident must state at least one symptom, and at least one that is evidence (not `context`):
    `--deep` proves only what the symptoms claim, so without one the fault is never shown to matter.
    """
    symptoms = data.get("symptoms")
    if not isinstance(symptoms, list) or not symptoms:
        return [Issue(("symptoms",), "none given; --deep proves only what the symptoms claim, so nothing would "
                      "show that the fault produces what the page says",
                      "add the page's headline as a claim (servedrill new ID --family F writes examples)",
                      on_key="symptoms" in data)]
    if all(_dict(s).get("context") is True for s in symptoms):
        return [Issue(("symptoms",), "every symptom is `context: true`: none is shown to depend on the faults",
                      "state at least one effect of the fault as an evidence claim (without `context`)",
                      on_key=True)]
    return []


def _check_models(fleet: dict[str, Any], faults: list[Any]) -> list[Issue]:
    known = known_models_and_gpus()
    if known is None:
        return []
    models, gpus = known
    issues: list[Issue] = []
    places: list[tuple[Any, Any, tuple[str | int, ...]]] = [(fleet.get("model"), fleet.get("gpu"), ("fleet",))]
    fallback = _dict(_dict(fleet.get("router")).get("fallback"))
    if fallback:
        places.append((fallback.get("model"), fallback.get("gpu"), ("fleet", "router", "fallback")))
    for i, raw in enumerate(faults):
        f = _dict(raw)
        if f.get("kind") == "fallback_routing":
            places.append((_dict(f.get("params")).get("model"), None, ("faults", i, "params")))
    for model, gpu, loc in places:
        if models and isinstance(model, str) and model not in models:
            hint = did_you_mean(model, models) or "models: " + ", ".join(models)
            issues.append(Issue((*loc, "model"), f"unknown model '{model}'", hint))
        if gpus and isinstance(gpu, str) and gpu not in gpus:
            hint = did_you_mean(gpu, gpus) or "GPUs: " + ", ".join(gpus)
            issues.append(Issue((*loc, "gpu"), f"unknown GPU '{gpu}'", hint))
    return issues


def _check_fault(i: int, f: dict[str, Any], n_replicas: int | None, duration: float | None,
                 where: tuple[str | int, ...] = ("faults",)) -> list[Issue]:
    loc: tuple[str | int, ...] = (*where, i)
    issues: list[Issue] = []
    kind = f.get("kind")
    params = _dict(f.get("params"))
    if isinstance(kind, str) and kind not in FAULT_KINDS:
        hint = did_you_mean(kind, FAULT_KINDS) or "kinds: " + ", ".join(FAULT_KINDS)
        issues.append(Issue((*loc, "kind"), f"unknown fault kind '{kind}'", hint))
    elif kind == "config_change":
        if not params:
            issues.append(Issue((*loc, "params"), "config_change needs params: {engine knob: new value}"))
        issues += _check_knobs(params, (*loc, "params"), validate=True)
    elif isinstance(kind, str):
        documented = FAULT_KINDS[kind][1]
        for name, value in params.items():
            if name not in documented:
                hint = did_you_mean(name, documented) or (
                    f"{kind} takes: " + ", ".join(documented) if documented else f"{kind} takes no params"
                )
                issues.append(Issue((*loc, "params", name), f"{kind} has no parameter '{name}'", hint, on_key=True))
            elif name == "weight_dtype" and value not in WEIGHT_DTYPES:
                issues.append(Issue((*loc, "params", name), f"weight_dtype must be one of {', '.join(WEIGHT_DTYPES)}"))
            elif name == "kv_cache_dtype" and value not in KV_DTYPES:
                issues.append(Issue((*loc, "params", name), f"kv_cache_dtype must be one of {', '.join(KV_DTYPES)}"))
            elif name == "policy" and value not in ROUTER_POLICIES:
                issues.append(
                    Issue(
                        (*loc, "params", name),
                        f"policy must be one of {', '.join(ROUTER_POLICIES)}",
                        did_you_mean(str(value), ROUTER_POLICIES),
                    )
                )
    issues += _check_time(f.get("at_s"), duration, (*loc, "at_s"), "at_s")
    until = _num(f.get("until_s"))
    at = _num(f.get("at_s"))
    if until is not None:
        if at is not None and until <= at:
            issues.append(Issue((*loc, "until_s"), f"until_s {f['until_s']} s is not after at_s {f['at_s']} s"))
        else:
            issues += _check_time(f.get("until_s"), duration, (*loc, "until_s"), "until_s")
    issues += _check_scope(f.get("scope"), n_replicas, (*loc, "scope"))
    return issues


def _check_scope(scope: Any, n_replicas: int | None, loc: tuple[str | int, ...]) -> list[Issue]:
    issues: list[Issue] = []
    for j, ref in enumerate(_list(_dict(scope).get("replicas"))):
        issues += _check_replica_ref(ref, n_replicas, (*loc, "replicas", j))
    return issues


def _check_noise(noise: list[Any], n_replicas: int | None, duration: float | None) -> list[Issue]:
    issues: list[Issue] = []
    for i, raw in enumerate(noise):
        event = _dict(raw)
        loc: tuple[str | int, ...] = ("noise", i)
        issues += _check_time(event.get("at_s"), duration, (*loc, "at_s"), "at_s")
        kind = event.get("kind")
        if kind == "config_change":
            issues += _check_knobs(_dict(event.get("params")), (*loc, "params"), validate=True)
            issues += _check_scope(event.get("scope"), n_replicas, (*loc, "scope"))
        elif kind in ("replica_restart", "deploy_event"):
            issues += _check_replica_ref(event.get("replica"), n_replicas, (*loc, "replica"))
    return issues


def _check_workload_times(workload: dict[str, Any], duration: float | None) -> list[Issue]:
    issues: list[Issue] = []
    for section in ("bursts", "ramps"):
        for i, raw in enumerate(_list(workload.get(section))):
            issues += _check_time(_dict(raw).get("start_s"), duration, ("workload", section, i, "start_s"), "start_s")
    return issues


def cross_check(data: Mapping[str, Any]) -> list[Issue]:
    """Problems that span sections of an incident, in file order of sections.

    Works on raw YAML data (partly invalid structure is skipped, not reported: the models
    report it) and on `Incident.model_dump()` output alike.
    """
    fleet = _dict(data.get("fleet"))
    window = _dict(data.get("window"))
    duration = _num(window.get("duration_s"))
    duration = duration if duration is not None and duration > 0 else None
    n_replicas = fleet.get("replicas") if _num(fleet.get("replicas")) is not None else None
    n_replicas = n_replicas if isinstance(n_replicas, int) and n_replicas >= 1 else None

    issues: list[Issue] = []
    engine = _dict(fleet.get("engine"))
    issues += _check_knobs(engine, ("fleet", "engine"), validate=True)
    for knob, field_name in (
        ("tensor_parallel_size", "tensor_parallel"),
        ("pipeline_parallel_size", "pipeline_parallel"),
    ):
        if knob in engine and engine[knob] != fleet.get(field_name, 1):
            issues.append(
                Issue(
                    ("fleet", "engine", knob),
                    f"{knob}={engine[knob]} disagrees with fleet.{field_name}={fleet.get(field_name, 1)}",
                    f"set fleet.{field_name} only",
                )
            )
    faults = _list(data.get("faults"))
    issues += _check_models(fleet, faults)
    issues += _check_workload_times(_dict(data.get("workload")), duration)
    for i, raw in enumerate(faults):
        issues += _check_fault(i, _dict(raw), n_replicas, duration)
    issues += _check_noise(_list(data.get("noise")), n_replicas, duration)
    issues += _check_symptoms(_list(data.get("symptoms")), duration)
    hyps = data.get("hypotheses")
    hyp_issues, hyp_ids, alias_of = _check_hypotheses(_list(hyps), isinstance(hyps, list))
    issues += hyp_issues
    from incidents.leaks import leaks

    for loc, word in leaks(data):
        issues.append(Issue(loc, f"'{word}' names the true cause in text the player sees before the debrief",
                            "describe the symptom here, not the cause"))
    for h_index, raw in enumerate(_list(hyps)):
        for i, fault in enumerate(_list(_dict(raw).get("world"))):
            issues += _check_fault(i, _dict(fault), n_replicas, duration, ("hypotheses", h_index, "world"))
    signals = data.get("signals")
    issues += _check_signals(_list(signals), isinstance(signals, list), hyp_ids, alias_of, n_replicas, duration)
    return issues


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
