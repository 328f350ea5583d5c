"""Incident variants: drawing per seed, typed substitution, diagnostics at file:line, and the library's
variant incident proving its claims on several seeds."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

from incidents.loader import (
    check_incident_text,
    has_variables,
    iter_library,
    load_incident,
    load_incident_text,
    load_variant,
)
from incidents.variants import VALIDATION_SEEDS, Variable, apply_filter, declared_variables, draw, resolve

DATA = Path(__file__).parent / "data" / "incidents"
GOOD_TEXT = (DATA / "good.yaml").read_text(encoding="utf-8")
LIBRARY = Path(__file__).resolve().parents[1] / "incidents"
SLOW = LIBRARY / "one-slow-replica.yaml"

VARIABLES = """\
variables:
  victim: {replica: true}
  at: {range: [1200, 1500], step: 60}
  clock: {choice: [0.4, 0.5, 0.6]}
  rps: {range: [4, 8]}
"""


def _variant_text(**swaps: str) -> str:
    """good.yaml with VARIABLES declared and the throttle's time, scope and clock drawn from them."""
    text = GOOD_TEXT.replace("briefing:\n", VARIABLES + "briefing:\n", 1)
    text = text.replace("    at_s: 1200\n", '    at_s: "{{at}}"\n', 1)
    text = text.replace("    scope: {fraction: 0.25}", '    scope: {replicas: ["{{victim}}"]}', 1)
    text = text.replace("params: {clock_factor: 0.5}", 'params: {clock_factor: "{{clock}}"}', 1)
    text = text.replace("  base_rps: 6", '  base_rps: "{{rps}}"', 1)
    text = text.replace('since: "around 09:20 UTC"', 'since: "around {{at|hhmm}} UTC"', 1)
    for old, new in swaps.items():
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def _raw(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


def _position(text: str, needle: str) -> tuple[int, int]:
    """1-based line and column of the first `needle` in `text`."""
    at = text.index(needle)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


# ------------------------------------------------------------------ drawing


def test_the_same_seed_gives_the_same_variant_and_seeds_differ() -> None:
    raw = _raw(_variant_text())
    assert resolve(raw, 5).data == resolve(raw, 5).data
    assert resolve(raw, 5).values == resolve(_raw(_variant_text()), 5).values
    draws = [resolve(raw, seed).values for seed in range(40)]
    # every variable moves between seeds, and the replica variable reaches every replica
    for name in ("victim", "at", "clock", "rps"):
        assert len({d[name] for d in draws}) > 1, name
    assert {d["victim"] for d in draws} == {0, 1, 2, 3}
    assert {d["clock"] for d in draws} == {0.4, 0.5, 0.6}


def test_draws_stay_inside_their_declaration_and_keep_their_types() -> None:
    variables, _, problems = declared_variables(_raw(_variant_text()))
    assert problems == []
    for seed in range(60):
        values = draw(variables, "slow-decode", seed)
        assert values["at"] in range(1200, 1501, 60) and type(values["at"]) is int
        assert values["rps"] in range(4, 9) and type(values["rps"]) is int
        assert values["victim"] in range(4) and type(values["victim"]) is int
        assert values["clock"] in (0.4, 0.5, 0.6)


def test_float_ranges_step_or_round_and_include_both_ends() -> None:
    stepped = Variable("f", "range", lo=0.3, hi=0.5, step=0.05)
    assert stepped.values() == [0.3, 0.35, 0.4, 0.45, 0.5]  # float error must not lose the top value
    drawn = {draw({"f": stepped}, "x", seed)["f"] for seed in range(200)}
    assert drawn == set(stepped.values())
    free = Variable("g", "range", lo=1.5, hi=3.0)
    assert free.values() is None
    for seed in range(50):
        g = draw({"g": free}, "x", seed)["g"]
        assert isinstance(g, float) and 1.5 <= g <= 3.0
        assert float(f"{g:.4g}") == g


def test_the_draw_depends_on_incident_and_variable_but_not_on_the_other_variables() -> None:
    at = Variable("at", "range", lo=0, hi=10_000)
    other = Variable("other", "choice", choices=("a", "b"))
    alone = [draw({"at": at}, "one", seed)["at"] for seed in range(20)]
    with_other = [draw({"at": at, "other": other}, "one", seed)["at"] for seed in range(20)]
    elsewhere = [draw({"at": at}, "two", seed)["at"] for seed in range(20)]
    renamed = [draw({"at2": Variable("at2", "range", lo=0, hi=10_000)}, "one", seed)["at2"] for seed in range(20)]
    assert alone == with_other
    assert alone != elsewhere
    assert alone != renamed


# ------------------------------------------------------------------ substitution


def test_whole_scalars_are_typed_and_longer_text_is_interpolated() -> None:
    text = _variant_text()
    for seed in range(4):
        incident = load_incident_text(text, "v.yaml", seed=seed)
        values = resolve(_raw(text), seed).values
        fault = incident.faults[0]
        assert fault.at_s == values["at"]
        assert fault.scope.replicas == [values["victim"]]
        assert fault.params["clock_factor"] == values["clock"]
        assert isinstance(fault.params["clock_factor"], float)
        assert incident.workload.base_rps == values["rps"]
        minutes = values["at"] // 60
        assert incident.briefing.since == f"around {9 + minutes // 60:02d}:{minutes % 60:02d} UTC"


def test_filters() -> None:
    t0 = datetime(2026, 11, 18, 9, 0, 0)
    assert apply_filter("replica", 3, t0) == ("vllm-3", None)
    assert apply_filter("replica", "vllm-2", t0) == ("vllm-2", None)
    assert apply_filter("ts", 900, t0) == ("2026-11-18 09:15:00", None)
    assert apply_filter("ts", 86_400 + 61, t0) == ("2026-11-19 09:01:01", None)
    assert apply_filter("hhmm", 3_599, t0) == ("09:59", None)
    assert apply_filter("pct", 0.35, t0) == ("35%", None)
    assert apply_filter("pct", 0.125, t0) == ("12.5%", None)
    assert apply_filter("replica", 0.5, t0)[1] is not None
    assert apply_filter("ts", "soon", t0)[1] is not None
    assert apply_filter("ts", 5, None)[1] is not None


def test_placeholders_reach_signals_symptoms_and_debrief() -> None:
    text = _variant_text(**{
        "reveals:\n      - {table: metrics, columns: [name, value], replica: vllm-0}":
            'reveals:\n      - {table: metrics, columns: [name, value], replica: "{{victim}}"}',
        "shows: SM clock dropped on vllm-0.": "shows: SM clock dropped on {{victim|replica}}.",
        "WHERE name = 'DCGM_FI_DEV_SM_CLOCK'\"":
            "WHERE name = 'DCGM_FI_DEV_SM_CLOCK' AND ts >= TIMESTAMP '{{at|ts}}'\"",
        "a: {window: [1800, 3600]}": 'a: {window: ["{{at}}", 3600]}',
        "summary: A GPU was throttled.": "summary: The GPU of {{victim|replica}} ran at {{clock|pct}} clock.",
    })
    raw = _raw(text)
    for seed in range(3):
        values = resolve(raw, seed).values
        incident = load_incident_text(text, "v.yaml", seed=seed)
        signal = incident.signals[1]
        assert signal.reveals[0].replica == values["victim"]
        assert signal.shows == f"SM clock dropped on vllm-{values['victim']}."
        minutes = values["at"] // 60
        assert f"TIMESTAMP '2025-03-04 {9 + minutes // 60:02d}:{minutes % 60:02d}:00'" in signal.query
        assert incident.symptoms[0].a.window == (values["at"], 3600)
        assert incident.debrief.summary == (f"The GPU of vllm-{values['victim']} ran at "
                                            f"{round(values['clock'] * 100):d}% clock.")


def test_a_choice_can_stand_for_a_whole_mapping() -> None:
    text = _variant_text(**{
        "  rps: {range: [4, 8]}\n": "  rps: {range: [4, 8]}\n  change: {choice: [{max_num_seqs: 64}, "
                                    "{max_num_seqs: 96, enable_chunked_prefill: true}]}\n",
        "params: {long_prefill_token_threshold: 2048}": 'params: "{{change}}"',
    })
    seen = set()
    for seed in range(12):
        params = load_incident_text(text, "v.yaml", seed=seed).faults[1].params
        assert params["max_num_seqs"] in (64, 96)
        seen.add(params["max_num_seqs"])
    assert seen == {64, 96}


def test_a_fixed_incident_resolves_to_itself() -> None:
    raw = _raw(GOOD_TEXT)
    resolution = resolve(raw, 7)
    assert resolution.data == raw and resolution.values == {} and resolution.problems == []
    assert load_incident_text(GOOD_TEXT, seed=7) == load_incident_text(GOOD_TEXT)


# ------------------------------------------------------------------ diagnostics


def test_an_unknown_variable_is_reported_where_it_is_used() -> None:
    text = _variant_text(**{'params: {clock_factor: "{{clock}}"}': 'params: {clock_factor: "{{clok}}"}'})
    diagnostics = check_incident_text(text, "v.yaml")
    assert len(diagnostics) == 1, diagnostics  # no second complaint that "{{clok}}" is not a number
    [d] = diagnostics
    assert (d.line, d.column) == _position(text, "{{clok}}")
    assert "unknown variable 'clok'" in d.message and d.message.startswith("faults[0].params.clock_factor")
    assert d.hint == "did you mean 'clock'?"


def test_unknown_variables_in_folded_sql_point_at_their_own_line() -> None:
    text = _variant_text(**{
        'query: "SELECT * FROM events WHERE kind = \'deploy\'"':
            "query: >-\n      SELECT * FROM events\n      WHERE kind = 'deploy' AND ts >= TIMESTAMP '{{att|ts}}'",
    })
    [d] = check_incident_text(text, "v.yaml")
    assert (d.line, d.column) == _position(text, "{{att|ts}}")
    assert d.hint == "did you mean 'at'?"


@pytest.mark.parametrize(
    ("swap", "needle", "words"),
    [
        ({"  rps: {range: [4, 8]}": "  rps: {range: [8, 4]}"}, "[8, 4]", "is empty"),
        ({"  at: {range: [1200, 1500], step: 60}": "  at: {range: [1200, 1500], step: 70}"}, "70",
         "not a multiple of step"),
        ({"  rps: {range: [4, 8]}": "  rps: {range: [4, 8], choice: [1]}"}, "rps:", "exactly one of"),
        ({"  rps: {range: [4, 8]}": "  rps: {rnage: [4, 8]}"}, "rnage", "unknown field 'rnage'"),
        ({'since: "around {{at|hhmm}} UTC"': 'since: "around {{at|hmm}} UTC"'}, "{{at|hmm}}",
         "unknown filter '|hmm'"),
        ({"id: slow-decode": 'id: "{{victim}}-gpu"'}, "{{victim}}", "the id cannot use variables"),
        ({"likelihoods: {throttle: 0.9,": 'likelihoods: {"{{victim}}": 0.5, throttle: 0.9,'}, '"{{victim}}": 0.5',
         "not substituted in keys"),
    ],
)
def test_bad_declarations_and_uses_have_a_line_and_column(swap: dict[str, str], needle: str, words: str) -> None:
    text = _variant_text(**swap)
    diagnostics = check_incident_text(text, "v.yaml")
    matching = [d for d in diagnostics if words in d.message]
    assert matching, diagnostics
    assert (matching[0].line, matching[0].column) == _position(text, needle)


def test_a_replica_variable_needs_a_fixed_fleet_size() -> None:
    text = _variant_text(**{"  replicas: 4": '  replicas: "{{rps}}"'})
    messages = [d.message for d in check_incident_text(text, "v.yaml")]
    assert any("needs fleet.replicas to be a fixed number" in m for m in messages), messages


def test_a_problem_only_some_draws_have_names_its_seed() -> None:
    # the fault starts inside the run (1200 s) or after its end (4800 s > 3600 s), depending on the draw
    text = _variant_text(**{"  at: {range: [1200, 1500], step: 60}": "  at: {range: [1200, 4800], step: 3600}"})
    raw = _raw(text)
    late = [s for s in range(40) if resolve(raw, s).values["at"] == 4800]
    early = [s for s in range(40) if resolve(raw, s).values["at"] == 1200]
    assert late and early
    assert check_incident_text(text, "v.yaml", seed=early[0]) == []
    diagnostics = check_incident_text(text, "v.yaml", seed=late[0])
    [d] = [d for d in diagnostics if "outside the run" in d.message]
    assert f"[variant seed {late[0]}: " in d.message and "at=4800" in d.message
    assert (d.line, d.column) == _position(text, '"{{at}}"')
    checked = [s for s in VALIDATION_SEEDS if s in late]
    assert bool(check_incident_text(text, "v.yaml")) == bool(checked)


# ------------------------------------------------------------------ the library


def test_one_slow_replica_is_a_template_with_distinct_variants() -> None:
    assert has_variables(SLOW)
    assert not has_variables(DATA / "good.yaml")
    variants = [load_variant(SLOW, seed) for seed in range(12)]
    assert len({inc.faults[0].scope.replicas[0] for inc, _ in variants}) > 1
    assert len({inc.faults[0].at_s for inc, _ in variants}) > 1
    for incident, values in variants:
        slow = f"vllm-{values['slow']}"
        assert incident.faults[0].scope.replicas == [values["slow"]]
        assert incident.signals[0].expect.value == slow
        assert slow in incident.symptoms[0].a.where and slow in incident.debrief.mitigation
        assert "{{" not in incident.model_dump_json()
    assert load_incident(SLOW) == load_incident(SLOW, seed=0)


@pytest.mark.slow
def test_every_library_incident_loads_for_several_seeds() -> None:
    for path in iter_library():
        for seed in VALIDATION_SEEDS if has_variables(path) else (0,):
            assert load_incident(path, seed=seed).id == path.stem


def _prove(seed: int) -> tuple[int, bool, list[str], dict]:
    from telemetry_gen.proving.proof import prove

    incident, values = load_variant(SLOW, seed)
    report = prove(incident, seed, variant=values)
    return seed, report.ok, report.problems(), values


@pytest.mark.slow
def test_one_slow_replica_proves_its_claims_on_every_checked_seed() -> None:
    """The slow test (two simulations per seed): the variants really show what the incident claims."""
    workers = max(1, min(len(VALIDATION_SEEDS), os.cpu_count() or 1))
    # spawn, not fork: the parent holds DuckDB connections whose threads a fork would not carry over
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_prove, VALIDATION_SEEDS))
    assert len({tuple(sorted(v.items())) for *_, v in results}) == len(VALIDATION_SEEDS)
    for seed, ok, problems, values in results:
        assert ok, (seed, values, problems)


