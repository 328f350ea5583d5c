"""The limits on a player's query, in one place: every gateway, sandbox and front end takes its
defaults from here. The row cap itself is telemetry_gen.proving.evidence's: evidence is computed on the rows shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from telemetry_gen.proving.evidence import ROW_CAP

__all__ = ["MAX_RESULT_BYTES", "MEMORY_LIMIT", "PLAYER_LIMITS", "ROW_CAP", "TIMEOUT_S", "QueryLimits"]

TIMEOUT_S = 10.0
"""Seconds a query may run before it is interrupted."""

MEMORY_LIMIT = "512MB"
"""DuckDB's memory limit for a query (a DuckDB size string)."""

MAX_RESULT_BYTES = 4 * 1024 * 1024
"""Bytes a query's result may take to cross from the SQL worker to the game (its rows, column names and
types, pickled, measured row by row as the worker builds the result). A larger result is refused whole
with a one-line message (never cut: what the player sees and what is assessed must agree), like any
failed statement: not journalled, no query spent. Why 4 MB: the largest result of the library's queries
is `SELECT * FROM requests` at the row cap, 235 KB (measured on every library incident), so honest
results stay 17x below it; each game process (one per browser tab) then holds a few tens of MB per
result at most, where results of up to the worker's memory cap (hundreds of MB) used to land."""


@dataclass(frozen=True)
class QueryLimits:
    """The limits one query runs under: `row_cap` in rows, `timeout_s` in seconds, `memory_limit` a
    DuckDB size string ("512MB")."""

    row_cap: int
    timeout_s: float
    memory_limit: str


PLAYER_LIMITS = QueryLimits(row_cap=ROW_CAP, timeout_s=TIMEOUT_S, memory_limit=MEMORY_LIMIT)
"""The limits of the player's queries (and of their re-runs on every world when scoring)."""
