"""One browser tab of `servedrill serve`, held to `tui.serve_limits.Limits`: its websocket (message size,
rate, terminal size, idle and total time) and its app process (own process group, watched memory and
CPU, killed when the socket closes). textual-serve's `AppService` runs the app and speaks its
protocol; `BoundedAppService` changes how the process starts and stops, and `run_tab` replaces
textual-serve's message loop (`Server._process_messages`), which trusted every message it read."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import signal
import time
from asyncio.subprocess import Process
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from tui.serve_limits import (
    CLOSE_APP_CPU,
    CLOSE_APP_CPU_RATE,
    CLOSE_APP_ENDED,
    CLOSE_APP_MEMORY,
    CLOSE_IDLE,
    CLOSE_SESSION_TIME,
    CLOSE_TOO_FAST,
    SERVED_APP_ENV,
    Limits,
    TokenBucket,
    cpu_seconds,
    input_events,
    rss_bytes,
    size_from_message,
    size_from_query,
)

if TYPE_CHECKING:
    from tui.serve_warm import WarmPool, WarmProcess

log = logging.getLogger("servedrill.serve")


def app_environment(width: int = 80, height: int = 24) -> dict[str, str]:
    """The environment of a tab's app: textual-serve's (the server's own, Textual's web driver settings and
    the terminal size) with SERVED_APP_ENV set."""
    from types import SimpleNamespace

    environment = AppService._build_environment(SimpleNamespace(debug=False), width, height)  # type: ignore[arg-type]
    environment[SERVED_APP_ENV] = "1"
    return environment


class BoundedAppService(AppService):
    """textual-serve's app service, with the app in a process group of its own (so the whole group can
    be killed), told that `serve` started it (it then watches the server), and a `stop` that takes at
    most `limits.quit_grace_s` before it kills the group. With a `warm` pool (tui.serve_warm), the app
    runs in a warm process when the pool can give one, else it starts cold as without it."""

    def __init__(self, command: str, *, websocket: web.WebSocketResponse, download_manager: DownloadManager,
                 limits: Limits, warm: WarmPool | None = None) -> None:

        async def close() -> None:  # the app said it has exited
            await websocket.close()

        super().__init__(command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                         close=close, download_manager=download_manager)
        self.limits = limits
        self.warm = warm
        self.started_warm = False

    @property
    def process(self) -> Process | WarmProcess | None:
        return self._process

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width, height)
        environment[SERVED_APP_ENV] = "1"
        return environment

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        environment = self._build_environment(width=width, height=height)
        if self.warm is not None and self.warm.ready:
            from tui.serve_warm import warm_start

            start = warm_start(self.command, environment, self.warm.environment, self.warm.python)
            warm = None if start is None else await self.warm.take(start)
            if warm is not None:
                self.started_warm = True
                self._process = warm  # type: ignore[assignment]  # what AppService uses of a Process
                self._stdin = warm.stdin
                return warm  # type: ignore[return-value]
        # as textual-serve does, plus start_new_session: the app leads a process group of its own
        self._process = process = await asyncio.create_subprocess_shell(
            self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=environment, start_new_session=True)
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    def kill(self) -> None:
        """SIGKILL the app's process group (the app and whatever it started that stayed in it)."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

    async def stop(self) -> None:
        """Ask the app to quit; kill its process group if it has not exited within `quit_grace_s`; wait
        for it. Takes at most about quit_grace_s + 1 s, whatever the app is doing."""
        process, task = self._process, self._task
        if process is None or task is None:
            return
        self._task = None
        deadline = time.monotonic() + self.limits.quit_grace_s
        with contextlib.suppress(Exception):
            await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        if process.returncode is None:
            # a busy app does not read its stdin, and the write would wait for it
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send_meta({"type": "quit"}), max(0.01, deadline - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), max(0.01, deadline - time.monotonic()))
        self.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 5.0)
        # the output reader ends at end of file; a child still holding the app's stdout (the SQL worker,
        # which follows its parent within half a second) delays that, so do not wait on it long
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(task, 1.0)


