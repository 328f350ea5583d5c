"""The observation rule: which signals a query observed, from the tables, columns and filters the
gateway reports (`game.rules.observe`). The validator uses it to check that a signal's own query observes
it; the score itself rests on what queries show on the hypothesis worlds (tests/test_scoring.py)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from game.rules.observe import (
    Read,
    decomposes_latency,
    is_schema_exploration,
    observed_signals,
    read_observes,
    replica_admits,
    ts_bounds,
    window_excluded,
)
from incidents.loader import load_incident
from incidents.spec import Incident, Reveal

DATA = Path(__file__).parent / "data" / "incidents"
T0 = datetime(2025, 3, 4, 9, 0, 0)


@pytest.fixture(scope="module")
def throttle() -> Incident:
    return load_incident(DATA / "drill-slow-replica.yaml")


# ------------------------------------------------------------------ observation rule


@pytest.mark.parametrize(
    ("text", "replica", "admits"),
    [
        ("replica = 'vllm-1'", "vllm-1", True),
        ("replica = 'vllm-0'", "vllm-1", False),
        ("(replica = 'vllm-0')", "vllm-1", False),
        ("replica != 'vllm-0'", "vllm-1", True),
        ("replica <> 'vllm-1'", "vllm-1", False),
        ("replica IN ('vllm-0', 'vllm-2')", "vllm-1", False),
        ("replica IN ('vllm-0', 'vllm-1')", "vllm-1", True),
        ("replica NOT IN ('vllm-1')", "vllm-1", False),
        ("(replica = 'vllm-0') OR (replica = 'vllm-1')", "vllm-1", True),
        ("(replica = 'vllm-0') OR (replica = 'vllm-2')", "vllm-1", False),
        ("lower(replica) = 'vllm-0'", "vllm-1", None),
        ("replica ~~ 'vllm-%'", "vllm-1", None),
        ("(replica = 'vllm-0') OR (ts > '2025-03-04 09:00:00'::TIMESTAMP)", "vllm-1", None),
        ("name = 'vllm-0'", "vllm-1", None),
    ],
)
def test_replica_filters(text: str, replica: str, admits: bool | None) -> None:
    assert replica_admits(text, replica) is admits


@pytest.mark.parametrize(
    ("filters", "window", "excluded"),
    [
        (["ts >= '2025-03-04 09:10:00'::TIMESTAMP"], (0.0, 600.0), True),  # starts exactly at the window end
        (["ts >= '2025-03-04 09:09:59'::TIMESTAMP"], (0.0, 600.0), False),
        (["ts < '2025-03-04 09:05:00'::TIMESTAMP"], (300.0, 600.0), True),  # ends where the window starts
        (["ts <= '2025-03-04 09:05:00'::TIMESTAMP"], (300.0, 600.0), False),
        (["ts >= '2025-03-04 09:01:00'::TIMESTAMP", "ts <= '2025-03-04 09:02:00'::TIMESTAMP"],
         (120.0, 600.0), False),
        (["ts >= '2025-03-04 09:01:00'::TIMESTAMP", "ts < '2025-03-04 09:02:00'::TIMESTAMP"],
         (120.0, 600.0), True),
        # bounds from two scans of one table contradict each other: not excluding
        (["ts < '2025-03-04 09:01:00'::TIMESTAMP", "ts >= '2025-03-04 09:20:00'::TIMESTAMP"],
         (300.0, 600.0), False),
        (["'2025-03-04 09:20:00'::TIMESTAMP <= ts"], (0.0, 600.0), True),
        (["ts BETWEEN '2025-03-04 09:00:00' AND '2025-03-04 09:01:00'"], (300.0, 600.0), True),
        (["ts >= '2025-03-04 09:20:00+00'::TIMESTAMP WITH TIME ZONE"], (0.0, 600.0), True),
        (["epoch(ts) > 1741079000"], (0.0, 600.0), False),
        (["ts >= now() - INTERVAL 1 HOUR"], (0.0, 600.0), False),
        ([], (0.0, 600.0), False),
    ],
)
def test_time_filters(filters: list[str], window: tuple[float, float], excluded: bool) -> None:
    assert window_excluded(ts_bounds(filters, T0), window) is excluded


def test_a_reveal_needs_its_table_and_every_listed_column() -> None:
    reveal = Reveal(table="metrics", columns=["name", "value"])
    assert read_observes(Read("metrics", ("name", "value")), reveal, T0)
    # a column used only in a filter was read too
    assert read_observes(Read("metrics", ("value",), ("name = 'DCGM_FI_DEV_SM_CLOCK'",)), reveal, T0)
    assert not read_observes(Read("metrics", ("value",)), reveal, T0)
    assert not read_observes(Read("metrics", ("value",), ("value > 'name'",)), reveal, T0)  # a literal only
    assert not read_observes(Read("requests", ("name", "value")), reveal, T0)
    assert not read_observes(Read("metrics"), reveal, T0)  # count(*): no columns


def test_a_counting_reveal_needs_a_query_that_counted_rows() -> None:
    reveal = Reveal(table="requests", columns=["replica"], counts=True)
    assert read_observes(Read("requests", ("replica",), counted=True), reveal, T0)
    assert not read_observes(Read("requests", ("replica", "prefill_s")), reveal, T0)  # per-replica means only
    assert not read_observes(Read("requests", (), counted=True), reveal, T0)  # count(*) without the replica
    assert Read.of(Read("requests", ("replica",), counted=True).to_dict()).counted
    assert not Read.of({"table": "requests", "columns": ["replica"]}).counted  # journals from before


def test_replica_and_window_narrow_a_reveal() -> None:
    reveal = Reveal(table="requests", columns=["replica", "ttft_s"], replica="vllm-1",
                    window=(1800.0, 3600.0))
    late = "ts >= '2025-03-04 09:40:00'::TIMESTAMP"
    early = "ts < '2025-03-04 09:20:00'::TIMESTAMP"
    cols = ("replica", "ttft_s")
    assert read_observes(Read("requests", cols, (late,)), reveal, T0)
    assert not read_observes(Read("requests", cols, (early,)), reveal, T0)
    assert not read_observes(Read("requests", cols, ("replica = 'vllm-0'",)), reveal, T0)
    assert read_observes(Read("requests", cols, ("replica = 'vllm-1'", late)), reveal, T0)
    # a self-join comparing two replicas: the gateway merges both scans' filters into one read
    assert read_observes(Read("requests", cols, ("replica = 'vllm-0'", "replica = 'vllm-1'")), reveal, T0)
    index_reveal = Reveal(table="requests", columns=["replica"], replica=1)
    assert not read_observes(Read("requests", ("replica",), ("replica = 'vllm-0'",)), index_reveal, T0)


def test_failed_queries_observe_nothing(throttle: Incident) -> None:
    reads = [{"table": "metrics", "columns": ["name", "value"], "filters": []}]
    assert observed_signals(throttle, reads, ok=True) == ["clock-drop"]
    assert observed_signals(throttle, reads, ok=False) == []


def test_schema_exploration_and_latency_decomposition() -> None:
    assert is_schema_exploration('SELECT "table", "column" FROM catalog', [])
    assert is_schema_exploration("DESCRIBE requests", [])
    assert is_schema_exploration("SELECT * FROM duckdb_columns()", [])
    assert not is_schema_exploration("SELECT 1", [])
    assert not is_schema_exploration("SELECT 'catalog' AS x FROM requests", [Read("requests", ("ts",))])
    assert decomposes_latency([Read("requests", ("queue_s", "prefill_s"))])
    assert decomposes_latency([{"table": "requests", "columns": ["ttft_s"], "filters": ["decode_s > 1"]}])
    assert not decomposes_latency([Read("requests", ("queue_s", "ttft_s"))])
    assert not decomposes_latency([Read("metrics", ("queue_s", "prefill_s"))])
