"""Game days: the gameday.yaml format and its file:line diagnostics, collecting real session journals
(played by scripted players through game.session) into the results folder, hand-ins from another
machine, and the facilitator's console driven line by line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from gameday_support import write_plan

import game.session as session_module
import game.session.core as session_clock  # the one module of game.session that reads the clock
from game.cli.gameday_commands import COMMANDS
from game.frontends.autoplay import plan, play
from game.frontends.gameday_console import Console
from game.gameday.collect import read_state, round_times
from game.gameday.plan import GameDay, check_gameday, load_gameday
from game.query.gateway import Gateway
from game.rules.assess import score_session
from game.session import Session
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

pytest_plugins = ("gameday_support",)  # the shared fixture: data

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "incidents"
MINI = DATA / "tui-mini.yaml"
DRILL = DATA / "drill-slow-replica.yaml"
EXAMPLE = ROOT / "docs" / "gameday.example.yaml"

GOOD = """\
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
    players: [dara, eli]
"""


def group() -> click.Group:
    g = click.Group(commands=COMMANDS)
    return g


@pytest.fixture
def day(tmp_path: Path) -> Path:
    return write_plan(tmp_path, GOOD.format(mini=MINI, drill=DRILL))


def play_session(data: Path, incident: Path, player: str, strategy: str = "expert", *, seed: int = 0,
                 submit: bool = True) -> Session:
    """A journalled session played by a scripted player through the real gateway, as `servedrill play`
    would leave it."""
    inc = load_incident(incident, seed=seed)
    the_plan = plan(inc, strategy, np.random.default_rng(1))
    session = Session.create(incident, seed, player, root=data)
    with Gateway(Path(ensure_database(inc, seed).path)) as gateway:
        if submit:
            play(session, gateway, the_plan)
        else:
            session.start()
            session.run_query(gateway, the_plan.queries[0].sql)
    session.close()
    return session


# ---------------------------------------------------------------- the file


def test_the_shipped_example_checks_clean() -> None:
    assert check_gameday(EXAMPLE) == []
    run = CliRunner().invoke(group(), ["gameday", "check", str(EXAMPLE), "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    assert set(doc) == {"ok", "file", "event", "date", "facilitator", "results", "data", "rounds", "teams",
                        "players", "diagnostics"}
    assert doc["ok"] is True and doc["diagnostics"] == [] and len(doc["teams"]) == 4 and doc["players"] == 12
    assert set(doc["rounds"][0]) == {"round", "incident", "ref", "title", "path", "seed", "time_limit_s",
                                         "debrief", "team_play"}
    assert sum(r["time_limit_s"] for r in doc["rounds"]) <= 45 * 60


def test_a_good_file_loads(day: Path) -> None:
    gd = load_gameday(day)
    assert gd.results == day.parent / "results"
    assert [(r.number, r.incident_id, r.seed) for r in gd.rounds] == [(1, "tui-mini", 0), (2, "drill-slow-replica", 0)]
    assert gd.rounds[0].time_limit_s == 600.0
    assert gd.rounds[1].time_limit_s == float(load_incident(DRILL).time_limit_s or 900)
    assert gd.players == {"ana": "blue", "ben": "blue", "dara": "red", "eli": "red"}
    assert gd.join_command(gd.rounds[0], "ana") == f"servedrill play {MINI} --seed 0 --player ana"


def test_library_ids_relative_paths_and_a_shared_data_folder(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "mini.yaml").write_bytes(MINI.read_bytes())
    path = write_plan(tmp_path, "event: e\nresults: /srv/results\ndata: /srv/shared data\nrounds:\n"
                                "  - {incident: one-slow-replica, seed: 4}\n  - {incident: inc/mini.yaml}\n"
                                "teams:\n  - {name: a, players: [x]}\n")
    gd = load_gameday(path)
    assert gd.rounds[1].path == (tmp_path / "inc" / "mini.yaml").resolve()
    assert gd.join_command(gd.rounds[0], "x") == \
        "SERVEDRILL_DATA='/srv/shared data' servedrill play one-slow-replica --seed 4 --player x"
    assert gd.results == Path("/srv/results")


BROKEN = [
    # (file text, line, column, words in the message)
    ("event: e\nresults: r\nround:\n  - {incident: tui-mini}\nteams: [{name: a, players: [x]}]\n",
     3, 1, ["unknown field 'round'", "did you mean 'rounds'"]),
    ("event: e\nresults: r\nrounds:\n  - incident: {mini}\n    seed: lots\nteams: [{name: a, players: [x]}]\n",
     5, 11, ["rounds[0].seed", "integer"]),
    ("event: e\nresults: r\nrounds:\n  - incident: {mini}\n    time_limit_min: 0\n"
     "teams: [{name: a, players: [x]}]\n", 5, 21, ["rounds[0].time_limit_min", "greater than 0"]),
    ("event: e\nresults: r\nrounds:\n  - incident: {mini}\nteams:\n  - name: a\n    players: [x, y]\n"
     "  - name: b\n    players: [z, x]\n", 9, 18, ["player 'x' is already in team 'a'"]),
    ("event: e\nresults: r\nrounds:\n  - incident: {mini}\nteams:\n  - name: a\n    players: [x, 'Dr Who']\n",
     7, 18, ["not a valid player name"]),
    ("event: e\nresults: r\nrounds:\n  - incident: one-slow-replca\nteams: [{name: a, players: [x]}]\n",
     4, 15, ["rounds[0].incident", "one-slow-replca", "did you mean one-slow-replica"]),
    ("event: e\nresults: r\nrounds:\n  - incident: {mini}\n  - incident: {mini}\n"
     "teams: [{name: a, players: [x]}]\n", 5, 5, ["already round 1"]),
    ("event: e\nresults: r\nrounds:\n  - incident: {mini}\n", 1, 1, ["missing required field 'teams'"]),
    ("event: e\nresults: r\nrounds: [\n  - incident\n", 4, 3, ["YAML syntax error"]),
    ("event: e\nevent: f\nresults: r\n", 2, 1, ["duplicate key 'event'"]),
    ("event: e\nrounds:\n\t- incident: x\n", 3, 1, ["tab character"]),
    ("- event\n- results\n", 1, 1, ["top level must be a mapping"]),
]


@pytest.mark.parametrize(("text", "line", "column", "words"), BROKEN)
def test_a_broken_file_gets_file_line_errors(tmp_path: Path, text: str, line: int, column: int,
                                             words: list[str]) -> None:
    path = write_plan(tmp_path, text.replace("{mini}", str(MINI)))
    found = check_gameday(path)
    assert found, "expected a diagnostic"
    hit = [d for d in found if all(w in str(d) for w in words)]
    assert hit, [str(d) for d in found]
    assert (hit[0].line, hit[0].column) == (line, column), str(hit[0])
    assert str(hit[0]).startswith(f"{path}:{line}:{column}: ")


def test_the_check_command_reports_every_problem_on_its_line(tmp_path: Path) -> None:
    path = write_plan(tmp_path, "event: e\nresults: r\nrounds:\n  - incident: nope\n    sed: 3\n"
                                "teams:\n  - name: a\n    players: [x, x]\n")
    run = CliRunner().invoke(group(), ["gameday", "check", str(path)])
    assert run.exit_code == 1 and "Traceback" not in run.output
    lines = run.stderr.strip().splitlines()
    assert lines[0].startswith(f"{path}:5:5: rounds[0]: unknown field 'sed' (hint: did you mean 'seed'?)")
    as_json = CliRunner().invoke(group(), ["gameday", "check", str(path), "--json"])
    doc = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and doc["ok"] is False and doc["error"] == doc["diagnostics"][0]
    missing = CliRunner().invoke(group(), ["gameday", "check", str(tmp_path / "missing.yaml")])
    assert missing.exit_code == 1 and "no such file" in missing.stderr and "Traceback" not in missing.output
    incident = CliRunner().invoke(group(), ["gameday", "check", str(MINI)])
    assert "an incident file, not a game-day file" in incident.stderr


# ---------------------------------------------------------------- collecting


@pytest.mark.slow
def test_collect_takes_submitted_sessions_of_the_roster(data: Path, day: Path) -> None:
    play_session(data, MINI, "ana", "expert")
    play_session(data, MINI, "dara", "lucky")
    play_session(data, MINI, "eli", submit=False)  # still investigating
    play_session(data, MINI, "zed")  # not on a team
    play_session(data, DRILL, "ben", "expert")
    run = CliRunner().invoke(group(), ["gameday", "collect", str(day), "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    assert set(doc) == {"ok", "results", "player", "team", "journals", "notice", "rounds"}
    assert doc["journals"] == "trusted" and "trust the players" in doc["notice"]
    first, second = doc["rounds"]
    assert set(first) == {"round", "handed_in", "new", "waiting", "files", "problems", "refused", "trusted"}
    assert first["handed_in"] == ["ana", "dara"] and first["waiting"] == ["ben", "eli"]
    assert second["handed_in"] == ["ben"]
    assert any("'zed' is on no team" in p for p in first["problems"])
    ana = Path(first["files"]["ana"])
    assert ana == day.parent / "results" / "round-01-tui-mini" / "blue--ana.json"
    transcript = json.loads(ana.read_text())
    assert transcript["format"] == "servedrill-transcript" and transcript["player"] == "ana"
    assert transcript["gameday"]["team"] == "blue" and transcript["gameday"]["round"] == 1
    assert transcript["gameday"]["score"] > 80 and transcript["gameday"]["late"] is False
    # the collected file is a transcript `servedrill score` accepts, and its score is the one its SQL earns
    checked = session_module.load_transcript(ana)
    assert transcript["gameday"]["score"] == score_session(checked.incident, 0, checked.events).total
    assert checked.recorded_total == transcript["gameday"]["score"]
    dara = json.loads(Path(first["files"]["dara"]).read_text())
    assert dara["gameday"]["score"] < 10  # 90% on the truth after only a look at the schema: a guess
    again = json.loads(CliRunner().invoke(group(), ["gameday", "collect", str(day), "--json"]).stdout)
    assert again["rounds"][0]["new"] == [] and again["rounds"][0]["handed_in"] == ["ana", "dara"]
    assert read_state(day.parent / "results")["format"] == "servedrill-gameday"


@pytest.mark.slow
def test_collect_rescores_from_the_journal_or_does_not_collect(data: Path, tmp_path: Path) -> None:
    incident = tmp_path / "mini.yaml"
    incident.write_bytes(MINI.read_bytes())
    day = write_plan(tmp_path, GOOD.format(mini=incident, drill=DRILL))
    ana = play_session(data, incident, "ana")
    ben = play_session(data, incident, "ben")
    # ben's journal claims a score in its header: collection writes what his queries earn
    assert ben.path is not None
    lines = ben.path.read_text(encoding="utf-8").split("\n")
    header = json.loads(lines[0])
    header["score"] = {"total": 100.0}
    ben.path.write_text("\n".join([json.dumps(header), *lines[1:]]), encoding="utf-8")
    doc = json.loads(CliRunner().invoke(group(), ["gameday", "collect", str(day), "--round", "1", "--json"]).stdout)
    [first] = doc["rounds"]
    assert first["handed_in"] == ["ana", "ben"]
    ben_doc = json.loads(Path(first["files"]["ben"]).read_text())
    checked = session_module.load_transcript(Path(first["files"]["ben"]))
    assert ben_doc["gameday"]["score"] == score_session(checked.incident, 0, checked.events).total
    assert ben_doc["gameday"]["score"] == json.loads(Path(first["files"]["ana"]).read_text())["gameday"]["score"]
    # the incident changes after the game: a session not yet collected cannot be scored, so it is not collected
    for f in Path(first["files"]["ana"]).parent.glob("*.json"):
        f.unlink()
    incident.write_text(MINI.read_text() + "# edited after the game\n")
    run = CliRunner().invoke(group(), ["gameday", "collect", str(day), "--round", "1", "--json"])
    assert run.exit_code == 0, run.output
    [again] = json.loads(run.stdout)["rounds"]
    assert again["handed_in"] == [] and again["files"] == {}
    assert {p.split(":")[0] for p in again["problems"]} == {str(ana.path), str(ben.path)}
    assert all("not collected" in p and "changed" in p for p in again["problems"])


@pytest.mark.slow
def test_submit_hands_in_only_your_own(data: Path, day: Path) -> None:
    play_session(data, MINI, "ana")
    play_session(data, MINI, "ben", "lucky")
    run = CliRunner().invoke(group(), ["gameday", "submit", str(day), "--player", "ben", "--round", "1", "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    assert doc["player"] == "ben" and doc["team"] == "blue"
    assert [r["handed_in"] for r in doc["rounds"]] == [["ben"]]
    assert not (day.parent / "results" / "round-01-tui-mini" / "blue--ana.json").exists()
    typo = CliRunner().invoke(group(), ["gameday", "submit", str(day), "--player", "bne"])
    assert typo.exit_code == 1 and "did you mean ben" in typo.stderr
    bad_round = CliRunner().invoke(group(), ["gameday", "submit", str(day), "--player", "ben", "--round", "9"])
    assert bad_round.exit_code == 1 and "no round 9" in bad_round.stderr


# ---------------------------------------------------------------- the console


class Script:
    """Feeds the console its lines; a callable in the script runs (a player acting) before the next line."""

    def __init__(self, steps: list[object]) -> None:
        self.steps = list(steps)
        self.prompts: list[str] = []

    def __call__(self, prompt: str, timeout: float | None) -> str | None:
        self.prompts.append(prompt)
        while self.steps and callable(self.steps[0]):
            self.steps.pop(0)()  # type: ignore[operator]
        if not self.steps:
            return "quit"
        step = self.steps.pop(0)
        return None if step is None else str(step)


@pytest.mark.slow
def test_the_console_runs_a_round(data: Path, day: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gd: GameDay = load_gameday(day)
    offset = {"s": 0.0}
    out: list[str] = []

    def late_player() -> None:
        # dara's clock says she submitted after the 10 minutes
        real = time.time
        monkeypatch.setattr(session_clock, "time", type("T", (), {"time": staticmethod(lambda: real() + 900)}))
        play_session(data, MINI, "dara", "lucky")
        monkeypatch.setattr(session_clock, "time", time)

    def ten_minutes_pass() -> None:
        offset["s"] = 601.0

    script = Script(["rounds", "start", "status", lambda: play_session(data, MINI, "ana"), "status", late_player,
                     ten_minutes_pass, None, "end", "board", "start 7", "bogus", "quit"])
    console = Console(gd, [data], read_line=script, echo=out.append, clock=lambda: time.time() + offset["s"])
    console.run()
    text = "\n".join(out)
    assert f"servedrill play {MINI} --seed 0 --player ana" in text
    assert f"servedrill play {MINI} --seed 0 --player eli" in text
    assert f"servedrill gameday submit {day} --player NAME" in text
    assert "handed in: ana" in text and "TIME UP" in text
    assert "Round 1 ended: 2/4 handed in; no transcript from ben, eli" in text
    assert "no round '7'" in text and "unknown command 'bogus'" in text
    assert "Leaderboard: Test day" in text
    assert "gameday [round 1, 10:00 left]> " in script.prompts
    assert "gameday [round 1, TIME UP]> " in script.prompts
    assert "handed in: dara (red)" in text  # found by the timer's tick
    started, ended = round_times(read_state(gd.results), 1)
    assert started is not None and ended is not None
    dara = json.loads((gd.results / "round-01-tui-mini" / "red--dara.json").read_text())
    ana = json.loads((gd.results / "round-01-tui-mini" / "blue--ana.json").read_text())
    assert dara["gameday"]["late"] is True and ana["gameday"]["late"] is False


def test_the_console_picks_up_a_running_round(data: Path, day: Path) -> None:
    gd = load_gameday(day)
    out: list[str] = []
    Console(gd, [data], read_line=Script(["start 2", "quit"]), echo=out.append).run()
    assert "Round 2 keeps running" in "\n".join(out)
    again: list[str] = []
    script = Script(["start", "end", "quit"])
    Console(gd, [data], read_line=script, echo=again.append).run()
    text = "\n".join(again)
    assert "round 2 is still running; `end` it first" in text
    assert "RUNNING" in text and "Round 2 ended: 0/4 handed in" in text
