"""Shared helpers for the `servedrill serve` tests (no tests here): a free loopback port, a
`servedrill serve` subprocess started on it and stopped again, and the processes under it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"servedrill serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"servedrill serve did not listen on {port} within {timeout:.0f} s")


@contextmanager
def serving(args: Sequence[str], log: Path) -> Iterator[int]:
    """`servedrill serve ARGS` on a free loopback port, with this process's environment (so the test's
    SERVEDRILL_DATA and SERVEDRILL_CACHE); yields the port, then SIGTERMs the server and waits."""
    port = free_port()
    with serving_process(args, log, port=port):
        yield port


@contextmanager
def serving_process(args: Sequence[str], log: Path, *, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`servedrill serve ARGS` on `port` (a test that hands out links first picks it with `free_port`), as
    `serving`; yields the server's process once it listens."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "serve", "--port", str(port), *args],
                                cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc)
        yield proc
    finally:
        stop(proc)


def live_children() -> dict[int, list[int]]:
    """Every live process's children (zombies left out), parent pid -> child pids, read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in "ZX":
                parents.setdefault(int(fields[1]), []).append(int(entry))
    return parents


def descendants(pid: int) -> set[int]:
    """Every live process under `pid` (its children, theirs, ...), read from /proc."""
    parents = live_children()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End a server started by a test: SIGTERM, then SIGKILL if it has not gone within 15 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
