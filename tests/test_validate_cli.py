"""The author commands through click: validate [--deep], schema, new, list."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from game.cli import validate_commands as cli_validate
from game.cli.commands import main
from incidents.loader import check_incident_file, iter_library, load_incident
from incidents.spec import SCHEMA_PATH, incident_json_schema

DATA = Path(__file__).parent / "data" / "incidents"
GOOD = DATA / "good.yaml"
BAD = [
    "alias_bomb",
    "comments_only",
    "duplicate_keys",
    "empty",
    "merge_key",
    "python_tag",
    "recursive_alias",
    "syntax_error",
    "tabs",
    "top_level_list",
]

@pytest.fixture(autouse=True)
def _cache(in_library_cache: Path) -> Path:
    """Deep validation builds go to the run's shared test cache, not the user's."""
    return in_library_cache


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


# ---------------------------------------------------------------- validate


def test_the_servedrill_group_has_the_author_commands() -> None:
    assert {"validate", "schema", "new", "list"} <= set(main.commands)


def test_good_fixture_validates() -> None:
    result = run("validate", str(GOOD))
    assert result.exit_code == 0, result.output
    assert f"{GOOD}: ok" in result.output


@pytest.mark.parametrize("name", BAD)
def test_bad_fixture_fails_with_file_line_column(name: str) -> None:
    path = DATA / f"{name}.yaml"
    result = run("validate", str(path))
    assert result.exit_code == 1, result.output
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: \S", result.output, re.MULTILINE), result.output


def test_every_diagnostic_of_every_file_in_one_run() -> None:
    paths = [DATA / "duplicate_keys.yaml", GOOD, DATA / "merge_key.yaml"]
    result = run("validate", *map(str, paths))
    assert result.exit_code == 1
    for path in paths:
        for diagnostic in check_incident_file(path):
            assert str(diagnostic) in result.output
    assert f"{GOOD}: ok" in result.output
    assert "3 files checked: 1 ok, 2 with errors" in result.output


def test_folder_expands_to_its_yaml_files(tmp_path: Path) -> None:
    shutil.copy(GOOD, tmp_path / "slow-decode.yaml")
    shutil.copy(DATA / "tabs.yaml", tmp_path / "tabs.yaml")
    (tmp_path / "notes.txt").write_text("not an incident")
    result = run("validate", "--json", str(tmp_path))
    assert result.exit_code == 1
    files = {Path(f["path"]).name: f["ok"] for f in json.loads(result.output)["files"]}
    assert files == {"slow-decode.yaml": True, "tabs.yaml": False}
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    result = run("validate", str(empty))
    assert result.exit_code == 1 and "no incident files" in result.output


def test_binary_garbage_and_missing_paths(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(random.Random(7).randbytes(4096))
    missing = tmp_path / "missing.yaml"
    result = run("validate", str(garbage), str(missing))
    assert result.exit_code == 1
    assert str(garbage) in result.output
    assert f"{missing}: no such file" in result.output


def test_an_unexpected_exception_becomes_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(path: object) -> list[object]:
        raise RuntimeError("loader bug")

    monkeypatch.setattr(cli_validate, "check_incident_file", explode)
    result = run("validate", str(GOOD))
    assert result.exit_code == 1
    [line] = [ln for ln in result.output.splitlines() if "loader bug" in ln]
    assert line.startswith(f"{GOOD}: internal error")


def test_json_shape() -> None:
    result = run("validate", "--json", str(GOOD), str(DATA / "tabs.yaml"))
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert set(data) == {"ok", "files"} and data["ok"] is False
    good, bad = data["files"]
    assert good == {"path": str(GOOD), "ok": True, "current": False, "diagnostics": [], "deep": None}
    assert bad["ok"] is False and bad["deep"] is None
    assert bad["diagnostics"] and set(bad["diagnostics"][0]) == {"line", "column", "message", "hint"}
    assert bad["diagnostics"][0]["line"] == 4


@pytest.mark.slow
def test_deep_json_proves_every_seed() -> None:
    path = DATA / "proof-slow-replica.yaml"
    result = run("validate", "--deep", "--json", "--seed", "0", "--seed", "1", str(path))
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.output)["files"]
    assert entry["ok"] is True and entry["deep"]["ok"] is True
    runs = entry["deep"]["runs"]
    assert [r["seed"] for r in runs] == [0, 1]
    for r in runs:
        assert r["claims"][0]["with_faults"]["holds"] and not r["claims"][0]["without_faults"]["holds"]
        assert r["wall_s"]["faults"] > 0 and r["wall_s"]["ablation"] > 0
        rivals = [w for w in r["worlds"] if w["kind"] == "rival"]
        assert {w["hypothesis"] for w in rivals} == {"overload", "bad-deploy", "kv-pressure"}
        assert all(w["ok"] and w["separated_by"] for w in rivals), r["worlds"]
        assert all(w["ok"] for w in r["worlds"] if w["kind"] == "draw"), r["worlds"]


def _line_of(path: Path, text: str) -> int:
    """1-based number of the first line of `path` containing `text`."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


