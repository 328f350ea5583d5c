"""Load test of `servedrill serve`: many browser sessions at once, each playing an incident.

(A standalone script of ~560 lines, run by hand or by tests/test_serve_load.py with SERVEDRILL_LOADTEST=1:
one file to copy to a load machine, so it stays whole.)

It starts its own `servedrill serve` on a free loopback port, with a fresh temporary data and cache
directory, and opens N sessions the way a browser tab does: a websocket to `/ws` speaking
textual-serve's protocol (JSON `["stdin", keys]` and `["resize", ...]` up, terminal output down). Each
session waits for the picker, opens the incident, starts it, then runs Q queries one at a time. Every
query carries a tag naming its session and its number (`SELECT 'lt07' AS session, 3 AS q, ...`), so the
check afterwards can tell whose query a journal line is:

- every query succeeded (the journal's query event says ok and its rows carry the session's tag);
- no session saw another's state: each session file holds exactly its own Q queries, in order, and
  nothing else, and the session ids are all distinct.

Timing: a query's round trip runs from sending F5 to the session file recording the query's result
(`p95_query_ms`), and to the terminal showing the new query count (`p95_screen_ms`); the journal is
polled every 10 ms. Memory is the resident set (RSS) of the app processes (the server's children) while
every session is open.

Bounded: at most MAX_SESSIONS sessions and MAX_QUERIES queries each, and the whole run stops by itself
after --max-seconds (then unfinished sessions count as failures). Loopback only; it never connects
anywhere else.

    .venv/bin/python tools/loadtest_serve.py            # 20 sessions x 10 queries; prints one JSON object
    .venv/bin/python tools/loadtest_serve.py --sessions 5 --queries 3 --max-seconds 120

Exit status 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "incidents" / "tui-mini.yaml"
MAX_SESSIONS = 50
MAX_QUERIES = 30
MAX_SECONDS = 900.0
HOST = "127.0.0.1"
F5 = "\x1b[15~"
CLEAR_LINE = "\x15"  # ctrl+u: the editor deletes back to the start of the line
KEY_GAP_S = 0.004
"""Between typed keys (a fast typist is about 0.1 s; xterm.js sends one message per key)."""
THINK_S = 1.0
"""Pause after a result shows before typing the next query (a player reads it; the app finishes
handling the result). Not part of any timing."""
PICKER_RETRY_S = 15.0
ECHO_S = 10.0
NOTICE_S = 6.0
"""How long the app shows a notice (Textual's default is 5 s)."""
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")

QUERIES = (
    "SELECT '{tag}' AS session, {q} AS q, count(*) AS n FROM requests",
    "SELECT '{tag}' AS session, {q} AS q, replica, avg(prefill_s) AS p FROM requests GROUP BY replica",
    "SELECT '{tag}' AS session, {q} AS q, min(value) AS v FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK'",
    "SELECT '{tag}' AS session, {q} AS q, status, count(*) AS n FROM requests GROUP BY status",
    "SELECT '{tag}' AS session, {q} AS q, sum(num_preemptions) AS p FROM requests",
)
"""Cycled through; all small, all on the fixture's tables. Each names its session and number at its
start, and is short enough to fit the editor on one line of the terminal size below (the check that
the editor shows the text before F5 looks for that start)."""
TERMINAL = (200, 50)


def query_sql(tag: str, q: int) -> str:
    return QUERIES[(q - 1) % len(QUERIES)].format(tag=tag, q=q)


# ---------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def start_server(port: int, incident: Path, env: dict[str, str], log: Path,
                 warm: int | None = None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tui.cli", "serve", "--host", HOST, "--port", str(port),
           "--incidents", str(incident), "--player", "loadtest", "--max-sessions", str(MAX_SESSIONS)]
    if warm is not None:
        cmd += ["--warm", str(warm)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"servedrill serve exited with {proc.returncode}: {log.read_text()[-500:]}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("servedrill serve did not start listening within 60 s")


def wait_for_pool(server_pid: int, warm: int | None, timeout: float) -> bool:
    """Wait until the server's warm pool holds `warm` spares (at least one when `warm` is None: the
    server's default size): the warm cache a game day starts from. False when it did not within
    `timeout` (the run goes on; its tabs start cold until the pool is up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(process_roles(server_pid).values()).count("spare") >= (warm or 1):
            return True
        time.sleep(0.2)
    return False


def stop_server(proc: subprocess.Popen[bytes], children: set[int]) -> list[int]:
    """SIGTERM the server (it tells its apps to quit); kill any app process of ours still alive after
    15 s (by pid). Returns the pids that had to be killed."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    deadline = time.monotonic() + 15
    alive = {pid for pid in children if _alive(pid)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = {pid for pid in alive if _alive(pid)}
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    return sorted(alive)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def descendants(pid: int) -> dict[int, int]:
    """Every process under `pid` (its children, theirs, ...) as {pid: parent pid}."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out: dict[int, int] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in out:
                out[child] = parent
                frontier.append(child)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def pss_mb(pid: int) -> float | None:
    """Proportional set size (shared pages divided among the processes sharing them), MB; None when it
    cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) the process has used so far; None when it cannot be read. A warm app's
    count starts at its fork from the template."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def process_roles(server_pid: int) -> dict[int, str]:
    """The processes under the server by role: "template" (the warm pool's, tui.serve_warm), "sql" (an
    app's query worker), "worlds" (a world build), "app" (a tab's app), "spare" (a warm process waiting
    for a tab: a child of the template with one thread) or "seed" (the query worker a spare forked ahead,
    not yet taken by an app)."""
    tree = descendants(server_pid)
    roles: dict[int, str] = {}
    for pid, parent in tree.items():
        line = cmdline(pid)
        if "game.query.sandbox" in line:
            roles[pid] = "sql"
        elif "telemetry_gen.proving.worlds" in line:
            roles[pid] = "worlds"
        elif parent == server_pid and "tui.serve_warm" in line:
            roles[pid] = "template"
    for pid, parent in tree.items():
        if pid in roles:
            continue
        if parent == server_pid:
            roles[pid] = "app"
        elif roles.get(parent) == "template":
            roles[pid] = "spare" if threads(pid) == 1 else "app"
    for pid, parent in tree.items():
        if pid not in roles:
            # a warm process's forked query worker shares its command line with the template
            forked = "tui.serve_warm" in cmdline(pid) and roles.get(parent) in ("app", "spare")
            roles[pid] = ("sql" if roles[parent] == "app" else "seed") if forked else "other"
    return roles


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ---------------------------------------------------------------- the journal watcher


class Journal:
    """Follows every session file under `folder`, reading only new lines; clients wait on tags."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.seen: dict[str, float] = {}  # "lt07-q03" -> when the journal had it (monotonic)
        self.running = True

    async def follow(self, interval: float = 0.01) -> None:
        while self.running:
            self.poll()
            await asyncio.sleep(interval)

    def poll(self) -> None:
        if not self.folder.is_dir():
            return
        now = time.monotonic()
        for path in self.folder.glob("*.jsonl"):
            try:
                size = path.stat().st_size
            except OSError:
                continue
            start = self.offsets.get(path, 0)
            if size <= start:
                continue
            with open(path, "rb") as fh:
                fh.seek(start)
                chunk = self.partial.pop(path, b"") + fh.read(size - start)
            self.offsets[path] = size
            *lines, rest = chunk.split(b"\n")
            if rest:
                self.partial[path] = rest
            for line in lines:
                for match in re.finditer(rb"'(lt\d+)' AS session, (\d+) AS q", line):
                    if b'"kind":"query"' in line or b'"kind": "query"' in line:
                        self.seen.setdefault(f"{match.group(1).decode()}-q{int(match.group(2)):02d}", now)


# ---------------------------------------------------------------- one session


@dataclass
class Client:
    index: int
    queries: int
    tag: str = ""
    screen: bytes = b""
    opened_at: float = 0.0
    picker_s: float | None = None
    workspace_s: float | None = None
    query_ms: list[float] = field(default_factory=list)
    screen_ms: list[float] = field(default_factory=list)
    error: str | None = None
    last_screen: str = ""
    retries: int = 0
    unconfirmed: int = 0
    trace: list[tuple[float, str, str]] | None = None
    done: bool = False

    def __post_init__(self) -> None:
        self.tag = f"lt{self.index:02d}"

    def text(self) -> str:
        return ANSI.sub(b"", self.screen).decode("utf-8", "replace")

    async def wait_text(self, needle: str, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.tag}: no {what} after {timeout:.0f} s")
            await asyncio.sleep(0.02)


async def open_workspace(client: Client, keys: Any, timeout: float) -> None:
    """Enter on the picker opens the briefing; Enter on the briefing starts the session (remembered until
    the telemetry is ready), or `n` when the briefing offers to continue another tab's unfinished
    session (all tabs share the data folder and the player name). The picker's Enter is pressed again
    if no briefing shows within PICKER_RETRY_S (a key sent before the app reads its input is lost);
    the briefing's key only once (pressed twice, it can open two sessions)."""
    deadline = time.monotonic() + timeout
    client.screen = b""
    await keys("\r")
    pressed = time.monotonic()
    while True:
        text = client.text()
        if "start a new one" in text:
            await keys("n")
            break
        if "start the investigation" in text:
            await keys("\r")
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{client.tag}: no briefing after {timeout:.0f} s")
        if time.monotonic() - pressed > PICKER_RETRY_S:
            client.screen = b""
            await keys("\r")
            pressed = time.monotonic()
        await asyncio.sleep(0.02)
    await client.wait_text("Write SQL here", max(1.0, deadline - time.monotonic()), "workspace")


async def type_query(client: Client, keys: Any, sql: str, timeout: float) -> bool:
    """Clear the editor's line (ctrl+u; the queries are one line each), type `sql` one key per message
    as xterm.js in a browser sends them, and wait until the terminal shows the editor holding exactly
    `sql`, as a player would before pressing F5 (F5 is a priority key: pressed while typed keys are still
    queued for the editor, it runs what the editor holds so far). Types it again once if it does not
    show within ECHO_S. Returns whether it showed."""
    needle = f"1  {sql}"
    for attempt in range(2):
        if attempt:
            client.retries += 1
        client.screen = b""
        await keys(CLEAR_LINE)
        await asyncio.sleep(0.05)
        for character in sql:
            await asyncio.sleep(KEY_GAP_S)
            await keys(character)
        shown_by = time.monotonic() + min(ECHO_S, timeout)
        while time.monotonic() < shown_by:
            if needle in client.text():
                return True
            await asyncio.sleep(0.02)
    return False


async def run_client(client: Client, url: str, journal: Journal, incident_id: str, stage_timeout: float) -> None:
    import aiohttp

    client.opened_at = time.monotonic()
    async with aiohttp.ClientSession() as http, http.ws_connect(f"{url}?width={TERMINAL[0]}&height={TERMINAL[1]}",
                                                                 heartbeat=None) as ws:
        async def read() -> None:
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY:
                    client.screen = (client.screen + message.data)[-65536:]
                    if client.trace is not None:
                        client.trace.append((time.monotonic(), "<", ANSI.sub(b"", message.data).decode(
                            "utf-8", "replace")))

        reader = asyncio.create_task(read())

        async def keys(text: str) -> None:
            if client.trace is not None:
                client.trace.append((time.monotonic(), ">", text))
            await ws.send_str(json.dumps(["stdin", text]))

        try:
            await client.wait_text(f"{incident_id} · ", stage_timeout, "picker")
            client.picker_s = time.monotonic() - client.opened_at
            await open_workspace(client, keys, stage_timeout)
            client.workspace_s = time.monotonic() - client.opened_at
            await client.wait_text("▶ requests", stage_timeout, "schema")
            await asyncio.sleep(1.0)  # the workspace settles (keys typed while it mounts can be lost)
            for q in range(1, client.queries + 1):
                key = f"{client.tag}-q{q:02d}"
                deadline = time.monotonic() + stage_timeout
                sent, screen_at = None, None
                while sent is None:
                    if not await type_query(client, keys, query_sql(client.tag, q), stage_timeout):
                        client.unconfirmed += 1  # pressed anyway; the journal check judges the result
                    client.screen = b""
                    sent = time.monotonic()
                    await keys(F5)
                    while key not in journal.seen or screen_at is None:
                        text = client.text()
                        if key not in journal.seen and "Type a query first" in text:
                            # The editor lost the text before F5 (seen on the first query, while the
                            # workspace settles). Let the notice time out, so that it is not mistaken
                            # for a new one, then type again.
                            client.retries += 1
                            sent = None
                            await asyncio.sleep(NOTICE_S)
                            break
                        if screen_at is None and f"queries {q} /" in text:
                            screen_at = time.monotonic()
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"{key}: not recorded within {stage_timeout:.0f} s")
                        await asyncio.sleep(0.005)
                client.query_ms.append((journal.seen[key] - sent) * 1000)
                client.screen_ms.append((screen_at - sent) * 1000)
                await asyncio.sleep(THINK_S)
            client.done = True
        except Exception as exc:
            client.error = f"{type(exc).__name__}: {exc}"
            client.last_screen = client.text()
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader


