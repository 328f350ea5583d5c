"""What a query shows (`telemetry_gen.proving.evidence`): the features a reader reads, and when what the player
saw rules a rival's whole family of worlds out beyond chance."""

from __future__ import annotations

from datetime import datetime, timedelta

from telemetry_gen.proving.evidence import (
    LEVEL,
    ONSET,
    PEAK_LEVEL,
    PEER,
    PRESENT,
    TOP,
    Feature,
    Shown,
    cite,
    describe_reading,
    ruling,
    shown,
    template,
)

T0 = datetime(2026, 1, 1, 9, 0, 0)


def by_replica(values: dict[str, float], column: str = "p90_prefill_s") -> Shown:
    return shown(["replica", column], [(r, v) for r, v in values.items()])


def rules_out(seen: Shown, truth_others: list[Shown], rival: list[Shown], span_s: float = 3600.0) -> bool:
    return bool(ruling(seen, truth_others, rival, span_s=span_s))


def test_empty_results_show_nothing_and_rule_out_nothing() -> None:
    empty = shown(["replica", "prefill_s"], [])
    assert empty.empty and empty.features == {}
    assert not rules_out(empty, [empty], [by_replica({"vllm-0": 1.0})])


def test_a_group_against_its_peers_rules_out_a_rival_whose_groups_are_alike() -> None:
    seen = by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.30})
    draws = [by_replica({"vllm-0": 0.11, "vllm-1": 0.10, "vllm-2": 0.33})]
    rival = [by_replica({"vllm-0": 0.20, "vllm-1": 0.21, "vllm-2": 0.20}),
             by_replica({"vllm-0": 0.25, "vllm-1": 0.24, "vllm-2": 0.26})]
    readings = ruling(seen, draws, rival)
    assert readings and all(r.feature.kind in (PEER, TOP) for r in readings)
    assert any("vllm-2" in describe_reading(r) for r in readings)


def test_a_magnitude_is_read_as_a_direction_never_as_a_size() -> None:
    # the same shape at another level: a reader does not know how severe the rival would have been
    seen = by_replica({"vllm-0": 0.10, "vllm-1": 0.30})
    draws = [by_replica({"vllm-0": 0.10, "vllm-1": 0.31})]
    for far in (2.0, 40.0):
        scaled = [by_replica({"vllm-0": 0.10 * far, "vllm-1": 0.30 * far}),
                  by_replica({"vllm-0": 0.11 * far, "vllm-1": 0.31 * far})]
        assert not rules_out(seen, draws, scaled)
    # zero against some is a reading: "no preemptions at all"
    none = shown(["preemptions"], [(0,)])
    some = [shown(["preemptions"], [(120,)]), shown(["preemptions"], [(80,)])]
    assert rules_out(none, [none, none], some)
    # so is the direction of a group against its siblings: up where the rival's are level
    flat = [by_replica({"vllm-0": 0.20, "vllm-1": 0.21}), by_replica({"vllm-0": 0.25, "vllm-1": 0.24})]
    assert rules_out(seen, draws, flat)
    # and a ratio the player computed (a before/after "speedup") is a level: a constant of the player's
    # choosing could make any magnitude look like 1, so it is not read as one
    ratio = shown(["speedup"], [(2.9,)])
    assert not rules_out(ratio, [shown(["speedup"], [(2.7,)])], [shown(["speedup"], [(1.0,)])] * 2)


def test_another_direction_needs_every_truth_draw_clear_of_the_rival() -> None:
    # flat (0.97x its siblings) against a rival that reads up (1.12-1.15x): another direction only when
    # the truth's other draws stand as clear of the rival; a draw at 1.05x says flat was near the line
    seen = by_replica({"vllm-0": 0.97, "vllm-1": 1.0, "vllm-2": 1.0})
    steady = [by_replica({"vllm-0": 0.98, "vllm-1": 1.0, "vllm-2": 1.0})]
    leaning = [by_replica({"vllm-0": 1.05, "vllm-1": 1.0, "vllm-2": 1.0})]
    rival = [by_replica({"vllm-0": 1.12, "vllm-1": 1.0, "vllm-2": 1.0}),
             by_replica({"vllm-0": 1.15, "vllm-1": 1.0, "vllm-2": 1.0})]
    key = Feature(PEER, ("vllm-0",), "p90_prefill_s|0")
    assert any(r.feature == key for r in ruling(seen, steady, rival))
    assert not any(r.feature == key for r in ruling(seen, leaning, rival))


