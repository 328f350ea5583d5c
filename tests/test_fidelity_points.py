"""Bringing your own benchmark points: the reader refuses a bad file with every problem at its line, matches
model and GPU names like `calc`, and the harness reports a point it cannot run instead of dying on it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from game.cli.commands import main
from telemetry_gen.fidelity import harness as F
from telemetry_gen.fidelity.points import MAX_PROMPTS, PointsError, load_points, select

GOOD = """\
points:
  - name: small-8b
    source: https://example.org/bench
    fitted_to: []
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: h100
    engine: vLLM v0.11.0
    input_tokens: 64
    output_tokens: 8
    load: {kind: batch}
    num_prompts: 4
    published: {output_throughput_tok_s: 500}
"""

TABLE_HEAD = """\
tables:
  - name: grid
    source: https://example.org/grid
    fitted_to: []
    engine: TensorRT-LLM
    metric: output_throughput_tok_s
    load: {kind: batch}
"""


def write(tmp_path: Path, text: str, name: str = "points.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(PointsError) as info:
        load_points(path)
    return info.value.problems


def test_names_match_like_calc_and_are_stored_canonically(tmp_path: Path) -> None:
    (p,) = load_points(write(tmp_path, GOOD))
    assert (p.model, p.gpu) == ("Llama-3.1-8B", "H100-SXM")


def test_every_problem_is_reported_at_its_line(tmp_path: Path) -> None:
    text = GOOD + """\
  - name: second
    source: https://example.org/bench
    fitted_to: []
    model: Llama-9000
    gpu: H100
    input_tokens: 64
    output_tokens: 8
    load: {kind: batch}
    num_prompts: 4
    published: {output_throughput_tok_s: 500}
  - name: third
    source: https://example.org/bench
    fitted_to: []
    model: Llama-3.1-8B
    gpu: H100
    input_tokens: 64
    output_tokens: 8
    load: {kind: rate, rate: fast}
    num_prompts: 4
    published: {ttft_ms: 5}
extra: 1
"""
    path = write(tmp_path, text)
    found = problems(path)
    assert len(found) == 3, found  # all at once, in line order
    assert found[0].startswith(f"{path}:16: second: unknown model 'Llama-9000'") and "did you mean" in found[0]
    assert found[1].startswith(f"{path}:30: third: the rate must be a positive number, not 'fast'")
    assert found[2].startswith(f"{path}:33: unknown section 'extra'")
    assert all("Traceback" not in line for line in found)


@pytest.mark.parametrize(("change", "message"), [
    ("num_prompts: 4", f"num_prompts must be within 1..{MAX_PROMPTS}"),
    ("input_tokens: 64", "input_tokens must be a whole number"),
    ("published: {output_throughput_tok_s: 500}", "unknown published figure 'p50'"),
    ("load: {kind: batch}", "load kind must be batch, rate or concurrency"),
    ("gpu: h100", "unknown GPU"),
])
def test_a_bad_field_is_named(tmp_path: Path, change: str, message: str) -> None:
    replacement = {
        "num_prompts: 4": "num_prompts: 1000000000",
        "input_tokens: 64": "input_tokens: 6.5",
        "published: {output_throughput_tok_s: 500}": "published: {p50: 3}",
        "load: {kind: batch}": "load: {kind: warp}",
        "gpu: h100": "gpu: TPU-v5",
    }[change]
    (line,) = problems(write(tmp_path, GOOD.replace(change, replacement)))
    assert "small-8b: " + message in line, line
    assert line.split(":")[1] == str(GOOD.splitlines().index("    " + change) + 1)  # the field's own line


def test_engine_knobs_and_missing_figures_are_checked_before_anything_runs(tmp_path: Path) -> None:
    knobs = GOOD.replace("num_prompts: 4", "num_prompts: 4\n    config: {warp_drive: 1}")
    assert "engine knobs refused: unknown engine knob(s): warp_drive" in problems(write(tmp_path, knobs))[0]
    nothing = GOOD.replace("{output_throughput_tok_s: 500}", "{duration_s: 3}")
    assert "publishes nothing the harness compares" in problems(write(tmp_path, nothing))[0]


def test_table_problems_point_at_the_row(tmp_path: Path) -> None:
    text = TABLE_HEAD + """\
    columns:
      - {name: a, model: llama-3.1-8b, gpu: H200, tp: 1}
    num_prompts: {"10/20": 5, "30/40": 5}
    rows:
      "10/20": [100]
      "30/40": [100, 200]