@pytest.mark.slow
def test_deep_text_reports_the_failing_claim_at_its_line() -> None:
    path = DATA / "proof-false-claims.yaml"
    result = run("validate", "--deep", "--seed", "0", str(path))
    assert result.exit_code == 1
    claim_line = _line_of(path, "id: prefill-ten-times")
    [line] = [ln for ln in result.output.splitlines() if "symptom prefill-ten-times does not hold" in ln]
    assert line.startswith(f"  FAIL {path}:{claim_line}:5: symptom prefill-ten-times"), line
    assert "required >= 10x" in line
    assert f"FAIL {path}:{_line_of(path, 'id: deploy-seen')}:5: signal deploy-seen does not discriminate" \
        in result.output
    # a strawman is its world's fault: the line of that hypothesis's `world:`
    overload = _line_of(path, "id: overload")
    world = overload + next(i for i, ln in enumerate(path.read_text().splitlines()[overload - 1:]) if "world:" in ln)
    assert f"FAIL {path}:{world}:5: hypothesis overload is a strawman: its world does not show briefed symptom " \
        "prefill-ten-times" in result.output
    assert re.search(r"wall time: simulation with faults \d+\.\d s", result.output)


def test_deep_skips_simulation_of_a_broken_file() -> None:
    result = run("validate", "--deep", "--json", str(DATA / "tabs.yaml"))
    assert result.exit_code == 1
    [entry] = json.loads(result.output)["files"]
    assert entry["deep"] is None and entry["diagnostics"]


@pytest.mark.slow
def test_no_path_validates_the_whole_library() -> None:
    library = iter_library()
    result = run("validate", "--json")
    files = json.loads(result.output)["files"]
    assert [f["path"] for f in files] == [str(p) for p in library]
    assert result.exit_code == (0 if all(not check_incident_file(p) for p in library) else 1)


# ---------------------------------------------------------------- schema


def test_schema_check_on_the_committed_schema() -> None:
    result = run("schema", "--check")
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output


def test_schema_check_on_a_stale_or_missing_copy(tmp_path: Path) -> None:
    stale = json.loads(SCHEMA_PATH.read_text())
    stale["$defs"]["FaultSpec"]["properties"].pop("intensity")
    target = tmp_path / "schema.json"
    target.write_text(json.dumps(stale, indent=2))
    assert run("schema", "--check", "--out", str(target)).exit_code == 1
    assert run("schema", "--check", "--out", str(tmp_path / "absent.json")).exit_code == 1


def test_schema_writes_what_check_accepts(tmp_path: Path) -> None:
    target = tmp_path / "out" / "schema.json"
    assert run("schema", "--out", str(target)).exit_code == 0
    assert json.loads(target.read_text()) == incident_json_schema()
    assert run("schema", "--check", "--out", str(target)).exit_code == 0


# ---------------------------------------------------------------- new


def test_new_creates_an_incident_that_validates(tmp_path: Path) -> None:
    result = run("new", "disk-full", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    created = tmp_path / "disk-full.yaml"
    assert str(created) in result.output and f"servedrill validate {created}" in result.output
    assert load_incident(created).id == "disk-full"
    assert run("validate", str(created)).exit_code == 0


def test_new_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "disk-full.yaml"
    target.write_text("mine: keep\n")
    result = run("new", "disk-full", "--dir", str(tmp_path))
    assert result.exit_code == 1 and "already exists" in result.output
    assert target.read_text() == "mine: keep\n"


@pytest.mark.parametrize("bad_id", ["Disk_Full", "disk--full", "-disk", "disk full", "../escape"])
def test_new_refuses_an_invalid_slug(tmp_path: Path, bad_id: str) -> None:
    result = run("new", "--dir", str(tmp_path), "--", bad_id)
    assert result.exit_code == 1
    assert "not a slug" in result.output
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "escape.yaml").exists()


# ---------------------------------------------------------------- list


@pytest.fixture
def library(tmp_path: Path) -> Path:
    shutil.copy(GOOD, tmp_path / "slow-decode.yaml")
    (tmp_path / "broken.yaml").write_text("id: broken\ntitle: [unclosed\n")
    (tmp_path / "template.yaml").write_text("not: listed\n")
    return tmp_path