# ---------------------------------------------------------------- checks and figures


def check_journals(folder: Path, clients: list[Client], queries: int) -> tuple[list[str], dict[str, Any]]:
    """Failures found in the session files, and counts."""
    failures: list[str] = []
    ids: list[str] = []
    owners: dict[str, Path] = {}
    ok_queries = 0
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            header = json.loads(lines[0])
            events = [json.loads(line) for line in lines[1:] if line.strip()]
        except (IndexError, ValueError) as exc:
            failures.append(f"{path.name}: unreadable ({exc})")
            continue
        ids.append(str(header.get("session_id")))
        recorded = [e["data"] for e in events if e.get("kind") == "query"]
        tags = {m.group(1) for d in recorded for m in re.finditer(r"'(lt\d+)' AS session", d.get("sql", ""))}
        if len(tags) != 1:
            failures.append(f"{path.name}: queries of {len(tags)} sessions ({sorted(tags)}), expected one")
            continue
        tag = tags.pop()
        if tag in owners:
            failures.append(f"{tag}: queries in two session files ({owners[tag].name}, {path.name})")
        owners[tag] = path
        expected = [query_sql(tag, q) for q in range(1, queries + 1)]
        got = [d.get("sql", "").strip() for d in recorded]
        if got != expected:
            failures.append(f"{path.name}: {len(got)} queries, not exactly {tag}'s {queries} in order")
        for d in recorded:
            rows = d.get("rows") or []
            if d.get("ok") is True and rows and all(row and row[0] == tag for row in rows):
                ok_queries += 1
            else:
                failures.append(f"{path.name}: query {d.get('index')} failed or answered for another session "
                                f"(ok={d.get('ok')}, error={d.get('error')!r})")
    if len(set(ids)) != len(ids):
        failures.append(f"session ids not distinct: {len(ids)} files, {len(set(ids))} ids")
    for client in clients:
        if client.tag not in owners:
            failures.append(f"{client.tag}: no session file holds its queries")
    return failures, {"session_files": len(files), "distinct_session_ids": len(set(ids)), "ok_queries": ok_queries}


