"""`servedrill serve` end to end in a real browser: headless Debian chromium driven by Playwright opens the
page, starts the fixture incident, runs a query, and the session file in the test's data directory
records it.

The page draws the terminal on a canvas (xterm.js), so there is no text to read in the DOM: the test
acts by keys, reads the terminal output off the page's websocket, and checks what the app writes (the
session journal). Skips, saying why, without
playwright or chromium (`make test` installs both when it can).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_serve_support import serving
from test_tui_support import FIXTURE

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                               "(pip install -e '.[test]')")
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""As the machine notes advise: without the background-networking flags chromium keeps trying to reach
hosts this closed network refuses."""

SQL = "SELECT replica, count(*) AS n FROM requests GROUP BY replica ORDER BY replica"


@pytest.fixture
def served(tui_env: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`servedrill serve --incidents FIXTURE` on a free loopback port; yields (url, data dir)."""
    with serving(["--incidents", str(FIXTURE), "--player", "browser"], tmp_path / "serve.log") as port:
        yield f"http://127.0.0.1:{port}/", tui_env


class Screen:
    """The terminal output the page received over its websocket, as text (escape sequences removed)."""

    ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")

    def __init__(self) -> None:
        self.data = b""

    def feed(self, payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            self.data = (self.data + payload)[-65536:]

    def clear(self) -> None:
        self.data = b""

    def text(self) -> str:
        return self.ANSI.sub(b"", self.data).decode("utf-8", "replace")


def events(data: Path) -> list[dict[str, Any]]:
    """Every event of every session file under `data` (header lines left out)."""
    out: list[dict[str, Any]] = []
    for path in sorted((data / "sessions").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            with contextlib.suppress(ValueError):  # a line being written
                out.append(json.loads(line))
    return out


def wait_until(predicate: Any, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@pytest.mark.skipif(CHROMIUM is None,
                    reason="Debian chromium is not installed (apt-get install chromium; make test tries)")
def test_a_browser_tab_plays_a_session_and_its_query_is_journalled(served: tuple[str, Path],
                                                                    tmp_path: Path) -> None:
    assert CHROMIUM is not None
    url, data = served
    started = time.monotonic()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            screen = Screen()
            page.on("websocket", lambda ws: ws.on("framereceived", screen.feed))
            page.goto(url, timeout=20_000)
            page.wait_for_selector("body.-first-byte", timeout=20_000)
            page.click("#terminal")
            # The picker's Enter opens the briefing, the briefing's Enter starts the session (once the
            # telemetry is ready). A key sent before a screen is up is lost, so press until the journal
            # shows the session started; a spare Enter lands in the SQL editor as a blank line.
            started_session = False
            for _ in range(12):
                page.keyboard.press("Enter")
                if wait_until(lambda: any(e["kind"] == "start" for e in events(data)), 2.5):
                    started_session = True
                    break
            assert started_session, "no session started in the browser tab"
            recorded: list[dict[str, Any]] = []
            for _ in range(3):  # the editor may not have focus yet on the first try
                time.sleep(0.5)
                screen.clear()
                page.keyboard.press("Control+u")
                page.keyboard.type(SQL)
                # F5 right behind the typed keys: it is a priority binding, and the workspace reads the
                # editor only after the keys queued before it, so the whole query runs (this is the race
                # the load test found; waiting for the screen to show the query would hide it)
                page.keyboard.press("F5")
                if wait_until(lambda: [e for e in events(data) if e["kind"] == "query"], 10):
                    recorded = [e for e in events(data) if e["kind"] == "query"]
                    break
            page.screenshot(path=str(tmp_path / "served.png"))
        finally:
            browser.close()
    assert recorded, f"the query never reached the session journal (screenshot: {tmp_path / 'served.png'})"
    query = recorded[0]["data"]
    assert query["sql"].strip() == SQL
    assert query["ok"] is True and query["row_count"] == 2
    assert [row[0] for row in query["rows"]] == ["vllm-0", "vllm-1"]
    [session] = list((data / "sessions").glob("*.jsonl"))
    header = json.loads(session.read_text(encoding="utf-8").splitlines()[0])
    assert header["incident_id"] == "tui-mini" and header["player"] == "browser"
    assert time.monotonic() - started < 60
