"""`servedrill serve` holds each browser tab and its app process to bounds (tui.serve_limits): terminal
size, message size and rate, the app's memory and CPU, idle and total time; the app goes when its
socket closes or the server dies; no folder is listed.

The slow tests start a real server on a free port and speak textual-serve's websocket protocol to it
(as tools/loadtest_serve.py does); the app processes are found in /proc (`tab_apps`). They serve cold
apps (`--warm 0`: the documented start-up memory and CPU are a fresh interpreter's); tests/test_serve_warm.py
runs the lifecycle ones on warm apps. Every bound is asserted against its documented value: times within
2x, memory within 2x."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_serve_support import descendants, free_port, live_children, stop, wait_for_port
from test_tui_support import FIXTURE

from tui.serve_limits import DEFAULT_LIMITS, Limits, TokenBucket, input_events, size_from_message, size_from_query

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
ROW = re.compile(rb"\x1b\[(\d+);\d+H")
"""A cursor move Textual writes before each line it draws: its row number is at most the terminal's."""

APP_TYPICAL_MB = 200
"""A served app's resident memory, documented in docs/cli.md: about 95 MB on the picker, 190 MB in the
workspace, under 200 MB at the largest terminal. Attacks must leave it within 2x of this."""
GONE_S = DEFAULT_LIMITS.quit_grace_s + 0.5
"""Documented: an app is gone within quit_grace_s (plus reaping) of its socket closing."""
LIFELINE_S = 1.0
"""Documented: an app is gone within a second of its server's death (the lifeline polls every 0.5 s)."""


# --- the pieces, without a server -----------------------------------------------------------------

def test_sizes_are_clamped_to_the_documented_maximum() -> None:
    limits = Limits()
    assert limits.clamp(30000, 30000) == (500, 200)
    assert limits.clamp(0, -7) == (1, 1)
    assert limits.clamp(120, 40) == (120, 40)
    assert size_from_query("20000", 80) == 20000
    assert size_from_query("9" * 5000, 80) == 10**9  # not parsed: Python refuses int() of 4,300+ digits
    assert size_from_query("-12", 80) == -12
    assert size_from_query("12px", 80) == 80 and size_from_query(None, 24) == 24
    assert size_from_query("\u0661\u0662", 80) == 80  # Arabic-Indic digits are digits to str.isdigit
    assert size_from_message(1e300) == 10**9 and size_from_message(-1e300) == -1
    assert size_from_message(float("nan")) is None and size_from_message(float("inf")) is None
    assert size_from_message(True) is None and size_from_message("80") is None
    assert size_from_message(80.9) == 80


def test_a_token_bucket_allows_its_burst_then_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(10, 5, clock=lambda: now[0])
    assert all(bucket.take() for _ in range(10))
    assert not bucket.take()
    now[0] = 1.0  # five tokens back, no more
    assert bucket.take(5) and not bucket.take()
    now[0] = 100.0  # refills to the burst, never above it
    assert not bucket.take(11) and bucket.take(10)


def test_input_events_count_escape_sequences_once() -> None:
    assert input_events("select") == 6
    assert input_events("\x1b[A\x1b[B") == 2  # two arrow keys
    assert input_events("\x1b[<35;120;40M") == 1  # one SGR mouse event
    assert input_events("\x1bOP") == 1  # F1
    garbage = "\x1b[" + "1;" * 100 + "M"
    assert input_events(garbage) > 100  # a long run counts its characters


def test_limits_are_changed_by_name_and_checked() -> None:
    changed = DEFAULT_LIMITS.replace(idle_s=60, max_columns=300.0)
    assert changed.idle_s == 60.0 and changed.max_columns == 300 and isinstance(changed.max_columns, int)
    for bad in ({"nope": 1.0}, {"idle_s": 0.0}, {"idle_s": -1.0}, {"idle_s": float("inf")},
                {"idle_s": float("nan")}):
        with pytest.raises(ValueError):
            DEFAULT_LIMITS.replace(**bad)