def percentile(values: list[float], pct: float, digits: int = 1) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return round(ordered[rank], digits)


async def drive(url: str, clients: list[Client], journal: Journal, incident_id: str, stage_timeout: float,
                server_pid: int, ramp_s: float) -> dict[str, Any]:
    follower = asyncio.create_task(journal.follow())
    memory: dict[str, Any] = {}
    app_pids: set[int] = set()
    before = resource.getrusage(resource.RUSAGE_SELF)
    server_before = cpu_s(server_pid) or 0.0

    async def sample_when_all_open() -> None:
        # Sample while every session sits in its workspace (or once all have finished or failed).
        while not all(c.workspace_s is not None or c.error for c in clients):
            app_pids.update(descendants(server_pid))
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # the last workspace's query worker is up
        roles = process_roles(server_pid)
        app_pids.update(roles)
        apps = [pid for pid, role in roles.items() if role == "app"]
        tree = descendants(server_pid)
        memory["apps_warm"] = sum(roles.get(tree.get(pid, 0)) == "template" for pid in apps)
        sizes = [s for s in (rss_mb(pid) for pid in apps) if s is not None]
        # where a burst's CPU went by the time every session reached its workspace: apps and their query
        # workers since they started, the server and this client since the sessions began
        cpu: dict[str, float] = {}
        for pid, role in roles.items():
            cpu[role] = cpu.get(role, 0.0) + (cpu_s(pid) or 0.0)
        cpu["server"] = (cpu_s(server_pid) or 0.0) - server_before
        own = resource.getrusage(resource.RUSAGE_SELF)
        cpu["loadtest_client"] = own.ru_utime + own.ru_stime - before.ru_utime - before.ru_stime
        memory["cpu_s_at_workspace"] = {role: round(v, 2) for role, v in sorted(cpu.items())}
        shares = [s for s in (pss_mb(pid) for pid in apps) if s is not None]
        tree_pss = [s for s in (pss_mb(pid) for pid in roles) if s is not None]
        tree_rss = [s for s in (rss_mb(pid) for pid in roles) if s is not None]
        memory.update({"app_processes": len(sizes), "rss_mb_total": round(sum(sizes), 1),
                       "rss_mb_mean": round(statistics.mean(sizes), 1) if sizes else None,
                       "rss_mb_max": round(max(sizes), 1) if sizes else None,
                       "pss_mb_mean": round(statistics.mean(shares), 1) if shares else None,
                       "processes": {role: list(roles.values()).count(role) for role in sorted(set(roles.values()))},
                       "tree_pss_mb": round(sum(tree_pss), 1) if tree_pss else None,
                       "tree_rss_mb": round(sum(tree_rss), 1),
                       "server_rss_mb": round(rss_mb(server_pid) or 0, 1)})

    async def start(client: Client) -> None:
        await asyncio.sleep(client.index * ramp_s)
        await run_client(client, url, journal, incident_id, stage_timeout)

    sampler = asyncio.create_task(sample_when_all_open())
    try:
        await asyncio.gather(*(start(c) for c in clients))
    finally:
        await asyncio.sleep(0.1)
        journal.poll()
        journal.running = False
        await follower
        if not sampler.done():
            sampler.cancel()
    memory["app_pids"] = sorted(app_pids)
    return memory


