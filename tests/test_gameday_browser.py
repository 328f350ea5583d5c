"""A whole game day, end to end through real processes, as a team lead runs it (issue 31's first done-when).

The facilitator writes the plan, checks it, builds its telemetry and worlds, and issues the roster with the real
CLI (`gameday check`, `generate`, the worlds, `gameday roster`); `servedrill serve --gameday` serves the round; the
live room opens in one chromium page and starts the round with its `s` key. Two players open their personal links
in two browser contexts of their own, the third joins from a terminal (`servedrill join LINK` on a
pseudo-terminal). Each opens the round's incident, runs a query and ranks the board; the two in the browser hand
in. The facilitator then ends the round from the room (`e`, `y`): TIME UP for the terminal player, whose board
is handed in as it stands on his screen. All the while the room, never
reloaded, shows each player's status (not joined, investigating, handed in, timed out), their queries, and the
standings growing as they hand in, without scores. Once the round has ended, the hand-ins are collected and
signed-verified, the scores show, the held debriefs open in the players' tabs.

Then a team round (`team_play: true`, issue 31's team play): the facilitator starts round 2 from the room; ana
and ben (team blue) open their links again in new browser contexts and land in one shared game; ana's query and
pin show on ben's screen, never reloaded, with a notice naming her; ben hands the team's board in while ana has
her submit dialog open, and her screen follows to the held debrief; the room shows one row per team
(`blue: ana, ben`); ending the round opens both members' debriefs with the team's one score, and collection
writes one verified result for the team. chen (alone in team red) plays no part in round 2: his terminal stays
on his round-1 debrief and red's row reads "not joined". Last, `gameday review --html` writes the review of
both rounds, which opens in the browser and names all three players and the team.

Every wait is for a state (a screen showing something, a journal holding an event), bounded by generous
timeouts that only guard against a hang; no step waits for the round's clock (ROUND_S is far longer than the
test). TIME UP when the clock itself runs out is tested through the game API and line mode
(tests/test_rounds.py): here it is the round ended early, the same hand-in.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from fcntl import ioctl
from pathlib import Path
from typing import Any

import pytest
from test_browser_support import CHROMIUM, CHROMIUM_ARGS, FOCUSED_JS, NO_CHROMIUM, Screen, events_of
from test_serve_support import ROOT, descendants, free_port, serving_process
from test_tui_support import FIXTURE

pytestmark = [pytest.mark.slow,  # a server, chromium and a terminal for three players
              pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                               "(pip install -e '.[test]')")

ROUND_S = 600.0
"""The round's limit, far beyond what the test takes on a busy machine: the facilitator ends the round before it,
so no step of the test races the clock."""
HANG_S = 240.0
"""A bound on any one wait: a guard against a hang, never a time the test expects to take."""

TEAMS = {"blue": ["ana", "ben"], "red": ["chen"]}
BROWSER, TERMINAL = ("ana", "ben"), "chen"
SQL = {"ana": "SELECT replica, min(value) AS min_clock_mhz FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' "
              "GROUP BY replica ORDER BY min_clock_mhz",
       "ben": "SELECT count(*) AS n FROM requests",
       "chen": "SELECT replica, count(*) AS n FROM requests GROUP BY replica ORDER BY replica"}
"""ana runs the fixture's settling query (the SM clock of each replica); the others run queries that rule out
nothing."""
RANKED = ["throttle", "bad-deploy", "kv-pressure", "overload"]
"""The fixture's board at seed 0 shows bad-deploy, throttle, kv-pressure, overload (rows A to D), an even split;
everyone moves the first row down, which gives this order, and ana then puts 45 points more on the true cause
(throttle, B) and normalises."""

PLAN = """\
event: Browser game day
facilitator: sam
results: results
rounds:
  - incident: {incident}
    seed: 0
    time_limit_min: {minutes}
  - incident: {incident}
    seed: 1
    time_limit_min: {minutes}
    team_play: true
teams:
  - name: blue
    players: [ana, ben]
  - name: red
    players: [chen]
