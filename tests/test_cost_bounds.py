"""Builds are bounded before they start (telemetry_gen.cost; docs/authoring.md, "Bounds"): the reviewer's
oversized incidents are refused by `validate` and `generate` in one line naming the knob, fast and in little
memory; --allow-large lets an author through; the library fits; `fidelity --points` reads only regular files
and bounds a point's work; a failed build leaves nothing in the cache folder."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from incidents.loader import LIBRARY_DIR, iter_library, load_incident
from telemetry_gen import cache, store
from telemetry_gen.cost import BOUNDS, check_file_cost, estimate, excesses

ROOT = Path(__file__).resolve().parent.parent
SERVEDRILL = [str(Path(sys.executable).parent / "servedrill")]
BASE = LIBRARY_DIR / "research-requests-crawl.yaml"  # a fixed incident: 3 replicas, 2.5 req/s, 2100 s
# a refusal is an estimate, never a build: well within these (measured ~1.3 s of CPU, 160 MB). CPU seconds,
# not wall: a busy machine stretches the wall clock (12 s seen beside other jobs), not the work done
MAX_CPU_S = 10.0
MAX_RSS_MB = 400.0
# Run the command from a fresh interpreter whose only child it is, so RUSAGE_CHILDREN's peak is this command's
_MEASURE = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(json.dumps({'rc': r.returncode, 'out': r.stdout, 'err': r.stderr, 'wall': time.perf_counter() - t,\n"
    "                  'cpu': u.ru_utime + u.ru_stime, 'rss_kb': u.ru_maxrss}))\n"
)


def run_measured(args: list[str], env: dict[str, str] | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """Run `servedrill ARGS`: its exit code, output, wall and CPU seconds and peak resident memory (MB)."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, *SERVEDRILL, *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)
    result: dict[str, Any] = json.loads(done.stdout)
    result["rss_mb"] = result["rss_kb"] / 1024.0
    return result


def variant(tmp: Path, name: str, *edits: tuple[str, str]) -> Path:
    """The base incident with each (old line, new text) replaced once, saved as NAME.yaml (id NAME)."""
    text = BASE.read_text(encoding="utf-8").replace("id: research-requests-crawl", f"id: {name}", 1)
    # the mitigation phase reads the fleet after the window: a stretched window would be refused for it first
    text = re.sub(r"(?m)^mitigation:\n(?:(?:[ #].*)?\n)*", "", text, count=1)
    assert "\nmitigation:" not in text
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# each reviewer case: the edit, the knob its refusal must name, and the YAML key on the line it points at
CASES: dict[str, tuple[tuple[tuple[str, str], ...], str, str]] = {
    "week-window": ((("  duration_s: 2100\n", "  duration_s: 604800\n"),), "window.duration_s", "duration_s:"),
    "fleet-256-at-5000": ((("  replicas: 3\n", "  replicas: 256\n"), ("  base_rps: 2.5\n", "  base_rps: 5000\n")),
                          "workload.base_rps", "base_rps:"),
    "scrape-micro": ((("  scrape_interval_s: 10\n", "  scrape_interval_s: 1e-6\n"),), "window.scrape_interval_s",
                     "scrape_interval_s:"),
    "tp64-pp64": ((("  replicas: 3\n", "  replicas: 3\n  tensor_parallel: 64\n  pipeline_parallel: 64\n"),),
                  "pipeline_parallel", "pipeline_parallel:"),
    "rate-inf": ((("  base_rps: 2.5\n", "  base_rps: .inf\n"),), "workload.base_rps", "base_rps:"),
    "rate-nan": ((("  base_rps: 2.5\n", "  base_rps: .nan\n"),), "workload.base_rps", "base_rps:"),
    "burst-1e9": ((("  start_hour: 9\n", "  start_hour: 9\n  bursts:\n    - {start_s: 600, duration_s: 60, "
                    "factor: 1e9}\n"),), "workload.bursts[0].factor", "factor: 1e9"),
}