"""
    path = write(tmp_path, text)
    (line,) = problems(path)
    assert line.startswith(f"{path}:13: grid: row 30/40 has 2 figures for 1 columns")


def test_unusable_files_are_one_clear_line(tmp_path: Path) -> None:
    cases = {
        "broken.yaml": ("points: [\n", "not valid YAML"),
        "scalar.yaml": ("42\n", "a points file is a mapping"),
        "empty.yaml": ("", "no points"),
        "recursive.yaml": ("points: &p [*p]\n", "an entry must be a mapping"),
        "duplicate.yaml": (GOOD + GOOD.split("\n", 1)[1], "point name 'small-8b' is used 2 times"),
    }
    for name, (text, message) in cases.items():
        found = problems(write(tmp_path, text, name))
        assert message in found[0], (name, found)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00points")
    assert "not UTF-8" in problems(binary)[0]
    assert "is a folder" in problems(tmp_path)[0]
    assert "cannot read" in problems(tmp_path / "missing.yaml")[0]


def test_the_built_in_file_merges_its_shared_table_fields() -> None:
    # the built-in file shares table fields through YAML anchors and merge keys; they must keep working
    names = {p.table for p in load_points()}
    assert {"trtllm-perf-overview", "trtllm-serving"} <= names
    assert sum(1 for n in names if n.startswith("trtllm-v0.17-")) >= 4


def test_select_filters_by_name_in_any_case() -> None:
    pts = load_points()
    chosen = select(pts, "NIGHTLY-latency")
    assert chosen and all("nightly-latency" in p.name for p in chosen) and len(chosen) < len(pts)
    assert select(pts, "") == pts


def test_a_point_the_engine_cannot_run_is_reported_not_fatal(tmp_path: Path) -> None:
    text = GOOD + GOOD.split("\n", 1)[1].replace("small-8b", "too-big").replace(
        "meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-70B").replace("gpu: h100", "gpu: L40S")
    result = F.run_fidelity(load_points(write(tmp_path, text)), workers=1)
    rows = {r["name"]: r for r in result["points"]}
    assert rows["small-8b"]["error"] is None and rows["small-8b"]["modelled"]
    assert "memory" in rows["too-big"]["error"] and rows["too-big"]["modelled"] == {}
    assert result["failed_points"] == ["too-big"] and result["meets_target"] is False
    assert result["summary"]["output_throughput_tok_s"]["points"] == 1  # only the point that ran
    assert "too-big" in F.format_fidelity(result) and "FAILED" in F.format_fidelity(result)


def test_fidelity_command_replays_your_file(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    res = CliRunner().invoke(main, ["fidelity", "--points", str(path), "--workers", "1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["ok"] and out["points_file"] == str(path) and out["failed_points"] == []
    (row,) = out["points"]
    assert row["name"] == "small-8b" and set(row["modelled"]) == {"output_throughput_tok_s"}
    text = CliRunner().invoke(main, ["fidelity", "--points", str(path), "--workers", "1"]).output
    assert "small-8b" in text and "https://example.org/bench" in text


def test_fidelity_command_refuses_a_bad_file_without_a_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("gpu: h100", "gpu: TPU-v5"))
    res = CliRunner().invoke(main, ["fidelity", "--points", str(path), "--json"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    out = json.loads(res.output)
    assert out["ok"] is False and out["diagnostics"][0].startswith(f"{path}:6: small-8b: unknown GPU")
    res = CliRunner().invoke(main, ["fidelity", "--only", "no-such-point"])
    assert res.exit_code == 1 and "no point" in res.output and "Traceback" not in res.output


_ALL_FORMS = GOOD + TABLE_HEAD + """\
    config: {max_num_seqs: 64}
    columns:
      - {name: a, model: llama-3.1-8b, gpu: H200, tp: 1, config: {max_num_batched_tokens: 4096}}
    num_prompts: {"10/20": 5}
    rows:
      "10/20": [100]