"""

STATUS = r"not joined|investigating|handed in|timed out"
NAME = r"[\w.-]+(?:: [\w.-]+(?:, [\w.-]+)*)?"
"""A row's name: a player's, or in a team round the team's row naming its members (`blue: ana, ben`)."""
ROSTER_ROW = re.compile(rf"^\W*(?P<player>{NAME})\s+(?P<team>[\w.-]+)\s+(?P<status>{STATUS})\s+(?P<queries>\S+)\s")
STANDING_ROW = re.compile(rf"^\W*(?P<rank>\d+)\s+(?P<player>{NAME})\s+(?P<team>[\w.-]+)\s+(?P<time>[\d:-]+)\s+"
                          r"(?P<queries>\d+)\s+(?P<last>\S+)")

KEYS = {"enter": "\r", "f5": "\x1b[15~", "f8": "\x1b[19~", "ctrl+b": "\x02", "ctrl+s": "\x13",
        "shift+down": "\x1b[1;2B"}
"""What a terminal sends for the keys the terminal player presses."""


def cli(*args: str, timeout: float = HANG_S) -> str:
    """`servedrill ARGS` as the facilitator types it; its standard output (it must succeed)."""
    run = subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=ROOT, env=os.environ.copy(),
                         capture_output=True, text=True, timeout=timeout, check=False)
    assert run.returncode == 0, f"servedrill {' '.join(args)}: {run.returncode}\n{run.stdout}\n{run.stderr}"
    return run.stdout


# ---------------------------------------------------------------- what the screens show


def roster_rows(screen: Screen) -> dict[str, tuple[str, str]]:
    """The room's roster as drawn: player -> (status, queries)."""
    rows = {}
    for line in screen.lines():
        found = ROSTER_ROW.match(line)
        if found and found["team"] in TEAMS:
            rows[found["player"]] = (found["status"], found["queries"])
    return rows


def standings_rows(screen: Screen) -> list[tuple[int, str, str]]:
    """The room's standings as drawn: (rank, player, the last column: when they handed in, or the score)."""
    rows = []
    for line in screen.lines():
        found = STANDING_ROW.match(line)
        if found and found["team"] in TEAMS:
            rows.append((int(found["rank"]), found["player"], found["last"]))
    return sorted(rows)


def on_top(lines: list[str], label: str, confidence: int) -> bool:
    """Whether the board shows hypothesis `label` first, at `confidence` percent."""
    row = re.compile(rf"^\W*1\s+{label}\s+{confidence}%")
    return any(row.match(line) for line in lines)


class Terminal:
    """`servedrill join LINK` on a pseudo-terminal of 120x40: what it draws (a `Screen`, read by a thread) and
    keys typed into it. Its own process group, ended by `close`."""

    def __init__(self, link: str, log: Path) -> None:
        self.screen = Screen()
        self.lock = threading.Lock()
        self.log = log
        master, slave = pty.openpty()
        ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "join", link], cwd=ROOT, env=env,
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.master = master
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with self.log.open("wb") as out:
            while True:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return
                if not data:
                    return
                out.write(data)
                with self.lock:
                    self.screen.feed(data)

    def lines(self) -> list[str]:
        with self.lock:
            return self.screen.lines()

    def shows(self, needle: str) -> bool:
        return any(needle in line for line in self.lines())

    def text(self) -> str:
        with self.lock:
            return self.screen.text()

    def clear(self) -> None:
        with self.lock:
            self.screen.clear()

    def press(self, *keys: str) -> None:
        for key in keys:
            os.write(self.master, KEYS[key].encode())

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        os.close(self.master)
        self.reader.join(timeout=5)