class Tab:
    """A tab's websocket and app: reads the browser's messages within the limits, and watches the app.
    `close_code` and `reason` say why the tab ended (None: the browser closed it)."""

    def __init__(self, websocket: web.WebSocketResponse, service: BoundedAppService, limits: Limits) -> None:
        self.websocket = websocket
        self.service = service
        self.limits = limits
        self.started = self.last_input = time.monotonic()
        self.messages = TokenBucket(limits.message_burst, limits.messages_per_s)
        self.typed = TokenBucket(limits.input_burst, limits.inputs_per_s)
        self.close_code: int | None = None
        self.reason = ""
        self._pending_size: tuple[int, int] | None = None
        self._last_resize = 0.0
        self._resize_task: asyncio.Task[None] | None = None
        self._malformed = 0

    async def end(self, code: int, reason: str, *, kill: bool = False) -> None:
        """End the tab: kill the app first when it broke a limit (it may not be listening), tell the
        player why on their terminal, and close the socket with `code`."""
        if self.close_code is not None:
            return
        self.close_code, self.reason = code, reason
        log.warning("closing a tab: %s", reason)
        if kill:
            self.service.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.websocket.send_bytes(f"\r\n\x1b[0m\r\nservedrill: {reason}\r\n".encode()),
                                   1.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.websocket.close(code=code, message=reason[:120].encode()), 2.0)

    async def read_messages(self) -> None:
        """textual-serve's message loop, bounded: every message spends a token of the message bucket and
        typed text spends input events of the input bucket (running out ends the tab); malformed messages are
        dropped; resizes are clamped and coalesced."""
        async for message in self.websocket:
            if self.close_code is not None:
                break
            if not self.messages.take():
                await self.end(CLOSE_TOO_FAST, f"closed: more than {self.limits.messages_per_s:g} messages a second")
                break
            if message.type != WSMsgType.TEXT:
                continue
            envelope = self._envelope(message.data)
            if envelope is None:
                continue
            kind, data = envelope
            if kind == "stdin" and isinstance(data, str):
                if not self.typed.take(input_events(data)):
                    await self.end(CLOSE_TOO_FAST, f"closed: input faster than {self.limits.inputs_per_s:g} "
                                   f"keys a second")
                    break
                self.last_input = time.monotonic()
                await self.service.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize" and isinstance(data, dict):
                width, height = size_from_message(data.get("width")), size_from_message(data.get("height"))
                if width is None or height is None:
                    self._drop("resize without a numeric width and height")
                    continue
                self.last_input = time.monotonic()
                self._resize(*self.limits.clamp(width, height))
            elif kind == "ping" and isinstance(data, str) and len(data) <= 64:
                await self.websocket.send_json(["pong", data])
            elif kind == "blur":
                await self.service.blur()
            elif kind == "focus":
                await self.service.focus()
            else:
                self._drop(f"message {kind!r} with {type(data).__name__} data")

    def _envelope(self, text: str) -> tuple[str, Any] | None:
        try:
            envelope = json.loads(text)
        except ValueError:
            self._drop("a message that is not JSON")
            return None
        if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
            self._drop("a message that is not [type, data]")
            return None
        return envelope[0], envelope[1] if len(envelope) > 1 else None

    def _drop(self, what: str) -> None:
        self._malformed += 1
        if self._malformed == 1:  # once per tab: the log is not a place a client may fill
            log.warning("dropped %s (further malformed messages from this tab are dropped silently)", what)

    def _resize(self, width: int, height: int) -> None:
        """Apply a resize now, or (within `resize_interval_s` of the last one) remember it and apply the
        latest one when the interval is over."""
        self._pending_size = (width, height)
        if self._resize_task is None or self._resize_task.done():
            self._resize_task = asyncio.create_task(self._apply_resizes())

    async def _apply_resizes(self) -> None:
        while self._pending_size is not None:
            wait = self._last_resize + self.limits.resize_interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            size, self._pending_size = self._pending_size, None
            if size is None:
                return
            self._last_resize = time.monotonic()
            await self.service.set_terminal_size(*size)

    async def watch(self) -> None:
        """Every `watch_interval_s`: end the tab when its app is gone, over its memory or CPU, or the tab
        has been idle or open too long."""
        limits = self.limits
        process = self.service.process
        assert process is not None
        cap = limits.app_rss_mb * 1_000_000
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, process.pid, limits.app_nice)
        samples: collections.deque[tuple[float, float]] = collections.deque()  # (monotonic s, CPU s)
        while self.close_code is None:
            await asyncio.sleep(limits.watch_interval_s)
            now = time.monotonic()
            if process.returncode is not None:
                await self.end(CLOSE_APP_ENDED, "the game has ended")
            elif (rss := rss_bytes(process.pid)) is not None and rss > cap:
                await self.end(CLOSE_APP_MEMORY, f"the game used {rss / 1e6:.0f} MB, over its "
                               f"{limits.app_rss_mb} MB limit, and was stopped", kill=True)
            elif (cpu := cpu_seconds(process.pid)) is not None and cpu > limits.app_cpu_s:
                await self.end(CLOSE_APP_CPU, f"the game used {cpu:.0f} s of CPU, over its "
                               f"{limits.app_cpu_s:g} s limit, and was stopped", kill=True)
            elif cpu is not None and (share := _window_share(samples, now, cpu, limits.app_cpu_window_s)) \
                    is not None and share > limits.app_cpu_share:
                await self.end(CLOSE_APP_CPU_RATE, f"the game kept {share:.0%} of a core busy for "
                               f"{limits.app_cpu_window_s:g} s, over its {limits.app_cpu_share:.0%} limit, "
                               f"and was stopped", kill=True)
            elif now - self.last_input > limits.idle_s:
                await self.end(CLOSE_IDLE, f"closed after {limits.idle_s:g} s without input; the session is "
                               f"saved (servedrill resume)")
            elif now - self.started > limits.session_s:
                await self.end(CLOSE_SESSION_TIME, f"closed: a tab may stay open {limits.session_s:g} s; the "
                               f"session is saved (servedrill resume)")

    async def close(self) -> None:
        if self._resize_task is not None:
            self._resize_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._resize_task


