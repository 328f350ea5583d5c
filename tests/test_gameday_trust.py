"""Game-day trust: who a player is (roster tokens), whose word a result is (journals the server signs),
and that the answer is not one throwaway game away (one game per player per round, debrief held).

Each attack from the three-player game day is tried here and must be refused: a wrong or missing token,
a second hand-in, an edited journal (a confidence, an event time, a deleted line), an edited result
file, a throwaway second game, the debrief before the round ends; a valid game is collected."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from gameday_support import MINI, cli, roster_for, seat_env, write_plan

from game import api
from game.frontends.autoplay import plan, play
from game.gameday.collect import write_state
from game.gameday.plan import load_gameday
from game.gameday.roster import load_roster, make_roster
from game.query.gateway import Gateway
from game.reports.leaderboard import read_results
from game.session import Session, SessionError, signing
from game.session import seat as seat_module
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

pytest_plugins = ("gameday_support",)  # the shared fixture: data

PLAN = """\
event: Trust day
results: results
rounds:
  - incident: {mini}
    seed: 0
    time_limit_min: 10
  - incident: {mini}
    seed: 1
    debrief: immediate
teams:
  - name: blue
    players: [ana, ben]
  - name: red
    players: [dara]
"""


@pytest.fixture
def day(tmp_path: Path) -> Path:
    return write_plan(tmp_path / "facilitator", PLAN.format(mini=MINI))


def served_game(data: Path, player: str, strategy: str = "expert", *, seed: int = 0) -> Session:
    """A game played by a scripted player in a served app process (the seat in the environment)."""
    inc = load_incident(MINI, seed=seed)
    session = Session.create(MINI, seed, player, root=data)
    with Gateway(Path(ensure_database(inc, seed).path)) as gateway:
        play(session, gateway, plan(inc, strategy, np.random.default_rng(1)))
    session.close()
    return session


# ---------------------------------------------------------------- identity


def test_the_roster_gives_each_player_a_private_token_and_keeps_it(day: Path) -> None:
    code, out, err = cli("gameday", "roster", str(day), "--url", "http://10.0.0.5:8000", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) == {"ok", "file", "roster_file", "key_file", "server_dir", "url", "players", "room"}
    roster_file, key_file = Path(doc["roster_file"]), Path(doc["key_file"])
    assert roster_file.parent == day.parent and key_file.parent == day.parent
    for secret in (roster_file, key_file):
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    tokens = load_roster(load_gameday(day)).tokens
    assert sorted(tokens) == ["ana", "ben", "dara"] and len(set(tokens.values())) == 3
    ana = next(p for p in doc["players"] if p["player"] == "ana")
    assert ana["link"] == f"http://10.0.0.5:8000/?token={tokens['ana']}"
    assert ana["join"] == f"servedrill join '{ana['link']}'"
    # again: links already handed out stay good; a reissued one changes
    cli("gameday", "roster", str(day), "--reissue", "ben")
    again = load_roster(load_gameday(day)).tokens
    assert again["ana"] == tokens["ana"] and again["ben"] != tokens["ben"]
    code, _, err = cli("gameday", "roster", str(day), "--reissue", "bne")
    assert code == 1 and "on no team" in err


def test_a_roster_others_may_read_is_refused(day: Path) -> None:
    gd = load_gameday(day)
    make_roster(gd)
    os.chmod(day.parent / "gameday.roster.json", 0o644)
    from game.gameday.roster import RosterError

    with pytest.raises(RosterError, match="may be read by other users"):
        load_roster(gd)
    os.chmod(day.parent / "gameday.journal.key", 0o644)
    with pytest.raises(signing.KeyError_, match="chmod 600"):
        signing.load_key(day.parent / "gameday.journal.key")


def test_impersonation_is_refused(day: Path) -> None:
    """A wrong, missing or reissued token gets no page and no tab; the name is the roster's."""
    from game.gameday.gate import Refused, RoundGate

    gd = load_gameday(day)
    roster = make_roster(gd)
    gate = RoundGate.load(gd)
    with pytest.raises(Refused, match="needs your personal link"):
        gate.check_page(None)
    with pytest.raises(Refused, match="not on the roster"):
        gate.check_page("ben")  # typing a name is not a token
    with pytest.raises(Refused, match="not on the roster"):
        gate.check_page(roster.tokens["ben"][:-1] + "x")
    with pytest.raises(Refused, match="No round is running"):
        gate.check_page(roster.tokens["ben"])  # a known player, before the facilitator starts a round
    write_state(gd, {1: (1.0, None)})
    player, command = gate.admit(roster.tokens["ben"])
    assert player == "ben" and "--player ben" in command and "--seed 0" in command
    assert seat_module.SEAT_ENV in command and signing.KEY_ENV in command
    assert roster.tokens["ben"] not in command  # the app never sees the token
    with pytest.raises(Refused, match="already open in another tab"):
        gate.admit(roster.tokens["ben"])  # a second tab of the same player
    gate.release("ben")
    old = roster.tokens["ben"]
    make_roster(gd, reissue=("ben",))
    with pytest.raises(Refused, match="not on the roster"):
        RoundGate.load(gd).check_page(old)