def test_a_number_cast_to_text_is_a_number() -> None:
    seen = shown(["v"], [("0.129",)])
    assert Feature("level", (), "v") in seen.features and not seen.cells
    draws = [shown(["v"], [("0.131",)])]
    rival = [shown(["v"], [("0.150",)]), shown(["v"], [("0.152",)])]
    # text of another number is not a group only the rival shows
    assert not rules_out(seen, draws, rival)


def test_numbers_inside_text_are_values_and_names_keep_their_digits() -> None:
    assert template("CUDA out of memory. 0.75 GiB is free (3 tries)") == (
        "CUDA out of memory. # GiB is free (# tries)", [0.75, 3.0])
    assert template("vllm-3 restarted at image 0.12.1-patch3") == ("vllm-3 restarted at image 0.12.1-patch3", [])
    seen = shown(["message"], [("OOM: 0.75 GiB is free",)])
    rival = shown(["message"], [("OOM: 0.63 GiB is free",)])
    assert seen.cells == rival.cells
    assert not rules_out(seen, [shown(["message"], [("OOM: 0.70 GiB is free",)])], [rival, rival])


def test_presence_rules_out_only_when_every_draw_agrees() -> None:
    with_change = shown(["kind", "n"], [("deploy", 2), ("config_change", 1)])
    without = shown(["kind", "n"], [("deploy", 2)])
    # the player saw no config change, no other draw of the truth has one, every rival world has one
    readings = ruling(without, [without, without], [with_change, with_change])
    assert readings and readings[0].feature == Feature(PRESENT, ("config_change",), "kind")
    assert "no kind 'config_change'" in describe_reading(readings[0])
    # a group one of the truth's own draws shows is luck
    assert not rules_out(without, [without, with_change], [with_change, with_change])
    # a rival member without it: the rival can produce what the player saw
    assert not rules_out(without, [without], [with_change, without])
    # but not the other way round: a change every draw of the truth shows and no world of the rival does
    # is something else that happened, which the rival does not forbid
    assert not rules_out(with_change, [with_change, with_change], [without, without])
    # in a result cut at the row cap, a missing text may be in the rows not shown
    cut = shown(["kind", "n"], [("deploy", 2)], truncated=True)
    assert not rules_out(cut, [cut], [with_change, with_change])


def test_a_reading_the_truths_other_draws_do_not_share_is_chance() -> None:
    seen = by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.30})
    rival = [by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.10}),
             by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.105})]
    steady = [by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.31})]
    noisy = [by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.104})]
    assert rules_out(seen, steady, rival)
    assert not rules_out(seen, noisy, rival)
    # a rival member that stands out the same way: the rival can produce what the player saw
    assert not rules_out(seen, steady, [rival[0], by_replica({"vllm-0": 0.1, "vllm-1": 0.1, "vllm-2": 0.2})])


def test_a_member_that_failed_does_not_count_and_without_draws_nothing_is_ruled_out() -> None:
    seen = by_replica({"vllm-0": 0.10, "vllm-1": 0.10, "vllm-2": 0.30})
    rival = [by_replica({"vllm-0": 0.20, "vllm-1": 0.21, "vllm-2": 0.20})]
    failed = Shown({}, -1)
    assert not rules_out(seen, [failed], rival)
    assert not rules_out(seen, [seen], [failed])
    assert rules_out(seen, [seen, failed], [*rival, failed])


def test_presence_is_read_column_by_column() -> None:
    cols = ["replica", "kind", "knob", "detail"]
    seen = shown(cols, [("vllm-0", "config_change", "max_num_seqs", "raised for the peak")])
    rival = shown(cols, [("vllm-0", "config_change", "max_num_seqs", "routine")])
    # the same change with another note: a reader sees a max_num_seqs change in both
    readings = ruling(seen, [seen], [rival, rival])
    assert readings and {r.feature.column for r in readings} == {"detail"}
    other_replica = shown(cols, [("vllm-1", "config_change", "max_num_seqs", "raised for the peak")])
    # the rival needs the change on vllm-1 and the log has none there (vllm-0's is something else)
    readings = ruling(seen, [seen], [other_replica] * 2)
    assert [(r.feature.column, r.feature.key) for r in readings] == [("replica", ("vllm-1",))]