serving_tables:
  - name: srv
    source: https://example.org/srv
    fitted_to: []
    engine: TensorRT-LLM v0
    num_prompts: 20
    setups:
      small: {model: Llama-3.1-8B, gpu: H100-SXM, tp: 1}
    columns: [qps, ttft_ms, itl_ms]
    rows:
      small: {"100/10": [[2, 20, 7], [inf, 900, 9]]}
"""
_JUNK = ["", "[]", "{}", "-1", "0", "1e400", "inf", "nan", "[[]]", "{a: b}", "~", "'x'", "&a [*a]", "2.5",
         "true", "H100", "999999999999", "[1, [2, {3: 4}]]", "\"\\u0000\""]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from(_JUNK)), min_size=1, max_size=4))
def test_any_damage_to_a_file_is_a_points_error_or_still_valid(tmp_path_factory: pytest.TempPathFactory,
                                                                edits: list[tuple[int, str]]) -> None:
    lines = _ALL_FORMS.splitlines()
    for index, junk in edits:
        i = index % len(lines)
        key, sep, _ = lines[i].partition(": ")
        lines[i] = f"{key}{sep}{junk}" if sep else junk
    path = tmp_path_factory.mktemp("fuzz") / "points.yaml"
    path.write_text("\n".join(lines) + "\n")
    try:
        points = load_points(path)
    except PointsError as exc:
        assert exc.problems and all(p.startswith(str(path)) for p in exc.problems), exc.problems
        return
    for p in points:  # what loads is usable: a real profile, sane sizes, a comparable figure
        assert p.num_prompts >= 1 and p.input_tokens >= 1 and F.published_metrics(p)
        p.engine_config()


@pytest.mark.parametrize("field", ["name", "source", "engine"])
def test_text_fields_are_one_plain_line(tmp_path: Path, field: str) -> None:
    value = {"name": "small-8b", "source": "https://example.org/bench", "engine": "vLLM v0.11.0"}[field]
    escape = GOOD.replace(f"{field}: {value}", f'{field}: "\\e[31mred\\e[0m"')
    (line,) = problems(write(tmp_path, escape))
    assert f"{field} holds a control character" in line and "\x1b" not in line
    long = GOOD.replace(f"{field}: {value}", f"{field}: {'x' * 400}")
    assert "at most 300" in problems(write(tmp_path, long))[0]


def test_a_file_cannot_ask_for_an_endless_run(tmp_path: Path) -> None:
    # every point within its own bound, the file as a whole far beyond what a run may take
    one = GOOD.split("\n", 1)[1].replace("num_prompts: 4", f"num_prompts: {MAX_PROMPTS}")
    many = "points:\n" + "".join(one.replace("small-8b", f"p{i}") for i in range(60))
    found = problems(write(tmp_path, many))
    assert any(f"{60 * MAX_PROMPTS} requests over all points" in line for line in found), found
    # a pathological nesting is a clear line too, not an interpreter error
    deep = tmp_path / "deep.yaml"
    deep.write_text("points: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested too deeply" in problems(deep)[0]


def test_odd_numbers_and_quoted_escapes_are_clear_lines(tmp_path: Path) -> None:
    (line,) = problems(write(tmp_path, GOOD.replace("num_prompts: 4", "num_prompts: .inf")))
    assert "num_prompts must be a whole number, not inf" in line
    knob = GOOD.replace("num_prompts: 4", 'num_prompts: 4\n    config: {"\\e[2Jwipe": 1}')
    (line,) = problems(write(tmp_path, knob))
    assert "engine knobs refused" in line and "\x1b" not in line


def test_a_point_names_the_server_in_front_of_its_engine(tmp_path: Path) -> None:
    """Batch points run offline and served points behind vLLM's API server unless they say otherwise; an
    unknown server is a clear line at its field."""
    rate = GOOD.replace("load: {kind: batch}", "load: {kind: rate, rate: 2}").replace(
        "{output_throughput_tok_s: 500}", "{ttft_ms: 50}")
    (batch,) = load_points(write(tmp_path, GOOD, "batch.yaml"))
    (served,) = load_points(write(tmp_path, rate, "rate.yaml"))
    (triton,) = load_points(write(tmp_path, rate.replace("num_prompts: 4", "num_prompts: 4\n    server: triton"),
                                  "triton.yaml"))
    assert (batch.server, served.server, triton.server) == ("offline", "vllm", "triton")
    bad = rate.replace("num_prompts: 4", "num_prompts: 4\n    server: nginx")
    (line,) = problems(write(tmp_path, bad, "bad.yaml"))
    assert "small-8b: server must be one of vllm, triton, offline, not 'nginx'" in line
    assert line.split(":")[1] == str(bad.splitlines().index("    server: nginx") + 1)
    # the harness puts the named front end in front of the engine: vLLM's adds its hand-off latency
    ttft = {p.server: F.point_row(p)["modelled"]["ttft_ms"] for p in (served, triton)}
    assert ttft["vllm"] - ttft["triton"] == pytest.approx(1e3 * F.SERVER_FRONTENDS["vllm"].latency_s, abs=0.5)


FIRST_TOKEN = """\
tables:
  - name: ft
    source: https://example.org/first-token
    fitted_to: []
    engine: TensorRT-LLM v0.5
    metric: prefill_ms
    load: {kind: batch}
    config: {max_num_seqs: 1, max_num_batched_tokens: 8192}
    columns:
      - {name: h100, model: Llama-2-7B, gpu: H100, tp: 1, config: {weight_dtype: fp8, kv_cache_dtype: fp8}}
    num_prompts: {"128/1": 1, "2048/1": 1}
    rows:
      "128/1": [7]
      "2048/1": [36]