def run(sessions: int = 20, queries: int = 10, max_seconds: float = 300.0, incident: Path = FIXTURE,
        ramp_ms: float = 0.0, keep: bool = False, warm: int | None = None) -> dict[str, Any]:
    """Run the load test; returns the report (see the module docstring and docs/serve.md)."""
    if not 1 <= sessions <= MAX_SESSIONS:
        raise ValueError(f"sessions must be 1..{MAX_SESSIONS}")
    if not 1 <= queries <= MAX_QUERIES:
        raise ValueError(f"queries must be 1..{MAX_QUERIES}")
    max_seconds = min(float(max_seconds), MAX_SECONDS)
    sys.path.insert(0, str(ROOT))
    from incidents.loader import load_incident
    from telemetry_gen.cache import ensure_database
    from telemetry_gen.proving.worlds import ensure_worlds

    wall0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="servedrill-loadtest-"))
    env = dict(os.environ, SERVEDRILL_DATA=str(work / "data"), SERVEDRILL_CACHE=str(work / "cache"))
    # A warm cache: build the telemetry once up front, so the sessions share the cached database instead
    # of racing to build it.
    loaded = load_incident(incident)
    saved_cache = os.environ.get("SERVEDRILL_CACHE")
    os.environ["SERVEDRILL_CACHE"] = env["SERVEDRILL_CACHE"]
    try:
        ensure_database(loaded, 0)
        # and the worlds scoring compares against, which every session's app otherwise starts building
        # in the background (at low priority, but one build per session)
        ensure_worlds(load_incident(incident, 0), 0)
    finally:
        if saved_cache is None:
            os.environ.pop("SERVEDRILL_CACHE", None)
        else:
            os.environ["SERVEDRILL_CACHE"] = saved_cache
    port = free_port()
    proc = start_server(port, incident, env, work / "serve.log", warm)
    pool_ready = wait_for_pool(proc.pid, warm, min(120.0, max_seconds)) if warm != 0 else None
    load_before = os.getloadavg()
    clients = [Client(i + 1, queries, trace=[] if keep else None) for i in range(sessions)]
    journal = Journal(work / "data" / "sessions")
    timed_out = False
    memory: dict[str, Any] = {}
    started = time.monotonic()
    try:
        memory = asyncio.run(asyncio.wait_for(
            drive(f"ws://{HOST}:{port}/ws", clients, journal, loaded.id, min(60.0, max_seconds),
                  proc.pid, ramp_ms / 1000), timeout=max_seconds))
    except TimeoutError:
        timed_out = True
    finally:
        killed = stop_server(proc, set(memory.get("app_pids", [])) | set(descendants(proc.pid)))
    run_s = time.monotonic() - started
    load_after = os.getloadavg()
    failures, counts = check_journals(work / "data" / "sessions", clients, queries)
    failures = [f"{c.tag}: {c.error}" for c in clients if c.error] + failures
    if timed_out:
        failures.insert(0, f"stopped after --max-seconds {max_seconds:.0f}")
    if killed:
        failures.append(f"{len(killed)} app processes did not quit with the server (killed)")
    query_ms = [ms for c in clients for ms in c.query_ms]
    screen_ms = [ms for c in clients for ms in c.screen_ms]
    starts = [c.workspace_s for c in clients if c.workspace_s is not None]
    pickers = [c.picker_s for c in clients if c.picker_s is not None]
    tree_pss = memory.get("tree_pss_mb")
    report = {
        "ok": not failures,
        "sessions": sessions,
        "sessions_completed": sum(c.done for c in clients),
        "queries_per_session": queries,
        "queries": counts["ok_queries"],
        "queries_expected": sessions * queries,
        "failures": len(failures),
        "failure_details": failures[:20],
        "session_files": counts["session_files"],
        "distinct_session_ids": counts["distinct_session_ids"],
        "warm": warm,
        "pool_ready": pool_ready,
        "memory_per_player_mb": round(tree_pss / sessions, 1) if tree_pss is not None else None,
        "memory_per_session_pss_mb": memory.get("pss_mb_mean"),
        "memory_per_session_mb": memory.get("rss_mb_mean"),
        "memory_per_session_max_mb": memory.get("rss_mb_max"),
        "memory_apps_total_mb": memory.get("rss_mb_total"),
        "app_processes": memory.get("app_processes"),
        "server_rss_mb": memory.get("server_rss_mb"),
        "memory_tree_pss_mb": tree_pss,
        "memory_tree_rss_mb": memory.get("tree_rss_mb"),
        "processes": memory.get("processes"),
        "apps_warm": memory.get("apps_warm"),
        "cpu_s_at_workspace": memory.get("cpu_s_at_workspace"),
        "p50_query_ms": percentile(query_ms, 50),
        "p95_query_ms": percentile(query_ms, 95),
        "max_query_ms": round(max(query_ms), 1) if query_ms else None,
        "p95_screen_ms": percentile(screen_ms, 95),
        "p50_session_start_s": percentile(starts, 50, 2),
        "p95_session_start_s": percentile(starts, 95, 2),
        "max_session_start_s": round(max(starts), 2) if starts else None,
        "p50_first_screen_s": percentile(pickers, 50, 2),
        "p95_first_screen_s": percentile(pickers, 95, 2),
        "retyped_queries": sum(c.retries for c in clients),
        "unconfirmed_queries": sum(c.unconfirmed for c in clients),
        "run_s": round(run_s, 2),
        "wall_s": round(time.monotonic() - wall0, 2),
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "workdir": str(work) if keep else None,
    }
    for client in clients:
        if client.last_screen:
            (work / f"{client.tag}-screen.txt").write_text(client.last_screen, encoding="utf-8")
        if client.trace:
            (work / f"{client.tag}-trace.txt").write_text("".join(
                f"{t - started:8.3f} {way} {text!r}\n" for t, way, text in client.trace), encoding="utf-8")
    if not keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help=f"browser sessions (1..{MAX_SESSIONS})")
    parser.add_argument("--queries", type=int, default=10, help=f"queries per session (1..{MAX_QUERIES})")
    parser.add_argument("--max-seconds", type=float, default=300.0,
                        help=f"stop the whole run after this long (at most {MAX_SECONDS:.0f})")
    parser.add_argument("--incident", type=Path, default=FIXTURE,
                        help="incident file to play (default: the small test fixture tui-mini)")
    parser.add_argument("--ramp-ms", type=float, default=0.0, help="delay between session starts")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir and server log")
    parser.add_argument("--warm", type=int, default=None,
                        help="the server's --warm (spare app processes; 0: every tab starts cold; default: "
                             "serve's default); the run starts once the pool is full")
    parser.add_argument("--json", action="store_true", help="print the whole report as one JSON object")
    args = parser.parse_args(argv)
    try:
        report = run(args.sessions, args.queries, args.max_seconds, args.incident, args.ramp_ms, args.keep,
                     args.warm)
    except (ValueError, RuntimeError) as exc:
        print(json.dumps({"ok": False, "error": str(exc)}) if args.json else f"loadtest: {exc}")
        return 1
    print(json.dumps(report, indent=2) if args.json else summary(report))
    return 0 if report["ok"] else 1