@pytest.mark.parametrize("option", ["nope=1", "idle_s", "idle_s=soon", "idle_s=-5"])
def test_a_bad_limit_option_is_one_line(option: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.serve
    from tui.cli import main

    monkeypatch.setattr(tui.serve, "serve", lambda command, **options: pytest.fail("served"))
    result = CliRunner().invoke(main, ["serve", "--limit", option])
    assert result.exit_code == 1, result.output
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output
    assert "limit" in result.output


def test_limit_options_reach_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    import tui.serve
    from tui.cli import main

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(tui.serve, "serve", lambda command, **options: calls.append(options))
    result = CliRunner().invoke(main, ["serve", "--limit", "idle_s=90", "--limit", "app_rss_mb=1500"])
    assert result.exit_code == 0, result.output
    [options] = calls
    assert options["limits"].idle_s == 90 and options["limits"].app_rss_mb == 1500
    assert options["limits"].max_columns == DEFAULT_LIMITS.max_columns


# --- a real server ----------------------------------------------------------------------------------

@contextmanager
def server(log: Path, *limits: str, warm: int = 0) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`servedrill serve --incidents FIXTURE --warm WARM` with `--limit` options; yields (port, process)
    once the server listens and its warm pool (if any) is full."""
    port = free_port()
    argv = [sys.executable, "-m", "tui.cli", "serve", "--port", str(port), "--incidents", str(FIXTURE),
            "--player", "bounds", "--warm", str(warm)]
    for limit in limits:
        argv += ["--limit", limit]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc)
        if warm:
            assert wait_until(lambda: len(warm_pool(proc.pid)) == 1 + warm, 120, 0.1) is not None, "no warm pool"
        yield port, proc
    finally:
        stop(proc)


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid`."""
    return live_children().get(pid, [])


def is_template(pid: int) -> bool:
    try:
        return b"tui.serve_warm" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def tab_apps(server_pid: int) -> set[int]:
    """The app processes serving tabs: the server's children (cold apps), but its warm pool's template, and
    the template's children that run a tab (a spare waiting for one is a single thread; an app runs
    Textual's input thread too)."""
    out: set[int] = set()
    for child in children(server_pid):
        if not is_template(child):
            out.add(child)
            continue
        out |= {pid for pid in children(child) if threads(pid) > 1}
    return out


def warm_pool(server_pid: int) -> list[int]:
    """The warm pool's template and every process it forked (spares and warm apps); empty without a pool."""
    return [pid for child in children(server_pid) if is_template(child) for pid in [child, *children(child)]]


def warm_tree(server_pid: int) -> list[int]:
    """The warm pool's template and every process under it (spares, warm apps, and the query workers each
    spare forked ahead); empty without a pool."""
    templates = [child for child in children(server_pid) if is_template(child)]
    return [*templates, *(pid for template in templates for pid in descendants(template))]


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` in MB (0 when gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return 0.0


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> float | None:
    """Seconds until `predicate()` held, or None when it did not within `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    return time.monotonic() - start if predicate() else None


class Tab:
    """One websocket to the server, as a browser tab opens it: the terminal output it got, the app
    process serving it, and the peak of that app's memory while the tab was open."""

    def __init__(self, port: int, server_pid: int, query: str = "") -> None:
        self.url = f"http://127.0.0.1:{port}/ws{query}"
        self.server_pid = server_pid
        self.data = b""
        self.total = 0
        self.app = 0
        self.peak_mb = 0.0
        self.ws: Any = None
        self.connected_at = 0.0
        self.closed_at: float | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def open(self, session: Any) -> None:
        before = tab_apps(self.server_pid)
        self.ws = await session.ws_connect(self.url, max_msg_size=0)
        self.connected_at = time.monotonic()
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._sample())]
        deadline = time.monotonic() + 30
        while not (new := tab_apps(self.server_pid) - before):
            assert time.monotonic() < deadline, "no app process started for the tab"
            await asyncio.sleep(0.02)
        [self.app] = new

    async def _read(self) -> None:
        import aiohttp

        async for message in self.ws:
            if message.type == aiohttp.WSMsgType.BINARY:
                self.data = (self.data + message.data)[-1_000_000:]
                self.total += len(message.data)
        self.closed_at = time.monotonic()

    async def _sample(self) -> None:
        while True:
            if self.app:
                self.peak_mb = max(self.peak_mb, rss_mb(self.app))
            await asyncio.sleep(0.02)

    def text(self) -> str:
        return ANSI.sub(b"", self.data).decode("utf-8", "replace")

    def rows(self, data: bytes | None = None) -> list[int]:
        return sorted({int(m) for m in ROW.findall(self.data if data is None else data)})

    async def until(self, predicate: Callable[[], bool], timeout: float, what: str) -> float:
        start = time.monotonic()
        while not predicate():
            assert time.monotonic() - start < timeout, f"no {what} within {timeout} s; screen: {self.text()[-300:]!r}"
            await asyncio.sleep(0.02)
        return time.monotonic() - start

    async def settle(self, quiet: float = 0.3, timeout: float = 30) -> None:
        """Wait until the app has written nothing for `quiet` seconds (a frame is complete)."""
        deadline = time.monotonic() + timeout
        seen, since = self.total, time.monotonic()
        while time.monotonic() - since < quiet:
            assert time.monotonic() < deadline, "the app never stopped writing"
            await asyncio.sleep(0.02)
            if self.total != seen:
                seen, since = self.total, time.monotonic()

    async def picker(self) -> None:
        await self.until(lambda: "pick an incident" in self.text(), 60, "picker")

    async def send(self, kind: str, data: Any = None) -> None:
        await self.ws.send_str(json.dumps([kind, data] if data is not None else [kind]))

    async def close(self) -> None:
        if self.ws is not None and not self.ws.closed:
            await self.ws.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def with_tab(port: int, server_pid: int, body: Callable[[Tab], Any], query: str = "") -> Tab:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        tab = Tab(port, server_pid, query)
        try:
            await tab.open(session)
            await body(tab)
        finally:
            await tab.close()
    return tab


