"""Incident loading: every bad input becomes a Diagnostic at the right line, never a traceback."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from incidents import loader, yaml_reader
from incidents.loader import (
    SCHEMA_COMMENT,
    Diagnostic,
    IncidentError,
    UnknownIncidentError,
    check_incident_file,
    check_incident_text,
    find_incident,
    iter_library,
    load_incident,
    load_incident_text,
    render_template,
)
from incidents.spec import (
    DEFAULT_LIKELIHOOD,
    SCHEMA_PATH,
    TABLE_COLUMNS,
    Incident,
    cross_check,
    incident_json_schema,
    known_models_and_gpus,
)

DATA = Path(__file__).parent / "data" / "incidents"
GOOD = DATA / "good.yaml"
GOOD_TEXT = GOOD.read_text(encoding="utf-8")
HAVE_PROFILES = known_models_and_gpus() is not None


def position(text: str, anchor: str) -> tuple[int, int]:
    """1-based (line, column) of the '«' in `anchor` (or its start) within `text`; anchor must be unique."""
    plain = anchor.replace("«", "")
    assert text.count(plain) == 1, f"anchor {plain!r} is not unique in the text"
    offset = text.index(plain) + max(anchor.find("«"), 0)
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


# ---------------------------------------------------------------- good input


def test_good_fixture_loads_with_defaults_and_normalised_values() -> None:
    inc = load_incident(GOOD)
    assert check_incident_file(GOOD) == []
    assert inc.id == "slow-decode"
    # "Z" is stripped to a naive UTC datetime, matching the TIMESTAMP columns
    assert inc.window.start == datetime(2025, 3, 4, 9, 0, 0)
    assert inc.window.start.tzinfo is None
    assert inc.window.scrape_interval_s == 10
    # YAML 1.1 would read `on` as true; the loader keeps it a string
    assert inc.fleet.model_version == "on"
    # the key `true:` stays a field name instead of becoming the boolean True
    assert [h.id for h in inc.hypotheses if h.true] == ["throttle"]
    assert inc.signals[0].likelihood("prefill-cap") == DEFAULT_LIKELIHOOD
    assert inc.signals[0].likelihood("throttle") == 0.9
    assert inc.hypothesis_ids()["chunking"] == "prefill-cap"
    assert inc.workload.apps == "standard"
    assert inc.faults[1].scope.replicas == [0, "vllm-1"]


def test_both_parsers_agree_on_values_and_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse() -> tuple[object, dict[object, tuple[int, int]], dict[object, tuple[int, int]]]:
        parsed, diagnostics = yaml_reader.parse_yaml(GOOD_TEXT, "good.yaml")
        assert parsed is not None and diagnostics == []
        values = {k: (m.line, m.column) for k, m in parsed.value_marks.items()}
        keys = {k: (m.line, m.column) for k, m in parsed.key_marks.items()}
        return parsed.data, values, keys

    fast = parse()
    monkeypatch.setattr(yaml_reader, "_FAST_LOADER", None)
    assert parse() == fast


def test_aliases_within_the_cap_are_allowed() -> None:
    old = "  bursts:\n    - {start_s: 600, duration_s: 60, factor: 2}\n"
    assert GOOD_TEXT.count(old) == 1
    text = GOOD_TEXT.replace(old, "  bursts:\n    - &b {start_s: 600, duration_s: 60, factor: 2}\n    - *b\n")
    inc = load_incident_text(text)
    assert len(inc.workload.bursts) == 2 and inc.workload.bursts[0] == inc.workload.bursts[1]


def test_model_dump_round_trips_and_passes_cross_checks() -> None:
    inc = load_incident(GOOD)
    dumped = inc.model_dump(mode="python")
    assert cross_check(dumped) == []
    assert Incident.model_validate(dumped) == inc


def test_model_validate_alone_enforces_cross_references() -> None:
    data = load_incident(GOOD).model_dump(mode="python")
    data["faults"][0]["kind"] = "gpu_throtle"
    with pytest.raises(ValidationError, match="unknown fault kind 'gpu_throtle'"):
        Incident.model_validate(data)


# ---------------------------------------------------------------- whole-file problems

FILE_CASES = [
    # fixture, expected message fragment, (line, column) or None when not about a position
    ("empty.yaml", "file is empty", (1, 1)),
    ("comments_only.yaml", "no YAML document", (1, 1)),
    ("tabs.yaml", "tab character in indentation; YAML allows only spaces", (4, 1)),
    ("duplicate_keys.yaml", "duplicate key 'title': also on line 3", (5, 1)),
    ("alias_bomb.yaml", "more than 16 YAML aliases", (4, None)),
    ("recursive_alias.yaml", "recursive alias", (2, 7)),
    ("top_level_list.yaml", "top level must be a mapping of incident fields, found a list", (2, 1)),
    ("syntax_error.yaml", "YAML syntax error", (3, None)),
    ("python_tag.yaml", "unsupported YAML tag !!python/object/apply:os.system", (1, 5)),
    ("merge_key.yaml", "YAML merge keys (<<) are not supported", (3, 3)),
]


@pytest.fixture(params=["libyaml", "python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with libyaml's fast parser (when installed) and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(yaml_reader, "_FAST_LOADER", None)
    return str(request.param)


@pytest.mark.parametrize(("name", "fragment", "where"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_fixture_files_give_positioned_diagnostics(
    parser: str, name: str, fragment: str, where: tuple[int, int | None]
) -> None:
    diagnostics = check_incident_file(DATA / name)
    hits = [d for d in diagnostics if fragment in d.message]
    assert hits, f"no diagnostic containing {fragment!r} in {[str(d) for d in diagnostics]}"
    line, column = where
    assert hits[0].line == line
    if column is not None:
        assert hits[0].column == column
    with pytest.raises(IncidentError) as info:
        load_incident(DATA / name)
    assert fragment in str(info.value)


GENERATED_CASES = [
    # file bytes, expected message fragment, (line, column)
    ("binary", bytes(range(256)) * 8, "looks binary", (1, 1)),
    ("invalid-utf8", b"id: x\ntitle: ok\nsummary: caf\xe9\n", "invalid UTF-8 (byte 0xe9)", (3, 13)),
    ("control-char", b"id: x\ntitle: a\x07b\n", "control character U+0007", (2, 9)),
    ("scalar-top", b"just words\n", "top level must be a mapping", (1, 1)),
    ("two-documents", b"id: a\n---\nid: b\n", "expected a single document", (2, 1)),
    ("deep-flow", b"x: " + b"[" * 200_000, "nesting deeper than 64 levels", (1, None)),
    ("deep-block", "".join(f"{'  ' * i}k{i}:\n" for i in range(100)).encode(), "nesting deeper than 64", (None, None)),
    ("list-key", b"? [a, b]\n: 1\n", "mapping key must be a plain name", (1, 3)),
    ("custom-tag", b"id: !shell rm\n", "unsupported YAML tag !shell", (1, 5)),
    ("utf16", "id: x\n".encode("utf-16"), "looks binary", (None, None)),
]


@pytest.mark.parametrize(("name", "content", "fragment", "where"), GENERATED_CASES, ids=[c[0] for c in GENERATED_CASES])
def test_hostile_bytes_give_positioned_diagnostics(
    tmp_path: Path, name: str, content: bytes, fragment: str, where: tuple[int | None, int | None]
) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(content)
    diagnostics = check_incident_file(path)
    hits = [d for d in diagnostics if fragment in d.message]
    assert hits, [str(d) for d in diagnostics]
    line, column = where
    if line is not None:
        assert hits[0].line == line
    if column is not None:
        assert hits[0].column == column


def test_huge_file_is_refused_on_size_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB on paper, nothing on disk
    [diag] = check_incident_file(path)
    assert "52.4 MB" in diag.message and "limited to 1024 KiB" in diag.message
    assert diag.line == 0
    assert str(diag).startswith(f"{path}: file is 52.4 MB")


def test_text_over_the_limit_is_refused() -> None:
    [diag] = check_incident_text("x: 1\n" + "#" * (loader.MAX_BYTES + 10))
    assert "larger than 1024 KiB" in diag.message


@pytest.mark.parametrize(("kind", "fragment"), [("missing", "no such file"), ("directory", "is a directory")])
def test_missing_file_and_directory(tmp_path: Path, kind: str, fragment: str) -> None:
    path = tmp_path / "nope.yaml" if kind == "missing" else tmp_path
    [diag] = check_incident_file(path)
    assert fragment in diag.message
    assert diag.line == 0
    with pytest.raises(IncidentError, match=fragment):
        load_incident(path)


# ---------------------------------------------------------------- one mistake in a good file

MUTATIONS = [
    # (id, old text, new text, message fragment, hint fragment or None, anchor «where the diagnostic points)
    ("top-level-typo", "title: One", "titel: One", "unknown field 'titel'", "did you mean 'title'?", "«titel:"),
    (
        "field-one-level-too-high",
        "    shows: One replica has a higher TPOT.\n",
        "    shows: One replica has a higher TPOT.\n    counts: true\n",
        "signals[0]: unknown field 'counts'",
        "did you mean reveals[].counts?",
        "«counts: true",
    ),
    (
        "nested-typo",
        "reported_by:",
        "reported_bye:",
        "briefing: unknown field 'reported_bye'",
        "'reported_by'",
        "«reported_bye:",
    ),
    (
        "missing-field",
        "  summary: Answers stream slowly for a share of users.\n",
        "",
        "briefing: missing required field 'summary'",
        "What the reporter sees",
        "«briefing:",
    ),
    (
        "int-as-word",
        "replicas: 4",
        "replicas: four",
        "fleet.replicas: expected an integer, got the string 'four'",
        None,
        "replicas: «four",
    ),
    (
        "out-of-range",
        "difficulty: 3",
        "difficulty: 9",
        "difficulty: input should be less than or equal to 5",
        None,
        "difficulty: «9",
    ),
    (
        "list-expected",
        '  evidence:\n    - "Token rate chart dipped"\n',
        "  evidence: none\n",
        "briefing.evidence: expected a list, got the string 'none'",
        None,
        "evidence: «none",
    ),
    (
        "fault-kind",
        "kind: gpu_throttle",
        "kind: gpu_throtle",
        "faults[0].kind: unknown fault kind 'gpu_throtle'",
        "did you mean 'gpu_throttle'?",
        "kind: «gpu_throtle",
    ),
    (
        "fleet-knob",
        "max_num_seqs: 128",
        "max_num_seq: 128",
        "unknown engine knob 'max_num_seq'",
        "'max_num_seqs'",
        "«max_num_seq: 128",
    ),
    (
        "fleet-knob-word",  # a text knob takes one of its words: a misspelt policy never runs as the default
        "max_num_seqs: 128",
        "max_num_seqs: 128\n    scheduling_policy: prio",
        "fleet.engine.scheduling_policy: engine knob 'scheduling_policy' is one of fcfs, priority, not 'prio'",
        "did you mean 'priority'?",
        "scheduling_policy: «prio",
    ),
    (
        "fault-knob",
        "    params: {long_prefill_token_threshold: 2048}\nnoise:",  # the fault's, not the world's copy
        "    params: {long_prefill_token_treshold: 2048}\nnoise:",
        "faults[1].params.long_prefill_token_treshold: unknown engine knob",
        "'long_prefill_token_threshold'",
        "«long_prefill_token_treshold",
    ),
    (
        "noise-knob",
        "{enforce_eager: false}",
        "{enforce_eagre: false}",
        "noise[2].params.enforce_eagre: unknown engine",
        "'enforce_eager'",
        "«enforce_eagre",
    ),
    (
        "knob-type",
        "enable_prefix_caching: true",
        "enable_prefix_caching: 3",
        "takes a bool, got 3",
        None,
        "enable_prefix_caching: «3",
    ),
    (
        "engine-invalid",
        "max_num_seqs: 128",
        "max_num_seqs: 100000",
        "max_num_seqs must not exceed max_num_batched_tokens",
        None,
        "«engine:",
    ),
    (
        "fault-param",
        "{clock_factor: 0.5}",
        "{clock: 0.5}",
        "gpu_throttle has no parameter 'clock'",
        "gpu_throttle takes: clock_factor",
        "{«clock: 0.5}",
    ),
    (
        "fault-time",
        "kind: gpu_throttle\n    at_s: 1200",
        "kind: gpu_throttle\n    at_s: 99999",
        "faults[0].at_s: at_s 99999 s is outside the run [0, 3600] s",
        None,
        "at_s: «99999",
    ),
    (
        "until-before-at",
        "until_s: 3000",
        "until_s: 1000",
        "until_s 1000 s is not after at_s 1200 s",
        None,
        "until_s: «1000",
    ),
    (
        "window-past-end",
        "a: {window: [1800, 3600]}",
        "a: {window: [1800, 9000]}",
        "symptoms[0].a.window: window [1800, 9000] ends after the run (3600 s)",
        None,
        "a: {window: «[1800, 9000]",
    ),
    (
        "window-reversed",
        "a: {window: [1800, 3600]}",
        "a: {window: [3600, 1800]}",
        "needs end_s > start_s",
        None,
        "a: {window: «[3600, 1800]",
    ),
    (
        "reveal-table",
        "{table: metrics, columns: [name, value], replica: vllm-0}",
        "{table: metric, columns: [name, value], replica: vllm-0}",
        "unknown table 'metric'",
        "'metrics'",
        "{table: «metric,",
    ),
    (
        "reveal-column",
        "columns: [kind, detail]",
        "columns: [kind, detial]",
        "table 'events' has no column 'detial'",
        "'detail'",
        "columns: [kind, «detial]",
    ),
    (
        "metric-column",
        "column: tpot_s,",
        "column: tpos_s,",
        "table 'requests' has no column 'tpos_s'",
        "'tpot_s'",
        "column: «tpos_s",
    ),
    (
        "likelihood-id",
        "overload: 0.2,",
        "overlaod: 0.2,",
        "likelihood for unknown hypothesis 'overlaod'",
        "'overload'",
        "«overlaod: 0.2",
    ),
    (
        "likelihood-alias",
        "bad-deploy: 0.9, prefill-cap: 0.5",
        "bad-deploy: 0.9, chunking: 0.5",
        "'chunking' is an alias; likelihoods are keyed by hypothesis id",
        "use 'prefill-cap'",
        "«chunking: 0.5",
    ),
    (
        "alias-collision",
        "aliases: [chunking]",
        "aliases: [overload]",
        "alias 'overload' collides with hypotheses[1].id",
        None,
        "aliases: [«overload]",
    ),
    (
        "duplicate-id",
        "  - id: bad-deploy\n    title: The",
        "  - id: throttle\n    title: The",
        "hypothesis id 'throttle' is already used at hypotheses[0].id",
        None,
        "id: «throttle\n    title: The",
    ),
    ("no-true", "    true: true\n", "    true: false\n", "no hypothesis has `true: true`", None, "«hypotheses:"),
    (
        "noise-kind",
        "kind: deploy_event",
        "kind: deploy_evnt",
        "noise[0].kind: unknown kind 'deploy_evnt'",
        "'deploy_event'",
        "kind: «deploy_evnt",
    ),
    (
        "noise-kind-missing",
        "  - kind: replica_restart\n",
        "  - knd: replica_restart\n",
        "noise[1]: missing required field 'kind'",
        "deploy_event",
        "- «knd:",
    ),
    (
        "restart-replica",
        "replica: vllm-3",
        "replica: vllm-7",
        "replica 'vllm-7' does not exist",
        None,
        "replica: «vllm-7",
    ),
    (
        "scope-replica",
        "\n    scope: {replicas: [0, vllm-1]}",  # the fault's, not the prefill-cap world's
        "\n    scope: {replicas: [0, vllm-9]}",
        "faults[1].scope.replicas[1]: replica 'vllm-9' does not exist",
        None,
        "[0, «vllm-9]",
    ),
    (
        "sql-column",
        "where: \"status = 'ok'\"}",
        "where: \"stauts = 'ok'\"}",
        'Referenced column "stauts" not found',
        None,
        'where: «"stauts',
    ),
    (
        "sql-two-statements",
        "\"SELECT * FROM events WHERE kind = 'deploy'\"",
        '"SELECT 1; DROP TABLE events"',
        "must be exactly one SELECT statement",
        None,
        'query: «"SELECT 1; DROP',
    ),
    (
        "sql-syntax",
        'GROUP BY replica"',
        'GROUP BY GROUP"',
        "syntax error",
        None,
        'settling_queries:\n    - «"SELECT replica, max',
    ),
    (
        "aggregate-literal",
        "aggregate: p99",
        "aggregate: p98",
        "the string 'p98' is not one of: mean, p50",
        "'p99'",
        "aggregate: «p98",
    ),
    (
        "ratio-without-b",
        "    b: {window: [0, 1200]}\n",
        "",
        "compare 'ratio_at_least' compares two sides: add side b",
        None,
        "compare: «ratio_at_least",
    ),
    (
        "rate-without-window",
        "a: {window: [0, 3600], where: \"status <> 'ok'\"}",
        "a: {where: \"status <> 'ok'\"}",
        "aggregate 'rate' divides by the window length: give side a a window",
        None,
        "a: «{where",
    ),
    (
        "scope-form",
        "scope: {fraction: 0.25}",
        "scope: {replica: [1]}",
        'scope must be "all", {replicas: [...]} or {fraction: 0..1}',
        None,
        "scope: «{replica:",
    ),
    (
        "scope-word",
        "scope: {fraction: 0.25}",
        "scope: everything",
        "the string 'everything' should be 'all'",
        None,
        "scope: «everything",
    ),
    (
        "non-utc-start",
        '"2025-03-04T09:00:00Z"',
        '"2025-03-04T09:00:00+02:00"',
        "window.start must be in UTC",
        None,
        'start: «"2025',
    ),
    (
        "slug",
        "id: slow-decode",
        "id: Throttled GPU",
        "id: the string 'Throttled GPU' is not a valid id",
        "lowercase letters and digits",
        "id: «Throttled GPU",
    ),
    (
        "expect-extra",
        "expect: {rows_at_least: 1}",
        "expect: {rows_at_least: 1, column: x}",
        "signals[2].expect: unknown field 'column'",
        "allowed: rows_at_least",
        "rows_at_least: 1, «column: x",
    ),
    (
        "number-as-list",
        "intensity: 0.8",
        "intensity: [1]",
        "faults[0].intensity: expected a number, got a list",
        None,
        "intensity: «[1]",
    ),
    (
        "negative-duration",
        "duration_s: 3600",
        "duration_s: -5",
        "window.duration_s: input should be greater than 0",
        None,
        "duration_s: «-5",
    ),
    (
        "three-hypotheses",
        "  - id: prefill-cap\n    title: Prefill cap\n    explanation: The prefill threshold slows long prompts.\n"
        "    aliases: [chunking]\n",
        "",
        "3 hypotheses; an incident needs at least 4",
        None,
        "«hypotheses:",
    ),
    (
        "two-signals",
        "  - id: deploy-seen\n    shows: The embeddings deploy is in the events.\n    reveals:\n"
        "      - {table: events, columns: [kind, detail]}\n    query: \"SELECT * FROM events WHERE kind = 'deploy'\"\n"
        "    expect: {rows_at_least: 1}\n"
        "    likelihoods: {throttle: 0.5, overload: 0.5, bad-deploy: 0.9, prefill-cap: 0.5}\n",
        "",
        "2 signals; an incident needs at least 3",
        None,
        "«signals:",
    ),
]
if HAVE_PROFILES:
    MUTATIONS += [
        (
            "model",
            "model: Llama-3.1-8B",
            "model: Llama-3.1-9B",
            "fleet.model: unknown model 'Llama-3.1-9B'",
            "'Llama-3.1-8B'",
            "model: «Llama-3.1-9B",
        ),
        ("gpu", "gpu: H100-SXM", "gpu: H100", "fleet.gpu: unknown GPU 'H100'", "'H100-SXM'", "gpu: «H100\n"),
    ]


@pytest.mark.parametrize(
    ("old", "new", "fragment", "hint", "anchor"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS]
)
def test_single_mistake_is_reported_at_its_node(
    old: str, new: str, fragment: str, hint: str | None, anchor: str
) -> None:
    assert GOOD_TEXT.count(old) == 1, f"mutation source {old!r} must occur once in good.yaml"
    text = GOOD_TEXT.replace(old, new)
    diagnostics = check_incident_text(text, "bad.yaml")
    hits = [d for d in diagnostics if fragment in d.message]
    assert hits, f"expected {fragment!r}; got {[str(d) for d in diagnostics]}"
    assert (hits[0].line, hits[0].column) == position(text, anchor), str(hits[0])
    if hint is not None:
        assert hits[0].hint is not None and hint in hits[0].hint


def test_every_problem_is_reported_in_one_pass() -> None:
    text = (
        GOOD_TEXT.replace("kind: gpu_throttle", "kind: gpu_throtle")
        .replace("overload: 0.2,", "overlaod: 0.2,")
        .replace("where: \"status = 'ok'\"}", "where: \"stauts = 'ok'\"}")
        .replace("replicas: 4", "replicas: four")
    )
    diagnostics = check_incident_text(text, "bad.yaml")
    assert [(d.line, d.column) for d in diagnostics] == sorted(
        [
            position(text, "replicas: «four"),
            position(text, "kind: «gpu_throtle"),
            position(text, 'where: «"stauts'),
            position(text, "«overlaod"),
        ]
    ), [str(d) for d in diagnostics]
    with pytest.raises(IncidentError) as info:
        load_incident_text(text, "bad.yaml")
    assert len(info.value.diagnostics) == 4
    assert str(info.value).count("bad.yaml:") == 4


def test_misspelt_key_is_not_also_reported_as_missing() -> None:
    diagnostics = check_incident_text(GOOD_TEXT.replace("title: One", "titel: One"))
    assert [d.message for d in diagnostics] == ["incident: unknown field 'titel'"]


def test_missing_top_level_fields_are_listed_together() -> None:
    [diag] = check_incident_text("id: only-an-id\n")
    assert diag.message.startswith("incident: missing required fields 'title', 'difficulty', 'briefing'")


# ---------------------------------------------------------------- fuzzing: never a traceback


def _assert_diagnostics(result: object) -> None:
    assert isinstance(result, list)
    for d in result:
        assert isinstance(d, Diagnostic)
        assert "internal error" not in d.message, str(d)
        assert d.line >= 0 and d.column >= 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_random_bytes_never_raise(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(blob)
    _assert_diagnostics(check_incident_file(path))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(GOOD_TEXT)), st.integers(0, 40), st.text(max_size=12))
def test_damaged_good_file_never_raises(at: int, cut: int, insert: str) -> None:
    _assert_diagnostics(check_incident_text(GOOD_TEXT[:at] + insert + GOOD_TEXT[at + cut :]))


_yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from([*Incident.model_fields, "extra"]), _yaml_values, max_size=8))
def test_wrongly_typed_sections_never_raise(data: dict[str, object]) -> None:
    _assert_diagnostics(check_incident_text(yaml.safe_dump(data)))


# ---------------------------------------------------------------- diagnostics, library, template, schema


def test_diagnostic_format() -> None:
    assert str(Diagnostic("a.yaml", 3, 5, "bad thing", "try this")) == "a.yaml:3:5: bad thing (hint: try this)"
    assert str(Diagnostic("a.yaml", 3, 5, "bad thing")) == "a.yaml:3:5: bad thing"
    assert str(Diagnostic("a.yaml", 0, 0, "no such file")) == "a.yaml: no such file"


def test_iter_library_and_find_incident(tmp_path: Path) -> None:
    for name in ("kv-thrash", "gpu-throttle", "template"):
        (tmp_path / f"{name}.yaml").write_text("id: x\n")
    (tmp_path / "notes.md").write_text("not an incident")
    assert [p.name for p in iter_library(tmp_path)] == ["gpu-throttle.yaml", "kv-thrash.yaml"]
    assert find_incident("kv-thrash", root=tmp_path) == tmp_path / "kv-thrash.yaml"
    assert find_incident(str(GOOD), root=tmp_path) == GOOD
    with pytest.raises(UnknownIncidentError) as info:
        find_incident("kv-trash", root=tmp_path)
    assert info.value.matches == ["kv-thrash"]
    assert "did you mean kv-thrash?" in str(info.value)
    assert isinstance(info.value, IncidentError) and isinstance(info.value, LookupError)
    with pytest.raises(UnknownIncidentError, match="library incidents: gpu-throttle, kv-thrash"):
        find_incident("zzzzzz", root=tmp_path)
    # paths are returned as they are, for load_incident to explain what is wrong with them
    assert find_incident("some/dir/missing.yaml", root=tmp_path) == Path("some/dir/missing.yaml")
    assert find_incident(str(tmp_path), root=tmp_path) == tmp_path


def test_template_renders_and_validates_as_written() -> None:
    text = render_template("my-new-incident")
    assert text.splitlines()[0] == SCHEMA_COMMENT
    assert check_incident_text(text, "my-new-incident.yaml") == []
    inc = load_incident_text(text)
    assert inc.id == "my-new-incident"
    assert sum(h.true for h in inc.hypotheses) >= 1


@pytest.mark.parametrize("bad", ["My Incident", "", "a--b", "-lead", "trailing-", "under_score"])
def test_render_template_rejects_non_slug_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="not a slug"):
        render_template(bad)


def test_schema_json_is_current() -> None:
    on_disk = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert on_disk == incident_json_schema(), "incidents/schema.json is stale: run `python -m incidents.spec`"


def test_schema_describes_fields_and_enumerates_names() -> None:
    schema = incident_json_schema()
    fault = schema["$defs"]["FaultSpec"]["properties"]
    assert "gpu_throttle" in fault["kind"]["enum"]
    assert fault["at_s"]["description"]
    knobs = schema["$defs"]["Fleet"]["properties"]["engine"]
    assert knobs["additionalProperties"] is False
    assert knobs["properties"]["enable_prefix_caching"]["type"] == "boolean"
    assert set(schema["$defs"]["Metric"]["properties"]["table"]["enum"]) == set(TABLE_COLUMNS)


def test_schema_accepts_good_and_rejects_typos() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(incident_json_schema())
    parsed, _ = yaml_reader.parse_yaml(GOOD_TEXT, "good.yaml")
    assert parsed is not None
    assert list(validator.iter_errors(parsed.data)) == []
    parsed.data["fleet"]["engine"]["max_num_seq"] = 3
    assert list(validator.iter_errors(parsed.data))


LIBRARY = iter_library()


@pytest.mark.parametrize("path", LIBRARY, ids=[p.stem for p in LIBRARY])
def test_library_incident_is_valid(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[0] == SCHEMA_COMMENT, f"{path.name}: first line must be {SCHEMA_COMMENT!r}"
    diagnostics = check_incident_file(path)
    assert diagnostics == [], "\n".join(str(d) for d in diagnostics)
    assert re.fullmatch(r"[a-z0-9-]+", path.stem)
    assert load_incident(path).id == path.stem


# ---------------------------------------------------------------- authoring rules and the telemetry catalog


# (spec.TABLE_COLUMNS against the telemetry schema and a built database: tests/test_telemetry_schema.py)


def test_a_wrong_expect_column_is_caught_without_simulating() -> None:
    text = GOOD_TEXT
    [query_col] = re.findall(r"expect: \{column: (\w+),", text)[:1]
    broken = text.replace(f"expect: {{column: {query_col},", f"expect: {{column: {query_col}x,", 1)
    [diag] = check_incident_text(broken, "g.yaml")
    assert diag.message.endswith(f"the query's result has no column '{query_col}x'")
    assert diag.hint == f"did you mean '{query_col}'?"
    line, column = position(broken, f"expect: {{column: «{query_col}x,")
    assert (diag.line, diag.column) == (line, column)
    # the model still loads: the check is about the query, which `load_incident` binds too
    with pytest.raises(IncidentError):
        load_incident_text(broken, "g.yaml")


def test_zero_symptoms_are_refused_by_validate_not_by_load() -> None:
    start = GOOD_TEXT.index("symptoms:")
    end = GOOD_TEXT.index("hypotheses:")
    text = GOOD_TEXT[:start] + "symptoms: []\n" + GOOD_TEXT[end:]
    [diag] = check_incident_text(text, "g.yaml")
    assert diag.message.startswith("symptoms: none given") and diag.line == position(text, "symptoms: []")[0]
    assert load_incident_text(text, "g.yaml").symptoms == []  # drills without claims still play
    # leaving the key out altogether is the same
    [absent] = check_incident_text(GOOD_TEXT[:start] + GOOD_TEXT[end:], "g.yaml")
    assert absent.message.startswith("symptoms: none given")


def test_a_briefing_word_that_names_the_cause_is_quoted_as_written() -> None:
    """The leak check matches stems; its message quotes the word the author wrote, names the stem it shares
    with the true hypothesis, and says that synonyms pass the check."""
    assert GOOD_TEXT.count("title: GPU clocks throttled\n") == 1
    text = GOOD_TEXT.replace("title: GPU clocks throttled\n", "title: GPU clocks throttled by overheating\n")
    clean = [d for d in check_incident_text(text, "bad.yaml") if "names the true cause" in d.message]
    assert clean == []  # the truth's own title is the answer key, not player-visible text
    text = text.replace("Answers stream slowly for a share of users.", "Answers stream slowly; a card overheated.")
    found = [d for d in check_incident_text(text, "bad.yaml") if "names the true cause" in d.message]
    assert len(found) == 1
    assert found[0].message.startswith("briefing.summary: 'overheated' names the true cause")
    assert "stem 'overheat'" in found[0].message and "synonym" in (found[0].hint or "")
