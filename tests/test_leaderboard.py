"""The leaderboard over real transcripts: sessions played by scripted players (game.frontends.autoplay) through
game.session and the real gateway, exported as transcripts, then read back with DuckDB, re-scored from
their SQL on the hypothesis worlds and ranked. A score a file claims is never used: a transcript that
cannot be re-scored is skipped, and a claim that differs from the recomputed score is a notice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

import game.session as session_module
import game.session.core as session_clock  # the one module of game.session that reads the clock
from game.cli.gameday_commands import COMMANDS
from game.frontends.autoplay import plan, play
from game.gameday.collect import write_state
from game.gameday.plan import load_gameday
from game.query.gateway import Gateway
from game.reports.leaderboard import Entry, read_results, team_confidence
from game.reports.leaderboard_report import plot_file, render_html, write_markdown
from game.rules.assess import score_session
from game.session import Session, load_transcript
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

pytestmark = pytest.mark.slow  # plays and scores a game day of sessions in its module fixtures

DATA = Path(__file__).parent / "data" / "incidents"
MINI = DATA / "tui-mini.yaml"
DRILL = DATA / "drill-slow-replica.yaml"


class FakeClock:
    """Stands in for the `time` module inside game.session: every call moves on by `step` seconds."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.step = 1.0

    def time(self) -> float:
        self.now += self.step
        return self.now


def play_transcript(out: Path, incident: Path, seed: int, player: str, strategy: str, *, step: float,
                    clock: FakeClock, rng_seed: int = 0) -> Path:
    """Play `strategy` as `player` on a real (in-memory) session through the real gateway, each action
    `step` seconds apart."""
    inc = load_incident(incident, seed=seed)
    the_plan = plan(inc, strategy, np.random.default_rng(rng_seed))
    clock.step = step
    session = _session(incident, inc, seed, player)
    with Gateway(Path(ensure_database(inc, seed).path)) as gateway:
        play(session, gateway, the_plan)
    return session.export_transcript(out)


def _session(path: Path, inc: object, seed: int, player: str) -> Session:
    return Session.in_memory(inc, seed, player, incident_digest=session_module.file_digest(path),  # type: ignore[arg-type]
                             incident_path=str(path.resolve()))


def cheat_transcript(out: Path, incident: Path, player: str, *, clock: FakeClock, claim: float) -> Path:
    """`SELECT 1`, all in on the truth, and a collected file that claims `claim` points."""
    inc = load_incident(incident, seed=0)
    clock.step = 1.0
    session = _session(incident, inc, 0, player)
    session.start()
    with Gateway(Path(ensure_database(inc, 0).path)) as gateway:
        session.run_query(gateway, "SELECT 1")
    session.submit([("throttle", 100.0)])
    path = session.export_transcript(out, score={"total": claim})
    doc = json.loads(path.read_text())
    doc["gameday"] = {"team": "red", "round": 1, "player": player, "score": claim, "late": False}
    path.write_text(json.dumps(doc))
    return path


GAMEDAY = """\
event: Test day
results: results
rounds:
  - incident: {mini}
    seed: 0
    time_limit_min: 10
  - incident: {drill}
    seed: 0
teams:
  - name: blue
    players: [ana, ben]
  - name: red
    players: [dara, eli, fay]
"""


@pytest.fixture(scope="module")
def cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield library_cache