def gone_within(pid: int, seconds: float) -> float:
    """Wait for `pid` to stop running; fail unless it does within 2 x `seconds` (the documented time)."""
    took = wait_until(lambda: not alive(pid), 2 * seconds)
    assert took is not None, f"app {pid} still running {2 * seconds:.1f} s later (documented: {seconds:.1f} s)"
    return took


@pytest.mark.slow
def test_no_folder_is_listed(tui_env: Path, tmp_path: Path) -> None:
    with server(tmp_path / "serve.log") as (port, _):
        def status(path: str) -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
                    return int(response.status)
            except urllib.error.HTTPError as exc:
                return exc.code
        for folder in ("/static/", "/static", "/static/js", "/static/js/", "/static/fonts/", "/static/../",
                       "/static/%2e%2e/"):
            assert status(folder) == 404, folder
        assert status("/static/js/textual.js") == 200  # files are still served
        assert status("/") == 200


@pytest.mark.slow
def test_a_huge_terminal_is_clamped_and_the_app_stays_small(tui_env: Path, tmp_path: Path) -> None:
    limits = DEFAULT_LIMITS

    async def body(tab: Tab) -> None:
        await tab.picker()
        await tab.until(lambda: limits.max_rows in tab.rows(), 30, "the first frame's last row")
        assert max(tab.rows()) == limits.max_rows  # the URL's 30000 rows became 200
        await tab.settle()
        tab.data = b""
        await tab.send("resize", {"width": 60, "height": 20})
        await tab.until(lambda: 20 in tab.rows(), 30, "redraw at 20 rows")
        await tab.settle()
        # on a busy machine the end of the frame drawn before the resize can arrive after it was sent: what
        # follows the new frame's last row (its footer, row 20) is drawn at the new size
        last = [m.start() for m in ROW.finditer(tab.data) if m.group(1) == b"20"][-1]
        assert max(tab.rows(tab.data[last:])) == 20
        await tab.settle()
        tab.data = b""
        for size in ({"width": 30000, "height": 30000}, {"width": 1e300, "height": 1e300}):
            await tab.send("resize", size)
        await tab.until(lambda: limits.max_rows in tab.rows(), 30, "redraw at the largest size")
        await asyncio.sleep(1)  # let any further growth show
        assert max(tab.rows()) == limits.max_rows
        assert not tab.ws.closed and alive(tab.app)

    with server(tmp_path / "serve.log") as (port, proc):
        tab = asyncio.run(with_tab(port, proc.pid, body, "?width=30000&height=30000"))
    assert 0 < tab.peak_mb < 2 * APP_TYPICAL_MB, f"app peaked at {tab.peak_mb:.0f} MB"