def test_an_offset_ties_a_value_to_a_drawn_one() -> None:
    text = _variant_text(**{
        "WHERE name = 'DCGM_FI_DEV_SM_CLOCK'\"":
            "WHERE name = 'DCGM_FI_DEV_SM_CLOCK' AND ts >= TIMESTAMP '{{at + 480|ts}}'\"",
        "a: {window: [1800, 3600]}": 'a: {window: ["{{ at - 60 }}", 3600]}',
        "summary: A GPU was throttled.": "summary: Throttled from {{at|hhmm}}, noticed at {{at + 300|hhmm}}.",
    })
    raw = _raw(text)
    for seed in range(3):
        at = resolve(raw, seed).values["at"]
        incident = load_incident_text(text, "v.yaml", seed=seed)
        later = (at + 480) // 60
        assert f"TIMESTAMP '2025-03-04 {9 + later // 60:02d}:{later % 60:02d}:00'" in incident.signals[1].query
        assert incident.symptoms[0].a.window == (at - 60, 3600)
        noticed = (at + 300) // 60
        assert incident.debrief.summary.endswith(f"noticed at {9 + noticed // 60:02d}:{noticed % 60:02d}.")


def test_an_offset_needs_a_number_and_a_declared_variable() -> None:
    bad_name = _variant_text(**{"summary: A GPU was throttled.": "summary: From {{att + 5|hhmm}}."})
    assert any("unknown variable 'att'" in d.message for d in check_incident_text(bad_name, "v.yaml"))
    bad_type = _variant_text(**{
        "  rps: {range: [4, 8]}\n": "  rps: {range: [4, 8]}\n  team: {choice: [search, ads]}\n",
        "summary: A GPU was throttled.": "summary: Paged by {{team + 1}}.",
    })
    assert any("an offset needs a number, got" in d.message for d in check_incident_text(bad_type, "v.yaml"))