def summary(report: dict[str, Any]) -> str:
    """The report's headline figures, a few lines for a person (--json prints all of it)."""
    def fig(key: str, unit: str) -> str:
        value = report.get(key)
        return "n/a" if value is None else f"{value:g} {unit}"

    warm = report.get("warm")
    lines = [
        f"{'ok' if report['ok'] else 'FAILED'}: {report['sessions']} sessions x {report['queries_per_session']} "
        f"queries, warm pool {'default' if warm is None else warm}, {report['cpus']} CPUs, load average "
        f"{report['load_before'][0]:.1f} before / {report['load_after'][0]:.1f} after",
        f"session start (websocket to workspace) p50 {fig('p50_session_start_s', 's')}, "
        f"p95 {fig('p95_session_start_s', 's')}, max {fig('max_session_start_s', 's')}",
        f"first screen (websocket to picker)     p50 {fig('p50_first_screen_s', 's')}, "
        f"p95 {fig('p95_first_screen_s', 's')}",
        f"query round trip (F5 to journal)       p50 {fig('p50_query_ms', 'ms')}, "
        f"p95 {fig('p95_query_ms', 'ms')}, max {fig('max_query_ms', 'ms')}",
        f"memory per player {fig('memory_per_player_mb', 'MB')} (PSS of every process under the server / "
        f"sessions); app process RSS {fig('memory_per_session_mb', 'MB')}, PSS "
        f"{fig('memory_per_session_pss_mb', 'MB')}; server {fig('server_rss_mb', 'MB')}",
        f"queries ok {report['queries']}/{report['queries_expected']}, wall {report['wall_s']} s",
    ]
    lines += [f"  failure: {line}" for line in report.get("failure_details", [])]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