def _window_share(samples: collections.deque[tuple[float, float]], now: float, cpu: float,
                  window_s: float) -> float | None:
    """Add the sample (now, cpu) and return the share of a core used over the last `window_s` seconds, or
    None until a whole window has been seen. Samples older than the window are dropped, but one: the
    sample at or just before the window's start is the baseline."""
    samples.append((now, cpu))
    while len(samples) > 1 and samples[1][0] <= now - window_s:
        samples.popleft()
    start, base = samples[0]
    if now - start < window_s:
        return None
    return (cpu - base) / (now - start)


async def run_tab(request: web.Request, command: str, download_manager: DownloadManager,
                  limits: Limits, warm: WarmPool | None = None) -> web.WebSocketResponse:
    """Serve one tab's websocket: start its app at the (clamped) size the URL asks for (in a process of
    the `warm` pool when it has one), pass messages both ways within `limits`, and stop the app (within
    `quit_grace_s`) when the socket closes."""
    websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=limits.max_message_bytes)
    width, height = limits.clamp(size_from_query(request.query.get("width"), 80),
                                 size_from_query(request.query.get("height"), 24))
    await websocket.prepare(request)
    service = BoundedAppService(command, websocket=websocket, download_manager=download_manager, limits=limits,
                                warm=warm)
    tab = Tab(websocket, service, limits)
    watcher: asyncio.Task[None] | None = None
    try:
        await service.start(width, height)
        watcher = asyncio.create_task(tab.watch())
        await tab.read_messages()
    except Exception as error:  # one line in the server's log; the tab ends as below
        log.error("tab failed: %s: %s", type(error).__name__, error)
    finally:
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher
        await tab.close()
        await service.stop()
        if not websocket.closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(websocket.close(code=tab.close_code or CLOSE_APP_ENDED), 2.0)
    return websocket
