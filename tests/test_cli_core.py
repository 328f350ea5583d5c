"""The simulation-side commands through the CLI: calc, generate (cache and digest), export, query."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from game.cli.commands import main

FIXTURE = Path(__file__).parent / "data" / "incidents" / "proof-slow-replica.yaml"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return CliRunner()


def run_json(runner: CliRunner, *args: str) -> tuple[int, dict]:
    res = runner.invoke(main, [*args, "--json"])
    assert "Traceback" not in res.output
    return res.exit_code, json.loads(res.output)


def test_calc_reports_figures_consistent_with_the_config(runner: CliRunner) -> None:
    code, out = run_json(runner, "calc", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "4096")
    assert code == 0
    assert out["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2  # 2 x layers x kv_heads x head_dim x bf16
    assert out["decode_step_floor_bound"] == "memory"
    assert out["max_concurrent_requests"] == out["kv_capacity_tokens"] // 4096
    code, fp8 = run_json(runner, "calc", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--kv-dtype", "fp8")
    assert fp8["kv_bytes_per_token"] == out["kv_bytes_per_token"] // 2
    assert fp8["kv_capacity_tokens"] > 1.9 * out["kv_capacity_tokens"]


def test_calc_unknown_model_is_one_clear_line(runner: CliRunner) -> None:
    code, out = run_json(runner, "calc", "--model", "Llama-9", "--gpu", "H100-SXM")
    assert code == 1 and out["ok"] is False and "Llama-9" in out["error"]


@pytest.mark.slow
def test_generate_is_deterministic_and_cached(runner: CliRunner, tmp_path: Path) -> None:
    code, first = run_json(runner, "generate", str(FIXTURE), "--seed", "4")
    assert code == 0 and first["cached"] is False
    code, second = run_json(runner, "generate", str(FIXTURE), "--seed", "4")
    assert second["cached"] is True and second["digest"] == first["digest"]
    code, rebuilt = run_json(runner, "generate", str(FIXTURE), "--seed", "4", "--force")
    assert rebuilt["cached"] is False and rebuilt["digest"] == first["digest"]
    code, other = run_json(runner, "generate", str(FIXTURE), "--seed", "5")
    assert other["digest"] != first["digest"]
    con = duckdb.connect(first["path"], read_only=True)
    try:
        for table, n in first["rows"].items():
            assert con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == n
    finally:
        con.close()


def test_export_writes_every_table_as_parquet(runner: CliRunner, tmp_path: Path) -> None:
    code, gen = run_json(runner, "generate", str(FIXTURE))
    code, out = run_json(runner, "export", str(FIXTURE), "--parquet", str(tmp_path / "pq"))
    assert code == 0 and set(out["files"]) == set(gen["rows"])
    for table, path in out["files"].items():
        assert duckdb.execute(f"SELECT count(*) FROM '{path}'").fetchone()[0] == gen["rows"][table]


@pytest.mark.slow
def test_query_runs_through_the_gateway_and_refuses_writes(runner: CliRunner) -> None:
    sql = "SELECT replica, count(*) AS n FROM requests GROUP BY 1 ORDER BY 1"
    code, ok = run_json(runner, "query", str(FIXTURE), sql)
    assert code == 0 and ok["columns"] == ["replica", "n"] and len(ok["rows"]) == 2
    assert ok["reads"][0]["table"] == "requests"
    code, bad = run_json(runner, "query", str(FIXTURE), "DROP TABLE requests")
    assert code == 1 and bad["ok"] is False and bad["error_kind"] == "refused"
    code, sneaky = run_json(runner, "query", str(FIXTURE), "SELECT * FROM read_text('/etc/passwd')")
    assert code == 1 and sneaky["ok"] is False


def test_broken_incident_gets_file_line_not_traceback(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\ntitle: [unclosed\n")
    res = runner.invoke(main, ["generate", str(bad)])
    assert res.exit_code == 1
    assert "Traceback" not in res.output
    assert f"{bad}:" in res.output


@pytest.mark.slow
def test_query_world_runs_the_sql_on_a_hypothesis_world_and_says_it_spoils(runner: CliRunner) -> None:
    sql = ("SELECT round(avg(gateway_s), 3) AS gw, "
           "round(avg(prefill_s) FILTER (WHERE replica = 'vllm-1'), 4) AS slow_prefill FROM requests")

    def ask(world: str | None) -> tuple[dict, str]:
        args = ["query", str(FIXTURE), sql, "--json"] + (["--world", world] if world else [])
        res = runner.invoke(main, args)
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout), res.stderr

    truth, said = ask(None)
    assert truth["world"] == "truth" and said == ""
    gw_truth, prefill_truth = truth["rows"][0]
    deploy, said = ask("bad-deploy")  # its world: a gateway release adding 0.5 s, no throttle
    assert deploy["world"] == "bad-deploy" and "spoils" in said
    assert deploy["rows"][0][0] > gw_truth + 0.2 and deploy["rows"][0][1] < 0.8 * prefill_truth
    baseline, _ = ask("baseline")  # no fault at all: vllm-1 prefills at full clock
    assert baseline["rows"][0][1] < 0.8 * prefill_truth and abs(baseline["rows"][0][0] - gw_truth) < 0.05
    same, _ = ask("throttle")  # the true hypothesis's world is the incident itself
    assert same["rows"] == truth["rows"]
    res = runner.invoke(main, ["query", str(FIXTURE), "SELECT 1", "--world", "nope"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "no world 'nope'" in res.stderr and "bad-deploy" in res.stderr


def test_the_apis_truth_world_is_the_proving_rooms() -> None:
    """game.api names the player's world without importing the proving room (heavy) at its import."""
    from game import api
    from telemetry_gen.proving.worlds import TRUTH

    assert api.TRUTH_WORLD == TRUTH


