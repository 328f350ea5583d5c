"""What a query shows (`telemetry_gen.evidence`): features of a result and when two worlds differ
beyond the noise between two seeds of one world."""

from __future__ import annotations

from datetime import datetime, timedelta

from telemetry_gen.evidence import MIN_RELATIVE, Shown, describe_feature, relative_gap, separates, shown

T0 = datetime(2026, 1, 1, 9, 0, 0)


def by_replica(values: dict[str, float]) -> Shown:
    return shown(["replica", "p90_prefill_s"], [(r, v) for r, v in values.items()])


def test_empty_results_show_nothing_and_separate_nothing() -> None:
    empty = shown(["replica", "prefill_s"], [])
    assert empty.empty and empty.features == {}
    assert not separates(empty, by_replica({"vllm-0": 1.0}), empty)


def test_a_group_far_beyond_the_noise_separates() -> None:
    truth = by_replica({"vllm-0": 0.10, "vllm-1": 0.25})
    noise = by_replica({"vllm-0": 0.11, "vllm-1": 0.24})
    rival = by_replica({"vllm-0": 0.10, "vllm-1": 0.10})
    assert separates(truth, rival, noise)


def test_a_difference_within_the_noise_does_not_separate() -> None:
    truth = by_replica({"vllm-0": 0.10, "vllm-1": 0.20})
    noise = by_replica({"vllm-0": 0.10, "vllm-1": 0.15})
    rival = by_replica({"vllm-0": 0.10, "vllm-1": 0.17})
    assert not separates(truth, rival, noise)


def test_tiny_differences_never_separate_even_without_noise() -> None:
    truth = by_replica({"vllm-0": 1.0})
    rival = by_replica({"vllm-0": 1.0 + MIN_RELATIVE / 2})
    assert not separates(truth, rival, truth)


def test_a_group_only_one_world_has_is_a_full_difference() -> None:
    truth = shown(["message", "n"], [("Xid 79: GPU has fallen off the bus", 3), ("started", 4)])
    rival = shown(["message", "n"], [("started", 4)])
    noise = shown(["message", "n"], [("Xid 79: GPU has fallen off the bus", 2), ("started", 4)])
    assert separates(truth, rival, noise)
    # a group the noise world lacks depends on luck, so it cannot separate
    assert not separates(truth, rival, rival)


def test_identifiers_are_not_evidence() -> None:
    truth = shown(["request_id", "n"], [(1, 5), (2, 5)])
    rival = shown(["request_id", "n"], [(901, 5), (902, 5)])
    assert not separates(truth, rival, truth)


def test_time_stamps_count_from_the_incident_start() -> None:
    early = shown(["first_error"], [(T0 + timedelta(seconds=300),)], T0)
    late = shown(["first_error"], [(T0 + timedelta(seconds=900),)], T0)
    assert separates(early, late, early)
    # measured from 1970 the same shift would be a rounding error
    assert not separates(shown(["t"], [(T0 + timedelta(seconds=300),)]),
                         shown(["t"], [(T0 + timedelta(seconds=900),)]),
                         shown(["t"], [(T0 + timedelta(seconds=300),)]))


def test_relative_gap_and_descriptions() -> None:
    assert relative_gap(1.0, 1.0) == 0.0
    assert relative_gap(None, 2.0) == 1.0
    assert relative_gap(0.0, 0.0) == 0.0
    assert describe_feature((("vllm-1",), "prefill_s@0.9")) == "p90 of prefill_s for vllm-1"
    assert describe_feature(((), "#rows")) == "row count"