@pytest.mark.slow
def test_oversize_and_flooding_messages_close_the_tab(tui_env: Path, tmp_path: Path) -> None:
    """A frame over max_message_bytes, a paste over the input burst and a flood of small messages each
    close the tab (1009, 1008, 1008), its app goes within the documented time and stays small."""
    limits = DEFAULT_LIMITS
    ended: list[tuple[str, int | None, float, float]] = []

    def attack(name: str, send: Callable[[Tab], Any]) -> Callable[[Tab], Any]:
        async def body(tab: Tab) -> None:
            await tab.picker()
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and tab.closed_at is None:
                try:
                    await send(tab)
                except (ConnectionError, RuntimeError):  # the server closed the socket under us
                    break
                await asyncio.sleep(0)
            await tab.until(lambda: tab.closed_at is not None, 10, "close")
            ended.append((name, tab.ws.close_code, gone_within(tab.app, GONE_S), tab.peak_mb))
        return body

    big = "x" * (limits.max_message_bytes + 1)
    paste = "x" * (limits.input_burst + 1)
    with server(tmp_path / "serve.log") as (port, proc):
        for name, send in (("frame", lambda tab: tab.send("stdin", big)),
                           ("paste", lambda tab: tab.send("stdin", paste)),
                           ("flood", lambda tab: tab.send("focus"))):
            asyncio.run(with_tab(port, proc.pid, attack(name, send)))
    codes = {name: code for name, code, _, _ in ended}
    assert codes["paste"] == 1008 and codes["flood"] == 1008, ended
    assert codes["frame"] in (1009, 1006), ended  # 1006: the server dropped the connection mid-frame
    for name, _, _, peak in ended:
        assert peak < 2 * APP_TYPICAL_MB, (name, peak)


@pytest.mark.slow
def test_typing_within_the_rates_and_malformed_messages_keep_the_tab(tui_env: Path, tmp_path: Path) -> None:
    """Keys at half the sustained rate for 5 s, then garbage of every shape: the tab stays open, the
    app answers a resize, its memory stays put."""

    async def body(tab: Tab) -> None:
        await tab.picker()
        rate = DEFAULT_LIMITS.inputs_per_s / 2
        start = time.monotonic()
        for n in range(int(5 * rate)):
            await tab.send("stdin", "\x1b[B" if n % 2 else "\x1b[A")  # down, up: stays on the picker
            await asyncio.sleep(max(0.0, start + (n + 1) / rate - time.monotonic()))
        for raw in ("{", "[]", "[1]", '"text"', "null", '["resize", 5]', '["resize", {"width": "a"}]',
                    '["resize", {"width": NaN, "height": 3}]', '["stdin", 5]', '["stdin"]', '["nope", {}]',
                    '["ping", "' + "p" * 1000 + '"]'):
            await tab.ws.send_str(raw)
        await tab.ws.send_bytes(b"\x00" * 1000)
        await tab.settle()
        tab.data = b""
        await tab.send("resize", {"width": 100, "height": 31})
        await tab.until(lambda: 31 in tab.rows(), 30, "redraw at 31 rows after the garbage")
        assert not tab.ws.closed and alive(tab.app)

    with server(tmp_path / "serve.log") as (port, proc):
        tab = asyncio.run(with_tab(port, proc.pid, body))
    assert tab.peak_mb < 2 * APP_TYPICAL_MB


@pytest.mark.slow
@pytest.mark.parametrize("warm", [0, 2], ids=["cold", "warm"])
def test_the_app_goes_when_its_socket_closes_even_if_it_does_not_listen(warm: int, tui_env: Path,
                                                                         tmp_path: Path) -> None:
    """Closed by the browser: a listening app quits; a stopped one (it cannot read the quit) is killed
    with its process group; both within the documented time."""
    apps: dict[str, int] = {}

    async def listening(tab: Tab) -> None:
        await tab.picker()
        apps["listening"] = tab.app

    async def stopped(tab: Tab) -> None:
        await tab.picker()
        os.kill(tab.app, signal.SIGSTOP)
        apps["stopped"] = tab.app

    with server(tmp_path / "serve.log", warm=warm) as (port, proc):
        asyncio.run(with_tab(port, proc.pid, listening))
        took = gone_within(apps["listening"], GONE_S)
        asyncio.run(with_tab(port, proc.pid, stopped))
        took_stopped = gone_within(apps["stopped"], GONE_S)
        assert wait_until(lambda: not tab_apps(proc.pid), 2 * GONE_S) is not None
    print(f"app gone {took:.2f} s after close; stopped app {took_stopped:.2f} s")