"""


def test_a_first_token_latency_is_one_prefill_step(tmp_path: Path) -> None:
    """A batch-1 first-token latency (`prefill_ms`) is compared as prefill_step_ms, and the harness's
    figure for it is the engine model's time for that one prefill, not a throughput-derived share."""
    from engine_model.profiles import GPUS, MODELS
    from engine_model.step_cost import StepCostModel

    short, long = load_points(write(tmp_path, FIRST_TOKEN))
    assert (short.name, long.name) == ("ft-h100-128-1", "ft-h100-2048-1")
    assert F.published_metrics(long) == {"prefill_step_ms": 36.0}
    rows = {p.input_tokens: F.point_row(p) for p in (short, long)}
    for tokens, row in rows.items():
        point = long if tokens == 2048 else short
        cost = StepCostModel(MODELS["Llama-2-7B"], GPUS["H100-SXM"], point.engine_config())
        step_ms = 1e3 * cost.prefill_time(tokens)
        assert row["modelled"]["prefill_step_ms"] == pytest.approx(step_ms, abs=1e-4)  # rows round to 4 places
    # 16x the tokens: far more than the fixed costs of a step, and compute-bound, so more than 3x the time
    assert rows[2048]["modelled"]["prefill_step_ms"] > 3 * rows[128]["modelled"]["prefill_step_ms"]


