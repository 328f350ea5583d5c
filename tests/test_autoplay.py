"""Scripted players against a real incident database, through the real gateway, scored the real way: each
query re-run on every hypothesis's world."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from game.cli.game_commands import COMMANDS
from game.frontends.autoplay import autoplay, plan
from game.query.gateway import Gateway
from game.rules.observe import Read, observed_signals
from game.rules.scoring import evidence_use
from game.session import RANK
from incidents.loader import load_incident
from incidents.spec import Incident
from telemetry_gen.cache import ensure_database

pytestmark = pytest.mark.slow  # plays fixture incidents with every strategy on their worlds

INCIDENT = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"


@pytest.fixture(scope="module")
def env(library_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        mp.setenv("SERVEDRILL_DATA", str(tmp_path_factory.mktemp("data")))
        yield library_cache


@pytest.fixture(scope="module")
def incident(env: Path) -> Incident:
    inc = load_incident(INCIDENT)
    ensure_database(inc, 0)  # built once for the module
    return inc


def test_real_expert_rules_out_every_rival_and_scores_high(incident: Incident) -> None:
    events, report = autoplay(INCIDENT, 0, "expert")
    # a scripted player's session journals nothing (api.open_game(journal=False)): no session to resume or watch
    assert not list(Path(os.environ["SERVEDRILL_DATA"]).rglob("*.jsonl"))
    queries = [e for e in events if e.kind == "query"]
    assert all(q.data["ok"] for q in queries), [q.data["error"] for q in queries]
    assert len(queries) == len(plan(incident, "expert").queries)
    assert set(report.ruled_out) == set(report.rivals) == {"overload", "bad-deploy", "kv-pressure"}
    assert report.consistent == ["throttle"] and report.ideal_belief["throttle"] == 1.0
    assert report.per_query[0]["ruled_out"] == []  # the catalog shows nothing about the cause
    # every rival ruled out, each credited as far as the expert's final board let it go
    conf = {r["id"]: r["confidence"] / 100.0 for r in report.ranking}
    used = [evidence_use(conf.get(r, 0.0), len(incident.hypotheses)) for r in report.rivals]
    assert report.component("evidence").points == pytest.approx(35.0 * sum(used) / len(used), abs=0.01)
    assert min(used) > 0.8
    assert report.component("pins").points == report.component("pins").max
    assert "wrong" not in [p["verdict"] for p in report.pins]
    assert report.total >= 85, report.components
    first_rank = next(e.seq for e in events if e.kind == RANK)
    assert first_rank > queries[-1].seq  # ranks once every query ran


def test_reference_queries_observe_their_own_signal_through_the_gateway(incident: Incident) -> None:
    """The reads the gateway reports for each signal's query satisfy that signal's reveal (what
    `servedrill validate --deep` checks of every incident)."""
    info = ensure_database(incident, 0)
    with Gateway(Path(info.path)) as gw:
        for signal in incident.signals:
            result = gw.run(signal.query)
            assert result.ok, result.error
            assert signal.id in observed_signals(incident, result.reads), (signal.id, result.reads)


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
    expert = autoplay(INCIDENT, 0, "expert")[1].total
    _, lucky = autoplay(INCIDENT, 0, "lucky")
    shotgun_events, shotgun = autoplay(INCIDENT, 0, "shotgun")
    randoms = [autoplay(INCIDENT, 0, "random", player_seed=k)[1].total for k in range(3)]
    # 90% on the truth with nothing ruled out is a guess, scored as one: worse than an even spread
    assert lucky.ruled_out == {} and lucky.component("conclusion").points < 0 and lucky.total < 10
    # the same evidence and ranking as the expert, but 30 idle row counts over the budget and no pins
    assert shotgun.ruled_out == autoplay(INCIDENT, 0, "expert")[1].ruled_out
    assert shotgun.component("idle").points < 0 and shotgun.component("budget").points < 0
    assert shotgun.total < expert
    assert sum(1 for e in shotgun_events if e.kind == "query") == len(plan(incident, "shotgun").queries)
    assert max(randoms) < expert


def test_autoplay_command_prints_one_json_object(incident: Incident, tmp_path: Path) -> None:
    group = click.Group(commands=COMMANDS)
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
    again = json.loads(scored.stdout)
    assert again["total"] == doc["total"]
    assert again["recorded_total"] is None and again["recorded_matches"] is None  # autoplay records no score


def test_autoplay_rejects_bad_input_in_one_line(env: Path) -> None:
    group = click.Group(commands=COMMANDS)
    bad = CliRunner().invoke(group, ["autoplay", "--strategy", "expert", "no-such-incident", "--json"])
    assert bad.exit_code == 1
    doc = json.loads(bad.stdout)
    assert doc["ok"] is False and "no-such-incident" in doc["error"]
    unknown = CliRunner().invoke(group, ["autoplay", "--strategy", "psychic", str(INCIDENT)])
    assert unknown.exit_code != 0 and "Traceback" not in unknown.output