@pytest.mark.slow
@pytest.mark.parametrize("warm", [0, 2], ids=["cold", "warm"])
def test_apps_die_with_their_server(warm: int, tui_env: Path, tmp_path: Path) -> None:
    """SIGKILL the server with two tabs open: both apps end within the documented second (warm: and the
    pool's template and spares with them)."""
    apps: list[int] = []
    pool: list[int] = []

    async def body(port: int, pid: int) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            tabs = [Tab(port, pid), Tab(port, pid)]
            for tab in tabs:
                await tab.open(session)
            for tab in tabs:
                await tab.picker()
            apps.extend(tab.app for tab in tabs)
            pool.extend(warm_tree(pid))
            assert bool(pool) == bool(warm)  # --warm 0: no template, the apps are the server's children
            # warm: each app holds the query worker its spare forked ahead, and must take it along
            assert not warm or all(children(app) for app in apps), [children(app) for app in apps]
            assert warm or set(apps) <= set(children(pid))
            os.kill(pid, signal.SIGKILL)
            for tab in tabs:
                await tab.close()

    with server(tmp_path / "serve.log", warm=warm) as (port, proc):
        asyncio.run(body(port, proc.pid))
        proc.wait(timeout=10)
        killed = time.monotonic()
        for app in apps:
            gone_within(app, LIFELINE_S)
        for pid in pool:
            gone_within(pid, LIFELINE_S)
    print(f"apps gone {time.monotonic() - killed:.2f} s after the server's SIGKILL")


@pytest.mark.slow
@pytest.mark.parametrize(("limit", "code", "warm"), [("app_rss_mb=60", 4002, 0), ("app_rss_mb=60", 4002, 2),
                                                     ("app_cpu_s=0.3", 4003, 0),
                                                     ("app_cpu_share=0.01,app_cpu_window_s=1", 4004, 0)])
def test_an_app_over_its_memory_or_cpu_is_stopped(limit: str, code: int, warm: int, tui_env: Path,
                                                  tmp_path: Path) -> None:
    """With the cap below what starting the app takes (it idles at ~95 MB after ~0.7 s of CPU, most of it
    in its first second, cold; a warm app skips the imports' CPU but not the memory), the tab closes with
    the cap's code and its app is gone."""

    async def body(tab: Tab) -> None:
        await tab.until(lambda: tab.closed_at is not None, 30, "close")
        assert tab.ws.close_code == code
        gone_within(tab.app, GONE_S)
        assert "over its" in tab.text()  # the player is told why

    with server(tmp_path / "serve.log", *limit.split(","), warm=warm) as (port, proc):
        tab = asyncio.run(with_tab(port, proc.pid, body))
    if code == 4002:
        cap = float(limit.split("=")[1])
        assert tab.peak_mb < 2 * cap, f"app reached {tab.peak_mb:.0f} MB against a {cap:.0f} MB cap"


@pytest.mark.slow
def test_idle_and_session_time_close_the_tab(tui_env: Path, tmp_path: Path) -> None:
    """idle_s=2, session_s=5: a silent tab closes (4000) after 2 s, not before; a tab typing every
    0.5 s outlives the idle time and closes at 5 s (4001)."""
    idle, session_time = 2.0, 5.0
    times: dict[str, float] = {}

    async def silent(tab: Tab) -> None:
        await tab.until(lambda: tab.closed_at is not None, 2 * idle + 5, "idle close")
        assert tab.ws.close_code == 4000
        times["idle"] = (tab.closed_at or 0) - tab.connected_at

    async def typing(tab: Tab) -> None:
        while tab.closed_at is None and time.monotonic() - tab.connected_at < 2 * session_time + 5:
            await tab.send("stdin", "\x1b[B")
            await asyncio.sleep(0.5)
        assert tab.ws.close_code == 4001
        times["session"] = (tab.closed_at or 0) - tab.connected_at

    with server(tmp_path / "serve.log", f"idle_s={idle}", f"session_s={session_time}") as (port, proc):
        asyncio.run(with_tab(port, proc.pid, silent))
        asyncio.run(with_tab(port, proc.pid, typing))
    # the server's clocks start just before the client's handshake returns: allow it 0.1 s
    assert idle - 0.1 <= times["idle"] < 2 * idle, times
    assert session_time - 0.1 <= times["session"] < 2 * session_time, times