@pytest.mark.parametrize("command", ["validate", pytest.param("generate", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_reviewer_case_is_refused_in_one_line_naming_the_knob(tmp_path: Path, case: str, command: str) -> None:
    edits, knob, key = CASES[case]
    path = variant(tmp_path, case, *edits)
    cache_dir = tmp_path / "cache"
    got = run_measured([command, str(path)], env={"SERVEDRILL_CACHE": str(cache_dir)})
    assert got["rc"] == 1, got
    lines = [line for line in got["err"].splitlines() if line.strip()]
    problem = lines if command == "generate" else [line for line in got["out"].splitlines() if str(path) in line]
    assert len(problem) == 1, got
    match = re.match(rf"^{re.escape(str(path))}:(\d+):(\d+): (.*) \(hint: .+\)$", problem[0])
    assert match, problem[0]
    assert knob in match.group(3), problem[0]
    # the line named is the knob's own line in the file
    assert key in path.read_text(encoding="utf-8").splitlines()[int(match.group(1)) - 1], problem[0]
    assert "Traceback" not in got["err"] and "internal error" not in got["err"] + got["out"]
    assert got["cpu"] < MAX_CPU_S, got
    assert got["rss_mb"] < MAX_RSS_MB, got["rss_mb"]
    # nothing was built, and nothing left behind
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_generate_json_refusal_is_one_object(tmp_path: Path) -> None:
    path = variant(tmp_path, "scrape-json", ("  scrape_interval_s: 10\n", "  scrape_interval_s: 1e-6\n"))
    got = run_measured(["generate", str(path), "--json"], env={"SERVEDRILL_CACHE": str(tmp_path / "c")})
    assert got["rc"] == 1
    obj = json.loads(got["out"])
    assert obj["ok"] is False and "window.scrape_interval_s" in obj["error"]
    assert obj["diagnostics"] == [obj["error"]]


def test_allow_large_lets_an_author_through_just_over_a_bound(tmp_path: Path) -> None:
    # 3 replicas x 2100 s / 0.09 s x 60 series = 4.2M metric rows: just over the bound of 4M, and nothing else
    path = variant(tmp_path, "just-over", ("  scrape_interval_s: 10\n", "  scrape_interval_s: 0.09\n"))
    est = estimate(load_incident(path))
    over = excesses(est)
    assert [e.quantity for e in over] == ["metric_rows"], over
    assert BOUNDS["metric_rows"] < est.metric_rows < 1.1 * BOUNDS["metric_rows"]
    refused = run_measured(["validate", str(path)])
    assert refused["rc"] == 1 and "window.scrape_interval_s" in refused["out"], refused
    allowed = run_measured(["validate", "--allow-large", str(path)])
    assert allowed["rc"] == 0, allowed
    assert f"{path}: ok" in allowed["out"]


def test_each_bound_is_refused_just_over_it_and_not_just_under(tmp_path: Path) -> None:
    """The estimate moves with its knob: 0.1 s scrapes fit (3.8M rows), 0.09 s do not; 450 req/s fit, 500 not."""
    under = variant(tmp_path, "under", ("  scrape_interval_s: 10\n", "  scrape_interval_s: 0.1\n"))
    over = variant(tmp_path, "over", ("  base_rps: 2.5\n", "  base_rps: 500\n"))
    fits = variant(tmp_path, "fits", ("  base_rps: 2.5\n", "  base_rps: 400\n"))
    assert check_file_cost(str(under)) == []
    assert check_file_cost(str(fits)) == []
    found = check_file_cost(str(over))
    assert found and found[0].message.startswith("workload.base_rps: 500 req/s"), found


@pytest.mark.slow  # estimates every variant of every library incident: ~10 s
def test_every_library_incident_fits_its_bounds_with_room() -> None:
    """Every incident (every validation variant) fits, at most half of each bound: the bounds have margin."""
    paths = iter_library()
    assert len(paths) >= 20
    for path in paths:
        assert check_file_cost(str(path)) == [], path
        est = estimate(load_incident(path))
        for name, value in est.quantities().items():
            assert value <= 0.5 * BOUNDS[name], (path.name, name, value)


def test_the_estimate_matches_a_real_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests and metric rows as estimated are within 25 % of what a build makes (a wrong estimate would
    bound the wrong incidents)."""
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path))
    inc = load_incident(BASE)
    est = estimate(inc)
    info = cache.ensure_database(inc, 0)
    assert abs(est.requests / info.rows["requests"] - 1.0) < 0.25, (est.requests, info.rows)
    assert abs(est.metric_rows / info.rows["metrics"] - 1.0) < 0.25, (est.metric_rows, info.rows)


# ------------------------------------------------------------------------------------- cache folder


def test_a_failed_build_leaves_no_tmp_and_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path))
    inc = load_incident(BASE)
    fake = SimpleNamespace(tables={}, digest="x", row_counts=lambda: {})
    monkeypatch.setattr(cache, "build_telemetry", lambda *a, **k: fake)

    def full_disk(tmp: Path, tables: Any) -> None:
        tmp.write_bytes(b"half a database")
        Path(str(tmp) + ".wal").write_bytes(b"wal")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "_write", full_disk)
    with pytest.raises(OSError):
        cache.ensure_database(inc, 0)
    assert list(tmp_path.iterdir()) == []

    def simulation_fails(*a: Any, **k: Any) -> Any:
        raise MemoryError("simulated")

    monkeypatch.setattr(cache, "build_telemetry", simulation_fails)
    with pytest.raises(MemoryError):
        cache.ensure_database(inc, 0)
    assert list(tmp_path.iterdir()) == []


def test_a_good_build_leaves_only_its_database_and_meta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path))
    info = cache.ensure_database(load_incident(BASE), 0)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".duckdb", ".json"], list(tmp_path.iterdir())
    assert cache.ensure_database(load_incident(BASE), 0).cached and Path(info.path).exists()


# ---------------------------------------------------------------------------------- fidelity points


def _fidelity(points: str) -> dict[str, Any]:
    # the wall timeout only catches a hang (a blocking FIFO); the bound asserted is CPU
    return run_measured(["fidelity", "--points", points, "--workers", "1"], timeout=300)


def _assert_quick_one_line_refusal(got: dict[str, Any], words: str) -> None:
    assert got["rc"] == 1, got
    lines = [line for line in got["err"].splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], got
    assert got["cpu"] < MAX_CPU_S and got["rss_mb"] < MAX_RSS_MB, got


def test_fidelity_refuses_dev_zero_fast() -> None:
    _assert_quick_one_line_refusal(_fidelity("/dev/zero"), "not a regular file")


def test_fidelity_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "points.yaml"
    os.mkfifo(fifo)
    got = _fidelity(str(fifo))  # no writer ever opens it: a blocking open would hang until the timeout (an error)
    _assert_quick_one_line_refusal(got, "is a FIFO")


def test_fidelity_refuses_a_folder(tmp_path: Path) -> None:
    _assert_quick_one_line_refusal(_fidelity(str(tmp_path)), "is a folder")


POINT = """points:
  - name: big
    source: https://example.com
    model: Llama-3.1-8B
    gpu: H100-SXM
    engine: vLLM
    tp: 1
    input_tokens: 128
    output_tokens: {output}
    load: {load}
    num_prompts: {prompts}
    published: {{ttft_ms: 10}}
    fitted_to: []
"""


@pytest.mark.parametrize(("output", "load", "prompts", "words"), [
    (2000, "{kind: batch}", 100000, "tokens to replay"),  # 2.1e8 tokens: ran 6.4 s
    (128, "{kind: rate, rate: 0.5}", 100000, "engine steps"),  # one request at a time: 1.3e7 steps
])
def test_fidelity_refuses_a_point_over_its_work_bound(tmp_path: Path, output: int, load: str, prompts: int,
                                                      words: str) -> None:
    path = tmp_path / "points.yaml"
    path.write_text(POINT.format(output=output, load=load, prompts=prompts), encoding="utf-8")
    got = _fidelity(str(path))
    _assert_quick_one_line_refusal(got, words)
    assert got["err"].startswith(f"{path}:11: big:")  # the num_prompts line


def test_fidelity_refuses_a_file_over_its_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "points.yaml"
    path.write_bytes(b"# " + b"x" * (5 << 20) + b"\n")
    _assert_quick_one_line_refusal(_fidelity(str(path)), "bytes is more than a points file may hold")


def test_the_built_in_points_fit_their_work_bounds() -> None:
    from telemetry_gen.fidelity import points as fp

    work = [fp.point_work(p) for p in fp.load_points()]
    assert max(t for t, _ in work) <= fp.MAX_POINT_TOKENS / 2
    assert max(s for _, s in work) <= fp.MAX_POINT_STEPS / 2
    assert sum(s for _, s in work) <= fp.MAX_TOTAL_STEPS / 2


def test_a_template_answers_for_its_costliest_variant_not_only_the_validated_seeds(tmp_path: Path) -> None:
    """A variable whose costly end no validation seed happens to draw is still held to the bounds: the check
    builds the variant with every numeric variable at its costlier end."""
    from incidents.loader import source_map
    from incidents.variants import VALIDATION_SEEDS

    rates = [2.5 + 0.5 * k for k in range(40)] + [5000]
    path = variant(tmp_path, "rare-costly-rate",
                   ("  base_rps: 2.5\n", '  base_rps: "{{rps}}"\n'),
                   ("\nbriefing:", f"\nvariables:\n  rps: {{choice: {rates}}}\n\nbriefing:"))
    drawn = [load_incident(path, s).workload.base_rps for s in VALIDATION_SEEDS]
    assert 5000 not in drawn, drawn  # the point of the case: the validated variants all fit
    [found] = check_file_cost(str(path))
    assert "costliest variant: rps=5000" in found.message and "base_rps" in found.message
    line = path.read_text(encoding="utf-8").splitlines()[found.line - 1]
    assert "base_rps" in line, (line, source_map(str(path)))
    # the same template without the costly end fits
    cheap = variant(tmp_path, "rare-cheap-rate", ("  base_rps: 2.5\n", '  base_rps: "{{rps}}"\n'),
                    ("\nbriefing:", f"\nvariables:\n  rps: {{choice: {rates[:-1]}}}\n\nbriefing:"))
    assert check_file_cost(str(cheap)) == []


def test_every_build_is_guarded_not_only_validate_and_generate(tmp_path: Path) -> None:
    """`play`, `query`, `export` and the worlds of `--deep` build through telemetry_gen.cache.ensure_database:
    it refuses an incident over the bounds before simulating anything, naming the knob, unless the author
    said --allow-large (the environment variable that flag sets for the process and its workers)."""
    from incidents.loader import IncidentError
    from telemetry_gen.cache import ensure_database
    from telemetry_gen.cost import ALLOW_LARGE_ENV

    edits, knob, _ = CASES["week-window"]
    inc = load_incident(variant(tmp_path, "week-built", *edits))
    env = {**os.environ, "SERVEDRILL_CACHE": str(tmp_path / "cache")}
    os.environ.pop(ALLOW_LARGE_ENV, None)
    started = time.process_time()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", env["SERVEDRILL_CACHE"])
        with pytest.raises(IncidentError) as err:
            ensure_database(inc, 0)
    assert time.process_time() - started < MAX_CPU_S
    assert knob in str(err.value.diagnostics[0]) and "--allow-large" in str(err.value.diagnostics[0])
    assert not list((tmp_path / "cache").glob("*.duckdb"))
    # through a command that builds: `query` on the file
    done = run_measured(["query", str(tmp_path / "week-built.yaml"), "SELECT 1", "--json"],
                        env={"SERVEDRILL_CACHE": env["SERVEDRILL_CACHE"]})
    assert done["rc"] == 1 and knob in done["out"] + done["err"], done
    assert done["cpu"] < MAX_CPU_S and done["rss_mb"] < MAX_RSS_MB, done
