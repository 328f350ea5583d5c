"""`servedrill serve` without a browser: the loopback rule, the command each tab runs, the incident
options, and the server's refusals (foreign Host or Origin, too many sessions)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_serve_support import serving
from test_tui_support import FIXTURE

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

ROOT = Path(__file__).resolve().parent.parent


def _cli() -> Any:
    from tui.cli import main

    return main


@pytest.fixture
def served_commands(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Stands in for the server: records (command, options) instead of serving."""
    import tui.serve

    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(tui.serve, "serve", lambda command, **options: calls.append((command, options)))
    return calls


@pytest.mark.slow
def test_serve_is_listed_and_documents_its_options() -> None:
    out = subprocess.run([sys.executable, "-m", "tui.cli", "serve", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    for flag in ("--host", "--port", "--public", "--incidents", "--seed", "--player", "--max-sessions"):
        assert flag in out.stdout


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_a_non_loopback_host_is_refused_in_one_line(host: str,
                                                   served_commands: list[tuple[str, dict[str, Any]]]) -> None:
    result = CliRunner().invoke(_cli(), ["serve", "--host", host])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert "refusing to serve" in result.output and "--public" in result.output
    assert served_commands == []


def test_public_serves_elsewhere_with_a_warning(served_commands: list[tuple[str, dict[str, Any]]]) -> None:
    result = CliRunner().invoke(_cli(), ["serve", "--host", "0.0.0.0", "--public", "--port", "8123"])
    assert result.exit_code == 0, result.output
    assert "warning" in result.output and "SQL console" in result.output
    [(_, options)] = served_commands
    assert options["host"] == "0.0.0.0" and options["port"] == 8123 and options["loopback_only"] is False


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_needs_no_flag(host: str, served_commands: list[tuple[str, dict[str, Any]]]) -> None:
    result = CliRunner().invoke(_cli(), ["serve", "--host", host])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    [(_, options)] = served_commands
    assert options["loopback_only"] is True


def test_each_tab_runs_servedrill_play_with_the_options(served_commands: list[tuple[str, dict[str, Any]]]) -> None:
    folder = FIXTURE.parent
    result = CliRunner().invoke(_cli(), ["serve", "tui-mini", "--incidents", str(FIXTURE), "--seed", "4",
                                         "--player", "ann b"])
    assert result.exit_code == 0, result.output
    [(command, _)] = served_commands
    assert command.startswith("exec ")
    argv = shlex.split(command[len("exec "):])
    assert argv[:4] == [sys.executable, "-m", "tui.cli", "play"]
    assert argv[4:] == ["tui-mini", "--seed", "4", "--player", "ann b", "--library", str(folder / "tui-mini.yaml")]


def test_without_a_player_each_tab_asks_for_one(served_commands: list[tuple[str, dict[str, Any]]]) -> None:
    assert CliRunner().invoke(_cli(), ["serve"]).exit_code == 0
    assert CliRunner().invoke(_cli(), ["serve", "--player", "ann"]).exit_code == 0
    (asked, _), (named, _) = served_commands
    assert shlex.split(asked)[-1] == "--ask-player"
    assert "--ask-player" not in shlex.split(named) and shlex.split(named)[-2:] == ["--player", "ann"]


def test_incident_options_are_checked_before_serving(served_commands: list[tuple[str, dict[str, Any]]],
                                                     tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(_cli(), ["serve", "--incidents", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 1 and "no such incident file or folder" in missing.output
    empty = runner.invoke(_cli(), ["serve", "--incidents", str(tmp_path)])
    assert empty.exit_code == 1 and "no incident files" in empty.output
    stranger = runner.invoke(_cli(), ["serve", "one-slow-replica", "--incidents", str(FIXTURE)])
    assert stranger.exit_code == 1 and "not among the --incidents files" in stranger.output
    typo = runner.invoke(_cli(), ["serve", "one-slow-replic"])
    assert typo.exit_code == 1 and "did you mean one-slow-replica" in typo.output
    mixed = runner.invoke(_cli(), ["serve", "--random", "--incidents", str(FIXTURE)])
    assert mixed.exit_code == 1
    assert served_commands == []


def test_a_folder_gives_its_incident_files(tmp_path: Path) -> None:
    from tui.serve import library_files

    (tmp_path / "b.yaml").write_text("id: b\n")
    (tmp_path / "a.yml").write_text("id: a\n")
    (tmp_path / "template.yaml").write_text("id: t\n")
    (tmp_path / "notes.txt").write_text("x\n")
    assert [p.name for p in library_files([tmp_path])] == ["a.yml", "b.yaml"]


def test_play_with_a_library_opens_the_picker_on_those_files(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.app

    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tui.app, "run", lambda incident, seed=0, player=None, incidents=None, ask_player=False:
                        calls.append((incident, seed, player, incidents, ask_player)))
    result = CliRunner().invoke(_cli(), ["play", "tui-mini", "--library", str(FIXTURE), "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert calls == [("tui-mini", 2, None, [FIXTURE], False)]


def test_requests_must_come_from_this_server() -> None:
    from tui.serve import request_allowed

    assert request_allowed("127.0.0.1:8000", None, True) is None
    assert request_allowed("localhost:8000", "http://localhost:8000", True) is None
    assert "Origin" in request_allowed("127.0.0.1:8000", "http://evil.example", True)
    assert "loopback" in request_allowed("evil.example:8000", None, True)  # DNS rebinding
    assert request_allowed("game.example:8000", "http://game.example:8000", False) is None
    assert request_allowed("10.0.0.5:8000", "https://game.example", False, "https://game.example") is None


@pytest.fixture
def server(tui_env: Path, tmp_path: Path) -> Iterator[int]:
    """A real `servedrill serve --max-sessions 1` on a free loopback port (no browser needed)."""
    with serving(["--incidents", str(FIXTURE), "--max-sessions", "1"], tmp_path / "serve.log") as port:
        yield port


@pytest.mark.slow
def test_the_server_refuses_foreign_pages_and_too_many_sessions(server: int) -> None:
    import aiohttp

    base = f"http://127.0.0.1:{server}"

    async def probe() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/") as page:
                out["page"] = (page.status, await page.text())
            async with http.get(base + "/", headers={"Host": "evil.example"}) as page:
                out["rebound"] = page.status
            try:
                async with http.ws_connect(f"ws://127.0.0.1:{server}/ws", headers={"Origin": "http://evil.example"}):
                    out["foreign"] = 101
            except aiohttp.WSServerHandshakeError as exc:
                out["foreign"] = exc.status
            async with http.ws_connect(f"ws://127.0.0.1:{server}/ws",
                                       headers={"Origin": f"http://127.0.0.1:{server}"}) as first:
                out["first"] = 101
                try:
                    async with http.ws_connect(f"ws://127.0.0.1:{server}/ws"):
                        out["second"] = 101
                except aiohttp.WSServerHandshakeError as exc:
                    out["second"] = exc.status
                await first.close()
        return out

    out = asyncio.run(probe())
    status, html = out["page"]
    assert status == 200 and f'ws://127.0.0.1:{server}/ws' in html
    assert out["rebound"] == 403
    assert out["foreign"] == 403
    assert out["first"] == 101 and out["second"] == 503


@pytest.mark.slow
def test_the_page_loads_nothing_from_outside_this_machine(server: int) -> None:
    """textual-serve's page asked Google Fonts for its font; ours points at the copy textual-serve ships."""
    import aiohttp

    base = f"http://127.0.0.1:{server}"

    async def fetch() -> tuple[str, list[tuple[str, int, int]]]:
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/") as page:
                html = await page.text()
            urls = re.findall(r"""(?:href|src)\s*=\s*"([^"]+)"|url\(\s*["']?([^"')]+)""", html)
            got = []
            for href, url in urls:
                link = href or url
                if link.startswith(("http://", "https://", "//")):
                    async with http.get(link) as reply:
                        got.append((link, reply.status, len(await reply.read())))
            return html, got

    html, fetched = asyncio.run(fetch())
    assert "googleapis" not in html and "Roboto Mono" in html
    assert fetched and all(link.startswith(base + "/") for link, _, _ in fetched), fetched
    fonts = [(link, status, size) for link, status, size in fetched if link.endswith(".ttf")]
    assert fonts and all(status == 200 and size > 10_000 for _, status, size in fonts), fonts


@pytest.mark.slow
def test_a_taken_port_is_one_line_not_a_traceback() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "tui.cli", "serve", "--port", str(port)], capture_output=True,
                             text=True, cwd=ROOT, check=False, timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().startswith(f"servedrill: cannot serve on 127.0.0.1:{port}")
    assert "Traceback" not in out.stderr + out.stdout and "serving on" not in out.stdout


ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
FAST_SQL = "SELECT replica, count(*) AS n FROM requests GROUP BY replica ORDER BY replica"


@pytest.mark.slow
def test_typing_at_machine_speed_in_a_served_tab_loses_no_key(tui_env: Path, tmp_path: Path) -> None:
    """A tab (a websocket speaking textual-serve's protocol, one message per key as xterm.js sends them)
    starts the incident and types its first query at once, no pause between keys, while the session opens
    and the workspace mounts; then F5. The journal must hold exactly that query. Twice: the second tab
    starts a new session with "n" while the first one's is unfinished (so "n" is also a briefing key)."""
    import aiohttp

    async def tab(port: int, trial: int) -> str | None:
        screen = [b""]
        async with aiohttp.ClientSession() as http, http.ws_connect(
                f"ws://127.0.0.1:{port}/ws?width=150&height=45",
                headers={"Origin": f"http://127.0.0.1:{port}"}) as ws:
            async def read() -> None:
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        screen[0] = (screen[0] + message.data)[-200_000:]

            reader = asyncio.create_task(read())

            async def shows(needle: str) -> None:
                deadline = time.monotonic() + 60
                while needle not in ANSI.sub(b"", screen[0]).decode("utf-8", "replace"):
                    assert time.monotonic() < deadline, f"no {needle!r} in the tab"
                    await asyncio.sleep(0.01)

            async def keys(text: str) -> None:
                await ws.send_str(json.dumps(["stdin", text]))

            await shows("pick an incident")
            await keys("\r")
            await shows("Telemetry ready")
            await shows("start a new one" if trial else "start the investigation")
            before = {p: p.read_text() for p in (tui_env / "sessions").glob("*.jsonl")}
            await keys("n" if trial else "\r")
            for character in FAST_SQL:
                await keys(character)
            await keys("\x1b[15~")  # F5
            deadline = time.monotonic() + 30
            sql = None
            while sql is None and time.monotonic() < deadline:
                for path in (tui_env / "sessions").glob("*.jsonl"):
                    lines = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
                    if path not in before:
                        sql = next((e["data"]["sql"] for e in lines if e["kind"] == "query"), None)
                await asyncio.sleep(0.02)
            reader.cancel()
            return sql

    with serving(["--incidents", str(FIXTURE), "--player", "fast"], tmp_path / "serve.log") as port:
        typed = [asyncio.run(tab(port, trial)) for trial in range(2)]
    assert typed == [FAST_SQL, FAST_SQL]
