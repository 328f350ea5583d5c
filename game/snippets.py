"""Starting points for the SQL editor. Pure: each snippet is text built from the incident's window.

The timestamps in snippets are the window's midpoint rounded to a minute: a neutral place for the
player to edit, never a hint at when anything happened."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class Snippet:
    key: str
    title: str
    sql: str


def midpoint(start: dt.datetime, duration_s: float) -> dt.datetime:
    """The window's middle (naive UTC), rounded down to a whole minute."""
    mid = start.replace(tzinfo=None) + dt.timedelta(seconds=duration_s / 2)
    return mid.replace(second=0, microsecond=0)


def snippets(window_start: dt.datetime, duration_s: float) -> list[Snippet]:
    """The snippet menu for an incident whose telemetry starts at `window_start` (UTC) and lasts
    `duration_s` seconds."""
    pivot = midpoint(window_start, duration_s).strftime("%Y-%m-%d %H:%M:%S")
    return [
        Snippet("latency", "Latency decomposition: gateway / queue / prefill / decode by 5-minute bucket", (
            "SELECT time_bucket(INTERVAL '5 minutes', ts) AS bucket,\n"
            "       avg(gateway_s) AS gateway_s, avg(queue_s) AS queue_s, avg(prefill_s) AS prefill_s,\n"
            "       avg(decode_s) AS decode_s,\n"
            "       count(*) AS requests\n"
            "FROM requests\n"
            "WHERE status = 'ok'\n"
            "GROUP BY bucket\n"
            "ORDER BY bucket")),
        Snippet("percentiles", "Per-replica TTFT percentiles over time (1-minute buckets)", (
            "SELECT time_bucket(INTERVAL '1 minute', ts) AS minute, replica,\n"
            "       quantile_cont(ttft_s, 0.5) AS p50_ttft_s, quantile_cont(ttft_s, 0.99) AS p99_ttft_s\n"
            "FROM requests\n"
            "WHERE status = 'ok'\n"
            "GROUP BY minute, replica\n"
            "ORDER BY minute, replica")),
        Snippet("before-after", "Before / after a timestamp, per replica", (
            f"SELECT CASE WHEN ts < TIMESTAMP '{pivot}' THEN 'before' ELSE 'after' END AS period,\n"
            "       replica, count(*) AS requests,\n"
            "       avg(ttft_s) AS mean_ttft_s, quantile_cont(ttft_s, 0.9) AS p90_ttft_s\n"
            "FROM requests\n"
            "WHERE status = 'ok'\n"
            "GROUP BY period, replica\n"
            "ORDER BY replica, period DESC")),
        Snippet("metric", "One metric over time, per replica", (
            "SELECT ts, replica, value\n"
            "FROM metrics\n"
            "WHERE name = 'vllm:num_requests_waiting'\n"
            "ORDER BY ts, replica")),
        Snippet("metric-names", "Which metrics exist", (
            "SELECT name, count(*) AS samples, min(value) AS min, max(value) AS max\n"
            "FROM metrics\n"
            "GROUP BY name\n"
            "ORDER BY name")),
        Snippet("changes", "The change log: deploys, restarts, config changes", (
            "SELECT ts, replica, kind, component, detail, old_value, new_value\n"
            "FROM events\n"
            "ORDER BY ts")),
    ]
