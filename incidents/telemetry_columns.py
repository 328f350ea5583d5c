"""The telemetry tables the player can query, their columns and column types, and the aggregates and
comparisons a symptom may use on them (the tables and columns themselves: incidents.telemetry_schema).
"""

from __future__ import annotations

from typing import Literal

# the tables, columns and types are written once, in incidents.telemetry_schema
from incidents.telemetry_schema import COLUMN_TYPES, OPTIONAL_COLUMNS, TABLE_COLUMNS

__all__ = ["COLUMN_TYPES", "NUMERIC_AGGREGATES", "NUMERIC_TYPES", "OPTIONAL_COLUMNS", "TABLE_COLUMNS",
           "TIME_AGGREGATES", "TWO_SIDED", "Aggregate", "Compare"]

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
