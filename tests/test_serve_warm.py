"""`servedrill serve --warm N` (tui.serve_warm): tabs start in processes forked from one that has imported
the game. Which commands can start warm (fast, no server); then a real server: a warm tab plays a query
that its journal records and the pool refills behind it. Closing a warm tab's socket, the server's death
(the template and spares die with it) and the memory cap on warm apps are tests/test_serve_bounds.py's,
parametrized cold (`--warm 0`: no pool at all) and warm."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_serve_bounds import (
    GONE_S,
    Tab,
    alive,
    children,
    gone_within,
    is_template,
    server,
    threads,
)
from test_tui_support import FIXTURE

from tui.serve import app_command
from tui.serve_warm import WarmStart, warm_start

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

BASE = {"PATH": "/usr/bin", "TEXTUAL_FPS": "60", "COLUMNS": "80", "ROWS": "24", "SERVEDRILL_SERVED_APP": "1"}


# --- which tabs start warm ----------------------------------------------------------------------------

def test_serves_own_command_starts_warm_with_its_arguments() -> None:
    command = app_command(incident="tui-mini", seed=3, player="ann", library=[FIXTURE], ask_player=False)
    start = warm_start(command, {**BASE, "COLUMNS": "200", "ROWS": "50"}, BASE)
    assert start == WarmStart(["play", "tui-mini", "--seed", "3", "--player", "ann", "--library", str(FIXTURE)],
                              {**BASE, "COLUMNS": "200", "ROWS": "50"}, os.getcwd())
    assert json.loads(start.header()[4:]) == {"argv": start.argv, "env": start.env, "cwd": start.cwd}


def test_a_game_days_command_starts_warm_with_its_environment() -> None:
    seat = '{"player": "ben", "round": 1}'
    command = "exec " + shlex.join(["env", f"SERVEDRILL_ROUND_SEAT={seat}", "SERVEDRILL_JOURNAL_KEY_FILE=/k",
                                    "SERVEDRILL_DATA=/d", sys.executable, "-m", "tui.cli", "resume", "abc123"])
    start = warm_start(command, BASE, BASE)
    assert start is not None and start.argv == ["resume", "abc123"]
    assert start.env == {**BASE, "SERVEDRILL_ROUND_SEAT": seat, "SERVEDRILL_JOURNAL_KEY_FILE": "/k",
                         "SERVEDRILL_DATA": "/d"}


@pytest.mark.parametrize(("command", "environment"), [
    ("exec /other/python -m tui.cli play", BASE),  # another interpreter
    (f"exec {sys.executable} -m game.cli play", BASE),  # not the app
    (f"exec {sys.executable} -c 'print(1)'", BASE),
    (f"exec {sys.executable} -m tui.cli play 'unclosed", BASE),
    (f"exec env TEXTUAL_FPS=5 {sys.executable} -m tui.cli play", BASE),  # read when Textual is imported
    (f"exec {sys.executable} -m tui.cli play", {**BASE, "SERVEDRILL_PURE": "1"}),  # read at import too
    (f"exec {sys.executable} -m tui.cli play", {**BASE, "PYTHONPATH": "/elsewhere"}),
], ids=["python", "module", "script", "quoting", "textual-env", "pure", "pythonpath"])
def test_what_a_warm_process_cannot_reproduce_starts_cold(command: str, environment: dict[str, str]) -> None:
    assert warm_start(command, environment, BASE) is None


def test_the_warm_option_reaches_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.serve
    from tui.cli import main

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(tui.serve, "serve", lambda command, **options: calls.append(options))
    for args in ([], ["--warm", "0"], ["--warm", "7"]):
        assert CliRunner().invoke(main, ["serve", *args]).exit_code == 0
    assert [options["warm"] for options in calls] == [4, 0, 7]
    refused = CliRunner().invoke(main, ["serve", "--warm", "-1"])
    assert refused.exit_code == 2 and "--warm" in refused.output


def test_a_template_that_cannot_start_leaves_every_tab_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three templates in a row that die before they are ready, and the pool gives up: not ready, no
    process left, and `take` has nothing (the tab starts cold)."""
    import tui.serve_warm

    monkeypatch.setattr(tui.serve_warm, "RESTART_S", 0.0)

    async def run() -> None:
        pool = tui.serve_warm.WarmPool(2, dict(os.environ), python="/bin/false")
        pool.start()
        [task] = list(pool._tasks)
        await asyncio.wait_for(task, 30)
        assert not pool.ready and pool.template is not None and pool.template.returncode is not None
        assert await pool.take(WarmStart(["play"], {}, "/")) is None
        await pool.close()

    asyncio.run(run())


