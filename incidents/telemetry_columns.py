"""The telemetry tables the player can query, their columns and column types, and the aggregates and
comparisons a symptom may use on them. Must match telemetry_gen's output.
"""

from __future__ import annotations

from typing import Literal

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
    ),
    "metrics": ("ts", "replica", "name", "value"),
    "events": ("ts", "replica", "kind", "component", "detail", "old_value", "new_value"),
    "logs": ("ts", "replica", "level", "component", "message"),
    "evals": ("ts", "model_version", "task", "score", "n", "ci_low", "ci_high"),
    "probes": ("ts", "replica", "probe_id", "prompt_id", "batch_size", "output_hash", "logprob_drift"),
    # a view over DuckDB's own column list, made by telemetry_gen.store
    "catalog": ("table", "column", "type", "description", "table_description"),
}

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