class Day:
    """The running game day as the test sees it: the room's page, the players' pages and terminal, and the data
    folder the server's games journal into. `until` waits for a state while Playwright delivers every page's
    websocket frames (its synchronous API does so only inside its own calls)."""

    def __init__(self, room_page: Any, room: Screen, data: Path) -> None:
        self.room_page = room_page
        self.room = room
        self.data = data
        self.views: dict[str, Callable[[], list[str]]] = {"room": room.lines}

    def until(self, predicate: Callable[[], Any], what: str, timeout: float = HANG_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                shown = "\n".join(f"--- {name}:\n" + "\n".join(view()) for name, view in self.views.items())
                raise AssertionError(f"no {what} within {timeout:.0f} s; the screens:\n{shown}")
            self.room_page.wait_for_timeout(50)

    def journal(self, player: str) -> Path | None:
        """The player's game of the round (its header names them)."""
        for path in sorted((self.data / "sessions").glob("*.jsonl")) if (self.data / "sessions").is_dir() else []:
            try:
                header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
            except (OSError, ValueError, IndexError):
                continue
            if header.get("player") == player:
                return path
        return None

    def kinds(self, player: str) -> list[str]:
        path = self.journal(player)
        return [] if path is None else [e["kind"] for e in events_of(path)]

    def status(self, player: str) -> tuple[str, str] | None:
        return roster_rows(self.room).get(player)


class Tab:
    """A player's browser tab in a browser context of its own."""

    def __init__(self, browser: Any, link: str) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 900})
        self.page = self.context.new_page()
        self.screen = Screen()
        self.page.on("websocket", lambda ws: ws.on("framereceived", self.screen.feed))
        self.focused = False
        # one tab per player: right after the player closed their tab of the round before, the server may not have
        # let go of it yet; it waits for the old tab to end (tui.serve.TAB_HANDOVER_S), so the link opens the game
        # at once, as a reload does, and never says "already open in another tab"
        response = self.page.goto(link, timeout=HANG_S * 1000)
        assert response is not None and response.status == 200, self.page.content()

    def press(self, *keys: str) -> None:
        if not self.focused:  # keys reach the app only through xterm.js's input element
            self.page.click("#terminal")
            self.page.wait_for_function(FOCUSED_JS, timeout=HANG_S * 1000)
            self.focused = True
        for key in keys:
            self.page.keyboard.press(key)

    def type(self, text: str) -> None:
        self.page.keyboard.type(text)

    def shows(self, needle: str) -> bool:
        return self.screen.shows(needle)

    def lines(self) -> list[str]:
        return self.screen.lines()


# ---------------------------------------------------------------- the game day


