"""`servedrill serve` end to end in a real browser: headless Debian chromium driven by Playwright opens the
page, starts the fixture incident, runs a query, and the session file in the test's data directory
records it.

The page draws the terminal on a canvas (xterm.js), so there is no text to read in the DOM: the test
acts by keys, reads the terminal output off the page's websocket, and checks what the app writes (the
session journal); the helpers for that are tests/test_browser_support.py's. Skips, saying why, without
playwright or chromium (`make test` installs both when it can).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_browser_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    FOCUSED_JS,
    NO_CHROMIUM,
    Screen,
    events,
    events_of,
    shows,
    wait_until,
)
from test_serve_support import serving
from test_tui_support import FIXTURE

pytestmark = pytest.mark.slow  # drives chromium against a served app

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                               "(pip install -e '.[test]')")

SQL = "SELECT replica, count(*) AS n FROM requests GROUP BY replica ORDER BY replica"


@pytest.fixture
def served(tui_env: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`servedrill serve --incidents FIXTURE` on a free loopback port; yields (url, data dir)."""
    with serving(["--incidents", str(FIXTURE), "--player", "browser"], tmp_path / "serve.log") as port:
        yield f"http://127.0.0.1:{port}/", tui_env


PASTED = "SELECT count(*) AS n\n  FROM requests WHERE replica = 'vllm-1'"
"""A query pasted (bracketed paste: xterm.js sends its lines ended by CR), across two lines."""

PASTE_JS = """text => {
    const area = document.querySelector('.xterm-helper-textarea');
    const data = new DataTransfer();
    data.setData('text/plain', text);
    area.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
}"""
"""What a paste does in the page: a paste event on xterm.js's input element."""


def queries(data: Path) -> list[dict[str, Any]]:
    return [e["data"] for e in events(data) if e["kind"] == "query"]


