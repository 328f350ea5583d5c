"""Warm app processes for `servedrill serve` (`--warm N`): a tab's app starts in a process that has already
imported the game, instead of a fresh interpreter.

Cold, every tab runs `python -m tui.cli play ...` from scratch: about 0.7 s of CPU importing Textual, the
game, DuckDB and numpy before it draws anything, and 30 players opening their links at once on 2 cores
queue behind each other's imports. Warm, the server keeps one *template* process (`python -m
tui.serve_warm`, started when the server starts, at the apps' niceness) that imports all of that once and
then only forks. Each fork is a *warm process*: it shares the template's memory copy-on-write, leads a
process group (a session) of its own as a cold app does, and waits on its stdin for its tab. The server
keeps `size` of them ready (the pool; a fork takes milliseconds, so the template forks another the moment
one is taken, and forks on demand when a burst empties the pool). A tab takes one, writes its parameters
(the command's arguments and environment, the working folder) as the first bytes on its stdin, and from
then on the process is that tab's app, spoken to exactly as a cold one (textual-serve's protocol on
stdin/stdout).

What a warm tab does not change: the app is `tui.cli`'s command with the tab's arguments, in the tab's
environment (the terminal size, a game day's seat and key, the data folder), under the same limits (its
pid is the process group the server kills; its memory and CPU are read from /proc as before; it counts
against `--max-sessions` like any tab; spares waiting in the pool are not tabs). A command that is not
`[env NAME=VALUE...] PYTHON -m tui.cli ...` with this interpreter, or an environment that differs from the
template's in a variable read at import time (anything but the terminal size and `SERVEDRILL_*` other than
SERVEDRILL_PURE), starts cold, as without the pool.

Nothing outlives the server: the template exits when its control socket reaches end of file (the server is
gone, however it died) or its parent changes; a spare exits when its stdin (whose other end only the server
holds) reaches end of file; a running warm app watches its parent, the template, as a cold app watches the
server (telemetry_gen.lifeline through `served_app_setup`), so it ends within a second of the server.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import shlex
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn

log = logging.getLogger("servedrill.serve")

PRELOAD = ("tui.cli", "tui.app", "textual.drivers.web_driver", "game.session", "game.rules.assess",
           "game.gameday.collect", "game.query.sandbox", "telemetry_gen.cache", "telemetry_gen.proving.worlds",
           "incidents.mitigation", "tree_sitter_sql", "textual.layouts.factory", "textual.layouts.horizontal",
           "textual.layouts.stream")
"""What the template imports before it forks: what a tab's app imports on its way from the picker to the
workspace (measured: about 440 modules, pandas among them), besides every module of `tui` itself
(`preload`)."""
PRIME = ("tui.widgets.sql_editor",)
"""Modules whose `prime()` the template calls once it has imported everything: work every tab's app would
otherwise repeat on its way to the workspace, done once before the fork (each says what it prepares)."""
NOT_PRELOADED = ("tui.serve", "tui.bench")
"""Modules of `tui` the template leaves alone: the server's side (aiohttp) and the benchmark."""
ORPHAN_EXIT = 70
"""Exit status of a template or spare whose server is gone (as telemetry_gen.lifeline's)."""
RUNTIME_ENV = ("COLUMNS", "ROWS")
"""Variables a tab's environment may set differently from the template's: read when the app runs, not
when it imports (as is every SERVEDRILL_* but SERVEDRILL_PURE)."""
IMPORT_TIME_ENV = ("SERVEDRILL_PURE",)
HEADER = struct.Struct(">I")
MAX_HEADER = 1 << 20
TEMPLATE_START_S = 120.0
"""How long the template may take to import (a busy machine) before the server gives up on it."""
RESTART_S = 5.0
"""After the template dies, the server starts another this long after (tabs start cold meanwhile)."""
FAILED_STARTS = 3
"""Templates in a row that die before they are ready (an import fails, say) before the server gives up on
the pool: from then on every tab starts cold, as with --warm 0, and the log says why."""


# ---------------------------------------------------------------- which tabs can start warm