@pytest.fixture
def facilitator(library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The facilitator's private folder with the plan (its secrets go beside it); the players' data folder and
    the telemetry cache in the environment every process inherits."""
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    folder = tmp_path / "facilitator"
    folder.mkdir(mode=0o700)
    plan = folder / "gameday.yaml"
    plan.write_text(PLAN.format(incident=FIXTURE, minutes=ROUND_S / 60), encoding="utf-8")
    yield plan


@contextmanager
def every_process_ends() -> Iterator[set[int]]:
    """Collects (in the yielded set, as the test adds to it) the processes the test started and their
    descendants; on the way out, after everything was stopped, asserts that none is left."""
    seen: set[int] = set()
    yield seen
    deadline = time.monotonic() + 30
    while (left := {pid for pid in seen if Path(f"/proc/{pid}").exists() and not _zombie(pid)}):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes outlived the test: {sorted(left)}")
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


BLUE, RED = "blue: ana, ben", "red: chen"
"""The room's rows in the team round: one per team, naming its members."""


def on_board(lines: list[str], rank: int, label: str, mark: str) -> bool:
    """Whether the board's row `rank` is hypothesis `label` with `mark` (a pin: `+Q1`) among its evidence."""
    row = re.compile(rf"^\W*{rank}\s+{label}\s+\d+%.*(?<!\S){re.escape(mark)}(?!\S)")
    return any(row.match(line) for line in lines)


def play_the_team_round(day: Day, browser: Any, links: dict[str, str],
                        round_one: dict[str, Tab]) -> tuple[dict[str, list[str]], list[tuple[int, str, str]]]:
    """Round 2, `team_play`: the facilitator starts it from the room; ana and ben close their round-1 tabs and
    open their (same, personal) links again in browser contexts of their own. ana starts team blue's game, ben's
    link lands in it. ana runs the settling query and pins it for D (the true cause at seed 1): ben's screen,
    never reloaded, shows the notice naming her, her query in his Queries log and her pin on his board. ana opens
    her submit dialog, ben hands the team's board in: ana's dialog closes with the game and her screen goes to the
    held debrief (her own hand-in is no longer possible). The room shows one row per team, blue handed in, red
    not joined. The facilitator ends the round: both members' debriefs open with the team's one score. Returns the
    members' last screens and the room's standings as scored."""
    room, room_page = day.room, day.room_page
    for player, tab in round_one.items():  # the players close their tabs of round 1 (the debrief read)
        tab.context.close()
        del day.views[player]
    room_page.keyboard.press("s")
    day.until(lambda: room.shows("Round 2 of 2") and room.shows("0/2 handed in")
              and roster_rows(room) == {BLUE: ("not joined", "-"), RED: ("not joined", "-")},
              "round 2 started: one row per team, naming its members")

    # ana comes first: the picker, the briefing with the round's limit, the team's game started
    ana = Tab(browser, links["ana"])
    day.views["ana (round 2)"] = ana.lines
    day.until(lambda: ana.shows("tui-mini"), "ana's picker in round 2")
    ana.press("Enter")
    day.until(lambda: ana.shows(f"Round 2: {int(ROUND_S // 60)}:{int(ROUND_S % 60):02d} for the round")
              and ana.shows("start the investigation"), "ana's briefing of round 2")
    ana.press("Enter")
    day.until(lambda: ana.shows("Write SQL here") and "start" in day.kinds("blue"), "team blue's game, started")
    team = day.journal("blue")
    assert team is not None and json.loads(team.read_text().splitlines()[0])["members"] == ["ana", "ben"]

    # ben's link opens that same game, straight into its workspace (the investigation already started)
    ben = Tab(browser, links["ben"])
    day.views["ben (round 2)"] = ben.lines
    day.until(lambda: ben.shows("Write SQL here"), "ben's workspace on the team's game")
    assert day.journal("blue") == team and day.journal("ana") != team
    day.until(lambda: roster_rows(room).get(BLUE, ("",))[0] == "investigating", "the room: blue investigating")

    # ana runs the settling query: ben's screen shows it, naming her, with nothing reloaded
    ana.type(SQL["ana"])
    ana.press("F5")
    day.until(lambda: "query" in day.kinds("blue"), "ana's query in the team's journal")
    day.until(lambda: ben.shows("ana ran Q1: SELECT replica, min(value)"), "the notice naming ana on ben's screen")
    ben.press("Control+l")  # his Queries log holds her query (its gist: two rows, from metrics), his count too
    logged = re.compile(r"\bQ1\s+2 rows metrics\b")
    day.until(lambda: any(logged.search(line) for line in ben.lines()) and ben.shows("queries 1 / "),
              "ana's query in ben's Queries log")
    day.until(lambda: roster_rows(room).get(BLUE) == ("investigating", "1"), "the room: blue's one query")

    # ana pins it as supporting D (the true cause at seed 1): her pin on ben's board, and the notice
    ana.press("Control+b")
    day.until(lambda: ana.shows("shift+↓ Move down") and on_top(ana.lines(), "A", 25), "ana's board in focus")
    ana.press("ArrowDown", "ArrowDown", "ArrowDown", "s")
    day.until(lambda: "pin" in day.kinds("blue"), "ana's pin in the team's journal")
    day.until(lambda: ben.shows("ana pinned Q1 as supports D") and on_board(ben.lines(), 4, "D", "+Q1"),
              "ana's pin on ben's board and the notice naming her")

    # ana opens her submit dialog; ben hands the team's board in first: ana's dialog closes with the game
    ana.press("F8")
    day.until(lambda: ana.shows("Submit ^s"), "ana's submit dialog")
    ben.press("F8")
    day.until(lambda: ben.shows("Submit ^s") and ben.shows("Sum 100%, ordered by confidence"), "ben's submit dialog")
    ben.press("Control+s")
    day.until(lambda: ben.shows("The debrief opens when the round ends"), "ben's held debrief")
    day.until(lambda: ana.shows("The debrief opens when the round ends") and not ana.shows("Submit ^s"),
              "ana's screen following the team's hand-in to the held debrief")
    assert [e["data"]["by"] for e in events_of(team) if e["kind"] == "submit"] == ["ben"]

    # the room: one row per team; blue handed in once, red (chen) never joined; no score while it runs
    day.until(lambda: roster_rows(room) == {BLUE: ("handed in", "1"), RED: ("not joined", "-")}
              and room.shows("1/2 handed in") and [r[1] for r in standings_rows(room)] == [BLUE],
              "the room with team blue handed in")
    assert standings_rows(room)[0][2].startswith("+")  # when, not a score

    # the facilitator ends round 2: the team's score in the standings, both members' debriefs open
    room_page.keyboard.press("e")
    day.until(lambda: room.shows("End round 2 now?"), "the room's question")
    room_page.keyboard.press("y")
    day.until(lambda: room.shows("Round 2 ended · 1/2 handed in")
              and [r[1] for r in standings_rows(room)] == [BLUE]
              and re.fullmatch(r"\d+\.\d", standings_rows(room)[0][2]) is not None,
              "the room's standings with team blue's score")
    for member, tab in (("ana", ana), ("ben", ben)):
        day.until(lambda tab=tab: tab.shows("The GPU behind vllm-1 was throttled"), f"{member}'s debrief of round 2")
    assert [e["data"]["by"] for e in events_of(team) if e["kind"] == "submit"] == ["ben"]  # still the one
    return {"ana": ana.lines(), "ben": ben.lines()}, standings_rows(room)


def test_a_whole_game_day_in_the_browser_and_a_terminal(facilitator: Path, tmp_path: Path) -> None:
    plan = facilitator
    data = Path(os.environ["SERVEDRILL_DATA"])
    started_at = time.monotonic()

    # ---- before: the plan checks, the round's telemetry and worlds are built, the roster is issued
    assert cli("gameday", "check", str(plan)).startswith(f"{plan}: ok")
    for seed in ("0", "1"):  # round 1's, round 2's
        cli("generate", str(FIXTURE), "--seed", seed)
        subprocess.run([sys.executable, "-m", "telemetry_gen.proving.worlds", str(FIXTURE), seed], cwd=ROOT,
                       env=os.environ.copy(), capture_output=True, timeout=HANG_S, check=True)
    port = free_port()
    roster = json.loads(cli("gameday", "roster", str(plan), "--url", f"http://127.0.0.1:{port}", "--json"))
    links = {p["player"]: p["link"] for p in roster["players"]}
    joins = {p["player"]: p["join"] for p in roster["players"]}
    assert sorted(links) == ["ana", "ben", "chen"] and len(set(links.values())) == 3
    assert joins["chen"] == f"servedrill join '{links['chen']}'"
    prepared = time.monotonic() - started_at

    log = tmp_path / "serve.log"
    with ExitStack() as stack:
        processes = stack.enter_context(every_process_ends())  # checked last, once everything was stopped
        server = stack.enter_context(serving_process(["--gameday", str(plan)], log, port=port))
        processes.add(server.pid)
        stack.callback(lambda: processes.update(descendants(server.pid)))  # read before the server stops
        pw = stack.enter_context(sync_api.sync_playwright())
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        stack.callback(browser.close)

        # ---- the facilitator opens the live room: the link the server prints is the roster's
        deadline = time.monotonic() + HANG_S
        while "live room" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline and server.poll() is None, log.read_text(errors="replace")
            time.sleep(0.05)
        assert roster["room"] in log.read_text(errors="replace")
        room_context = browser.new_context(viewport={"width": 900, "height": 1000})  # roster above standings
        room_page = room_context.new_page()
        room = Screen()
        room_sockets: list[Any] = []  # one for the whole day: the room is never reloaded
        room_page.on("websocket", lambda ws: (room_sockets.append(ws), ws.on("framereceived", room.feed)))
        room_page.goto(roster["room"], timeout=HANG_S * 1000)
        day = Day(room_page, room, data)
        day.until(lambda: room.shows("Press s to start round 1.")
                  and roster_rows(room) == {p: ("not joined", "-") for p in links}, "room before the round")
        room_page.click("#terminal")
        room_page.wait_for_function(FOCUSED_JS, timeout=HANG_S * 1000)
        room_page.keyboard.press("s")
        day.until(lambda: room.shows("Round 1 of 2") and room.shows("0/3 handed in"), "round 1 started")
        round_started = time.monotonic()

        # ---- the players join: two browsers, one terminal
        tabs = {player: Tab(browser, links[player]) for player in BROWSER}
        for player, tab in tabs.items():
            day.views[player] = tab.screen.lines
        terminal = Terminal(links[TERMINAL], tmp_path / "join.log")
        stack.callback(terminal.close)
        processes.add(terminal.proc.pid)
        day.views[TERMINAL] = terminal.lines

        for player, tab in tabs.items():
            day.until(lambda tab=tab: tab.screen.shows("tui-mini"), f"{player}'s picker with the round's incident")
            tab.press("Enter")
        day.until(lambda: terminal.shows("tui-mini"), "the terminal's picker")
        terminal.press("enter")

        # each reads the round's limit on the briefing, starts, and runs a query
        limit = f"Round 1: {int(ROUND_S // 60)}:{int(ROUND_S % 60):02d} for the round"
        for player, tab in tabs.items():
            day.until(lambda tab=tab: tab.screen.shows(limit) and tab.screen.shows("start the investigation"),
                      f"{player}'s briefing with the round's limit")
            tab.press("Enter")
        day.until(lambda: terminal.shows(limit) and terminal.shows("start the investigation"),
                  "the terminal's briefing")
        terminal.press("enter")
        for player, tab in tabs.items():
            day.until(lambda tab=tab: tab.screen.shows("Write SQL here"), f"{player}'s workspace")
            tab.type(SQL[player])
            tab.press("F5")
        day.until(lambda: terminal.shows("Write SQL here"), "the terminal's workspace")
        terminal.type(SQL[TERMINAL])
        terminal.press("f5")
        for player in links:
            day.until(lambda player=player: "query" in day.kinds(player), f"{player}'s query in the journal")
        processes.update(descendants(server.pid), descendants(terminal.proc.pid))  # every player's app

        # the room shows all three investigating, a query each, nobody in the standings
        day.until(lambda: all(day.status(p) == ("investigating", "1") for p in links), "everyone investigating")
        assert standings_rows(room) == []

        # each ranks: the first hypothesis moved down (the board pane, shift+down); ana backs the true cause
        for player, view in [*tabs.items(), (TERMINAL, terminal)]:
            view.press("Control+b" if view is not terminal else "ctrl+b")
            day.until(lambda view=view: view.shows("shift+↓ Move down") and on_top(view.lines(), "A", 25),
                      f"{player}'s board in focus")
            view.press("Shift+ArrowDown" if view is not terminal else "shift+down")
            day.until(lambda view=view: on_top(view.lines(), "B", 25), f"{player}'s board with B on top")
        tabs["ana"].press("ArrowUp", *["+"] * 9)
        day.until(lambda: on_top(tabs["ana"].screen.lines(), "B", 70), "ana's board with B at 70%")

        # ana hands in first: the room shows her handed in, and ben still investigating
        handed: list[str] = []
        for player, tab in tabs.items():
            tab.press("F8")
            day.until(lambda tab=tab: tab.screen.shows("Submit ^s"), f"{player}'s submit dialog")
            if player == "ana":  # 145 points in all: the dialog offers to normalise
                day.until(lambda tab=tab: tab.screen.shows("ctrl+n normalises"), "ana's board not adding up")
                tab.press("Control+n")
            day.until(lambda tab=tab: tab.screen.shows("Sum 100%, ordered by confidence"), f"{player}'s board")
            assert day.status(player) == ("investigating", "1")  # not before the hand-in
            tab.press("Control+s")
            day.until(lambda tab=tab: tab.screen.shows("The debrief opens when the round ends"),
                      f"{player}'s held debrief")
            assert "submit" in day.kinds(player)
            handed.append(player)
            day.until(lambda: all(day.status(p) == ("handed in", "1") for p in handed)
                      and all(day.status(p) == ("investigating", "1") for p in links if p not in handed)
                      and [r[1] for r in standings_rows(room)] == handed,
                      f"the room with {', '.join(handed)} handed in")
            assert all(last.startswith("+") for _, _, last in standings_rows(room))  # when, not a score
        handed_in_by = time.monotonic() - round_started
        assert "submit" not in day.kinds(TERMINAL)

        # ---- the facilitator ends the round early: TIME UP for the terminal player, whose board is handed in as it
        # stands on his screen; then collected, scores in the standings, the debriefs open
        room_page.keyboard.press("e")
        day.until(lambda: room.shows("End round 1 now?"), "the room's question")
        room_page.keyboard.press("y")
        day.until(lambda: "submit" in day.kinds(TERMINAL), "TIME UP handing the terminal player's board in")
        day.until(lambda: day.status(TERMINAL) == ("timed out", "1"), "the room showing the terminal player timed out")
        assert all(day.status(p) == ("handed in", "1") for p in BROWSER)
        day.until(lambda: room.shows("Round 1 ended · 3/3 handed in")
                  and len(standings_rows(room)) == 3
                  and all(re.fullmatch(r"\d+\.\d", last) for _, _, last in standings_rows(room)),
                  "the room's standings with scores")
        for player, view in [*tabs.items(), (TERMINAL, terminal)]:  # the truth, once the debrief has scored
            day.until(lambda view=view: view.shows("The GPU behind vllm-1 was throttled"), f"{player}'s debrief")
        shown_standings = standings_rows(room)
        assert len(room_sockets) == 1
        room_page.screenshot(path=str(tmp_path / "room.png"))
        final = {name: view() for name, view in day.views.items()}
        for name, lines in final.items():  # the last screens, for a reader of the test's folder
            (tmp_path / f"{name}.screen.txt").write_text("\n".join(lines), encoding="utf-8")
        played = time.monotonic() - round_started

        # ---- round 2, played by teams: ana and ben, team blue, in one shared game (chen, alone in team red,
        # stays on his round-1 debrief and plays no part in it)
        team_started = time.monotonic()
        team_final, team_standings = play_the_team_round(day, browser, links, tabs)
        for member, lines in team_final.items():
            (tmp_path / f"{member}-round-2.screen.txt").write_text("\n".join(lines), encoding="utf-8")
        processes.update(descendants(server.pid))
        team_played = time.monotonic() - team_started

    # ---- the journals: the server's (signed), one hand-in each, the board as each player left it (chen's handed
    # in by TIME UP as it stood on his screen: he never saved it)
    rankings = {}
    for player in links:
        path = day.journal(player)
        assert path is not None
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert lines[0]["player"] == player and all(isinstance(line.get("mac"), str) for line in lines)
        [submit] = [e for e in lines[1:] if e["kind"] == "submit"]
        rankings[player] = [(r["id"], r["confidence"]) for r in submit["data"]["ranking"]]
    assert [hid for hid, _ in rankings["chen"]] == RANKED and rankings["chen"] == rankings["ben"]
    assert {c for _, c in rankings["ben"]} == {25.0}
    assert rankings["ana"][0][0] == "throttle" and rankings["ana"][0][1] > 45
    assert sum(c for _, c in rankings["ana"]) == pytest.approx(100)

    # ---- after: the results collected at the end, verified; the review names all three
    results = plan.parent / "results"
    collected = sorted(p.name for p in results.glob("round-01-*/*.json"))
    assert collected == ["blue--ana.json", "blue--ben.json", "red--chen.json"]
    scores = {}
    for name in collected:
        transcript = json.loads(next(results.glob(f"round-01-*/{name}")).read_text())
        assert transcript["gameday"]["verified"] is True
        scores[transcript["gameday"]["player"]] = transcript["gameday"]["score"]
    assert scores["ana"] > scores["ben"]  # the settling query and the truth backed
    # each player's debrief showed their own, and the room those scores, highest first
    for player, score in scores.items():
        assert any(line.strip().startswith(f"Score {score:.1f} / 100") for line in final[player]), player
    assert {p: last for _, p, last in shown_standings} == {p: f"{s:.1f}" for p, s in scores.items()}
    assert shown_standings[0][1] == "ana"
    assert [float(last) for _, _, last in shown_standings] == sorted(scores.values(), reverse=True)
    collect = json.loads(cli("gameday", "collect", str(plan), "--json"))  # again, as a script would
    assert collect["journals"] == "signed"
    [first, second] = collect["rounds"]
    assert first["handed_in"] == ["ana", "ben", "chen"] and first["waiting"] == [] and first["refused"] == []
    assert second["handed_in"] == ["blue"] and second["waiting"] == ["red"] and second["refused"] == []
    html = tmp_path / "review.html"
    review = json.loads(cli("gameday", "review", str(plan), "--html", str(html), "--json"))
    assert review["verified"] is True and review["skipped"] == []
    solo = [row for row in review["rows"] if row["round"] == 1]
    assert sorted(row["player"] for row in solo) == ["ana", "ben", "chen"]
    assert all(row["submitted"] and row["queries"] == 1 for row in solo)
    assert {row["player"]: row["score"] for row in solo} == pytest.approx(scores)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(html.as_uri())
            shown = page.inner_text("body")
        finally:
            browser.close()
    for player in links:
        assert re.search(rf"\b{player}\b", shown), f"the review does not name {player}"
    assert "blue (ana, ben)" in shown

    # ---- the team round: one shared, signed journal naming its members, every event naming the member who acted
    # (ben's hand-in the only one); one result for the team, verified, whose score both members' debriefs and the
    # room showed; the review's row for round 2 is the team's
    team = day.journal("blue")
    assert team is not None
    lines = [json.loads(line) for line in team.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["player"] == "blue" and lines[0]["members"] == ["ana", "ben"]
    assert all(isinstance(line.get("mac"), str) for line in lines)
    acted = [(e["kind"], e["data"]["by"]) for e in lines[1:] if e["kind"] != "debrief_viewed"]
    assert acted == [("start", "ana"), ("query", "ana"), ("pin", "ana"), ("submit", "ben")]
    assert [e["kind"] for e in lines[1:]].count("debrief_viewed") == 1  # the team's game debriefed once
    assert lines[3]["data"]["hypothesis"] == "throttle" and lines[3]["data"]["stance"] == "supports"
    [result] = results.glob("round-02-*/*.json")
    assert result.name == "blue.team.json"
    doc = json.loads(result.read_text())
    assert doc["gameday"]["verified"] is True and doc["gameday"]["members"] == ["ana", "ben"]
    team_score = doc["gameday"]["score"]
    for member in ("ana", "ben"):
        assert any(line.strip().startswith(f"Score {team_score:.1f} / 100") for line in team_final[member]), member
    assert team_standings == [(1, BLUE, f"{team_score:.1f}")]
    [team_row] = [row for row in review["rows"] if row["round"] == 2]
    assert (team_row["player"], team_row["team"], team_row["submitted"], team_row["queries"]) == (
        "blue (ana, ben)", "blue", True, 1)
    assert team_row["score"] == pytest.approx(team_score) and team_row["verified"] is True
    print(f"scores {scores}, team blue {team_score}; prepared in {prepared:.1f} s; the browser players handed in "
          f"{handed_in_by:.1f} s into round 1; played {played:.1f} s; the team round {team_played:.1f} s; whole test "
          f"{time.monotonic() - started_at:.1f} s")
