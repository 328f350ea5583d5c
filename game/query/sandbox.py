"""The player's queries run in a worker process that can be killed.

DuckDB checks its time limit (an interrupt) and its memory limit between chunks of work, but some
functions build a whole value in one go: ``length(range(30000000))`` ran for 61 s at 2.9 GB under a
10 s / 512 MB limit, and ``count(*) FROM (SELECT unnest(range(1000000000)))`` reached 20 GB. So the
`LocalGateway` that does the checking and the running lives in a child process, and this side holds
two hard limits DuckDB cannot be talked out of:

- time: the child's own timer interrupts at ``timeout_s``; if no answer has come ``GRACE_S`` later, the
  child is killed and the query ends with error ``timeout``;
- memory: while a query runs, the child's resident memory is sampled every ``SAMPLE_S``; above its
  idle size plus ``MEMORY_HEADROOM`` times the memory limit, the child is killed and the query ends
  with error ``memory``.

What crosses back is bounded too: the child refuses a result over ``max_result_bytes``
(`game.query.limits.MAX_RESULT_BYTES`, measured as it fetches), and this side reads at most that plus
``MESSAGE_SLACK_BYTES`` (and the query's own text, which the result repeats) of any answer: a longer
one is not read at all, the child is killed and the query ends with error ``internal``.

A killed child is replaced on the next call. The API is `LocalGateway`'s: `run` never raises for player
input, `cancel` is safe from any thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from game.query.gateway import CatalogEntry, LocalGateway, QueryResult, check_limits
from game.query.limits import MAX_RESULT_BYTES, MEMORY_LIMIT, ROW_CAP, TIMEOUT_S

GRACE_S = 1.0
"""Seconds past the time limit the child gets to answer after its own interrupt."""
SAMPLE_S = 0.02
"""Seconds between two looks at the child's memory while a query runs."""
MEMORY_HEADROOM = 1.5
"""The child may grow this many memory limits above its idle size before it is killed."""
START_TIMEOUT_S = 60.0
MESSAGE_SLACK_BYTES = 1024 * 1024
"""Bytes an answer may take beyond its rows, names and types (`max_result_bytes`) and its SQL text: the
error detail, what the query read (a plan's tables, columns and filters), the pickling's own framing."""
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}


def memory_bytes(limit: str) -> int:
    """DuckDB's memory-limit spelling ("512MB", "1GiB") in bytes."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", limit)
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"cannot read memory limit {limit!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _resident(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _serve(conn: Connection, db_paths: dict[str, str], options: dict[str, Any]) -> None:
    """The child: one LocalGateway per database; queries run on a thread so that a cancel can reach
    them meanwhile."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is the parent's to handle
    gateways: dict[str, LocalGateway] = {}
    try:
        for name, path in db_paths.items():
            gateways[name] = LocalGateway(Path(path), **options)
    except Exception as exc:
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    current = [next(iter(gateways.values()))]
    send_lock = threading.Lock()

    def reply(message: tuple[Any, ...]) -> None:
        with send_lock:
            conn.send(message)

    reply(("ready", None))

    def run(name: str, sql: str) -> None:
        current[0] = gateways[name]
        reply(("result", gateways[name].run(sql)))

    while True:
        try:
            op, arg = conn.recv()
        except (EOFError, OSError):
            break
        if op == "run":
            threading.Thread(target=run, args=arg, daemon=True).start()
        elif op == "cancel":
            current[0].cancel()
        elif op == "catalog":
            try:
                reply(("catalog", gateways[arg].catalog()))
            except Exception as exc:
                reply(("failed", str(exc)))
        elif op == "close":
            break
    for gateway in gateways.values():
        gateway.close()


