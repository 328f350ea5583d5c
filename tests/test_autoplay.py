"""Scripted players against a real incident database, through the real gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from game.autoplay import autoplay, plan, reveal_reads
from game.cli_game import register
from game.gateway import Gateway
from game.observe import Read, observed_signals
from game.session import RANK
from incidents.loader import load_incident
from incidents.spec import Incident
from telemetry_gen.cache import ensure_database

INCIDENT = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(cache))
        mp.setenv("SERVEDRILL_DATA", str(tmp_path_factory.mktemp("data")))
        yield cache


@pytest.fixture(scope="module")
def incident(env: Path) -> Incident:
    inc = load_incident(INCIDENT)
    ensure_database(inc, 0)  # built once for the module
    return inc


def test_real_expert_observes_every_signal_and_scores_high(incident: Incident) -> None:
    events, report = autoplay(incident, 0, "expert", incident_path=INCIDENT)
    queries = [e for e in events if e.kind == "query"]
    assert all(q.data["ok"] for q in queries), [q.data["error"] for q in queries]
    assert report.observed_signals == [s.id for s in incident.signals]
    assert report.total >= 85, report.components
    first_rank = next(e.seq for e in events if e.kind == RANK)
    decompose = next(q for q in queries if "queue_s" in q.data["sql"])
    assert decompose.seq < first_rank
    assert report.component("first_look").points > 0
    assert report.component("discriminator").points > 0


def test_reference_queries_observe_their_own_signal_through_the_gateway(incident: Incident) -> None:
    """The reads the gateway reports for each signal's query satisfy that signal's reveal, like the
    reads the synthetic players assume (the scoring tests rely on this agreement)."""
    info = ensure_database(incident, 0)
    with Gateway(Path(info.path)) as gw:
        for signal in incident.signals:
            result = gw.run(signal.query)
            assert result.ok, result.error
            assert signal.id in observed_signals(incident, result.reads), (signal.id, result.reads)
            synthetic = [reveal_reads(incident, r) for r in signal.reveals]
            assert signal.id in observed_signals(incident, synthetic)


def test_a_query_filtered_to_the_other_replica_does_not_observe(incident: Incident) -> None:
    info = ensure_database(incident, 0)
    with Gateway(Path(info.path)) as gw:
        clock = "SELECT min(value) FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' AND replica = '{}'"
        other = gw.run(clock.format("vllm-0"))
        this = gw.run(clock.format("vllm-1"))
        early = gw.run("SELECT replica, avg(prefill_s) FROM requests "
                       "WHERE ts < TIMESTAMP '2025-03-04 09:03:00' GROUP BY replica")
    assert "clock-drop" not in observed_signals(incident, other.reads)
    assert "clock-drop" in observed_signals(incident, this.reads)
    assert "prefill-by-replica" not in observed_signals(incident, early.reads)
    assert [Read.of(r).table for r in early.reads] == ["requests"]


def test_real_lucky_random_and_shotgun_rank_below_the_expert(incident: Incident) -> None:
    expert = autoplay(incident, 0, "expert", incident_path=INCIDENT)[1].total
    lucky = autoplay(incident, 0, "lucky", incident_path=INCIDENT)[1].total
    shotgun_events, shotgun = autoplay(incident, 0, "shotgun", incident_path=INCIDENT)
    randoms = [autoplay(incident, 0, "random", player_seed=k)[1].total for k in range(3)]
    assert lucky < 60
    assert shotgun.total < expert
    assert sum(1 for e in shotgun_events if e.kind == "query") == len(plan(incident, "shotgun").queries)
    assert max(randoms) < expert


def test_autoplay_command_prints_one_json_object(incident: Incident, tmp_path: Path) -> None:
    group = click.Group()
    register(group)
    out = tmp_path / "auto.json"
    result = CliRunner().invoke(group, ["autoplay", "--strategy", "expert", str(INCIDENT), "--json",
                                        "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["strategy"] == "expert" and doc["incident"] == "drill-slow-replica"
    assert doc["total"] == doc["score"]["total"] >= 85
    assert doc["queries"] == sum(1 for e in doc["events"] if e["kind"] == "query")
    assert Path(doc["transcript"]) == out and out.is_file()
    scored = CliRunner().invoke(group, ["score", str(out), "--json"])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)["total"] == doc["total"]


def test_autoplay_rejects_bad_input_in_one_line(env: Path) -> None:
    group = click.Group()
    register(group)
    bad = CliRunner().invoke(group, ["autoplay", "--strategy", "expert", "no-such-incident", "--json"])
    assert bad.exit_code == 1
    doc = json.loads(bad.stdout)
    assert doc["ok"] is False and "no-such-incident" in doc["error"]
    unknown = CliRunner().invoke(group, ["autoplay", "--strategy", "psychic", str(INCIDENT)])
    assert unknown.exit_code != 0 and "Traceback" not in unknown.output
