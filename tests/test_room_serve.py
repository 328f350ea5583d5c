"""The live room in a browser (`servedrill serve --gameday PLAN`): served at `/room/<token>` for the facilitator's
token from the roster only (a player's token, a wrong one or none is refused, page and websocket alike), its
link printed at the start and by `gameday roster`, and the token kept out of the access log. The slow test
starts a real server and reads the room's terminal over textual-serve's websocket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_serve_bounds import Tab
from test_serve_support import free_port, serving_process
from test_tui_support import FIXTURE

from game.gameday.plan import load_gameday
from game.gameday.roster import load_roster, make_roster

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ("test_tui_support",)  # tui_env

PLAN = f"""\
event: Served room day
results: results
rounds:
  - incident: {FIXTURE}
    seed: 0
    time_limit_min: 10
teams:
  - name: blue
    players: [ana, ben]
"""


@pytest.fixture
def day(tmp_path: Path) -> Path:
    folder = tmp_path / "facilitator"
    folder.mkdir()
    path = folder / "gameday.yaml"
    path.write_text(PLAN, encoding="utf-8")
    return path


def test_the_roster_gives_the_facilitator_a_room_token_apart_from_every_player(day: Path) -> None:
    from game.gameday.gate import Refused, RoundGate
    from tui.cli import main

    run = CliRunner().invoke(main, ["gameday", "roster", str(day), "--url", "http://10.0.0.5:8000", "--json"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    roster = load_roster(load_gameday(day))
    assert roster.facilitator and roster.facilitator not in roster.tokens.values()
    assert doc["room"] == f"http://10.0.0.5:8000/room/{roster.facilitator}"
    make_roster(load_gameday(day))  # again: the room link stays good
    assert load_roster(load_gameday(day)).facilitator == roster.facilitator
    gate = RoundGate.load(load_gameday(day))
    gate.check_room(roster.facilitator)  # no round needs to run for the room
    near = roster.facilitator[:-1] + ("y" if roster.facilitator.endswith("x") else "x")  # one character off
    for token in (None, "", roster.tokens["ana"], near, "facilitator"):
        with pytest.raises(Refused, match="not the facilitator's room link") as refused:
            gate.check_room(token)
        assert refused.value.status == 403
    command = gate.room_command()
    assert "gameday room" in command and str(day) in command and roster.facilitator not in command
    with pytest.raises(Refused, match="not on the roster"):
        gate.check_page(roster.facilitator)  # the room's token opens no game


def test_a_roster_from_before_the_room_says_how_to_get_its_link(day: Path) -> None:
    from game.gameday.gate import Refused, RoundGate

    gd = load_gameday(day)
    make_roster(gd)
    path = day.with_name("gameday.roster.json")
    doc = json.loads(path.read_text())
    del doc["facilitator"]
    path.write_text(json.dumps(doc))
    with pytest.raises(Refused, match="no facilitator token yet"):
        RoundGate.load(gd).check_room("anything")


def test_the_room_page_points_its_websocket_at_the_room_and_the_log_keeps_no_token() -> None:
    from tui.serve import redact
    from tui.serve_gameday import room_websocket_url

    page = '<div data-session-websocket-url="ws://127.0.0.1:8000/ws" data-font-size="16">'
    assert 'data-session-websocket-url="ws://127.0.0.1:8000/room/T0k-en/ws"' in room_websocket_url(page, "T0k-en")
    assert redact("/room/s3cr3t") == "/room/<token>"
    assert redact("/room/s3cr3t/ws?width=80") == "/room/<token>/ws?width=80"


@contextlib.contextmanager
def served(day: Path, log: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    with serving_process(["--gameday", str(day)], log, port=port) as proc:
        yield port, proc


def status_of(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.slow
def test_the_server_serves_the_room_to_the_facilitator_only(day: Path, tui_env: Path, tmp_path: Path) -> None:
    import aiohttp

    roster = make_roster(load_gameday(day))
    assert roster.facilitator is not None
    log = tmp_path / "serve.log"
    with served(day, log) as (port, proc):
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while "live room" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        assert f"{base}/room/{roster.facilitator}" in log.read_text(errors="replace")
        code, page = status_of(f"{base}/room/{roster.facilitator}")
        assert code == 200 and f"/room/{roster.facilitator}/ws" in page
        for token in (roster.tokens["ana"], "nobody"):
            code, page = status_of(f"{base}/room/{token}")
            assert code == 403 and "facilitator&#x27;s room link" in page and "/ws" not in page

        async def talk() -> None:
            async with aiohttp.ClientSession() as session:
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await session.ws_connect(f"{base}/room/{roster.tokens['ana']}/ws")
                assert refused.value.status == 403
                tab = Tab(port, proc.pid)
                tab.url = f"{base}/room/{roster.facilitator}/ws?width=100&height=30"
                try:
                    await tab.open(session)
                    # The table's header can paint a frame before its rows: wait for the row.
                    await tab.until(lambda: "Served room day" in tab.text() and "Players" in tab.text()
                                    and "not joined" in tab.text(), 90, "the room with its roster")
                finally:
                    await tab.close()

        asyncio.run(talk())
    text = log.read_text(errors="replace")
    assert '"GET /room/<token>' in text
    assert roster.facilitator not in text.split("live room", 1)[1].split("\n", 1)[1]  # only the start line has it