def test_list_json_with_a_broken_incident(library: Path) -> None:
    result = run("list", "--library", str(library), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [i["id"] for i in data["incidents"]] == ["slow-decode"]
    [entry] = data["incidents"]
    # "hardware" is a topic tag (it can name the cause): a player's listing shows symptom tags only
    assert entry["difficulty"] == 3 and entry["tags"] == ["latency"]
    assert entry["path"] == str(library / "slow-decode.yaml")
    [bad] = data["invalid"]
    assert bad["path"] == str(library / "broken.yaml")
    assert re.match(rf"{re.escape(str(library / 'broken.yaml'))}:\d+:\d+: ", bad["error"])


def test_list_table_coverage_and_filters(library: Path) -> None:
    result = run("list", "--library", str(library))
    assert result.exit_code == 0
    assert "slow-decode" in result.output and "One replica decodes slowly" in result.output
    assert "coverage: latency 1" in result.output and "hardware" not in result.output
    assert "invalid: " in result.output and "broken.yaml" in result.output

    def ids(*args: str) -> list[str]:
        data = json.loads(run("list", "--library", str(library), "--json", *args).stdout)
        return [i["id"] for i in data["incidents"]]

    assert ids("--tag", "latency") == ["slow-decode"]
    assert ids("--tag", "hardware") == [] and ids("--covers", "hard") == []
    assert ids("--tag", "hardware", "--all-tags") == ["slow-decode"]
    assert ids("--covers", "hard", "--all-tags") == ["slow-decode"]
    assert ids("--tag", "numerics", "--all-tags") == []
    assert ids("--difficulty", "3") == ["slow-decode"]
    assert ids("--difficulty", "2") == []


def test_list_hides_topic_tags_unless_asked_and_says_it_spoils(library: Path) -> None:
    hidden = run("list", "--library", str(library), "--tag", "hardware")
    assert "no incidents match" in hidden.output and "--all-tags" in hidden.output
    plain = json.loads(run("list", "--library", str(library), "--json").stdout)
    assert plain["spoils"] is False and plain["topics"] is None
    assert plain["coverage"] == {"latency": 1}
    spoiled = run("list", "--library", str(library), "--json", "--all-tags")
    assert "spoils" in spoiled.stderr
    data = json.loads(spoiled.stdout)
    assert data["spoils"] is True and data["incidents"][0]["tags"] == ["latency", "hardware"]
    assert data["coverage"] == {"hardware": 1, "latency": 1}
    # the counts per topic are the same either way: they say what the library teaches, not where
    assert data["topic_counts"] == plain["topic_counts"]
    assert data["topic_counts"] == {key: len(ids) for key, ids in data["topics"].items()}


@pytest.mark.slow
def test_the_library_covers_every_interview_topic_and_list_reports_it() -> None:
    from incidents.coverage import TOPICS

    result = run("list", "--json", "--all-tags")
    assert result.exit_code == 0, result.output
    topics = json.loads(result.stdout)["topics"]
    assert set(topics) == {t.key for t in TOPICS}
    assert [key for key, ids in topics.items() if not ids] == []
    text = run("list").output
    assert f"interview topics covered: {len(TOPICS)} of {len(TOPICS)}" in text


def test_topic_coverage_matches_tags_exactly() -> None:
    from incidents.coverage import topic_coverage

    found = topic_coverage([("a", ["KV-Cache", "preemption"]), ("b", ["fallbacks"])])
    assert found["kv-capacity"] == ["a"] and found["fallback"] == [] and found["paged-kv"] == []


@pytest.mark.slow
def test_deep_fails_a_signal_its_own_query_cannot_observe(tmp_path: Path) -> None:
    text = (DATA / "proof-slow-replica.yaml").read_text()
    assert "columns: [name, value], replica: vllm-1}" in text
    broken = tmp_path / "proof-slow-replica.yaml"
    broken.write_text(text.replace("columns: [name, value], replica: vllm-1}",
                                   "columns: [name, value, ts], replica: vllm-1}"))
    result = run("validate", "--deep", "--seed", "0", str(broken))
    assert result.exit_code == 1
    [line] = [ln for ln in result.output.splitlines() if "signal clock-drop: its own query" in ln]
    assert line.startswith(f"  FAIL {broken}:{_line_of(broken, 'id: clock-drop')}:5: "), line
    assert "does not observe it as a player would" in line and "metrics(" in line
    good = run("validate", "--deep", "--seed", "0", str(DATA / "proof-slow-replica.yaml"))
    assert "every signal's reference query" in good.output


@pytest.mark.slow
def test_the_library_spans_every_difficulty() -> None:
    """At least two incidents at each difficulty 1-4 and one at 5 (a cascade or two concurrent faults)."""
    incidents = json.loads(run("list", "--json").output)["incidents"]
    counts = {d: sum(inc["difficulty"] == d for inc in incidents) for d in range(1, 6)}
    assert all(counts[d] >= 2 for d in range(1, 5)) and counts[5] >= 1, counts
    hardest = [load_incident(Path(inc["path"])) for inc in incidents if inc["difficulty"] == 5]
    assert any(len(inc.faults) >= 2 for inc in hardest)


def test_a_deep_proof_logged_to_a_file_says_it_is_alive(capsys: pytest.CaptureFixture[str]) -> None:
    """Off a terminal (CI, `| tee`) the proof counter prints whole lines, the first proof done and then at
    most one per LOG_EVERY_S, and always the last, instead of nothing until the end."""
    from game.cli.validate_commands import _Counter

    counter = _Counter()
    counter.tty = False
    for done in range(1, 6):
        counter(done, 5, f"x seed {done - 1}")
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(" done")[0] for ln in lines] == ["proving 1/5: x seed 0", "proving 5/5: x seed 4"]
    assert all(ln.endswith(" s in") for ln in lines)
