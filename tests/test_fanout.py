"""Fan-out (telemetry_gen.fanout): independent tasks in local processes or as Ray tasks, failures as data, bounded.

The Ray tests run on a local two-node cluster (ray.cluster_utils.Cluster, one CPU per node) that the module's
fixture starts and shuts down; they prove two library incidents through it and locally and compare the proof
records byte for byte, and play one eval episode both ways. They skip, saying why, where Ray is not installed
(`make test` installs it: the Makefile's `ray` extra)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from game.cli.commands import main as cli
from telemetry_gen.fanout import FanoutError, Outcome, fan_out, ray_available

ROOT = Path(__file__).resolve().parent.parent
PROVEN = ("first-shift-one-replica-lags", "one-slow-replica")
"""Two small library incidents the Ray proof test proves (claims only, seeds 0 and 1)."""

needs_ray = pytest.mark.skipif(not ray_available(), reason="Ray is not installed here: pip install "
                               "'servedrill[ray]' (make test installs the extra)")


def by_index(outcomes: Iterator[Outcome[Any, Any]]) -> dict[int, Outcome[Any, Any]]:
    return {o.index: o for o in outcomes}


# ---------------------------------------------------------------- local processes


def test_a_failing_task_comes_back_as_data() -> None:
    got = by_index(fan_out(math.sqrt, [4.0, -1.0, 9.0], jobs=2))
    assert got[0].value == 2.0 and got[2].value == 3.0 and got[0].ok
    assert got[1].value is None and not got[1].ok and "math domain error" in (got[1].error or "")


def test_one_process_runs_the_tasks_in_order_with_errors_as_data() -> None:
    got = list(fan_out(math.sqrt, [1.0, -1.0], jobs=1))
    assert [o.index for o in got] == [0, 1] and got[0].value == 1.0 and got[1].error


def test_a_task_past_its_bound_is_stopped_and_the_others_finish() -> None:
    started = time.monotonic()
    got = by_index(fan_out(time.sleep, [60.0, 0.01, 0.01, 0.01], jobs=2, task_timeout_s=4.0))
    assert time.monotonic() - started < 40  # not the 60 s the first task asked for
    assert "timed out" in (got[0].error or "")
    assert all(got[i].ok for i in (1, 2, 3)), got


def test_the_run_s_bound_ends_every_unfinished_task() -> None:
    started = time.monotonic()
    got = by_index(fan_out(time.sleep, [60.0, 60.0, 60.0], jobs=2, timeout_s=3.0))
    assert time.monotonic() - started < 30
    assert sorted(got) == [0, 1, 2] and all("limit of 3 s" in (o.error or "") for o in got.values())


# ---------------------------------------------------------------- without Ray


@pytest.mark.parametrize("args", [
    ["validate", "--deep", "--ray", "auto", "one-slow-replica"],
    ["eval", "--agent", "builtin:expert", "--incidents", "one-slow-replica", "--seeds", "0", "--out", "OUT",
     "--ray", "auto"],
    ["autoplay", "--strategy", "expert", "one-slow-replica", "--seeds", "0-1", "--ray", "auto"],
    ["bench", "fidelity", "--ray", "auto"],
    ["fidelity", "--ray", "auto"],
])
def test_without_ray_the_flag_says_how_to_install_it(args: list[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as it does where Ray is missing
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "pip install 'servedrill[ray]'" in result.output and "servedrill: --ray needs Ray" in result.output
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    report = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and report["ok"] is False and "servedrill[ray]" in report["error"]


def test_the_library_call_raises_fanout_error_without_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(FanoutError, match=r"servedrill\[ray\]"):
        fan_out(math.sqrt, [1.0], ray="auto")


def test_a_cli_without_ray_gives_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The whole command in its own process, Ray hidden behind a `ray` package that fails to import."""
    fake = tmp_path / "fake" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    done = subprocess.run([str(Path(sys.executable).parent / "servedrill"), "validate", "--deep", "--ray", "auto",
                           "one-slow-replica"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line
    assert "pip install 'servedrill[ray]'" in done.stderr


# ---------------------------------------------------------------- on a local two-node Ray cluster


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """Two Ray nodes on this machine, one CPU each; shut down (raylets and all) when the module is done."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()


def _validate(folder: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> dict[str, Any]:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(cache))
    result = CliRunner().invoke(cli, ["validate", "--deep", "--claims-only", "--seeds", "2", "--record", str(folder),
                                      "--json", *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


@needs_ray
@pytest.mark.slow  # 8 simulations locally and 8 on the cluster, plus the cluster's start
def test_proofs_on_a_two_node_ray_cluster_are_the_local_ones_byte_for_byte(
        ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for side in ("local", "ray"):
        (tmp_path / side).mkdir()
        for name in PROVEN:
            shutil.copy(ROOT / "incidents" / f"{name}.yaml", tmp_path / side / f"{name}.yaml")
    local = _validate(tmp_path / "local", tmp_path / "cache-local", monkeypatch, "--jobs", "2")
    on_ray = _validate(tmp_path / "ray", tmp_path / "cache-ray", monkeypatch, "--ray", ray_cluster)
    assert on_ray["deep"]["ray"] == ray_cluster and on_ray["deep"]["proofs"] == local["deep"]["proofs"] == 4
    assert local["ok"] and on_ray["ok"]
    # the Ray tasks built the databases themselves (with and without the faults, per file and seed), in the cache
    # the driver named (forwarded to every task), under the same content-addressed names as the local run's
    built = sorted(p.name for p in (tmp_path / "cache-ray").glob("*.duckdb"))
    assert len(built) == 8 and built == sorted(p.name for p in (tmp_path / "cache-local").glob("*.duckdb"))
    for name in PROVEN:
        mine = (tmp_path / "local" / "proofs" / f"{name}.json").read_bytes()
        theirs = (tmp_path / "ray" / "proofs" / f"{name}.json").read_bytes()
        assert mine == theirs, name
        assert json.loads(mine)["ok"] and sorted(json.loads(mine)["seeds"]) == ["0", "1"]


@needs_ray
@pytest.mark.slow  # starts a two-node Ray cluster and waits out a 60 s task bound
def test_ray_task_bounds_and_errors_as_data(ray_cluster: str) -> None:
    started = time.monotonic()
    got = by_index(fan_out(math.sqrt, [4.0, -1.0], ray=ray_cluster))
    assert got[0].value == 2.0 and "math domain error" in (got[1].error or "")
    # the bound counts from submission, a worker's start-up included: on a busy machine that alone took over
    # 8 s, so the bound is generous and what is checked is that the endless task was cut, not how soon
    got = by_index(fan_out(time.sleep, [3600.0, 0.01], ray=ray_cluster, task_timeout_s=60.0))
    assert "timed out" in (got[0].error or "") and got[1].ok
    assert time.monotonic() - started < 600
    # one CPU per node and both tasks in flight at once: they ran on the two nodes
    spread = by_index(fan_out(time.sleep, [2.0, 2.0], ray=ray_cluster))
    assert all(o.ok for o in spread.values()) and len({o.node for o in spread.values()}) == 2, spread
    import ray

    assert not ray.is_initialized()  # the run connected and disconnected; the cluster is the fixture's


def _eval(out: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["eval", "--agent", "builtin:expert", "--incidents", PROVEN[0], "--seeds", "0",
                                      "--out", str(out), "--json", *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


@needs_ray
@pytest.mark.slow  # two episodes of the tutorial incident, each an agent, its server and the scoring
def test_eval_on_ray_gives_the_local_results(ray_cluster: str, library_cache: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    local = _eval(tmp_path / "local")
    on_ray = _eval(tmp_path / "ray", "--ray", ray_cluster)

    def same(report: dict[str, Any], out: Path) -> list[dict[str, Any]]:
        rows = []
        for row in report["episodes"]:
            assert row["status"] == "submitted" and row["error"] is None, row
            assert Path(row["transcript"]) == out / "transcripts" / Path(row["transcript"]).name
            assert Path(row["transcript"]).is_file()  # shipped back from the Ray node into --out
            rows.append({k: v for k, v in row.items() if k not in ("wall_s", "transcript", "session_id")})
        return rows

    assert same(local, tmp_path / "local") == same(on_ray, tmp_path / "ray")
    assert [{k: v for k, v in r.items() if k != "wall_s"} for r in local["summary"]] == \
        [{k: v for k, v in r.items() if k != "wall_s"} for r in on_ray["summary"]]
    assert list((tmp_path / "ray" / "episodes").iterdir())  # the episode's logs and journal came back too


@needs_ray
@pytest.mark.slow  # needs the two-node Ray cluster the module starts
def test_fidelity_points_on_ray_are_the_local_rows(ray_cluster: str) -> None:
    def rows(*extra: str) -> list[dict[str, Any]]:
        result = CliRunner().invoke(cli, ["fidelity", "--only", "nightly-latency-llama8B", "--json", *extra])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert not report["failed_points"]
        return list(report["points"])

    local = rows("--workers", "2")
    assert len(local) == 3 and local == rows("--ray", ray_cluster)


@pytest.mark.slow  # two games of the tutorial, scored on their worlds
def test_an_autoplay_sweep_plays_every_seed(in_library_cache: Path) -> None:
    result = CliRunner().invoke(cli, ["autoplay", "--strategy", "lucky", PROVEN[0], "--seeds", "0-1", "--jobs", "2",
                                      "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["spoils"] and report["seeds"] == [0, 1] and report["failed"] == []
    assert [r["seed"] for r in report["runs"]] == [0, 1] and all(r["queries"] == 1 for r in report["runs"])
    assert report["mean"] == round(sum(r["total"] for r in report["runs"]) / 2, 2)


def test_a_sweep_flag_without_seeds_is_refused() -> None:
    result = CliRunner().invoke(cli, ["autoplay", "--strategy", "lucky", PROVEN[0], "--jobs", "2"])
    assert result.exit_code == 1 and "--seeds" in result.output and "Traceback" not in result.output
