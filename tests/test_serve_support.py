"""Shared helpers for the `servedrill serve` tests (no tests here): a free loopback port, and a
`servedrill serve` subprocess started on it and stopped again."""

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
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "serve", "--port", str(port), *args],
                                cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc)
        yield port
    finally:
        stop(proc)


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