@dataclass(frozen=True)
class WarmStart:
    """A tab's app as a warm process runs it: `tui.cli`'s arguments, the whole environment, the folder."""

    argv: list[str]
    env: dict[str, str]
    cwd: str

    def header(self) -> bytes:
        body = json.dumps({"argv": self.argv, "env": self.env, "cwd": self.cwd}).encode()
        return HEADER.pack(len(body)) + body


def warm_start(command: str, environment: dict[str, str], template_env: dict[str, str],
               python: str = sys.executable) -> WarmStart | None:
    """How a warm process runs `command` (a tab's shell command, as `tui.serve.app_command` or a game day's
    gate writes it) in `environment`; None when it must start cold: another shape of command, another
    interpreter, or a variable read at import time that differs from the template's `template_env`."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:1] == ["exec"]:
        words = words[1:]
    env = dict(environment)
    if words[:1] == ["env"]:
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith("-"):
            name, _, value = words.pop(0).partition("=")
            if not name.replace("_", "").isalnum():
                return None
            env[name] = value
    if words[:3] != [python, "-m", "tui.cli"]:
        return None
    for name in set(env) | set(template_env):
        runtime = name in RUNTIME_ENV or (name.startswith("SERVEDRILL_") and name not in IMPORT_TIME_ENV)
        if not runtime and env.get(name) != template_env.get(name):
            return None
    return WarmStart(words[3:], env, os.getcwd())


# ---------------------------------------------------------------- the template process (python -m tui.serve_warm)


def _send(control: socket.socket, message: dict[str, Any]) -> None:
    """Tell the server `message`; a template whose server is gone (it closed the socket: a port that was
    taken, say, while the template was still importing) exits quietly, as on end of file."""
    try:
        control.send(json.dumps(message).encode())
    except OSError:
        os._exit(ORPHAN_EXIT)


def preload() -> list[str]:
    """Import PRELOAD and every module of `tui` but NOT_PRELOADED, then prime what PRIME names; returns the
    names imported."""
    import importlib
    import pkgutil

    import tui

    names = list(PRELOAD) + [info.name for info in pkgutil.walk_packages(tui.__path__, "tui.")
                             if not info.name.startswith(NOT_PRELOADED)]
    for name in names:
        importlib.import_module(name)
    for name in PRIME:
        importlib.import_module(name).prime()
    return names


def template_main(control_fd: int, nice: int) -> None:
    """Import what every app imports, then fork a spare for every request on `control_fd` (a SEQPACKET
    socket to the server carrying the spare's stdin, stdout and stderr) and report each child's exit."""
    import gc
    import select

    with contextlib.suppress(OSError):
        if nice > os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    control = socket.socket(fileno=control_fd)
    parent = os.getppid()
    preload()
    gc.collect()
    gc.freeze()  # the imported objects stay out of every child's collections: fewer copied pages
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _send(control, {"ready": os.getpid(), "threads": len(os.listdir("/proc/self/task"))})
    while True:
        readable, _, _ = select.select([control.fileno(), wake_r], [], [], 0.5)
        if os.getppid() != parent:
            os._exit(ORPHAN_EXIT)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send(control, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})
        if control.fileno() in readable:
            try:
                message, fds, _, _ = socket.recv_fds(control, 4096, 3)
            except OSError:
                os._exit(ORPHAN_EXIT)
            if not message:
                os._exit(0)  # the server is gone (or closed the pool)
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _spare(fds, closing=(control.detach(), wake_r, wake_w))  # detached: closed once, here
            for fd in fds:
                os.close(fd)
            _send(control, {"forked": pid, "id": json.loads(message).get("id")})


def _read_exactly(fd: int, size: int) -> bytes | None:
    out = b""
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def _spare(fds: list[int], closing: tuple[int, ...]) -> NoReturn:
    """A forked spare: wait on stdin for the tab's header, then run `tui.cli` as the tab's app. Never returns:
    it exits at once when it gets no tab, else the app's SystemExit (or exception) leaves through the
    template's frames and the interpreter's own shutdown, as a cold app's does (non-daemon threads joined,
    atexit handlers and weakref finalizers run, buffers flushed)."""
    try:
        os.setsid()  # a process group of its own, as a cold app's start_new_session
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        template = os.getppid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in {*fds, *closing} - {0, 1, 2}:
            with contextlib.suppress(OSError):
                os.close(fd)
        from game.api import prefork_query_worker

        # the tab's SQL worker, forked while this process has one thread and has not yet heard its tab
        prefork_query_worker()
        size = _read_exactly(0, HEADER.size)
        if size is None:
            os._exit(0)  # the server closed the pool, or is gone
        (length,) = HEADER.unpack(size)
        body = _read_exactly(0, length) if length <= MAX_HEADER else None
        if body is None or os.getppid() != template:
            os._exit(ORPHAN_EXIT)
        tab = json.loads(body)
        os.environ.clear()
        os.environ.update(tab["env"])
        os.chdir(tab["cwd"])
    except BaseException:  # no tab to run: nothing of an app to clean up
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(1)
    import gc

    import tui.cli

    # a young generation of 10,000 objects rather than 700: an app's start allocates in bursts that
    # mostly live on as widgets, and collecting them as they come cost about a tenth of its CPU (measured
    # from the picker to the workspace: 0.38-0.41 s against 0.33-0.35 s), which thirty tabs at once feel
    gc.set_threshold(10_000, 10, 10)
    sys.argv = [tui.cli.__file__, *tab["argv"]]
    tui.cli.main(args=tab["argv"], prog_name="python -m tui.cli")  # standalone: ends in SystemExit
    raise SystemExit(0)


# ---------------------------------------------------------------- the server's side


class WarmProcess:
    """A spare forked by the template, as much of `asyncio.subprocess.Process` as the server uses: `pid`,
    `returncode` (reported by the template), `stdin`, `stdout`, `stderr` and `wait()`."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._exited = asyncio.Event()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def _ended(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self._exited.set()
            self.stdin.close()


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**16, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0))
    return reader