def test_identifiers_are_not_evidence() -> None:
    seen = shown(["request_id", "n"], [(1, 5), (2, 5)])
    rival = shown(["request_id", "n"], [(901, 5), (902, 5)])
    assert not rules_out(seen, [seen], [rival, rival])


def series(replica: str, values: list[float], step_s: float = 300.0) -> list[tuple[str, datetime, float]]:
    return [(replica, T0 + timedelta(seconds=i * step_s), v) for i, v in enumerate(values)]


def test_a_series_is_read_in_time_order_when_it_starts_to_move() -> None:
    cols = ["replica", "t", "fb_used"]
    early = shown(cols, series("vllm-0", [70, 70, 71, 72, 74, 76, 78, 80]), T0)
    late = shown(cols, series("vllm-0", [70, 70, 70, 70, 70, 70, 70, 80]), T0)
    onset = Feature(ONSET, ("vllm-0",), "fb_used")
    assert early.features[onset] < late.features[onset]
    # the same values in another order are another shape
    shuffled = shown(cols, [("vllm-0", T0 + timedelta(seconds=i * 300), v)
                            for i, v in enumerate([80, 78, 76, 74, 72, 71, 70, 70])], T0)
    assert shuffled.features[onset] != early.features[onset]
    # when a rival would have begun is known only for a family that spans declared onsets
    assert not ruling(early, [early], [late, late], span_s=1200)
    readings = ruling(early, [early], [late, late], span_s=1200, sized=True)
    assert any(r.feature.kind == ONSET for r in readings)
    assert "leaves its early level at 09:" in describe_reading(
        next(r for r in readings if r.feature.kind == ONSET), T0)


def test_which_group_stands_out_counts_only_when_it_stands_clear() -> None:
    close = by_replica({"a": 1.0, "b": 1.05, "c": 1.1})
    assert Feature(TOP, (), "p90_prefill_s") not in close.features
    clear = by_replica({"a": 1.0, "b": 1.05, "c": 2.0})
    assert clear.features[Feature(TOP, (), "p90_prefill_s")] == "c"


def evals(gsm8k_bf16: float, columns: tuple[str, str] = ("score", "ci_low")) -> Shown:
    """An eval table: two versions x three tasks, each score with the lower end of its interval (0.025
    below). Only bf16's gsm8k score moves with the argument."""
    scores = {("bf16", "gsm8k"): gsm8k_bf16, ("fp8", "gsm8k"): 0.83, ("bf16", "mmlu"): 0.84,
              ("fp8", "mmlu"): 0.85, ("bf16", "chat"): 0.81, ("fp8", "chat"): 0.82}
    rows = []
    for (version, task), score in scores.items():
        values = {"score": score, "ci_low": score - 0.025}
        rows.append((version, task, values[columns[0]], values[columns[1]]))
    return shown(["model_version", "task", *columns], rows)


def test_the_debrief_cites_the_column_the_query_put_first() -> None:
    # the truth: bf16's gsm8k stands above its peers; the rival's worlds: every row alike. ci_low's ratios
    # run larger than score's only because its values are smaller, so its margin is the larger one
    seen, draws = evals(0.945), [evals(0.944)]
    rival = [evals(0.83), evals(0.835)]
    readings = ruling(seen, draws, rival)
    best = readings[0].feature.column.partition("|")[0]
    assert best == "ci_low"
    cited = cite(readings, seen)
    assert cited.feature.column.startswith("score")
    assert describe_reading(cited).startswith("score for bf16, gsm8k is")
    # the player who put ci_low first asked to read it first
    flipped = evals(0.945, ("ci_low", "score"))
    readings = ruling(flipped, [evals(0.944, ("ci_low", "score"))],
                      [evals(0.83, ("ci_low", "score")), evals(0.835, ("ci_low", "score"))])
    assert cite(readings, flipped).feature.column.startswith("ci_low")
    # a text present or missing is cited before any number, whatever its column
    with_change = shown(["model_version", "task", "score"], [("bf16", "gsm8k", 0.945), ("bf16", "mmlu", 0.84),
                                                            ("bf16", "chat", 0.81)])
    rival_kv = [shown(["model_version", "task", "score"], [("kv8", "gsm8k", 0.83), ("kv8", "mmlu", 0.84),
                                                           ("kv8", "chat", 0.81)])] * 2
    readings = ruling(with_change, [with_change], rival_kv)
    assert cite(readings, with_change).feature.kind == PRESENT


