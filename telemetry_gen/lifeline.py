"""A child process that ends when its parent does: no SQL worker, world build or proof worker outlives
the game or the validation that started it, whatever killed the parent (kill -9 included).

The child calls `watch_parent()` first thing (its `main`, or a pool's initializer). A daemon thread then
checks, every `POLL_S` seconds, whether the child has been re-parented (its parent process id is no longer
the one it started with) and exits the process at once if so. Polling rather than Linux's
PR_SET_PDEATHSIG: that signal fires when the parent *thread* that started the child exits, and the game
starts its children from short-lived worker threads; it needs a preexec_fn too, which can deadlock a
threaded parent. The cost is one `getppid` call per POLL_S; a child outlives its parent by at most that.
"""

from __future__ import annotations

import os
import threading
import time

POLL_S = 0.5
"""Seconds between two checks of the parent: the longest a child runs on after its parent died."""
ORPHAN_EXIT = 70
"""Exit status of a child that stopped because its parent was gone (EX_SOFTWARE, for the logs)."""

_watching: int | None = None
"""The process whose parent the lifeline thread watches: a fork of it copies this but not the thread."""


def watch_parent(parent_pid: int | None = None) -> None:
    """Exit this process when its parent (`parent_pid`, default: the current parent) is gone. Idempotent:
    a second call in the same process does nothing."""
    global _watching
    if _watching == os.getpid():
        return
    _watching = os.getpid()
    parent = os.getppid() if parent_pid is None else parent_pid
    if os.getppid() != parent:
        os._exit(ORPHAN_EXIT)

    def watch() -> None:
        while True:
            time.sleep(POLL_S)
            if os.getppid() != parent:
                # no cleanup: the parent that would read our results is gone, and a database counts as
                # built only once its metadata is renamed into place (telemetry_gen.cache): none is torn
                os._exit(ORPHAN_EXIT)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()