async def _pipe_writer(fd: int) -> asyncio.StreamWriter:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(fd, "wb", 0))
    return asyncio.StreamWriter(transport, protocol, None, loop)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


class WarmPool:
    """The template process and `size` spares it forked, kept full in the background. `take` gives a
    tab's app a warm process (None: start it cold)."""

    def __init__(self, size: int, environment: dict[str, str], *, nice: int = 0,
                 python: str = sys.executable) -> None:
        self.size = size
        self.environment = environment
        self.nice = nice
        self.python = python
        self.spares: collections.deque[WarmProcess] = collections.deque()
        self.template: asyncio.subprocess.Process | None = None
        self.template_pid: int | None = None
        self.taken = 0
        self._control: socket.socket | None = None
        self._ready = False
        self._closing = False
        self._live: dict[int, WarmProcess] = {}
        self._early_exits: dict[int, int] = {}
        self._forks: dict[int, asyncio.Future[int]] = {}
        self._next_id = 0
        self._fork_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refilling: asyncio.Task[None] | None = None
        self._ready_event = asyncio.Event()

    @property
    def ready(self) -> bool:
        return self._ready

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def start(self) -> None:
        """Start the template in the background (tabs start cold until it has imported)."""
        self._spawn(self._run_template())

    async def wait_ready(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready_event.wait(), timeout)
        return self._ready

    async def _run_template(self) -> None:
        failed = 0
        while not self._closing:
            started = time.monotonic()
            self.template_pid = None
            try:
                await self._template_once()
            except Exception as error:  # one line; tabs start cold meanwhile
                log.error("warm pool: %s: %s", type(error).__name__, error)
            if self._closing:
                return
            failed = 0 if self.template_pid is not None else failed + 1
            if failed >= FAILED_STARTS:
                log.error("warm pool: the template process failed to start %d times in a row; every tab starts "
                          "cold from now on", failed)
                return
            await asyncio.sleep(max(0.0, RESTART_S - (time.monotonic() - started)))

    async def _template_once(self) -> None:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)
        try:
            self.template = process = await asyncio.create_subprocess_exec(
                self.python, "-m", "tui.serve_warm", str(theirs.fileno()), str(self.nice),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                env=self.environment, start_new_session=True)
        finally:
            theirs.close()
        self._control = ours
        try:
            first = await asyncio.wait_for(loop.sock_recv(ours, 4096), TEMPLATE_START_S)
            if not first:
                raise RuntimeError(f"the template process exited ({await process.wait()}) before it was ready")
            self.template_pid = json.loads(first)["ready"]
            self._ready = True
            self._ready_event.set()
            log.info("warm pool: template %d ready (%d threads)", process.pid, json.loads(first).get("threads", 0))
            self._refill()
            while message := await loop.sock_recv(ours, 4096):
                self._on_message(json.loads(message))
            if not self._closing:
                log.error("warm pool: the template process ended (%s); tabs start cold until it is back",
                          process.returncode)
        finally:
            self._ready = False
            self._ready_event.clear()
            self._control = None
            ours.close()
            for future in self._forks.values():
                if not future.done():
                    future.set_exception(RuntimeError("the template process ended"))
            self._forks.clear()
            for spare in self.spares:
                spare.stdin.close()
            self.spares.clear()
            if self._live:
                self._spawn(self._watch_orphans(dict(self._live)))
                self._live.clear()
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 5.0)

    async def _watch_orphans(self, live: dict[int, WarmProcess]) -> None:
        """Without the template to report their exits, watch /proc for warm apps still running (they end
        within a second of the template: their lifeline)."""
        while live:
            await asyncio.sleep(0.2)
            for pid in [pid for pid in live if _gone(pid)]:
                live.pop(pid)._ended(ORPHAN_EXIT)

    def _on_message(self, message: dict[str, Any]) -> None:
        if "forked" in message:
            future = self._forks.pop(int(message.get("id", -1)), None)
            if future is not None and not future.done():
                future.set_result(int(message["forked"]))
        elif "exit" in message:
            pid, code = int(message["exit"]), int(message["code"])
            process = self._live.pop(pid, None)
            if process is not None:
                process._ended(code)
            else:  # reported before the fork's own answer was handled
                self._early_exits[pid] = code

    async def _fork(self) -> WarmProcess | None:
        """A new spare from the template (None when there is no template)."""
        control = self._control
        if control is None or not self._ready:
            return None
        loop = asyncio.get_running_loop()
        pipes = [os.pipe() for _ in range(3)]  # (read, write) each, not inherited by other children
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        async with self._fork_lock:
            self._next_id += 1
            request = self._next_id
            future: asyncio.Future[int] = loop.create_future()
            self._forks[request] = future
            try:
                socket.send_fds(control, [json.dumps({"id": request}).encode()], theirs)
            except OSError:
                self._forks.pop(request, None)
                for fd in theirs + ours:
                    os.close(fd)
                return None
            finally:
                if self._forks.get(request) is future:
                    for fd in theirs:
                        os.close(fd)
        try:
            pid = await asyncio.wait_for(future, 10.0)
        except (TimeoutError, RuntimeError):
            for fd in ours:
                os.close(fd)
            return None
        process = WarmProcess(pid, await _pipe_writer(ours[0]), await _pipe_reader(ours[1]),
                              await _pipe_reader(ours[2]))
        if pid in self._early_exits:
            process._ended(self._early_exits.pop(pid))
        else:
            self._live[pid] = process
        return process

    def _refill(self) -> None:
        if self._refilling is None or self._refilling.done():
            self._refilling = self._spawn(self._fill())

    async def _fill(self) -> None:
        while not self._closing and self._ready and len(self.spares) < self.size:
            process = await self._fork()
            if process is None:
                return
            self.spares.append(process)

    async def take(self, start: WarmStart) -> WarmProcess | None:
        """A warm process running `start` (a spare, or a fresh fork when none is left); None when the pool
        cannot give one (no template yet): start the app cold."""
        process = None
        while self.spares and process is None:
            spare = self.spares.popleft()
            process = spare if spare.returncode is None else None
        if process is None:
            process = await self._fork()
        self._refill()
        if process is None:
            return None
        process.stdin.write(start.header())
        try:
            await process.stdin.drain()
        except (ConnectionError, RuntimeError):
            return None
        self.taken += 1
        return process

    async def close(self) -> None:
        """Stop the template and the spares (running warm apps are the tabs': their sockets stop them)."""
        self._closing = True
        for spare in self.spares:
            spare.stdin.close()
        self.spares.clear()
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.shutdown(socket.SHUT_RDWR)
        template = self.template
        if template is not None and template.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(template.wait(), 2.0)
            with contextlib.suppress(ProcessLookupError):
                template.kill()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


if __name__ == "__main__":
    template_main(int(sys.argv[1]), int(sys.argv[2]))