def test_shown_round_trips_through_json() -> None:
    seen = shown(["replica", "t", "v"], series("vllm-0", [1, 2, 3, 4, 5]), T0)
    assert Shown.from_json(seen.to_json()) == seen


def test_the_worked_reading_in_docs_scoring() -> None:
    """docs/scoring.md's "A worked reading": keep the page and the rule in step."""
    from pathlib import Path

    def clocks(slow: float, others: tuple[float, float, float] = (1980.0, 1980.0, 1980.0)) -> Shown:
        rows = [("vllm-0", others[0]), ("vllm-1", others[1]), ("vllm-2", others[2]), ("vllm-3", slow)]
        return shown(["replica", "min_sm_clock_mhz"], rows)

    seen = clocks(780.0)
    draws = [clocks(792.0), clocks(772.0)]
    router = [clocks(1980.0), clocks(1965.0, (1980.0, 1985.0, 1990.0))]
    restart = [clocks(337.0), clocks(336.0)]
    key = Feature(PEER, ("vllm-3",), "min_sm_clock_mhz|0")
    assert round(float(seen.features[key]), 2) == 0.39
    against_router = ruling(seen, draws, router)
    reading = next(r for r in against_router if r.feature == key)
    text = describe_reading(reading)
    assert text == "min_sm_clock_mhz for vllm-3 is 0.39x the other rows' (the rival's worlds: 0.99x to 1.00x)"
    # down against down: only the size differs (0.39 against 0.17), and nobody knows what size the
    # restart would have had unless the incident declares its severities
    assert round(float(restart[0].features[key]), 2) == 0.17
    assert not any(r.feature == key for r in ruling(seen, draws, restart))
    declared = [*restart, clocks(200.0)]  # a member: a longer restart
    assert any(r.feature == key for r in ruling(seen, draws, declared))
    # the fleet's mean, on its own, rules out neither
    mean = shown(["mean_ttft_s"], [(0.13,)])
    assert not ruling(mean, [shown(["mean_ttft_s"], [(0.14,)])], [shown(["mean_ttft_s"], [(20.0,)])] * 2)
    doc = (Path(__file__).parent.parent / "docs" / "scoring.md").read_text(encoding="utf-8")
    assert text in doc and "0.39x" in doc and "0.17x" in doc


def test_only_what_the_rival_needs_and_the_result_lacks_counts_as_presence() -> None:
    cols = ["replica", "kind", "detail"]
    truth_log = shown(cols, [("vllm-0", "deploy", "image 0.12"), ("vllm-0", "config_change", "kv_cache_dtype")])
    rival_log = shown(cols, [("vllm-0", "deploy", "image 0.12"), ("vllm-0", "config_change", "max_num_seqs")])
    readings = ruling(truth_log, [truth_log], [rival_log, rival_log])
    # the rival needs a max_num_seqs change the log does not have; the kv_cache_dtype change it does not
    # explain is no evidence against it (a change can happen whatever the cause)
    assert [(r.feature.column, r.feature.key, r.seen) for r in readings] == [("detail", ("max_num_seqs",), 0.0)]
    only_extra = shown(cols, [("vllm-0", "deploy", "image 0.12")])
    assert not ruling(truth_log, [truth_log], [only_extra, only_extra])
    # the same in any table: an error line only the truth shows is something else that happened
    lines = shown(["level", "message"], [("INFO", "ready"), ("ERROR", "NCCL timeout after 600 s")])
    quiet = shown(["level", "message"], [("INFO", "ready")])
    assert not ruling(lines, [lines], [quiet, quiet])
    assert ruling(quiet, [quiet], [lines, lines])  # the rival's error line is missing: that counts
    # ...but not where the result was cut at the row cap: the line may be in the rows not shown
    cut = shown(["level", "message"], [("INFO", "ready")], truncated=True)
    assert not ruling(cut, [cut], [lines, lines])
    # more rows of a kind than the rival needs is not evidence; fewer is, but only where the incident
    # declares the rival's members: a count is a size, and without them nobody knows how many changes a
    # cause adds to those the fleet logs anyway (the change it needs may be one of those seen)
    two = shown(["kind", "replica"], [("config_change", "vllm-0"), ("config_change", "vllm-0")])
    one = shown(["kind", "replica"], [("config_change", "vllm-0")])
    assert not ruling(two, [two], [one, one, one])
    assert not ruling(one, [one], [two, two])
    assert ruling(one, [one], [two, two, two])