def test_serve_gameday_refuses_typed_names_and_other_deals(day: Path) -> None:
    from tui.cli import main

    roster_for(day)
    for extra in (["--player", "ben"], ["--random"], ["one-slow-replica"]):
        run = CliRunner().invoke(main, ["serve", "--gameday", str(day), *extra])
        assert run.exit_code == 1 and "does not combine with it" in run.stderr, run.output
    run = CliRunner().invoke(main, ["serve", "--gameday", str(day), "--round", "9"])
    assert run.exit_code == 1 and "no round 9" in run.stderr
    (day.parent / "gameday.roster.json").unlink()
    run = CliRunner().invoke(main, ["serve", "--gameday", str(day)])
    assert run.exit_code == 1 and "servedrill gameday roster" in run.stderr


def test_the_page_points_its_websocket_at_the_token() -> None:
    from tui.serve_gameday import websocket_url

    page = '<div data-session-websocket-url="ws://127.0.0.1:8000/ws" data-font-size="16">'
    assert 'data-session-websocket-url="ws://127.0.0.1:8000/ws/T0k-en"' in websocket_url(page, "T0k-en")


# ---------------------------------------------------------------- authority and one game per round


@pytest.mark.slow
def test_a_served_round_collects_the_signed_game_and_refuses_the_rest(
        data: Path, day: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gd = load_gameday(day)
    make_roster(gd)
    write_state(gd, {1: (1.0, None)})
    # ben plays his round in his tab: the journal is signed, every line
    seat_env(monkeypatch, day, "ben")
    ben = served_game(data, "ben", "expert")
    assert ben.path is not None
    lines = [json.loads(line) for line in ben.path.read_text().splitlines()]
    assert all(isinstance(line.get("mac"), str) for line in lines)

    # a throwaway game: a second session of ben in the same round is refused, and writes nothing
    before = sorted((data / "sessions").glob("*.jsonl"))
    with pytest.raises(SessionError, match="one game per player per round"):
        Session.create(MINI, 0, "ben", root=data)
    assert sorted((data / "sessions").glob("*.jsonl")) == before
    # ... as is another player's name or another incident from ben's seat
    with pytest.raises(SessionError, match="as ben"):
        Session.create(MINI, 0, "ana", root=data)
    with pytest.raises(SessionError, match="plays tui-mini"):
        Session.create(MINI, 3, "ben", root=data)
    # the debrief is held until the round ends
    resumed = api.resume_session(ben.path)
    with pytest.raises(SessionError, match="held until the round ends"):
        api.debrief(resumed)
    # a second hand-in (another board, all on one hypothesis): refused by the session's rules, and nothing is
    # journalled
    with pytest.raises(SessionError, match="already submitted"):
        resumed.submit([(h.id, 100.0 if i == 0 else 0.0) for i, h in enumerate(resumed.board)])
    with pytest.raises(SessionError, match="already submitted"):
        resumed.submit()
    resumed.close()
    assert len(ben.path.read_text().splitlines()) == len(lines)

    # the server reopens ben's link: his same game, not a new one
    from game.gameday.gate import RoundGate

    command = RoundGate.load(gd, 1).command("ben", gd.rounds[0])
    assert f"resume {ben.session_id}" in command

    # ana plays in her tab; dara plays outside the server (unsigned), and a fake "ana" hands in a 0 there too
    seat_env(monkeypatch, day, "ana")
    ana = served_game(data, "ana", "expert")
    monkeypatch.delenv(seat_module.SEAT_ENV)
    monkeypatch.delenv(signing.KEY_ENV)
    served_game(data, "dara", "lucky")
    served_game(data, "ana", "lucky")

    code, out, err = cli("gameday", "collect", str(day), "--round", "1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["journals"] == "signed"
    [first] = doc["rounds"]
    assert first["handed_in"] == ["ana", "ben"] and first["waiting"] == ["dara"]
    refused = {(r["player"], r["reason"].split(":")[0]) for r in first["refused"]}
    assert refused == {("dara", "not written by the game-day server (unsigned)"),
                       ("ana", "not written by the game-day server (unsigned)")}
    transcript = json.loads(Path(first["files"]["ana"]).read_text())
    assert transcript["gameday"]["verified"] is True and transcript["session_id"] == ana.session_id

    # the round ends: ben's debrief is released in his tab
    write_state(gd, {1: (1.0, 2.0)})
    seat_env(monkeypatch, day, "ben")
    resumed = api.resume_session(ben.path)
    assert api.debrief(resumed).report.total > 50
    resumed.close()

    # the leaderboard verifies every result file against the key; an edited one is refused
    key = signing.load_key(signing.key_file_for(day))
    board = read_results(gd.results, gd, key=key)
    assert board.verified and sorted(e.player for e in board.entries) == ["ana", "ben"]
    path = Path(first["files"]["ben"])
    edited = json.loads(path.read_text())
    submit = next(e for e in edited["events"] if e["kind"] == "submit")
    ranking = submit["data"]["ranking"]
    ranking[0]["confidence"], ranking[-1]["confidence"] = ranking[-1]["confidence"], ranking[0]["confidence"]
    path.write_text(json.dumps(edited))
    board = read_results(gd.results, gd, key=key)
    assert [e.player for e in board.entries] == ["ana"]
    [skip] = board.skipped
    assert skip["file"] == str(path) and "refused: events[" in skip["reason"] and "was changed" in skip["reason"]
    # without the key the board says it trusts its files
    assert "trusts its files" in read_results(gd.results, gd).notices[0]


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["confidence", "time", "delete", "player"])
def test_an_edited_journal_is_refused_by_collection_with_the_reason(
        data: Path, day: Path, monkeypatch: pytest.MonkeyPatch, attack: str) -> None:
    gd = load_gameday(day)
    make_roster(gd)
    seat_env(monkeypatch, day, "ana")
    ana = served_game(data, "ana", "lucky")
    monkeypatch.delenv(seat_module.SEAT_ENV)
    assert ana.path is not None
    lines = ana.path.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    if attack == "confidence":  # lift the score: all confidence on the truth, as a hand edit would
        i = next(i for i, r in enumerate(records) if r.get("kind") == "submit")
        for row in records[i]["data"]["ranking"]:
            row["confidence"] = round(1.0 / len(records[i]["data"]["ranking"]), 4)
        where, why = i + 1, "was changed"
    elif attack == "time":  # an earlier hand-in to win the tie
        i = next(i for i, r in enumerate(records) if r.get("kind") == "submit")
        records[i]["time"] -= 300.0
        where, why = i + 1, "was changed"
    elif attack == "delete":  # drop a query that ruled out nothing
        i = next(i for i, r in enumerate(records) if r.get("kind") == "query")
        del records[i]
        where, why = i + 1, "is missing (deleted)"
    else:  # hand the game to someone else
        records[0]["player"] = "dara"
        where, why = 1, "header was changed"
    ana.path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    code, out, err = cli("gameday", "collect", str(day), "--round", "1", "--json")
    assert code == 0, err
    [first] = json.loads(out)["rounds"]
    assert first["handed_in"] == []
    [refused] = first["refused"]
    assert refused["reason"].startswith(f"{ana.path}:{where}: ") and why in refused["reason"], refused
    code, out, _ = cli("gameday", "collect", str(day), "--round", "1")
    assert f"refused: {ana.path}" in out
    # the server will not continue it either
    seat_env(monkeypatch, day, "dara" if attack == "player" else "ana")
    with pytest.raises(SessionError, match=r"cannot be continued|was changed"):
        Session.resume(ana.path)


@pytest.mark.slow
def test_a_shared_folder_says_it_trusts_its_players(data: Path, day: Path) -> None:
    """No server, no key: collected on the players' word, said plainly; a signed journal it cannot check
    is refused."""
    from tests.test_gameday import play_session

    play_session(data, MINI, "ana")
    code, out, _ = cli("gameday", "collect", str(day), "--round", "1")
    assert code == 0 and "NOTE: journals are not signed" in out and "trust the players" in out
    doc = json.loads(cli("gameday", "collect", str(day), "--round", "1", "--json")[1])
    assert doc["journals"] == "trusted" and doc["rounds"][0]["handed_in"] == ["ana"]


def test_a_signed_journal_needs_the_key_to_go_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "k.key"
    signing.make_key(key_file)
    monkeypatch.setenv(signing.KEY_ENV, str(key_file))
    session = Session.create(MINI, 0, "ana", root=tmp_path / "data")
    session.start("digest")
    session.close()
    assert session.path is not None
    monkeypatch.delenv(signing.KEY_ENV)
    with pytest.raises(SessionError, match="signed by a game-day server"):
        Session.resume(session.path)
    other = tmp_path / "other.key"
    signing.make_key(other)
    monkeypatch.setenv(signing.KEY_ENV, str(other))
    with pytest.raises(SessionError, match="signed with another key"):
        Session.resume(session.path)
    monkeypatch.setenv(signing.KEY_ENV, str(key_file))
    again = Session.resume(session.path)  # the key's holder goes on, and the chain still verifies
    again.note(again.board[0].id, "still me")
    again.close()
    records = [json.loads(line) for line in session.path.read_text().splitlines()]
    signing.verify_chain(signing.load_key(key_file), records[0], records[1:])


def test_the_debrief_policy_is_the_plans(day: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gd = load_gameday(day)
    make_roster(gd)
    assert [r.debrief for r in gd.rounds] == ["held", "immediate"]
    seat_env(monkeypatch, day, "ana", round_no=2)
    assert seat_module.debrief_held() is None  # practice round
    seat_env(monkeypatch, day, "ana", round_no=1)
    assert "held until the round ends" in (seat_module.debrief_held() or "")
    write_state(gd, {1: (1.0, 5.0)})
    assert seat_module.debrief_held() is None