INTERMEDIATE = """
import os, subprocess, sys
env = dict(os.environ)
if sys.argv[1] == "served":
    env["SERVEDRILL_SERVED_APP"] = "1"
app = subprocess.Popen(sys.argv[2:], stdin=0, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
print(app.pid, flush=True)
app.wait()
"""
"""Stands in for the server: starts `servedrill play` as serve does, prints its pid, and waits."""


@pytest.mark.slow
@pytest.mark.parametrize("served", [True, False])
def test_a_served_app_ends_with_its_server_even_while_its_input_stays_open(served: bool, tui_env: Path) -> None:
    """The server's death closes the app's input, which Textual notices only between events; the
    lifeline does not depend on it. Here the input stays open (this test holds it), so only the
    lifeline can end the app: within the documented second when `serve` started it; an app the
    server did not start (no SERVEDRILL_SERVED_APP) does not watch its parent."""
    read, write = os.pipe()
    try:
        parent = subprocess.Popen(
            [sys.executable, "-c", INTERMEDIATE, "served" if served else "plain", sys.executable, "-m", "tui.cli",
             "play", str(FIXTURE), "--plain", "--player", "bounds"],
            cwd=ROOT, stdin=read, stdout=subprocess.PIPE, env=os.environ.copy())
        assert parent.stdout is not None
        app = int(parent.stdout.readline())
        # the app is up once it waits for input at its prompt (it reads from our pipe)
        assert wait_until(lambda: "pipe" in Path(f"/proc/{app}/wchan").read_text()
                          if alive(app) else True, 60, 0.05) is not None
        assert alive(app)
        parent.kill()
        parent.wait(timeout=10)
        if served:
            gone_within(app, LIFELINE_S)
        else:
            time.sleep(2 * LIFELINE_S)
            assert alive(app)
            os.kill(app, signal.SIGKILL)
    finally:
        os.close(read)
        os.close(write)


def test_the_cpu_share_is_averaged_over_a_whole_window() -> None:
    """No verdict before a window has passed; then the share of a core over the last window, with older
    samples dropped (the one at the window's start is the baseline)."""
    import collections

    from tui.serve_session import _window_share

    samples: collections.deque[tuple[float, float]] = collections.deque()
    assert _window_share(samples, 0.0, 0.0, 10.0) is None
    assert _window_share(samples, 5.0, 5.0, 10.0) is None  # a busy start, but half a window
    assert _window_share(samples, 10.0, 5.0, 10.0) == pytest.approx(0.5)
    assert _window_share(samples, 20.0, 5.5, 10.0) == pytest.approx(0.05)  # the busy start has left
    assert len(samples) <= 3


def test_the_access_log_keeps_no_token() -> None:
    """A game day's personal link is a password: the access log keeps the request without it."""
    from tui.serve import redact

    assert redact("/?token=s3cr3t") == "/?token=<token>"
    assert redact("/?a=1&TOKEN=s3cr3t&b=2") == "/?a=1&TOKEN=<token>&b=2"
    assert redact("/ws/s3cr3t?width=80") == "/ws/<token>?width=80"
    assert redact("/static/js/textual.js") == "/static/js/textual.js"
    assert "s3cr3t" not in redact("/ws/s3cr3t?token=s3cr3t")


def test_a_served_request_with_a_token_is_logged_without_it(tui_env: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with server(log) as (port, _):
        for path in ("/?token=SECRET1", "/ws/SECRET2"):
            with contextlib.suppress(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30).read()
        deadline = time.monotonic() + 30
        while log.read_text(encoding="utf-8", errors="replace").count("<token>") < 2:
            assert time.monotonic() < deadline, log.read_text(encoding="utf-8", errors="replace")
            time.sleep(0.05)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "SECRET" not in text and '"GET /?token=<token>"' in text
