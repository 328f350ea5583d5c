"""Starting points for the SQL editor. Pure: each snippet is text built from the incident's window.

A snippet teaches the dialect (time buckets, percentiles, a metric's series, the catalog of metrics) on
the fleet as a whole. Splitting by replica, by app or by time, and choosing what to compare, is the
diagnosis the game scores, so no snippet does it for the player: run alone, the snippets show the page
and the fleet's overall shape, and settle no incident (tests/test_hostile_players.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

METRIC_PLACEHOLDER = "metric name"
"""What the metric snippet filters on until the player types a metric's name: it matches no metric."""


@dataclass(frozen=True)
class Snippet:
    key: str
    title: str
    sql: str


def snippets(window_start: dt.datetime, duration_s: float) -> list[Snippet]:
    """The snippet menu for an incident whose telemetry starts at `window_start` (UTC) and lasts
    `duration_s` seconds."""
    return [
        Snippet("latency", "Where a request's time goes, over the whole window: gateway / API server / queue / "
                "prefill / decode", (
            "SELECT avg(gateway_s) AS gateway_s, avg(api_server_s) AS api_server_s, avg(queue_s) AS queue_s,\n"
            "       avg(prefill_s) AS prefill_s, avg(decode_s) AS decode_s, count(*) AS requests\n"
            "FROM requests\n"
            "WHERE status = 'ok'")),
        Snippet("percentiles", "TTFT percentiles over time, whole fleet (1-minute buckets)", (
            "SELECT time_bucket(INTERVAL '1 minute', ts) AS minute,\n"
            "       quantile_cont(ttft_s, 0.5) AS p50_ttft_s, quantile_cont(ttft_s, 0.99) AS p99_ttft_s\n"
            "FROM requests\n"
            "WHERE status = 'ok'\n"
            "GROUP BY minute\n"
            "ORDER BY minute")),
        Snippet("metric", "One metric over time, per replica (put a name from 'Which metrics exist' before the %)", (
            "SELECT ts, replica, value\n"
            "FROM metrics\n"
            f"WHERE name LIKE '{METRIC_PLACEHOLDER}%'\n"
            "ORDER BY ts, replica")),
        Snippet("metric-names", "Which metrics exist", (
            "SELECT regexp_replace(name, '[{].*', '') AS metric, count(*) AS samples\n"
            "FROM metrics\n"
            "GROUP BY metric\n"
            "ORDER BY metric")),
    ]
