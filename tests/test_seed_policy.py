"""The seed policy of `servedrill validate --deep`: how many seeds, which, reported how (per seed, with
file:line, in text and JSON), and in parallel processes. Most tests replace the proof of one seed with a
stand-in that fails on chosen seeds, so they run in milliseconds; one proves a small fixture for real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from game.cli.commands import main
from game.cli.game_commands import DEAL_SEEDS
from incidents.claims import ClaimResult
from incidents.loader import source_map
from incidents.variants import (
    PROOF_CATCH_PROBABILITY,
    PROOF_CATCH_SHARE,
    PROOF_SEEDS,
    catch_probability,
    proof_seeds,
)
from telemetry_gen.proving import pool as proof_pool
from telemetry_gen.proving.pool import ProofTask, located
from telemetry_gen.proving.proof import ClaimCheck, ProofReport

DATA = Path(__file__).parent / "data" / "incidents"
SLOW = DATA / "proof-slow-replica.yaml"  # a fixed incident: no variables


def test_the_sample_catches_a_one_in_twenty_failure_with_probability_095() -> None:
    assert PROOF_CATCH_SHARE == 1 / 20 and PROOF_CATCH_PROBABILITY == 0.95
    assert catch_probability(PROOF_SEEDS) >= PROOF_CATCH_PROBABILITY
    # and it is the smallest sample that does: one seed fewer falls short
    assert catch_probability(PROOF_SEEDS - 1) < PROOF_CATCH_PROBABILITY
    assert catch_probability(3) == pytest.approx(1 - 0.95**3)  # the old policy: seeds 0-2 caught 14%


def test_the_sample_is_seeds_players_can_be_dealt() -> None:
    assert proof_seeds() == tuple(range(PROOF_SEEDS))
    assert max(proof_seeds()) < DEAL_SEEDS
    assert proof_seeds(3) == (0, 1, 2) and proof_seeds(0) == ()


# ---------------------------------------------------------------- the CLI, with a stand-in proof


FAILING = {6, 31}


def _stand_in(task: ProofTask, inspect: Any = None, progress: Any = None) -> dict[str, Any]:
    """A proof of `task` that fails its first symptom on the FAILING seeds, without simulating."""
    holds = ClaimResult(True, 2.0, 1.0, 2.0, 1.1, "p90 of requests.prefill_s: 2x; required >= 1.1x")
    short = ClaimResult(False, 1.0, 1.0, 1.0, 1.1, "p90 of requests.prefill_s: 1x; required >= 1.1x")
    no = ClaimResult(False, 1.0, 1.0, 1.0, 1.1, "p90 of requests.prefill_s: 1x; required >= 1.1x")
    claim = ClaimCheck("prefill-slow-on-part", "c", "ratio_at_least",
                       short if task.seed in FAILING else holds, no)
    report = ProofReport("proof-slow-replica", task.seed, claims=[claim], worlds_checked=task.worlds)
    return located(report, source_map(task.path))


@pytest.fixture
def proofs(monkeypatch: pytest.MonkeyPatch) -> list[ProofTask]:
    """Replace the proof of one seed; collect the tasks it was given."""
    seen: list[ProofTask] = []

    def fake(task: ProofTask, inspect: Any = None, progress: Any = None) -> dict[str, Any]:
        seen.append(task)
        return _stand_in(task, inspect, progress)

    monkeypatch.setattr(proof_pool, "prove_task", fake)
    return seen


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _claim_line(path: Path) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), start=1) if "id: prefill-slow-on-part" in ln)


def test_deep_proves_the_whole_sample_by_default_even_for_a_fixed_incident(proofs: list[ProofTask]) -> None:
    result = run("validate", "--deep", "--jobs", "1", "--json", str(SLOW))
    assert sorted(t.seed for t in proofs) == list(range(PROOF_SEEDS))
    assert all(t.worlds for t in proofs)
    assert result.exit_code == 1
    data = json.loads(result.output)
    [entry] = data["files"]
    deep = entry["deep"]
    assert deep["seeds"] == list(range(PROOF_SEEDS)) and [r["seed"] for r in deep["runs"]] == deep["seeds"]
    assert deep["failed_seeds"] == sorted(FAILING) and deep["ok"] is False
    [check] = deep["by_check"]
    line = _claim_line(SLOW)
    suspects = check.pop("suspects")
    assert check == {"check": "claim", "subject": ["symptoms", "prefill-slow-on-part"], "at": f"{SLOW}:{line}:5",
                     "line": line, "column": 5, "seeds": sorted(FAILING)}
    # the entries most likely at fault, gathered once from the failing seeds' own suspects
    gathered = {s["at"] for r in deep["runs"] for f in r.get("failures", []) for s in f.get("suspects", [])}
    assert isinstance(suspects, list) and {s["at"] for s in suspects} == gathered
    # old keys stay; new ones name the file position of the failing claim
    bad = deep["runs"][6]
    assert {"incident", "seed", "ok", "problems", "claims", "lines"} <= set(bad)
    assert bad["failures"][0]["at"] == f"{SLOW}:{line}:5" and bad["claims"][0]["line"] == line
    assert data["deep"]["seeds"] == list(range(PROOF_SEEDS)) and data["deep"]["jobs"] == 1


def test_text_reports_every_seed_and_where_it_fails(proofs: list[ProofTask]) -> None:
    result = run("validate", "--deep", "--seeds", "8", "--jobs", "1", str(SLOW))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    for seed in range(8):
        verdict = "FAILED (1 problem)" if seed in FAILING else "ok"
        assert f"{SLOW}: seed {seed}: {verdict}" in lines
    at = f"{SLOW}:{_claim_line(SLOW)}:5"
    assert any(ln.startswith(f"{at}: seed 6: symptom prefill-slow-on-part does not hold") for ln in lines)
    assert f"{SLOW}: deep check on 8 seeds (0-7): 7 ok, failing seeds: 6" in lines
    assert f"  {at}: symptom prefill-slow-on-part fails on 1 of 8 seeds: 6" in lines


def test_seed_and_seeds_choose_what_is_proved(proofs: list[ProofTask]) -> None:
    assert run("validate", "--deep", "--seeds", "3", "--jobs", "1", str(SLOW)).exit_code == 0
    assert [t.seed for t in proofs] == [0, 1, 2]
    proofs.clear()
    result = run("validate", "--deep", "--seed", "31", "--seed", "2", "--seeds", "40", "--jobs", "1",
                 "--claims-only", str(SLOW))
    assert sorted(t.seed for t in proofs) == [2, 31]  # --seed wins over --seeds
    assert not any(t.worlds for t in proofs)
    assert "(claims only: no hypothesis worlds)" in result.output and result.exit_code == 1


def test_a_file_that_fails_the_static_check_is_not_proved(proofs: list[ProofTask], tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(SLOW.read_text().replace("kind: gpu_throttle", "kind: gpu_throtle"))
    result = run("validate", "--deep", "--seeds", "2", "--jobs", "1", str(broken), str(SLOW))
    assert [t.path for t in proofs] == [str(SLOW), str(SLOW)]
    assert "did you mean 'gpu_throttle'" in result.output
    # files print in the order given, the broken one first
    assert result.output.index(str(broken)) < result.output.index(f"{SLOW}: seed 0")


# ---------------------------------------------------------------- for real, in two processes


@pytest.fixture
def _cache(in_library_cache: Path) -> Path:
    return in_library_cache


@pytest.mark.slow
def test_parallel_proof_of_two_seeds_in_worker_processes(_cache: Path) -> None:
    result = run("validate", "--deep", "--seeds", "2", "--jobs", "2", "--claims-only", "--json", str(SLOW))
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.output)["files"]
    runs = entry["deep"]["runs"]
    assert [r["seed"] for r in runs] == [0, 1] and all(r["ok"] for r in runs)
    assert all(r["worlds"] == [] and r["worlds_checked"] is False for r in runs)
    # two seeds draw two different traffics
    assert runs[0]["claims"][0]["with_faults"]["observed"] != runs[1]["claims"][0]["with_faults"]["observed"]


def _die_once(incident: object, database: Path) -> list[str]:
    """An inspect hook whose first call (across processes) kills its worker, as an OOM kill would."""
    import os

    marker = Path(os.environ["SERVEDRILL_TEST_DIE_ONCE"])
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return []
    os._exit(1)


@pytest.mark.slow
def test_a_dead_worker_does_not_fail_the_rest_of_the_run(
    _cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVEDRILL_TEST_DIE_ONCE", str(tmp_path / "died"))
    tasks = [ProofTask(str(SLOW), seed, worlds=False) for seed in (0, 1, 2)]
    runs = dict(proof_pool.prove_many(tasks, 2, inspect=_die_once))
    assert (tmp_path / "died").exists()  # a worker did die
    assert sorted(t.seed for t in runs) == [0, 1, 2]
    assert all(run["ok"] for run in runs.values()), [run["problems"] for run in runs.values()]
