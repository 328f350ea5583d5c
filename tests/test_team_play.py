"""Team play in a served game day (issue 31): a round marked `team_play` gives each team one shared game.

Every member's link opens the same server-kept session; what one member records (a query, a pin, a ranking)
the others' processes read from the journal; each event names the member who did it (the seat's player, from
the token); the team hands in once, and a second member's hand-in is refused; collection, the leaderboard and
the review show one result per team, naming its members. The impersonation and edited-journal refusals hold
for a team's game as for a player's, and a solo round is what it always was.

Each member's app process is stood in for by a Session opened under that member's seat (the environment the
server gives the process): two open Session objects on one journal are two open files, locked as two
processes' would be."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from gameday_support import MINI, cli, roster_for, seat_env, write_plan

from game import api
from game.frontends.autoplay import plan
from game.gameday.collect import write_state
from game.gameday.gate import RoundGate
from game.gameday.plan import check_gameday, load_gameday
from game.query.gateway import Gateway
from game.reports.leaderboard import read_results
from game.session import Session, SessionError, signing
from game.session import seat as seat_module
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

pytest_plugins = ("gameday_support",)  # the shared fixture: data

PLAN = """\
event: Team day
results: results
rounds:
  - incident: {mini}
    seed: 0
    time_limit_min: 10
    team_play: true
  - incident: {mini}
    seed: 1
teams:
  - name: blue
    players: [ana, ben]
  - name: red
    players: [dara]
