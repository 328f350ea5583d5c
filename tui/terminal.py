"""Noticing that the terminal went away, so the game saves and exits instead of spinning.

A closed terminal (a tmux session killed, an ssh connection dropped, the browser tab's server gone) does
not always send SIGHUP to the game: under `make play` the hangup goes to make, which waits for its child.
Textual's input thread then reads end-of-file from the hung-up terminal in a tight loop, forever, at full
CPU. `TerminalWatch` polls the app's standard input and output for a hangup or an error (poll() reports
POLLHUP/POLLERR/POLLNVAL whatever it was asked for, and reading nothing from the descriptor, so it takes no
keys from the app), and calls `on_gone` once from its thread. The app also treats SIGHUP (and SIGTERM)
the same way (see `ServedrillApp.terminal_gone`).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from collections.abc import Callable

POLL_MS = 200
"""How often the watch looks: the game exits within about this plus the time to save."""

GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def terminal_fds() -> list[int]:
    """The descriptors the app talks to its terminal through: standard input and output (once each)."""
    fds: list[int] = []
    seen: set[tuple[int, int]] = set()
    for stream in (sys.__stdin__, sys.__stdout__):
        if stream is None:
            continue
        try:
            fd = stream.fileno()
            st = os.fstat(fd)
        except (OSError, ValueError):
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            fds.append(fd)
    return fds


def hung_up(fds: list[int], timeout_ms: int = 0) -> str | None:
    """"hangup" or "error" when one of `fds` reports it within `timeout_ms`, else None."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, 0)  # no events asked for: only hangup, error and invalid are reported
    for _fd, mask in poller.poll(timeout_ms):
        if mask & GONE:
            return "hangup" if mask & select.POLLHUP else "error"
    return None


class TerminalWatch:
    """Calls `on_gone(reason)` once, from a daemon thread, when the terminal hangs up or errors."""

    def __init__(self, on_gone: Callable[[str], None], fds: list[int] | None = None) -> None:
        self.on_gone = on_gone
        self.fds = terminal_fds() if fds is None else fds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="servedrill-terminal-watch", daemon=True)

    def start(self) -> None:
        if self.fds:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                reason = hung_up(self.fds, POLL_MS)
            except OSError:
                reason = "error"
            if reason is not None and not self._stop.is_set():
                with contextlib.suppress(Exception):
                    self.on_gone(reason)
                return