@pytest.fixture(scope="module")
def results(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A results folder: two rounds, two teams (fay never hands in), plus a corrupt and a foreign file."""
    root = tmp_path_factory.mktemp("day")
    clock = FakeClock()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(session_clock, "time", clock)
        res = root / "results"
        r1, r2 = res / "round-01-tui-mini", res / "round-02-drill-slow-replica"
        # round 1: ana and dara play the same expert game, dara faster; ben guesses; eli plays at random
        play_transcript(r1 / "blue--ana.json", MINI, 0, "ana", "expert", step=20.0, clock=clock)
        play_transcript(r1 / "red--dara.json", MINI, 0, "dara", "expert", step=5.0, clock=clock)
        play_transcript(r1 / "blue--ben.json", MINI, 0, "ben", "lucky", step=3.0, clock=clock)
        play_transcript(r1 / "red--eli.json", MINI, 0, "eli", "random", step=4.0, clock=clock, rng_seed=3)
        # round 2: only ana and eli
        play_transcript(r2 / "blue--ana.json", DRILL, 0, "ana", "expert", step=10.0, clock=clock)
        play_transcript(r2 / "red--eli.json", DRILL, 0, "eli", "shotgun", step=2.0, clock=clock)
        # ana played round 1 a second time, later: the first submission counts
        play_transcript(r1 / "extra" / "ana-again.json", MINI, 0, "ana", "lucky", step=1.0, clock=clock)
    (r1 / "red--broken.json").write_text('{"format": "servedrill-transcript", "session_id": "x", "ev',
                                         encoding="utf-8")
    (res / "notes.json").write_text(json.dumps({"title": "snacks", "items": [1, 2]}), encoding="utf-8")
    gameday_file = root / "gameday.yaml"
    gameday_file.write_text(GAMEDAY.format(mini=MINI, drill=DRILL), encoding="utf-8")
    write_state(load_gameday(gameday_file), {})
    yield res


def test_ranks_by_score_then_time(results: Path) -> None:
    board = read_results(results)
    first = board.incidents[0]
    assert (first.round, first.incident_id) == (1, "tui-mini")
    ranked = [p["player"] for p in first.players]
    ana = next(p for p in first.players if p["player"] == "ana")
    dara = next(p for p in first.players if p["player"] == "dara")
    # same plan, same score: the faster one ranks first
    assert ana["score"] == dara["score"] > 80
    recomputed = load_transcript(results / "round-01-tui-mini" / "red--dara.json")
    assert dara["score"] == score_session(recomputed.incident, 0, recomputed.events).total
    assert dara["time_s"] < ana["time_s"]
    assert ranked[:2] == ["dara", "ana"]
    assert [p["rank"] for p in first.players][:2] == [1, 2]
    scores = [p["score"] for p in first.players]
    assert scores == sorted(scores, reverse=True)
    # the start-to-submit time comes from the session's own events
    doc = json.loads((results / "round-01-tui-mini" / "red--dara.json").read_text())
    times = {e["kind"]: e["time"] for e in doc["events"]}
    assert dara["time_s"] == pytest.approx(times["submit"] - times["start"], abs=0.1)


def test_teams_average_over_their_roster(results: Path) -> None:
    board = read_results(results)
    by_player = {(b.incident_id, p["player"]): p["score"] for b in board.incidents for p in b.players}
    first = board.incidents[0]
    teams = {t["team"]: t for t in first.teams}
    assert teams["blue"]["score"] == pytest.approx((by_player["tui-mini", "ana"] + by_player["tui-mini", "ben"]) / 2,
                                                   abs=0.06)
    # red has three players on the roster; fay handed nothing in and counts 0
    assert teams["red"]["size"] == 3 and teams["red"]["handed_in"] == 2
    assert teams["red"]["score"] == pytest.approx((by_player["tui-mini", "dara"] + by_player["tui-mini", "eli"]) / 3,
                                                  abs=0.06)
    overall = {t["team"]: t for t in board.teams}
    per_incident = {t: sum(next(x["score"] for x in b.teams if x["team"] == t) for b in board.incidents if
                           any(x["team"] == t for x in b.teams)) for t in overall}
    for team, row in overall.items():
        assert row["score"] == pytest.approx(per_incident[team], abs=0.11)
    ranks = [t["team"] for t in board.teams]
    assert ranks == sorted(overall, key=lambda t: -overall[t]["score"])
    players = {p["player"]: p for p in board.players}
    assert players["ana"]["incidents"] == 2 and players["dara"]["incidents"] == 1
    ana_total = by_player["tui-mini", "ana"] + by_player["drill-slow-replica", "ana"]
    assert players["ana"]["score"] == pytest.approx(ana_total, abs=0.11)


def test_corrupt_and_foreign_files_are_skipped_with_a_notice(results: Path) -> None:
    board = read_results(results)
    skipped = {Path(s["file"]).name: s["reason"] for s in board.skipped}
    assert set(skipped) == {"red--broken.json", "notes.json"}
    assert "Malformed JSON" in skipped["red--broken.json"]
    assert "not a servedrill transcript" in skipped["notes.json"]
    # the good ones still count: 6 distinct games (ana's second try is a duplicate)
    assert len(board.entries) == 6
    assert any("ana already has a transcript for tui-mini" in n for n in board.notices)
    ana = next(p for p in board.incidents[0].players if p["player"] == "ana")
    assert ana["file"].endswith("blue--ana.json")


def test_confidence_curves_per_team(results: Path) -> None:
    board = read_results(results)
    first = board.incidents[0]
    assert set(first.confidence) == {"blue", "red"}
    blue = first.confidence["blue"]
    # starts at the even spread over the four hypotheses, ends at the mean of ana's and ben's submissions
    # (both put 90% on the truth, give or take the rounding residue)
    assert blue[0] == (0.0, 25.0)
    assert blue[-1][1] == pytest.approx((90.0 + 90.0) / 2, abs=0.05)
    assert any(v == pytest.approx((25.0 + 90.0) / 2, abs=0.05) for _, v in blue)  # ben ranked early, ana late
    xs = [x for x, _ in blue]
    assert xs == sorted(xs)


def test_team_confidence_is_the_mean_of_step_functions() -> None:
    def entry(player: str, team: str, timeline: list[tuple[float, float]]) -> Entry:
        return Entry(Path(f"{player}.json"), player, player, team, "x", 0, "x", 0.0, None, False, False, True,
                     timeline, ["t"])

    curves = team_confidence([entry("a", "t1", [(0.0, 25.0), (10.0, 75.0)]),
                              entry("b", "t1", [(0.0, 25.0), (20.0, 45.0)]),
                              entry("c", "t2", [(0.0, 25.0)])])
    assert curves["t1"] == [(0.0, 25.0), (10.0, 50.0), (20.0, 60.0)]
    assert curves["t2"] == [(0.0, 25.0)]


def test_html_and_markdown_reports_contain_the_plot(results: Path, tmp_path: Path) -> None:
    board = read_results(results)
    html = render_html(board)
    assert html.count("<svg") == len(board.incidents) == 2
    assert 'data-series="blue"' in html and 'data-series="red"' in html
    assert "Confidence in the true cause" in html and "red--broken.json" in html
    md = tmp_path / "report" / "board.md"
    written = write_markdown(board, md)
    text = md.read_text()
    for b in board.incidents:
        svg = plot_file(md, b)
        assert svg in written and svg.read_text().startswith("<svg")
        assert f"]({svg.name})" in text
    assert "| 1 | dara | red |" in text
    assert any(ch in text for ch in "▁▂▃▄▅▆▇█")


def test_leaderboard_command_json_keys(results: Path, tmp_path: Path) -> None:
    group = click.Group(commands=COMMANDS)
    html = tmp_path / "board.html"
    run = CliRunner().invoke(group, ["leaderboard", str(results), "--json", "--html", str(html)])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    assert set(doc) == {"ok", "results_dir", "event", "transcripts", "incidents", "overall", "skipped", "notices",
                        "verified", "written"}
    assert doc["verified"] is False and "trusts its files" in doc["notices"][0]
    assert doc["ok"] is True and doc["event"] == "Test day" and doc["transcripts"] == 6
    assert doc["written"] == [str(html)] and html.is_file()
    incident = doc["incidents"][0]
    assert set(incident) == {"round", "incident", "seed", "title", "truth", "players", "teams", "confidence"}
    assert set(incident["players"][0]) == {"rank", "player", "team", "score", "time_s", "submitted", "late", "file",
                                           "members"}
    assert incident["players"][0]["members"] == []  # one player's game; a team's names its members
    assert set(incident["teams"][0]) == {"rank", "team", "score", "time_s", "handed_in", "size"}
    assert set(doc["overall"]["players"][0]) == {"rank", "player", "team", "score", "time_s", "incidents"}
    assert set(doc["overall"]["teams"][0]) == {"rank", "team", "score", "time_s", "incidents", "size"}
    assert {Path(s["file"]).name for s in doc["skipped"]} == {"red--broken.json", "notes.json"}
    assert "notice: skipped" in run.stderr and "red--broken.json" in run.stderr
    text = CliRunner().invoke(group, ["leaderboard", str(results)])
    assert text.exit_code == 0 and "Teams overall" in text.stdout and "Traceback" not in text.output


def test_leaderboard_of_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    group = click.Group(commands=COMMANDS)
    run = CliRunner().invoke(group, ["leaderboard", str(tmp_path / "nope"), "--json"])
    assert run.exit_code == 1
    assert json.loads(run.stdout)["ok"] is False


def test_an_empty_folder_gives_an_empty_board(tmp_path: Path) -> None:
    board = read_results(tmp_path)
    assert board.entries == [] and board.incidents == [] and board.players == [] and board.skipped == []
    assert "<svg" not in render_html(board)


def test_a_changed_incident_is_skipped_whatever_score_the_file_records(cache: Path, tmp_path: Path) -> None:
    incident = tmp_path / "mini.yaml"
    incident.write_bytes(MINI.read_bytes())
    res = tmp_path / "results"
    clock = FakeClock()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(session_clock, "time", clock)
        kept = play_transcript(res / "blue--ana.json", incident, 0, "ana", "expert", step=2.0, clock=clock)
        lost = play_transcript(res / "red--dara.json", incident, 0, "dara", "expert", step=2.0, clock=clock)
    doc = json.loads(kept.read_text())
    doc["gameday"] = {"team": "blue", "round": 1, "score": 88.8}
    kept.write_text(json.dumps(doc))
    assert len(read_results(res).entries) == 2  # both count while the incident is as they played it
    incident.write_text(MINI.read_text() + "# edited after the game\n")
    board = read_results(res)
    assert board.entries == [] and board.incidents == []
    assert {Path(s["file"]).name for s in board.skipped} == {kept.name, lost.name}
    assert all("cannot be scored" in s["reason"] and "changed since" in s["reason"] for s in board.skipped)
    assert not any("88.8" in n for n in board.notices)  # the recorded score is not taken instead


@pytest.fixture(scope="module")
def forged(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Round 1 of tui-mini: ana plays the expert; mallory runs SELECT 1 and her file claims 1e9 points;
    trudy's file is ana's game with another incident digest."""
    res = tmp_path_factory.mktemp("forged") / "results"
    clock = FakeClock()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(session_clock, "time", clock)
        play_transcript(res / "blue--ana.json", MINI, 0, "ana", "expert", step=5.0, clock=clock)
        cheat_transcript(res / "red--mallory.json", MINI, "mallory", clock=clock, claim=1e9)
    doc = json.loads((res / "blue--ana.json").read_text())
    doc.update(session_id="trudy-1", player="trudy", incident_digest="0" * 64)
    (res / "red--trudy.json").write_text(json.dumps(doc))
    return res


def test_a_forged_incident_digest_is_skipped(forged: Path) -> None:
    board = read_results(forged)
    [skipped] = board.skipped
    assert Path(skipped["file"]).name == "red--trudy.json"
    assert "cannot be scored" in skipped["reason"] and "changed since" in skipped["reason"]
    assert "trudy" not in {e.player for e in board.entries}


def test_a_forged_score_ranks_by_the_recomputed_score_with_a_notice(forged: Path) -> None:
    board = read_results(forged)
    [first] = board.incidents
    assert [p["player"] for p in first.players] == ["ana", "mallory"]
    mallory = next(e for e in board.entries if e.player == "mallory")
    cheat = load_transcript(mallory.file)
    assert cheat.recorded_total == 1e9
    assert mallory.score == score_session(cheat.incident, 0, cheat.events).total < 50
    assert first.players[1]["score"] == mallory.score
    [notice] = [n for n in board.notices if "red--mallory.json" in n]
    assert "claims 1e+09 points" in notice and f"recomputed from its queries: {mallory.score:.1f}" in notice
    assert not any("blue--ana.json" in n for n in board.notices)  # an honest file (no claim) is no notice
    overall = {p["player"]: p["score"] for p in board.players}
    assert overall["mallory"] == mallory.score and overall["ana"] > overall["mallory"]

    run = CliRunner().invoke(_group(), ["leaderboard", str(forged), "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    assert doc["transcripts"] == 2 and any("red--mallory.json" in n for n in doc["notices"])
    assert "notice: " in run.stderr and "claims 1e+09 points" in run.stderr


def _group() -> click.Group:
    group = click.Group(commands=COMMANDS)
    return group