"""


@pytest.fixture
def day(tmp_path: Path) -> Path:
    path = write_plan(tmp_path / "facilitator", PLAN.format(mini=MINI))
    roster_for(path)
    return path


@pytest.fixture
def gateway(in_library_cache: Path) -> Iterator[Gateway]:
    inc = load_incident(MINI, seed=0)
    with Gateway(Path(ensure_database(inc, 0).path)) as gw:
        yield gw


def journal_lines(path: Path | None) -> list[dict[str, object]]:
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------- the plan and the gate


def test_the_plan_marks_team_rounds_and_the_gate_seats_a_team(day: Path, tmp_path: Path) -> None:
    gd = load_gameday(day)
    assert [r.team_play for r in gd.rounds] == [True, False]
    assert gd.hand_ins(gd.rounds[0]) == {"blue": ["ana", "ben"], "red": ["dara"]}
    assert gd.hand_ins(gd.rounds[1]) == {"ana": ["ana"], "ben": ["ben"], "dara": ["dara"]}
    # the whole event as team play, a round that opts out; and a typo is a diagnostic, not a traceback
    other = tmp_path / "event.yaml"
    other.write_text(PLAN.format(mini=MINI).replace("    team_play: true\n", "    team_play: false\n")
                     .replace("teams:\n", "team_play: true\nteams:\n"), encoding="utf-8")
    assert [r.team_play for r in load_gameday(other).rounds] == [False, True]
    other.write_text(PLAN.format(mini=MINI).replace("team_play: true", "team_plya: true"), encoding="utf-8")
    [problem] = check_gameday(other)
    assert problem.line == 7 and "unknown field 'team_plya'" in problem.message and "team_play" in (problem.hint or "")

    gate = RoundGate.load(gd)
    write_state(gd, {1: (1.0, None)})
    ana = gate.seat("ana", gd.rounds[0])
    assert (ana.player, ana.team, ana.members) == ("ana", "blue", ("ana", "ben"))
    assert seat_module.Seat.from_env(ana.to_env()) == ana
    _, command = gate.admit(load_roster_token(day, "ana"))
    assert "--player blue" in command  # the team's game, under the team's name; the member is in the seat
    # a solo round seats the player alone, as before
    solo = gate.seat("ana", gd.rounds[1])
    assert (solo.team, solo.members) == (None, ())
    assert "--player ana" in gate.command("ana", gd.rounds[1])


def load_roster_token(day: Path, player: str) -> str:
    from game.gameday.roster import load_roster

    return load_roster(load_gameday(day)).tokens[player]


# ---------------------------------------------------------------- one shared game


@pytest.mark.slow
def test_two_members_play_one_game_and_hand_in_once(data: Path, day: Path, gateway: Gateway,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    gd = load_gameday(day)
    t0 = time.time()  # the console's start of the round (a recorded time, never waited on)
    write_state(gd, {1: (t0, None)})
    inc = load_incident(MINI, seed=0)
    the_plan = plan(inc, "expert", np.random.default_rng(1))

    # ana's tab starts the team's game
    seat_env(monkeypatch, day, "ana")
    ana = api.new_session(api.load_variant(MINI, 0), "blue")
    assert ana.header.player == "blue" and ana.team == ("ana", "ben") and ana.member == "ana"
    api.start(ana, None)
    q1 = api.run_query(ana, gateway, the_plan.queries[1].sql)
    assert q1.index == 1

    # ben's link opens the same game while ana's tab still has it open (the gate resumes the team's claim)
    gate = RoundGate.load(gd)
    assert f"resume {ana.session_id}" in gate.command("ben", gd.rounds[0])
    assert f"resume {ana.session_id}" in gate.command("ana", gd.rounds[0])
    seat_env(monkeypatch, day, "ben")
    ben = api.resume_session(ana.path or "")
    assert ben.session_id == ana.session_id and ben.member == "ben"
    assert [q.data["sql"] for q in ben.queries] == [the_plan.queries[1].sql]  # ana's query, read by ben
    assert api.start(ben, None).data["by"] == "ana"  # leaving the briefing after ana: the game started once
    # a member who opens "a new game" joins the team's instead of starting a second one
    also_ben = api.new_session(api.load_variant(MINI, 0), "blue")
    assert also_ben.session_id == ana.session_id
    also_ben.close()
    with pytest.raises(SessionError, match="one game per team per round"):
        Session.create(MINI, 0, "blue", root=data)

    # ben pins ana's query and ranks; ana's next refresh shows both, each naming ben
    hypothesis, stance = the_plan.pins[0][1], the_plan.pins[0][2]
    api.pin(ben, 1, hypothesis, stance)
    api.rank(ben, the_plan.ranking)
    news = api.team_news(ana)
    assert [(e.kind, e.data["by"]) for e in news] == [("pin", "ben"), ("rank", "ben")]
    assert api.active_pins(ana) and ana.ranking == ben.ranking
    assert api.team_news(ana) == []  # each event is news once
    # ana's next query is Q2 (after ben's actions), and ben sees it
    q2 = api.run_query(ana, gateway, the_plan.queries[2].sql)
    assert q2.index == 2
    assert [(e.kind, e.data.get("index")) for e in api.team_news(ben)] == [("query", 2)]

    # every line is the server's (signed), and names its member: from the seat, never typed
    lines = journal_lines(ana.path)
    assert all(isinstance(line.get("mac"), str) for line in lines)
    assert lines[0]["player"] == "blue" and lines[0]["members"] == ["ana", "ben"]
    assert [(e["kind"], e["data"]["by"]) for e in lines[1:]] == [
        ("start", "ana"), ("query", "ana"), ("pin", "ben"), ("rank", "ben"), ("query", "ana")]

    # one hand-in per team, on the server's word: ben hands in; ana's hand-in (and a query) is refused, saying why
    api.submit(ben)
    with pytest.raises(SessionError, match=r"ben already handed in team blue's board at \d\d:\d\d:\d\d: one "
                                           "hand-in per team"):
        api.submit(ana, [(h.id, 100.0 if i == 0 else 0.0) for i, h in enumerate(ana.board)])
    with pytest.raises(SessionError, match="already submitted"):
        api.run_query(ana, gateway, "SELECT 1")
    assert ana.state == "submitted" and ana.submission is not None and ana.submission.data["by"] == "ben"
    # TIME UP in ana's tab then has nothing to hand in
    assert api.time_up(ana, api.Clock(700.0, 600.0, 1, submits=True)) is None
    count = len(journal_lines(ana.path))
    ana.close()
    ben.close()
    assert count == len(lines) + 1  # only ben's hand-in was added

    # the live room: one row per team, naming its members; the team handed in once
    room = api.room_state(gd, [data], t0 + 60)
    assert [(p.label, p.status, p.queries) for p in room.players] == [
        ("blue: ana, ben", "handed in", 2), ("red: dara", "not joined", 0)]
    assert [(s.label, s.score) for s in room.standings] == [("blue: ana, ben", None)]  # no score while it runs

    # collection: one result for the team, naming its members; red handed nothing in
    code, out, err = cli("gameday", "collect", str(day), "--round", "1", "--json")
    assert code == 0, err
    [first] = json.loads(out)["rounds"]
    assert first["handed_in"] == ["blue"] and first["waiting"] == ["red"] and first["refused"] == []
    result = Path(first["files"]["blue"])
    assert result.name == "blue.team.json"
    doc = json.loads(result.read_text())
    assert doc["gameday"]["members"] == ["ana", "ben"] and doc["gameday"]["verified"] is True
    assert doc["player"] == "blue" and doc["members"] == ["ana", "ben"]

    # the leaderboard: one row for the team in that round, naming its members; the team's score is its game's
    key = signing.load_key(signing.key_file_for(day))
    board = read_results(gd.results, gd, key=key)
    assert board.verified
    [round1] = board.incidents
    [row] = round1.players
    assert row["player"] == "blue" and row["members"] == ["ana", "ben"] and row["team"] == "blue"
    blue = next(t for t in round1.teams if t["team"] == "blue")
    assert blue["score"] == row["score"] and blue["handed_in"] == 2 and blue["size"] == 2
    # overall, each member is credited with the team's result
    overall = {p["player"]: p["score"] for p in board.players}
    assert overall == {"ana": row["score"], "ben": row["score"]}
    # the review: the team's one path, naming its members
    review = api.game_day_review(gd, key=key)
    [path] = review.rounds[0].players
    assert path.player == "blue (ana, ben)" and path.team == "blue" and path.verified


def test_every_members_debrief_opens_when_the_round_ends(data: Path, day: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """When the facilitator ends the round, every member's held debrief opens by itself, so the members' processes
    mark the team's game debriefed at about the same time: the first does, and a member whose process had not
    read that yet gets it back instead of "cannot view the debrief: the session is over" (found through real
    `serve` processes, tests/test_gameday_browser.py)."""
    gd = load_gameday(day)
    write_state(gd, {1: (1.0, None)})
    seat_env(monkeypatch, day, "ana")
    ana = api.new_session(api.load_variant(MINI, 0), "blue")
    api.start(ana, None)
    assert ana.path is not None
    seat_env(monkeypatch, day, "ben")
    ben = api.resume_session(ana.path)
    try:
        api.submit(ben, [(h.id, 100.0 if i == 0 else 0.0) for i, h in enumerate(ben.board)])
        assert [e.kind for e in api.team_news(ana)] == ["submit"] and ana.state == "submitted"
        hold = api.debrief_hold(ana, time.time())  # ana's waiting screen names who handed the board in
        assert hold is not None and hold.text.startswith("Handed in. The debrief opens when the round ends")
        assert hold.text.endswith("still play. ben handed in team blue's board.")
        viewed = ben.view_debrief()  # ben's debrief opened first; ana's process has not read it
        assert ana.state == "submitted"
        assert ana.view_debrief() == viewed and ana.state == "debriefed"
        assert [(e["kind"], e["data"]["by"]) for e in journal_lines(ana.path)[1:]] == [
            ("start", "ana"), ("submit", "ben"), ("debrief_viewed", "ben")]
    finally:
        ana.close()
        ben.close()


@pytest.mark.slow
def test_impersonation_and_edits_are_refused_for_a_team(data: Path, day: Path, gateway: Gateway,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    gd = load_gameday(day)
    write_state(gd, {1: (1.0, None)})
    seat_env(monkeypatch, day, "ana")
    ana = api.new_session(api.load_variant(MINI, 0), "blue")
    api.start(ana, None)
    api.run_query(ana, gateway, "SELECT 1 AS one")
    assert ana.path is not None

    # dara (team red) cannot open blue's game, nor start a game under blue's name
    seat_env(monkeypatch, day, "dara")
    with pytest.raises(SessionError, match="this session is blue's; you play round 1 in team red"):
        api.resume_session(ana.path)
    with pytest.raises(SessionError, match="in team red, not as 'blue'"):
        Session.create(MINI, 0, "blue", root=data)
    # nor can a member play it in a round each player plays alone
    seat_env(monkeypatch, day, "ben", round_no=2)
    with pytest.raises(SessionError, match="this session is blue's; you play round 2 as ben"):
        api.resume_session(ana.path)

    # ben joins; then a line is edited behind the server's back (a query's SQL): ben's next refresh refuses it,
    # and so does collection
    seat_env(monkeypatch, day, "ben")
    ben = api.resume_session(ana.path)
    api.run_query(ana, gateway, "SELECT 2 AS two")
    lines = ana.path.read_text().splitlines()
    edited = json.loads(lines[-1])
    edited["data"]["by"] = "ben"  # pass ana's query off as ben's
    lines[-1] = json.dumps(edited, separators=(",", ":"))
    ana.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionError, match=rf":{len(lines)}: event 3 was changed"):
        ben.sync()
    api.submit(ana, [(h.id, 100.0 if i == 0 else 0.0) for i, h in enumerate(ana.board)])
    ana.close()
    ben.close()
    code, out, err = cli("gameday", "collect", str(day), "--round", "1", "--json")
    assert code == 0, err
    [first] = json.loads(out)["rounds"]
    assert first["handed_in"] == []
    [refused] = first["refused"]
    assert refused["player"] == "blue" and refused["reason"].startswith(f"{ana.path}:{len(lines)}: ")
    assert "was changed" in refused["reason"]


@pytest.mark.slow
def test_a_solo_round_is_unchanged(data: Path, day: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gd = load_gameday(day)
    write_state(gd, {2: (1.0, None)})
    seat_env(monkeypatch, day, "ana", round_no=2)
    ana = api.new_session(api.load_variant(MINI, 1), "ana")
    assert ana.member is None and ana.team == ()
    api.start(ana, None)
    header, start = journal_lines(ana.path)
    assert "members" not in header and header["player"] == "ana"
    assert isinstance(start["data"], dict) and "by" not in start["data"]
    # one game per player, and another player's game stays closed to ben
    with pytest.raises(SessionError, match="one game per player per round"):
        Session.create(MINI, 1, "ana", root=data)
    assert ana.path is not None
    seat_env(monkeypatch, day, "ben", round_no=2)
    with pytest.raises(SessionError, match="open in another servedrill process"):
        api.resume_session(ana.path)  # a player's game stays locked by its one process, as before
    ana.close()
    with pytest.raises(SessionError, match="this session is ana's"):
        api.resume_session(ana.path)
    # a team's name in a solo round is refused: the seat is the player's
    with pytest.raises(SessionError, match="as ben, not as 'blue'"):
        Session.create(MINI, 1, "blue", root=data)