def test_numbers_inside_log_lines_are_read_line_by_line_not_as_curves() -> None:
    """A number inside text (with its unit: '1.46x', '12ms') is a value of the line's template, so two
    worlds whose lines differ only in digits show the same text. Across many lines of one template it
    is read as a level (zero or not), never as a trend or against its siblings' medians: nobody plots
    the numbers inside a log dump."""
    assert template("Maximum concurrency for 32,768 tokens per request: 1.46x") == (
        "Maximum concurrency for # tokens per request: #", [32768.0, 1.46])
    assert template("llama31-70b 2026-11 vllm-3 took 12ms") == ("llama31-70b 2026-11 vllm-3 took #", [12.0])
    t0 = datetime(2026, 1, 1, 9)
    lines = [(t0 + timedelta(minutes=m), r, f"Running: {n} reqs") for m in range(10) for r, n in
             (("vllm-0", m * 10), ("vllm-1", 5))]
    seen = shown(["ts", "replica", "message"], lines, t0)
    kinds = {f.kind for f in seen.features if f.column.startswith("message#")}
    assert kinds == {LEVEL, PEAK_LEVEL}
    # one line per group: the numbers are read against each other
    one_each = shown(["replica", "message"], [("vllm-0", "KV cache 120 GiB"), ("vllm-1", "KV cache 40 GiB"),
                                              ("vllm-2", "KV cache 120 GiB")])
    assert any(f.kind == PEER for f in one_each.features)


def test_numbers_inside_hundreds_of_log_lines_are_not_read() -> None:
    """'Waiting: 1 reqs' once among hundreds of 'Waiting: 0 reqs' lines, or whether most of those lines read
    zero, is found by asking for it (a WHERE, a max, an average), not by reading a dump, as a missing line
    is: in a group longer than ABSENCE_ROWS a number inside text is no feature, so neither the truth's one
    stray line nor its mostly non-zero lines rule out a rival whose lines read zero. In a group short
    enough to read whole both are read."""
    from telemetry_gen.proving.evidence import ABSENCE_ROWS

    def stats(rows: int, waiting: int, stray: bool = False) -> Shown:
        lines = [("vllm-1", f"Running: 3 reqs, Waiting: {1 if stray and i == rows // 2 else waiting} reqs")
                 for i in range(rows)]
        return shown(["replica", "message"], lines)

    key = ("vllm-1", "Running: # reqs, Waiting: # reqs")
    for rows, readable in ((ABSENCE_ROWS * 4, False), (ABSENCE_ROWS // 2, True)):
        rival = stats(rows, 0)
        for truth in (stats(rows, 0, stray=True), stats(rows, 109)):
            assert (Feature(PEAK_LEVEL, key, "message#2") in truth.features) is readable
            assert (Feature(LEVEL, key, "message#2") in truth.features) is readable
            assert rules_out(truth, [truth, truth], [rival, rival]) is readable


def test_a_boolean_group_is_cited_as_the_grid_prints_it() -> None:
    """The terminal and the browser print true/false; a reading quoting Python's True would cite a text
    the player never saw."""
    seen = shown(["slow", "n"], [(True, 10), (False, 30)])
    assert {key for (_, key) in seen.cells} == {"true", "false"}
    assert all(f.key in (("true",), ("false",)) for f in seen.features)
