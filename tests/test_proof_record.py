"""Proof records (telemetry_gen.proving.record): what `validate --deep --record` keeps, how records merge, and
every way `check_record` refuses one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from game.cli.commands import main
from incidents.variants import PROOF_SEEDS, WORLD_PROOF_SEEDS
from telemetry_gen.proving.record import (
    check_record,
    make_record,
    read_record,
    record_path,
    write_record,
)

FIXTURE = Path(__file__).parent / "data" / "incidents" / "proof-slow-replica.yaml"


def run(seed: int, *, ok: bool = True, faults: str = "f", ablation: str = "a", worlds: bool = False,
        claims: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A run dict as telemetry_gen.proving.pool.located gives it, reduced to what a record reads."""
    return {"seed": seed, "ok": ok, "error": None, "worlds_checked": worlds,
            "digests": {"faults": f"{faults}{seed}", "ablation": f"{ablation}{seed}"},
            "problems": [] if ok else [f"symptom s: fails on seed {seed}"], "claims": claims or []}


def full_policy(**changes: Any) -> list[dict[str, Any]]:
    """What `make prove` records: every seed of the policy, the first WORLD_PROOF_SEEDS with their worlds."""
    return [run(s, worlds=s < WORLD_PROOF_SEEDS, **changes) for s in range(PROOF_SEEDS)]


def incident(tmp_path: Path) -> Path:
    target = tmp_path / "lib" / FIXTURE.name
    target.parent.mkdir()
    shutil.copy(FIXTURE, target)
    return target


def test_a_full_passing_record_checks_clean_and_a_fresh_run_with_the_same_telemetry_agrees(tmp_path: Path) -> None:
    path = incident(tmp_path)
    written = write_record(path, "proof-slow-replica", full_policy())
    assert written == record_path(path) == path.parent / "proofs" / "proof-slow-replica.json"
    assert check_record(path, [run(0), run(1)]) == []


def test_no_record_missing_seeds_and_failed_seeds_are_each_reported(tmp_path: Path) -> None:
    path = incident(tmp_path)
    assert "no proof record" in check_record(path)[0]
    write_record(path, "x", [run(s) for s in range(3)])
    [problem] = check_record(path)
    assert f"{PROOF_SEEDS - 3} of the policy's {PROOF_SEEDS} seeds not proven (first: 3)" in problem
    write_record(path, "x", [run(s, ok=s != 7) for s in range(PROOF_SEEDS)])
    [problem] = check_record(path)
    assert "seed 7 failed its proof: symptom s: fails on seed 7" in problem


def test_an_edited_yaml_makes_the_record_stale(tmp_path: Path) -> None:
    path = incident(tmp_path)
    write_record(path, "x", full_policy())
    path.write_text(path.read_text() + "\n# an edit\n")
    [problem] = check_record(path)
    assert "recorded for another version of proof-slow-replica.yaml" in problem


def test_a_record_is_stale_when_both_the_code_and_the_telemetry_changed(tmp_path: Path) -> None:
    path = incident(tmp_path)
    write_record(path, "x", full_policy())
    changed = [run(0), run(1, ablation="changed")]
    # same code, other bytes: another CPU's rounding, not a change; the record stands
    assert check_record(path, changed) == []
    record = json.loads(record_path(path).read_text())
    record["code"] = "older"
    record_path(path).write_text(json.dumps(record))
    # other code, same bytes: a refactor; the record stands
    assert check_record(path, [run(0), run(1)]) == []
    # other code and other bytes: the engine changed what players see
    [problem] = check_record(path, changed)
    assert "stale: the engine or telemetry builder changed since the proof and seed 1 now simulates" in problem


def test_the_first_seeds_need_their_worlds_proven(tmp_path: Path) -> None:
    path = incident(tmp_path)
    # a claims-only pass over the whole policy is not enough ...
    write_record(path, "x", [run(s) for s in range(PROOF_SEEDS)])
    [problem] = check_record(path)
    assert f"hypothesis worlds not proven on seeds {', '.join(map(str, range(WORLD_PROOF_SEEDS)))}" in problem
    assert f"--seeds {WORLD_PROOF_SEEDS} --record" in problem  # the hint says how
    # ... until the worlds of those seeds are added (records merge); one missing seed is named
    write_record(path, "x", [run(s, worlds=s != 3) for s in range(WORLD_PROOF_SEEDS)])
    [problem] = check_record(path)
    assert "hypothesis worlds not proven on seed 3 (hint" in problem
    write_record(path, "x", [run(3, worlds=True)])
    assert check_record(path) == []


