"""Saved queries (issue 34): named SQL a player keeps and reuses in every incident, through game.api, line
mode (`save`, `saved`, `forget`) and the terminal (alt+s names the editor's query, F3 offers it). A name is
text, never a path; every bound is checked before anything is written; an unreadable file is never
overwritten; two games saving at once both keep their query."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import investigating_events, journal, make_app, run_async, screen_name, until

from game import api
from game.frontends.line_mode import PlainGame
from game.session import Session
from game.session.saved_queries import MAX_NAME_CHARS, MAX_SAVED, MAX_SQL_CHARS, saved_path
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

pytest_plugins = ("test_tui_support",)

SQL = "SELECT replica, quantile_cont(ttft_s, 0.99) AS p99 FROM requests GROUP BY replica ORDER BY p99 DESC"
DRILL = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"
MINI = Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml"


# ---------------------------------------------------------------- the API


def test_saved_in_order_replaced_by_name_in_any_case_and_forgotten(tmp_path: Path) -> None:
    first, replaced = api.save_query("ada", "p99 per replica", SQL, tmp_path)
    assert (first.name, first.sql, replaced) == ("p99 per replica", SQL, False)
    api.save_query("ada", "  errors   by minute ", "SELECT 1", tmp_path)
    again, replaced = api.save_query("ada", "P99 PER REPLICA", SQL + " LIMIT 3", tmp_path)
    assert replaced and again.name == "P99 PER REPLICA"
    assert [(q.name, q.sql) for q in api.saved_queries("ada", tmp_path)] == [
        ("P99 PER REPLICA", SQL + " LIMIT 3"), ("errors by minute", "SELECT 1")]  # a replaced one keeps its place
    assert api.forget_query("ada", "errors BY minute", tmp_path).sql == "SELECT 1"
    assert [q.name for q in api.saved_queries("ada", tmp_path)] == ["P99 PER REPLICA"]
    with pytest.raises(api.SessionError, match="no saved query is called 'nope'"):
        api.forget_query("ada", "nope", tmp_path)


def test_the_apis_name_bound_is_the_stores() -> None:
    assert api.SAVED_NAME_CHARS == MAX_NAME_CHARS


def test_players_keep_their_own_lists(tmp_path: Path) -> None:
    api.save_query("ada", "mine", "SELECT 1", tmp_path)
    api.save_query("ben", "mine", "SELECT 2", tmp_path)
    assert [q.sql for q in api.saved_queries("ada", tmp_path)] == ["SELECT 1"]
    assert [q.sql for q in api.saved_queries("ben", tmp_path)] == ["SELECT 2"]
    assert api.saved_queries("cy", tmp_path) == []


@pytest.mark.parametrize("name", ["../../../etc/passwd", "[b]bold[/b] $(rm -rf ~)", "/tmp/x", "ü 名前 ✓"])
def test_a_name_is_text_kept_as_typed_and_never_a_path(tmp_path: Path, name: str) -> None:
    root = tmp_path / "data"
    query, _ = api.save_query("ada", name, "SELECT 1", root)
    assert query.name == name and [q.name for q in api.saved_queries("ada", root)] == [name]
    assert sorted(p.name for p in root.iterdir()) == [".saved-queries.lock", "saved-queries.json"]
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("name", "sql", "why"), [
    ("", "SELECT 1", "needs a name"),
    ("   ", "SELECT 1", "needs a name"),
    ("x" * 61, "SELECT 1", "at most 60"),
    ("bell\x07", "SELECT 1", "control character"),
    ("tab\x1b[31m", "SELECT 1", "control character"),
    ("fine", "   ", "no query to save"),
    ("fine", "SELECT '" + "x" * MAX_SQL_CHARS + "'", f"at most {MAX_SQL_CHARS}"),
])
def test_bad_input_is_refused_with_a_reason_and_nothing_written(tmp_path: Path, name: str, sql: str,
                                                                why: str) -> None:
    with pytest.raises(api.SessionError, match=why):
        api.save_query("ada", name, sql, tmp_path)
    assert not saved_path(tmp_path).exists()


def test_a_full_list_refuses_a_new_name_but_still_replaces(tmp_path: Path) -> None:
    for i in range(MAX_SAVED):
        api.save_query("ada", f"q{i}", f"SELECT {i}", tmp_path)
    with pytest.raises(api.SessionError, match=f"{MAX_SAVED} saved queries.*forget one"):
        api.save_query("ada", "one more", "SELECT 1", tmp_path)
    assert api.save_query("ada", "q7", "SELECT 'seven'", tmp_path)[1]
    assert len(api.saved_queries("ada", tmp_path)) == MAX_SAVED


@pytest.mark.parametrize("content", ['{"format": 1, "players": {"ada": [', '[1, 2]', '{"format": 9, "players": {}}',
                                     '{"format": 1, "players": {"ada": [{"name": 3}]}}'])
def test_an_unreadable_file_is_named_and_never_overwritten(tmp_path: Path, content: str) -> None:
    saved_path(tmp_path).write_text(content)
    with pytest.raises(api.SessionError) as caught:
        api.save_query("ada", "new", "SELECT 1", tmp_path)
    message = str(caught.value)
    assert str(saved_path(tmp_path)) in message and "hint: move saved-queries.json aside" in message
    assert "\n" not in message
    with pytest.raises(api.SessionError):
        api.saved_queries("ada", tmp_path)
    assert saved_path(tmp_path).read_text() == content


def test_a_fifo_in_its_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    os.mkfifo(saved_path(tmp_path))
    with pytest.raises(api.SessionError, match="FIFO"):
        api.saved_queries("ada", tmp_path)


def test_two_games_saving_at_once_both_keep_their_query(tmp_path: Path) -> None:
    def save(player: str) -> None:
        for i in range(15):
            api.save_query(player, f"{player} {i}", f"SELECT {i}", tmp_path)

    threads = [threading.Thread(target=save, args=(p,)) for p in ("ada", "ben", "cy")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for player in ("ada", "ben", "cy"):
        assert [q.name for q in api.saved_queries(player, tmp_path)] == [f"{player} {i}" for i in range(15)]
    assert json.loads(saved_path(tmp_path).read_text())["format"] == 1


# ---------------------------------------------------------------- line mode


@pytest.fixture(scope="module")
def cache(library_cache: Path) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        ensure_database(load_incident(DRILL), 0)
        ensure_database(load_incident(MINI), 0)
    return library_cache


def _play(incident: Path, data: Path, moves: list[str]) -> tuple[str, Session]:
    from game.query.gateway import Gateway

    info = ensure_database(load_incident(incident), 0)
    session = Session.create(incident, 0, "ada", root=data)
    out = io.StringIO()
    try:
        with Gateway(Path(info.path)) as gateway:
            PlainGame(session, gateway, io.StringIO("\n".join([*moves, "quit"]) + "\n"), out,
                      transcript_root=data).run()
    finally:
        session.close()
    return out.getvalue(), session


@pytest.mark.slow
def test_line_mode_saves_in_one_incident_and_runs_it_in_another(cache: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(cache))
    data = tmp_path / "data"
    said, first = _play(DRILL, data, ["save too early", SQL, "save p99 per replica", "save counts: SELECT count(*) "
                                      "AS n FROM requests", "save bell\x07", "saved"])
    assert "error: no query to save yet" in said
    assert 'Saved "p99 per replica"' in said and 'Saved "counts"' in said
    assert "error: the name holds a control character" in said
    assert "1. p99 per replica" in said and "2. counts" in said and "Traceback" not in said
    assert len(first.queries) == 1  # saving and listing are free

    said, second = _play(MINI, data, ["saved 2", "saved 3", "saved two", "forget 1", "saved"])
    assert [q.data["sql"] for q in second.queries] == ["SELECT count(*) AS n FROM requests"]
    assert "error: no saved query '3': write saved N with N from 1 to 2" in said
    assert "error: no saved query 'two'" in said
    assert 'Forgot "p99 per replica".' in said
    assert said.rstrip().count("1. counts") == 1
    assert [q.name for q in api.saved_queries("ada", data)] == ["counts"]


# ---------------------------------------------------------------- the terminal


@pytest.mark.slow
def test_alt_s_names_the_editors_query_and_f3_offers_it_in_the_next_game(tui_env: Path) -> None:
    api.save_query("tester", "[red]not markup[/red]", "SELECT 'earlier' AS x", tui_env)

    async def go() -> None:
        path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())
        app: Any = make_app(tui_env, resume_session=path, steady=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
            editor = app.screen.query_one("#editor")
            editor.load_text(SQL)
            await pilot.press("alt+s")
            await until(pilot, lambda: screen_name(app) == "QueryNameScreen")
            await pilot.press("enter")  # no name: refused under the box, which stays open
            problem = app.screen.query_one("#query-name-problem")
            await until(pilot, lambda: "needs a name" in str(problem.render()), what="the refusal")
            assert screen_name(app) == "QueryNameScreen"
            await pilot.press(*"p99 by replica", "enter")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            strip = app.screen.query_one("NoticeStrip")
            await until(pilot, lambda: "p99 by replica" in str(strip.render()), what="the notice")
            editor.load_text("")
            await pilot.press("f3")
            await until(pilot, lambda: screen_name(app) == "SnippetScreen")
            options = app.screen.query_one("#snippet-list")
            prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
            assert prompts[-2:] == ["★ [red]not markup[/red]", "★ p99 by replica"]  # literal, after the snippets
            await pilot.press("end", "enter")
            await until(pilot, lambda: screen_name(app) == "WorkspaceScreen")
            assert editor.text == SQL
        assert [q.name for q in api.saved_queries("tester", tui_env)] == ["[red]not markup[/red]", "p99 by replica"]

    run_async(go())