def open_workspace(browser: Any, url: str, data: Path, briefing: str) -> tuple[Any, Screen]:
    """Open a tab at `url`, take the first incident from the picker, wait for its briefing to show
    `briefing`, enter the workspace and wait for the session's start in the journal under `data`."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    screen = Screen()
    page.on("websocket", lambda ws: ws.on("framereceived", screen.feed))
    page.goto(url, timeout=20_000)
    page.wait_for_selector("body.-first-byte", timeout=20_000)
    shows(page, screen, "pick an incident", "picker")
    # keys reach the app only through xterm.js's input element: click the terminal and wait until that
    # element has the page's focus
    page.click("#terminal")
    page.wait_for_function(FOCUSED_JS, timeout=20_000)
    page.keyboard.press("Enter")
    shows(page, screen, briefing, "briefing with its telemetry")
    screen.clear()
    page.keyboard.press("Enter")
    shows(page, screen, "Write SQL here", "workspace")
    assert wait_until(lambda: any(e["kind"] == "start" for e in events(data)), 10, 0.02, page)
    return page, screen


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_a_browser_tab_plays_a_session_and_its_query_is_journalled(served: tuple[str, Path],
                                                                    tmp_path: Path) -> None:
    """Every wait is for a state (the terminal showing a screen, the journal holding an event), none for
    time: the picker before the first Enter, the telemetry before the second, the workspace (its editor
    has focus before it is first drawn) before typing. The query is typed at machine speed with F5 right
    behind it (a priority key: the workspace reads the editor only after the keys queued before F5), and
    a second query is pasted."""
    assert CHROMIUM is not None
    url, data = served
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page, screen = open_workspace(browser, url, data, "Telemetry ready")

            # typed at machine speed, F5 right behind the last key
            page.keyboard.type(SQL)
            page.keyboard.press("F5")
            assert wait_until(lambda: len(queries(data)) >= 1, 30, 0.02, page), "the typed query never ran"
            shows(page, screen, "queries 1 /", "query count")

            # pasted: focus the editor (ctrl+e), clear its line (ctrl+u deletes to the start of the line) and
            # wait until it shows empty again (its placeholder) before pasting
            screen.clear()
            page.keyboard.press("Control+e")
            page.keyboard.press("Control+u")
            shows(page, screen, "Write SQL here", "empty editor")
            page.evaluate(PASTE_JS, PASTED)
            page.keyboard.press("F5")
            assert wait_until(lambda: len(queries(data)) >= 2, 30, 0.02, page), "the pasted query never ran"
            page.screenshot(path=str(tmp_path / "served.png"))
        finally:
            browser.close()
    typed, pasted = queries(data)[:2]
    assert typed["sql"] == SQL, f"typed {SQL!r}, the editor ran {typed['sql']!r}"
    assert typed["ok"] is True and typed["row_count"] == 2
    assert [row[0] for row in typed["rows"]] == ["vllm-0", "vllm-1"]
    assert pasted["sql"] == PASTED, f"pasted {PASTED!r}, the editor ran {pasted['sql']!r}"
    assert pasted["ok"] is True and pasted["row_count"] == 1
    [session] = list((data / "sessions").glob("*.jsonl"))
    header = json.loads(session.read_text(encoding="utf-8").splitlines()[0])
    assert header["incident_id"] == "tui-mini" and header["player"] == "browser"


FAILING = "SELECT no_such_column FROM requests"


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_a_browser_tab_plays_the_seeds_variant_and_a_failed_statement_is_free(
        library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tab of `serve INCIDENT --seed 7` plays the variant of seed 7 on that variant's telemetry: its
    session starts on the database `game.api` builds for (incident, 7), as line mode and the terminal do
    (tests/test_one_game.py). Seed 7, not 0: the tab once built seed 7's traffic from the seed-less
    incident and differed from every other front end everywhere but seed 0."""
    from game import api

    assert CHROMIUM is not None
    path = api.find_incident("one-slow-replica").resolve()
    data = tmp_path / "data"
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(data))
    variant = api.load_variant(path, 7)
    expected = api.open_telemetry(variant)  # built now, so the tab finds it in the cache
    expected.close()
    with serving(["--incidents", str(path), "--seed", "7", "--player", "browser"], tmp_path / "serve.log") as port, \
            sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page, screen = open_workspace(browser, f"http://127.0.0.1:{port}/", data, "seed 7")

            page.keyboard.type(FAILING)
            page.keyboard.press("F5")
            shows(page, screen, "not counted", "the failed statement's error")
            # wait for the editor to be drawn empty again, not for a placeholder still on the stale screen
            screen.clear()
            page.keyboard.press("Control+e")
            page.keyboard.press("Control+u")
            shows(page, screen, "Write SQL here", "empty editor")
            page.keyboard.type(SQL)
            page.keyboard.press("F5")
            assert wait_until(lambda: len(queries(data)) >= 1, 30, 0.02, page), "the query never ran"
        finally:
            browser.close()
    [session] = list((data / "sessions").glob("*.jsonl"))
    header = json.loads(session.read_text(encoding="utf-8").splitlines()[0])
    assert (header["incident_id"], header["seed"]) == (variant.incident.id, 7)
    [start] = [e for e in events(data) if e["kind"] == "start"]
    assert start["data"]["telemetry_digest"] == expected.digest
    [ran] = queries(data)  # the failed statement was not recorded
    assert ran["index"] == 1 and ran["sql"] == SQL and ran["ok"] is True
    counts = {row[0]: row[1] for row in ran["rows"]}
    assert sum(counts.values()) == expected.build.rows["requests"]


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_every_incident_with_variants_opens_its_seeds_variant_in_a_browser_tab(
        library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every library incident that has variants, at one of the seeds 0, 7 and 23 (in turn, so each seed serves
    four or five incidents), opened in a browser tab of `serve --seed S`: the session the tab starts is that
    variant's (incident and seed in its header) on the telemetry `game.api` builds for it (the start event's
    digest), and the tab shows that variant's board (every hypothesis's title). tests/test_one_game.py plays
    every incident at seed 0 and at this test's seed (7 or 23 where this one is 0) through the API, line mode
    and the terminal, and debriefs the same truth in each; one seed per incident here keeps this test to 13
    tabs, while every seed and every incident still goes through a browser tab."""
    from game import api
    from incidents.loader import has_variables

    assert CHROMIUM is not None
    data = tmp_path / "data"
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(data))
    paths = [p.resolve() for p in api.library_files(None) if has_variables(p)]
    seeds = (0, 7, 23)
    by_seed = {seed: paths[i::len(seeds)] for i, seed in enumerate(seeds)}
    expected: dict[tuple[str, int], str] = {}
    boards: dict[tuple[Path, int], list[str]] = {}
    for seed, group in by_seed.items():
        for path in group:
            variant = api.load_variant(path, seed)
            telemetry = api.open_telemetry(variant)  # built now, so the tab finds it in the cache
            expected[(variant.incident.id, seed)] = telemetry.digest
            boards[(path, seed)] = [shown.title for shown in api.board(variant.incident, seed)]
            telemetry.close()
    seen: dict[tuple[str, int], str] = {}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            for seed, group in by_seed.items():
                args = [*(a for path in group for a in ("--incidents", str(path))), "--seed", str(seed),
                        "--player", "browser"]
                with serving(args, tmp_path / f"serve-{seed}.log") as port:
                    for path in group:
                        before = set((data / "sessions").glob("*.jsonl")) if (data / "sessions").is_dir() else set()
                        page = browser.new_page(viewport={"width": 1400, "height": 900})
                        screen = Screen()
                        page.on("websocket", lambda ws, s=screen: ws.on("framereceived", s.feed))
                        page.goto(f"http://127.0.0.1:{port}/", timeout=20_000)
                        page.wait_for_selector("body.-first-byte", timeout=20_000)
                        shows(page, screen, "pick an incident", "picker")
                        # the picker's title line: a click on the table would take the focus from the filter
                        page.click("#terminal", position={"x": 10, "y": 8})
                        page.wait_for_function(FOCUSED_JS, timeout=20_000)
                        # the filter: its id and the words of its title leave this incident alone (the id alone
                        # also matches the tutorial, whose tags name one-slow-replica)
                        [entry] = api.library([path])
                        words = " ".join(w for w in entry.title.split() if w.isalnum())
                        page.keyboard.type(f"{path.stem} {words}")
                        shows(page, screen, path.stem, f"the filter holding {path.stem}")
                        page.keyboard.press("Enter")
                        shows(page, screen, f"seed {seed}", f"{path.stem}'s briefing")
                        shows(page, screen, "start the investigation", f"{path.stem}'s telemetry ready")
                        page.keyboard.press("Enter")

                        def started(before: set[Path] = before) -> Path | None:
                            for new in set((data / "sessions").glob("*.jsonl")) - before:
                                if any(e["kind"] == "start" for e in events_of(new)):
                                    return new
                            return None

                        assert wait_until(lambda: started() is not None, 60, 0.05, page), f"{path.stem}: no start"
                        journal = started()
                        assert journal is not None
                        header = json.loads(journal.read_text(encoding="utf-8").splitlines()[0])
                        start = next(e for e in events_of(journal) if e["kind"] == "start")
                        seen[(header["incident_id"], header["seed"])] = start["data"]["telemetry_digest"]
                        for title in boards[(path, seed)]:  # the board pane shows each title's beginning
                            shows(page, screen, title[:18], f"{path.stem}'s board at seed {seed}")
                        page.close()
        finally:
            browser.close()
    assert seen == expected
