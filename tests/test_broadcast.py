"""Messages to all players in a round (the console's `broadcast`, `servedrill gameday broadcast`), and who may
send into a session at all: only with the credential the session's game takes (its interviewer key), else a
clear refusal, never a "sent" the game then drops."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_gameday import MINI, Script, day, play_session  # noqa: F401  (fixtures)

from game import api
from game.cli.gameday_commands import COMMANDS
from game.frontends.gameday_console import Console
from game.gameday.plan import load_gameday
from game.session import Session
from game.session.gm_key import key_id, load_key, trust_path

pytest_plugins = ("gameday_support",)  # the fixture data (day is test_gameday's)


def _playing(folder: Path, player: str) -> Session:
    session = Session.create(MINI, 0, player, root=folder)
    session.start()
    return session


def test_the_console_broadcasts_to_every_player_in_the_round(data: Path, day: Path) -> None:  # noqa: F811
    gd = load_gameday(day)
    out: list[str] = []
    games: dict[str, Session] = {}

    def players_join() -> None:
        games["ana"] = _playing(data, "ana")
        games["dara"] = _playing(data, "dara")
        play_session(data, MINI, "ben")  # handed in already

    script = Script(["start", players_join, "broadcast Pin your evidence: 5 minutes to go", "broadcast", "quit"])
    Console(gd, [data], read_line=script, echo=out.append).run()
    try:
        text = "\n".join(out)
        assert "Sent to 2 player(s) in round 1: ana, dara" in text
        assert "no game yet (not reached): eli" in text and "handed in already: ben" in text
        assert "usage: broadcast TEXT" in text
        for player in ("ana", "dara"):  # each player's game shows it as an update
            updates = games[player].poll_gm()
            assert [(u.kind, u.text, u.sender) for u in updates] == [
                ("message", "Pin your evidence: 5 minutes to go", "Facilitator")]
    finally:
        for session in games.values():
            session.close()


def test_gameday_broadcast_on_the_command_line(data: Path, day: Path) -> None:  # noqa: F811
    import click

    from game.gameday.collect import write_state

    gd = load_gameday(day)
    runner = CliRunner()
    cli = click.Group(commands=COMMANDS)
    run = runner.invoke(cli, ["gameday", "broadcast", str(day), "hello"])
    assert run.exit_code == 1 and "no round is running" in run.output and "hint:" in run.output
    write_state(gd, {1: (1.0, None)})
    session = _playing(data, "ana")
    try:
        run = runner.invoke(cli, ["gameday", "broadcast", str(day), "Ten minutes left", "--from", "sam", "--json"])
        assert run.exit_code == 0, run.output
        doc = json.loads(run.stdout)
        assert doc["ok"] and doc["round"] == 1 and doc["from"] == "sam" and doc["text"] == "Ten minutes left"
        assert list(doc["delivered"]) == ["ana"] and doc["delivered"]["ana"] == session.session_id
        assert set(doc["not_playing"]) == {"ben", "dara", "eli"} and doc["refused"] == {}
        assert [u.text for u in session.poll_gm()] == ["Ten minutes left"]
        run = runner.invoke(cli, ["gameday", "broadcast", str(day), "  ", "--json"])
        assert run.exit_code == 1 and "Traceback" not in run.output
        assert json.loads(run.stdout)["ok"] is False
    finally:
        session.close()


def test_send_refuses_a_key_the_sessions_game_does_not_take(tmp_path: Path, mini_incident: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session.create(mini_incident, 0, "candidate", root=tmp_path)
    try:
        session.start()
        assert session.path is not None
        mine = os.environ["SERVEDRILL_GM_KEY_FILE"]
        own = load_key()
        assert own is not None and trust_path(session.path).read_text().strip() == key_id(own)
        api.send(session.path, "message", text="from the interviewer")  # the right key: sent
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(tmp_path / "nobody.key"))  # no key at all
        with pytest.raises(api.GMError, match=r"you hold no interviewer key.*hint: send from that account"):
            api.send(session.path, "message", text="from a shell user")
        load_key(create=True)  # a key of their own is not the game's either
        with pytest.raises(api.GMError, match="is not it"):
            api.send(session.path, "message", text="from a shell user")
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", mine)
        delivered = session.poll_gm()
        assert [u.text for u in delivered] == ["from the interviewer"]  # nothing else reached the inbox
    finally:
        session.close()


def test_a_session_with_no_recorded_key_takes_only_its_owner(tmp_path: Path, mini_incident: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session.create(mini_incident, 0, "candidate", root=tmp_path)
    session.start()
    session.close()
    assert session.path is not None
    trust_path(session.path).unlink()  # a session from before the key was recorded
    api.send(session.path, "message", text="the owner")
    monkeypatch.setattr(os, "getuid", lambda: os.stat(session.path).st_uid + 1)  # another shell user
    with pytest.raises(api.GMError, match="another user's"):
        api.send(session.path, "message", text="someone else")


def test_servedrill_send_without_the_key_says_why(tmp_path: Path, mini_incident: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.cli import main

    session = Session.create(mini_incident, 0, "candidate", root=tmp_path)
    session.start()
    session.close()
    assert session.path is not None
    monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(tmp_path / "nobody.key"))
    run = CliRunner().invoke(main, ["send", str(session.path), "message", "hi", "--json"])
    assert run.exit_code == 1 and "Traceback" not in run.output
    doc = json.loads(run.stdout)
    assert doc["ok"] is False and "not sent" in doc["error"] and "hint:" in doc["error"]


def test_a_broadcast_without_the_games_key_is_refused_per_player(data: Path, day: Path, tmp_path: Path,  # noqa: F811
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    gd = load_gameday(day)
    session = _playing(data, "ana")
    try:
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(tmp_path / "intruder.key"))
        load_key(create=True)
        done = api.broadcast(gd, gd.rounds[0], [data], "I am the facilitator, honest")
        assert done.delivered == {} and list(done.refused) == ["ana"]
        assert "not sent" in done.refused["ana"] and "hint:" in done.refused["ana"]
        with pytest.raises(api.GMError, match="needs some text"):
            api.broadcast(gd, gd.rounds[0], [data], "   ")
    finally:
        session.close()