@pytest.mark.parametrize(("change", "message"), [
    ('load: {kind: batch}', "prefill_ms is the time of one prefill step: it needs an offline batch"),
    ('"2048/1": 1}', "input_tokens x num_prompts <= max_num_batched_tokens, here 8192"),
    ("load: {kind: batch}\n    server: vllm", "(load kind batch, no server)"),
])
def test_a_first_token_latency_must_be_one_step(tmp_path: Path, change: str, message: str) -> None:
    """A prefill_ms figure from a served run, from a batch sent through a server, or from a batch too large
    for one step is not one step's time: refused at its entry, with the reason."""
    if change == "load: {kind: batch}":
        # the same figure as a single point under a request rate
        text = GOOD.replace("load: {kind: batch}", "load: {kind: rate, rate: 1}").replace(
            "{output_throughput_tok_s: 500}", "{prefill_ms: 7}")
    elif change.startswith("load"):
        # an offline batch, but sent through vLLM's API server
        text = FIRST_TOKEN.replace("load: {kind: batch}", change)
    else:
        text = FIRST_TOKEN.replace(change, '"2048/1": 5}')
    found = problems(write(tmp_path, text))
    assert any(message in line for line in found), found


def test_a_table_metric_names_a_published_figure(tmp_path: Path) -> None:
    text = FIRST_TOKEN.replace("metric: prefill_ms", "metric: prefill_step_ms")
    (line,) = problems(write(tmp_path, text))
    assert "a table needs a source and a metric (the published figure its cells hold)" in line
    assert "'prefill_ms'" in line


def test_a_point_that_does_not_say_what_was_fitted_to_it_is_refused(tmp_path: Path) -> None:
    """Without `fitted_to` a point could pass as held out by omission: refused at the entry's line."""
    (line,) = problems(write(tmp_path, GOOD.replace("    fitted_to: []\n", "")))
    assert line.startswith(f"{tmp_path / 'points.yaml'}:2: small-8b: missing field 'fitted_to'"), line
    assert "[] for a held-out point" in line


@pytest.mark.parametrize(("value", "message"), [
    ("step_cost.HOST_STEP_S", "fitted_to must be a list"),
    ("[3]", "fitted_to entries are constant names"),
    ("['']", "fitted_to entries are constant names"),
])
def test_a_malformed_fitted_to_is_refused_at_its_line(tmp_path: Path, value: str, message: str) -> None:
    (line,) = problems(write(tmp_path, GOOD.replace("fitted_to: []", f"fitted_to: {value}")))
    assert line.startswith(f"{tmp_path / 'points.yaml'}:4: small-8b: {message}"), line


def test_tables_say_what_was_fitted_to_them_and_columns_may_add_to_it(tmp_path: Path) -> None:
    table = TABLE_HEAD + """\
    columns:
      - {name: a, model: llama-3.1-8b, gpu: H100, tp: 1}
      - {name: b, model: llama-3.1-8b, gpu: H200, tp: 1, fitted_to: [profiles.GPUS.H200.hbm_reach]}
    num_prompts: {"10/20": 5}
    rows:
      "10/20": [100, 200]
"""
    table = table.replace("    fitted_to: []\n", "    fitted_to: [step_cost.HOST_PER_SEQ_S]\n")
    pts = {p.name: p for p in load_points(write(tmp_path, table))}
    assert pts["grid-a-10-20"].fitted_to == ("step_cost.HOST_PER_SEQ_S",)
    assert pts["grid-b-10-20"].fitted_to == ("step_cost.HOST_PER_SEQ_S", "profiles.GPUS.H200.hbm_reach")
    assert not pts["grid-a-10-20"].held_out
    (line,) = problems(write(tmp_path, table.replace("    fitted_to: [step_cost.HOST_PER_SEQ_S]\n", "")))
    assert line.startswith(f"{tmp_path / 'points.yaml'}:2: grid: missing field 'fitted_to'"), line
    serving = """\
serving_tables:
  - name: srv
    source: https://example.org/srv
    engine: TensorRT-LLM v0
    num_prompts: 20
    setups:
      small: {model: Llama-3.1-8B, gpu: H100-SXM, tp: 1}
    columns: [qps, ttft_ms]
    rows:
      small: {"100/10": [[2, 20]]}
"""
    (line,) = problems(write(tmp_path, serving))
    assert line.startswith(f"{tmp_path / 'points.yaml'}:2: srv: missing field 'fitted_to'"), line
    (p,) = load_points(write(tmp_path, serving.replace("    engine:", "    fitted_to: []\n    engine:")))
    assert p.held_out and p.fitted_to == ()