class ForkedWorker:
    """A query worker forked by `prefork`, as much of `subprocess.Popen` as `Sandbox` uses: `pid`, `poll`,
    `kill` and `wait`. It is this process's child, so the exit status is ours to collect."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # collected elsewhere: gone all the same
                    self.returncode = -1
                else:
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def kill(self) -> None:
        # never signal a collected pid: the number may belong to another process by now
        with self._lock:
            if self.returncode is None:
                os.kill(self.pid, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"query worker {self.pid}", timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code


_seed_lock = threading.Lock()
_seed: tuple[int, ForkedWorker, Connection] | None = None
"""The worker `prefork` left ready: (the process it was forked for, the worker, our end of its socket)."""


def prefork() -> bool:
    """Fork a query worker now, for this process's first `Sandbox` to use: it skips an interpreter's start
    and the imports (about 0.2 s of CPU), which matters when thirty players open a game at once.

    Call it only while this process has one thread (a fork copies no other thread, and any lock another
    held would stay held in the child) and holds nothing a player's query must not reach: the served
    game's warm spare calls it before it learns which tab it will run. The worker is a session of its own
    with no descriptor but its socket (stdio on /dev/null); it ends when that socket closes or this process
    dies (telemetry_gen.lifeline). True if a worker was forked."""
    global _seed
    if threading.active_count() != 1:
        return False
    try:
        ours, theirs = socket.socketpair()
    except OSError:
        return False
    try:
        pid = os.fork()
    except OSError:  # out of processes or memory: the first Sandbox starts its worker the usual way
        ours.close()
        theirs.close()
        return False
    if pid == 0:  # the worker: never returns into the caller's frames
        code = 1
        try:
            ours.close()
            code = _seed_main(theirs.detach())
        finally:
            os._exit(code)
    theirs.close()
    with _seed_lock:
        if _seed is not None:
            _reap(_seed[1], _seed[2])
        _seed = (os.getpid(), ForkedWorker(pid), Connection(ours.detach()))
    return True


def _seed_main(fd: int) -> int:
    """The forked worker: wait for its databases and limits, then serve as a started one does."""
    os.setsid()  # as start_new_session: a Ctrl-C or a killed process group of the parent is the parent's
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.closerange(3, fd)
    os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
    from telemetry_gen.lifeline import watch_parent

    watch_parent()
    conn = Connection(fd)
    try:
        db_paths, options = conn.recv()
    except (EOFError, OSError):
        return 0  # its process ended without a query: nothing to do
    _serve(conn, db_paths, options)
    return 0


def _take_seed() -> tuple[ForkedWorker, Connection] | None:
    """The worker `prefork` left, once; None if there is none or it was forked for another process."""
    global _seed
    with _seed_lock:
        seed, _seed = _seed, None
    if seed is None:
        return None
    owner, proc, conn = seed
    if owner != os.getpid() or proc.poll() is not None:
        if owner == os.getpid():
            conn.close()
        return None
    return proc, conn


def _reap(proc: subprocess.Popen[bytes] | ForkedWorker, conn: Connection) -> None:
    with contextlib.suppress(OSError):
        conn.close()
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        proc.wait(5)


class Sandbox:
    """Read-only, time- and memory-limited access to named databases, in one killable child process.

    `run(sql, db)` runs on database `db` (a key of `db_paths`), one query at a time. `row_cap` is in
    rows, `timeout_s` in seconds, `memory_limit` a DuckDB size string ("512MB"); the defaults are the
    player's limits (game.query.limits). Construction raises for programmer errors (missing file, bad limits);
    `run` never raises."""

    def __init__(self, db_paths: dict[str, Path], *, memory_limit: str = MEMORY_LIMIT, threads: int = 1,
                 row_cap: int = ROW_CAP, timeout_s: float = TIMEOUT_S,
                 max_result_bytes: int = MAX_RESULT_BYTES) -> None:
        check_limits(row_cap=row_cap, timeout_s=timeout_s, threads=threads, max_result_bytes=max_result_bytes)
        if not db_paths:
            raise ValueError("a sandbox needs at least one database")
        self.db_paths = {name: Path(p) for name, p in db_paths.items()}
        for path in self.db_paths.values():
            if not path.is_file():
                raise FileNotFoundError(f"incident database not found: {path}")
        self.db_path = next(iter(self.db_paths.values()))
        self._default = next(iter(self.db_paths))
        self.memory_limit = memory_limit
        self.memory_cap = int(MEMORY_HEADROOM * memory_bytes(memory_limit))
        self.threads = threads
        self.row_cap = row_cap
        self.timeout_s = timeout_s
        self.max_result_bytes = max_result_bytes
        self._options = {"memory_limit": memory_limit, "threads": threads, "row_cap": row_cap,
                         "timeout_s": timeout_s, "max_result_bytes": max_result_bytes}
        self._query_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._proc: Any = None
        self._conn: Connection | None = None
        self._idle_rss = 0
        self._busy = False
        self._cancel_requested = False
        self._closed = False
        self._finalizer: weakref.finalize[Any, Sandbox] | None = None
        self._start()

    # -- the child ---------------------------------------------------------------------------

    def _start(self) -> None:
        # one retry: on a loaded machine a fresh interpreter occasionally fails to come up
        try:
            self._start_once()
        except RuntimeError:
            self._start_once()

    def _start_once(self) -> None:
        paths = {name: str(p) for name, p in self.db_paths.items()}
        seed = _take_seed()
        errors = None
        proc: subprocess.Popen[bytes] | ForkedWorker
        if seed is not None:
            # a worker forked ahead (`prefork`): it has imported all it needs, so it only opens the databases
            proc, parent = seed
            try:
                parent.send((paths, self._options))
            except OSError:
                _reap(proc, parent)  # it died waiting: start one the usual way
                seed = None
        if seed is None:
            # a fresh interpreter (not multiprocessing's spawn, which re-imports the caller's main module),
            # talking over a socket pair with pickled messages; its stderr is kept to explain a failed start
            ours, theirs = socket.socketpair()
            errors = tempfile.TemporaryFile()  # noqa: SIM115 - closed on both paths below
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "game.query.sandbox", str(theirs.fileno()), json.dumps(paths),
                     json.dumps(self._options)],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stderr=errors, start_new_session=True,
                )
            finally:
                theirs.close()
            parent = Connection(ours.detach())
        ready = False
        try:
            if parent.poll(START_TIMEOUT_S):
                status, detail = parent.recv()
                ready = status == "ready"
            else:
                detail = "no answer"
        except (EOFError, OSError) as exc:
            detail = f"it exited ({exc or proc.poll()})"
        if not ready:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            parent.close()
            tail: list[str] = []
            if errors is not None:
                errors.seek(0)
                tail = errors.read()[-2000:].decode("utf-8", "replace").strip().splitlines()
                errors.close()
            why = f"{detail}: {tail[-1]}" if tail else detail
            raise RuntimeError(f"the query process for {self.db_path} did not start: {why}")
        if errors is not None:
            errors.close()
        self._proc, self._conn = proc, parent
        self._idle_rss = _resident(proc.pid) or 0
        # a sandbox dropped without close() must not leave its worker behind
        self._finalizer = weakref.finalize(self, _reap, proc, parent)

    def _kill(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        if conn is not None:
            conn.close()

    def _ensure(self) -> Connection:
        if self._conn is None or self._proc is None or self._proc.poll() is not None:
            self._kill()
            self._start()
        assert self._conn is not None
        return self._conn

    def _send(self, message: tuple[str, Any]) -> None:
        with self._send_lock:
            if self._conn is not None:
                self._conn.send(message)

    # -- public API --------------------------------------------------------------------------

    def run(self, sql: str, db: str | None = None) -> QueryResult:
        """Run one player query on database `db` (default: the first). Never raises for player input;
        see `QueryResult` for the outcome."""
        started_at = time.time()
        with self._query_lock:
            t0 = time.perf_counter()
            result = self._run_locked(sql, self._default if db is None else db)
            result.started_at = started_at
            result.duration_s = time.perf_counter() - t0
            return result

    def _run_locked(self, sql: str, db: str) -> QueryResult:
        if self._closed:
            return QueryResult(sql, ok=False, error="the query gateway is closed", error_kind="internal")
        if not isinstance(sql, str):
            return QueryResult(str(sql), ok=False, error="a query must be text", error_kind="refused")
        try:
            conn = self._ensure()
            self._busy = True
            if db not in self.db_paths:
                raise ValueError(f"no database {db!r}")
            self._send(("run", (db, sql)))
        except (OSError, RuntimeError, ValueError) as exc:
            self._busy = False
            self._kill()
            return QueryResult(sql, ok=False, error=f"the query process failed: {exc}", error_kind="internal")
        deadline = time.monotonic() + self.timeout_s + GRACE_S
        cap = self._idle_rss + self.memory_cap
        # the result repeats the SQL (and what it read is derived from it): room for that on top
        longest = self.max_result_bytes + MESSAGE_SLACK_BYTES + 8 * len(sql.encode("utf-8", "replace"))
        resend = 0.0
        try:
            while True:
                if self._cancel_requested and time.monotonic() > resend:
                    # repeated until the answer comes: a cancel that reached the child before its query
                    # started running had nothing to stop
                    with contextlib.suppress(OSError, ValueError):
                        self._send(("cancel", None))
                    resend = time.monotonic() + 0.1
                try:
                    if conn.poll(SAMPLE_S):
                        # a longer answer is not read at all (OSError "bad message length")
                        status, payload = pickle.loads(conn.recv_bytes(longest))
                        if status == "result":
                            return payload
                        continue
                except EOFError:
                    self._kill()
                    return QueryResult(sql, ok=False, error="the query process died", error_kind="internal")
                except OSError as exc:
                    self._kill()
                    if "message length" in str(exc):
                        return QueryResult(sql, ok=False, error_kind="internal",
                                           error=f"the query process sent back more than {longest} bytes; "
                                           "it was stopped (select fewer or narrower columns)")
                    return QueryResult(sql, ok=False, error="the query process died", error_kind="internal")
                rss = _resident(self._proc.pid) if self._proc is not None else None
                if rss is not None and rss > cap:
                    self._kill()
                    return QueryResult(sql, ok=False, error_kind="memory",
                                       error=f"query needs more memory than the {self.memory_limit} limit; "
                                       "aggregate or filter first")
                if time.monotonic() > deadline:
                    self._kill()
                    return QueryResult(sql, ok=False, error_kind="timeout",
                                       error=f"stopped after {self.timeout_s:.1f} s (time limit)")
        finally:
            self._busy = False
            self._cancel_requested = False

    @property
    def busy(self) -> bool:
        """Whether a query is running."""
        return self._busy

    def cancel(self) -> bool:
        """Interrupt the running query, if any; it ends with error "cancelled". Safe from any thread.

        Returns True when a query was running and has been told to stop."""
        if not self._busy:
            return False
        self._cancel_requested = True
        return True

    def catalog(self) -> list[CatalogEntry]:
        """Tables and columns with descriptions (see `LocalGateway.catalog`). Raises RuntimeError once
        closed."""
        with self._query_lock:
            if self._closed:
                raise RuntimeError("the query gateway is closed")
            conn = self._ensure()
            self._send(("catalog", self._default))
            if not conn.poll(START_TIMEOUT_S):
                self._kill()
                raise RuntimeError("the query process did not answer")
            status, payload = conn.recv()
            if status != "catalog":
                raise RuntimeError(str(payload))
            return payload

    def close(self) -> None:
        """Stop any running query and the child process. Idempotent; safe from any thread."""
        self.cancel()
        with self._query_lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(OSError, ValueError):
                self._send(("close", None))
            proc = self._proc
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(2)
            self._kill()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Gateway(Sandbox):
    """The player's gateway: a `Sandbox` on one incident database (`LocalGateway`'s API)."""

    def __init__(self, db_path: Path, *, memory_limit: str = MEMORY_LIMIT, threads: int = 1,
                 row_cap: int = ROW_CAP, timeout_s: float = TIMEOUT_S,
                 max_result_bytes: int = MAX_RESULT_BYTES) -> None:
        super().__init__({"": Path(db_path)}, memory_limit=memory_limit, threads=threads, row_cap=row_cap,
                         timeout_s=timeout_s, max_result_bytes=max_result_bytes)

    def run(self, sql: str, db: str | None = None) -> QueryResult:
        return super().run(sql, db)

    def __enter__(self) -> Gateway:
        return self


def main(argv: list[str]) -> int:
    """`python -m game.query.sandbox FD DB_PATHS_JSON OPTIONS_JSON`: the child side (see `Sandbox._start`)."""
    fd, db_paths, options = int(argv[0]), json.loads(argv[1]), json.loads(argv[2])
    _serve(Connection(fd), db_paths, options)
    return 0


if __name__ == "__main__":
    from telemetry_gen.lifeline import watch_parent

    watch_parent()  # a game killed mid-query takes its SQL worker with it
    raise SystemExit(main(sys.argv[1:]))
