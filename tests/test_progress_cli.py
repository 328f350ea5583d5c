"""`servedrill list` shows the player's progress (issue 34): the best score per incident, solved or not (as
game.api.solved decides), what is new to them, `--unsolved`, and the same in `--json`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_tui_support import FIXTURE, journal, submitted_events

from tui.cli import main


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def played(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A library of tui-mini and one more incident, and a data folder where `tester` scored 82.5 on
    tui-mini (a transcript written through game.api); returns the library folder."""
    from game import api

    library = tmp_path / "library"
    library.mkdir()
    shutil.copy(FIXTURE, library / "tui-mini.yaml")
    shutil.copy(FIXTURE.parent / "good.yaml", library / "slow-decode.yaml")
    data = tmp_path / "data"
    monkeypatch.setenv("SERVEDRILL_DATA", str(data))
    session = api.resume_session(journal(data / "sessions" / "tui-mini-fixed.jsonl", submitted_events()))
    try:
        api.export_transcript(session, None, {"total": 82.5}, root=data)
    finally:
        session.close()
    return library


def test_list_json_has_the_players_best_solved_and_new(played: Path) -> None:
    data = json.loads(run("list", "--library", str(played), "--json", "--player", "tester").stdout)
    by_id = {inc["id"]: inc for inc in data["incidents"]}
    assert by_id["tui-mini"]["best"] == 82.5 and by_id["tui-mini"]["solved"] is True
    assert by_id["tui-mini"]["new"] == []
    fresh = by_id["slow-decode"]
    assert fresh["best"] is None and fresh["solved"] is False
    assert "difficulty 3" in fresh["new"]
    assert data["player"] == "tester" and data["solved"] == 1
    # another player has finished nothing: everything is new to them
    other = json.loads(run("list", "--library", str(played), "--json", "--player", "nobody").stdout)
    assert other["solved"] == 0 and all(inc["best"] is None and inc["new"] for inc in other["incidents"])


def test_list_table_marks_best_and_new_and_unsolved_filters(played: Path) -> None:
    text = run("list", "--library", str(played), "--player", "tester").output
    header, _, *rows = text.splitlines()
    assert header.split()[:6] == ["id", "title", "difficulty", "best", "new", "tags"]
    [mini] = [r for r in rows if r.startswith("tui-mini")]
    [slow] = [r for r in rows if r.startswith("slow-decode")]
    assert "82 ✓" in mini and " new " not in mini
    assert " - " in slow and " new " in slow
    assert "tester: solved 1 of 2 incidents" in text
    data = json.loads(run("list", "--library", str(played), "--json", "--player", "tester", "--unsolved").stdout)
    assert [inc["id"] for inc in data["incidents"]] == ["slow-decode"]


def test_history_lists_the_players_finished_sessions_in_text_and_json(played: Path) -> None:
    data = json.loads(run("history", "--player", "tester", "--json").stdout)
    [past] = data["sessions"]
    assert data["ok"] is True and data["player"] == "tester"
    assert (past["session_id"], past["incident"], past["score"], past["solved"]) == ("tui-mini-fixed", "tui-mini",
                                                                                    82.5, True)
    assert past["queries"] >= 1 and Path(past["transcript"]).is_file()
    text = run("history", "--player", "tester").output
    assert "82.5 solved" in text and "Reopen a debrief in the terminal" in text
    # someone else has finished nothing; every player's list has tester's
    assert json.loads(run("history", "--player", "nobody", "--json").stdout)["sessions"] == []
    assert "No finished sessions yet" in run("history", "--player", "nobody").output
    everyone = json.loads(run("history", "--all-players", "--json").stdout)
    assert everyone["player"] is None and [p["player"] for p in everyone["sessions"]] == ["tester"]
    both = run("history", "--player", "x", "--all-players", "--json")
    assert both.exit_code != 0 and json.loads(both.stdout)["ok"] is False