def test_worlds_proven_under_older_world_rules_must_be_proven_again_and_claims_stand(tmp_path: Path) -> None:
    """A world check added since the proof (WORLD_RULES) changes no telemetry, so the digests cannot tell:
    the record says which rules its worlds met, and an older one asks for the worlds again, not the claims."""
    from telemetry_gen.proving.record import WORLD_RULES, still_proven

    path = incident(tmp_path)
    write_record(path, "x", full_policy())
    assert read_record(path)["rules"] == WORLD_RULES and still_proven(path)
    older = {k: v for k, v in json.loads(record_path(path).read_text()).items() if k != "rules"}  # rules 1
    record_path(path).write_text(json.dumps(older))
    [problem] = check_record(path)
    assert f"hypothesis worlds proven under world rules 1, not the current {WORLD_RULES}" in problem
    assert f"--seeds {WORLD_PROOF_SEEDS} --record" in problem
    assert check_record(path, world_seeds=[]) == []  # the claims on every seed still stand
    assert still_proven(path, claims_only=True) and not still_proven(path)
    # `make prove`'s claims-only pass keeps the old worlds out; its worlds pass proves them under these rules
    write_record(path, "x", [run(s) for s in range(PROOF_SEEDS)])
    assert "hypothesis worlds not proven on seeds" in check_record(path)[0]
    record_path(path).write_text(json.dumps(older))
    write_record(path, "x", [run(s, worlds=True) for s in range(WORLD_PROOF_SEEDS)])
    merged = read_record(path)
    assert merged["rules"] == WORLD_RULES and len(merged["seeds"]) == PROOF_SEEDS
    assert check_record(path) == []


def test_make_prove_proves_the_worlds_the_records_are_held_to() -> None:
    recipe = (Path(__file__).resolve().parents[1] / "Makefile").read_text().split("\nprove:", 1)[1].split("\n\n")[0]
    ray = "$(if $(RAY),--ray $(RAY)) "  # make prove RAY=ADDRESS: the same proofs on a cluster
    assert recipe.count(ray) == 2
    recipe = recipe.replace(ray, "")
    assert "--claims-only --record --changed-only incidents/" in recipe
    assert f"--seeds {WORLD_PROOF_SEEDS} --record --changed-only incidents/" in recipe


def test_records_merge_only_over_the_same_yaml_and_telemetry(tmp_path: Path) -> None:
    path = incident(tmp_path)
    # a claims-only pass over every seed, then worlds over seed 0: both kept
    write_record(path, "x", [run(s) for s in range(PROOF_SEEDS)])
    write_record(path, "x", [run(0, worlds=True)])
    record = read_record(path)
    assert record is not None and len(record["seeds"]) == PROOF_SEEDS and record["seeds"]["0"]["worlds"]
    # proving seed 0 again claims only keeps its worlds verdict: same telemetry
    write_record(path, "x", [run(0)])
    assert read_record(path)["seeds"]["0"]["worlds"]  # type: ignore[index]
    # new physics: the old seeds go, only what was proven with it stays
    write_record(path, "x", [run(0, faults="new")])
    assert list(read_record(path)["seeds"]) == ["0"]  # type: ignore[index]
    # an edited YAML: the same
    write_record(path, "x", [run(s) for s in range(4)])
    path.write_text(path.read_text() + "\n# an edit\n")
    write_record(path, "x", [run(9)])
    assert list(read_record(path)["seeds"]) == ["9"]  # type: ignore[index]


def test_a_record_names_the_claim_closest_to_failing() -> None:
    claims = [
        {"symptom": "far", "context": False, "with_faults": {"margin": 4.0, "required": 2.0},
         "without_faults": {"margin": -1.0, "required": 2.0}},
        # holds with a 10% margin, but without the faults misses the threshold by only 5%
        {"symptom": "near", "context": False, "with_faults": {"margin": 0.2, "required": 2.0},
         "without_faults": {"margin": -0.1, "required": 2.0}},
        # a context claim must hold on both sides: its margin without counts as is
        {"symptom": "context", "context": True, "with_faults": {"margin": 1.0, "required": 1.0},
         "without_faults": {"margin": 0.5, "required": 1.0}},
    ]
    record = make_record(FIXTURE, "x", [run(0, claims=claims)])
    assert record["seeds"]["0"]["weakest"] == {"symptom": "near", "margin": 0.05}