# --- a real server ------------------------------------------------------------------------------------

SQL = "SELECT 'warm' AS who, count(*) AS n FROM requests"


def journal_queries(data: Path) -> list[dict[str, Any]]:
    out = []
    for path in (data / "sessions").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            with_event = json.loads(line) if line.strip() else {}
            if with_event.get("kind") == "query":
                out.append(with_event["data"])
    return out


@pytest.mark.slow
def test_a_warm_tab_plays_and_the_pool_refills(tui_env: Path, tmp_path: Path) -> None:
    """With two spares ready, a tab's app is one of them (a child of the template, not of the server); it
    opens the incident and runs a query its journal records; the template forks a spare in its place; the
    app goes when the socket closes, the spares stay."""
    seen: dict[str, Any] = {}

    async def body(port: int, pid: int) -> None:
        import aiohttp

        [template] = [child for child in children(pid) if is_template(child)]
        spares = set(children(template))
        async with aiohttp.ClientSession() as session:
            tab = Tab(port, pid, "?width=160&height=45")
            try:
                await tab.open(session)
                await tab.picker()
                assert tab.app in spares, (tab.app, spares)  # a spare took the tab: no process was started
                # the template forks another: two spares again besides the tab's app
                await tab.until(lambda: len([p for p in children(template) if threads(p) == 1]) == 2, 60,
                                "the pool refilled")
                await tab.send("stdin", "\r")
                await tab.until(lambda: "start the investigation" in tab.text(), 60, "briefing")
                await tab.send("stdin", "\r")
                await tab.until(lambda: "Write SQL here" in tab.text(), 60, "workspace")
                await tab.until(lambda: "▶ requests" in tab.text(), 60, "the schema")
                for character in SQL:  # one key per message, as a browser sends them
                    await tab.send("stdin", character)
                await tab.until(lambda: SQL in tab.text(), 30, "the query in the editor")
                await tab.send("stdin", "\x1b[15~")  # F5
                await tab.until(lambda: journal_queries(tui_env), 60, "the query in the journal")
                seen["app"] = tab.app
                # its query worker was forked ahead with the spare: no interpreter was started for it
                workers = children(tab.app)
                seen["workers"] = [Path(f"/proc/{p}/cmdline").read_bytes() for p in workers]
            finally:
                await tab.close()
        seen["spares"] = {p for p in children(template) if p != seen.get("app")}

    with server(tmp_path / "serve.log", warm=2) as (port, proc):
        asyncio.run(body(port, proc.pid))
        gone_within(seen["app"], GONE_S)
        assert len(seen["spares"]) == 2 and all(alive(p) for p in seen["spares"])
    # (besides the world build it may have started) one child: the template's fork, not a started interpreter
    assert [b"tui.serve_warm" in c for c in seen["workers"] if b"proving.worlds" not in c] == [True], seen["workers"]
    [query] = journal_queries(tui_env)
    assert query["sql"].strip() == SQL and query["ok"] is True and query["rows"][0][0] == "warm"
    [journal] = (tui_env / "sessions").glob("*.jsonl")
    assert json.loads(journal.read_text(encoding="utf-8").splitlines()[0])["player"] == "bounds"