def test_calc_says_when_a_memory_share_leaves_no_room_for_one_request(runner: CliRunner) -> None:
    """An author sizing a config_change: at a small gpu_memory_utilization the KV cache cannot hold one
    request of --context tokens, and vLLM would refuse to start (the simulation then keeps the old config)."""
    args = ["calc", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--context", "4096"]
    code, default = run_json(runner, *args)
    code, roomy = run_json(runner, *args, "--gpu-memory-utilization", "0.3")
    assert default["gpu_memory_utilization"] == 0.9 and roomy["gpu_memory_utilization"] == 0.3
    assert roomy["fits"] is True and 0 < roomy["kv_capacity_tokens"] < default["kv_capacity_tokens"]
    code, tight = run_json(runner, *args, "--gpu-memory-utilization", "0.21")
    assert code == 0 and tight["fits"] is False and tight["kv_capacity_tokens"] == 0
    assert "max seq len (4096)" in tight["memory_error"]
    code, bad = run_json(runner, *args, "--gpu-memory-utilization", "1.5")
    assert code == 1 and "gpu_memory_utilization" in bad["error"]


@pytest.mark.slow
def test_generate_export_and_query_read_the_variant_a_player_at_that_seed_plays(in_library_cache: Path,
                                                                              tmp_path: Path) -> None:
    """At a seed other than 0 an incident with variables is that seed's variant (what `play --seed` opens), not
    the seed-0 variant on that seed's traffic."""
    from game import api
    from telemetry_gen.cache import ensure_database

    ref = "first-shift-one-replica-lags"  # the tutorial: small, and its variables draw other values at seed 7
    at_7 = api.open_telemetry(api.load_variant(api.find_incident(ref), 7))
    at_7.close()
    seed_0_variant = api.load_variant(api.find_incident(ref), 0).incident
    assert ensure_database(seed_0_variant, 7).digest != at_7.digest  # else this test would show nothing
    code, out = run_json(CliRunner(), "export", ref, "--seed", "7", "--parquet", str(tmp_path / "pq"))
    assert code == 0 and out["digest"] == at_7.digest
    code, out = run_json(CliRunner(), "generate", ref, "--seed", "7")
    assert code == 0 and out["digest"] == at_7.digest
    sql = "SELECT count(*) AS n FROM requests"
    code, res = run_json(CliRunner(), "query", ref, sql, "--seed", "7")
    with duckdb.connect(at_7.build.path, read_only=True) as con:
        assert code == 0 and res["rows"] == [list(con.execute(sql).fetchone() or ())]