def test_unchanged_proofs_write_the_same_bytes(tmp_path: Path) -> None:
    path = incident(tmp_path)
    write_record(path, "x", [run(s) for s in range(5)])
    first = record_path(path).read_bytes()
    write_record(path, "x", [run(s) for s in range(5)])
    assert record_path(path).read_bytes() == first
    assert json.loads(first)["ok"] is True


def test_record_needs_deep() -> None:
    result = CliRunner().invoke(main, ["validate", "--record", str(FIXTURE)])
    assert result.exit_code == 2 and "--record needs --deep" in result.output


def test_validate_record_writes_what_the_simulation_proved(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
    path = incident(tmp_path)
    result = CliRunner().invoke(main, ["validate", "--deep", "--claims-only", "--seed", "0", "--jobs", "1",
                                       "--record", "--json", str(path)])
    out = json.loads(result.output)
    assert result.exit_code == 0 and out["records"] == [str(record_path(path))]
    record = read_record(path)
    assert record is not None and list(record["seeds"]) == ["0"] and record["ok"]
    digests = out["files"][0]["deep"]["runs"][0]["digests"]
    assert record["seeds"]["0"]["faults"] == digests["faults"] and len(digests["faults"]) == 64
    assert record["seeds"]["0"]["faults"] != record["seeds"]["0"]["ablation"]
    assert check_record(path, out["files"][0]["deep"]["runs"], seeds=[0], world_seeds=[]) == []
    # claims only: seed 0's worlds were not proven, and the policy wants them
    [problem] = check_record(path, seeds=[0], world_seeds=[0])
    assert "hypothesis worlds not proven on seed 0" in problem


def test_changed_only_proves_the_files_whose_records_do_not_stand_and_only_those(
        tmp_path: Path, monkeypatch: Any) -> None:
    """In a folder where one record stands and another file has none, `--changed-only` proves the second
    alone: the standing record keeps its bytes and the output says it was not proven again (it once proved
    every file of the folder as soon as one needed it)."""
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
    standing = incident(tmp_path)
    fresh = standing.with_name("proof-slow-replica-copy.yaml")
    fresh.write_text(standing.read_text(encoding="utf-8").replace("id: proof-slow-replica", "id: proof-copy", 1),
                     encoding="utf-8")
    write_record(standing, "proof-slow-replica", full_policy())  # this code, this YAML, the whole policy
    before = record_path(standing).read_bytes()
    result = CliRunner().invoke(main, ["validate", "--deep", "--claims-only", "--seed", "0", "--jobs", "1",
                                       "--record", "--changed-only", "--json", str(standing.parent)])
    out = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert out["records"] == [str(record_path(fresh))]
    assert record_path(standing).read_bytes() == before
    proven = {Path(f["path"]).name: bool(f.get("deep")) for f in out["files"]}
    assert proven == {standing.name: False, fresh.name: True}


def test_a_record_stands_under_new_code_that_simulates_to_the_same_telemetry(
        tmp_path: Path, in_library_cache: Path) -> None:
    """`make prove` proves again only what changed (`validate --changed-only`, telemetry_gen.proving.record.
    still_proven): a record made from this YAML over the whole policy stands under other code when seed 0
    still simulates to the recorded telemetry (and is then stamped with this code's version, so the next
    check simulates nothing); another digest, an edited YAML or a missing seed mean proving again."""
    from incidents.loader import load_incident
    from telemetry_gen.cache import code_version, ensure_database
    from telemetry_gen.proving.record import still_proven

    path = incident(tmp_path)
    inc = load_incident(path, 0)
    faults, ablation = ensure_database(inc, 0).digest, ensure_database(inc, 0, ablate=True).digest

    def recorded(seed0: tuple[str, str]) -> None:
        runs = full_policy()
        runs[0]["digests"] = {"faults": seed0[0], "ablation": seed0[1]}
        write_record(path, "proof-slow-replica", runs)
        data = json.loads(record_path(path).read_text())
        record_path(path).write_text(json.dumps({**data, "code": "older-code"}))

    recorded((faults, ablation))
    assert still_proven(path)
    assert read_record(path)["code"] == code_version()  # stamped: the next check builds nothing
    assert still_proven(path)
    recorded((faults, "another-ablation"))
    assert not still_proven(path)
    recorded((faults, ablation))
    path.write_text(path.read_text() + "\n# an edit\n")
    assert not still_proven(path)


def test_changed_only_needs_a_record_to_write() -> None:
    result = CliRunner().invoke(main, ["validate", "--deep", "--changed-only", str(FIXTURE)])
    assert result.exit_code == 2 and "--changed-only needs --deep --record" in result.output
