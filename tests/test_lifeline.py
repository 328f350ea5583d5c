"""No child outlives its parent (brief, non-negotiable 5): a parent killed with SIGKILL, which runs no
cleanup at all, takes its SQL worker (game.query.sandbox), its background world build (telemetry_gen.proving.worlds) and
its pool workers (telemetry_gen.proving.pool, telemetry_gen.fidelity.harness) with it. Each test starts a parent
process, reads its children's pids from it, kills it with SIGKILL, and waits for the state "every child
gone" (bounded, never a fixed sleep)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from telemetry_gen.lifeline import ORPHAN_EXIT

ROOT = Path(__file__).resolve().parent.parent
GONE_WITHIN_S = 30.0
"""Generous for a busy 2-core machine; a child normally goes within POLL_S of its parent."""

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")


def alive(pid: int) -> bool:
    """Running and not a zombie (a zombie has exited; only its entry waits to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_gone(pids: list[int]) -> list[int]:
    """The pids still alive after GONE_WITHIN_S (polling)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def kill_parent_and_check(script: str) -> None:
    """Run `script` as a parent process; it prints its children's pids on one line, then blocks."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    children: list[int] = []
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()  # blocks until the children are up (a state), or the parent dies
        assert line.strip(), f"the parent printed no pids: {parent.stderr.read() if parent.stderr else ''}"
        children = [int(p) for p in line.split()]
        assert children and all(alive(p) for p in children)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        left = wait_gone(children)
        assert not left, f"children {left} outlived their parent by {GONE_WITHIN_S} s"
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()


def test_a_game_killed_mid_session_takes_its_sql_worker_with_it(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE requests AS SELECT range AS id FROM range(10)")
    # killed while a query runs: an idle worker already ends on its socket's EOF, a busy one would run on
    # to its time limit (the parent's 300 s here, far beyond GONE_WITHIN_S)
    kill_parent_and_check(f"""
        import threading, time
        from pathlib import Path
        from game.query.sandbox import Sandbox
        box = Sandbox({{"main": Path({str(db)!r})}}, timeout_s=300)
        assert box.run("SELECT count(*) FROM requests").ok
        threading.Thread(target=box.run, args=("SELECT count(*) FROM range(1000000000000) a",), daemon=True).start()
        while not box._busy:
            time.sleep(0.01)
        print(box._proc.pid, flush=True)
        time.sleep(600)
    """)


def test_a_killed_validation_takes_its_pool_workers_with_it() -> None:
    """The pool as telemetry_gen.proving.pool and telemetry_gen.fidelity.harness start it (spawn, watch_parent as
    the initializer), with both workers busy when the parent dies."""
    kill_parent_and_check("""
        import multiprocessing, time
        from concurrent.futures import ProcessPoolExecutor, wait
        from telemetry_gen.lifeline import watch_parent

        pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=watch_parent)
        wait([pool.submit(time.sleep, 0.5) for _ in range(2)])
        pool.submit(time.sleep, 600)
        pool.submit(time.sleep, 600)
        print(*sorted(pool._processes), flush=True)
        time.sleep(600)
    """)


def test_a_child_whose_parent_is_already_gone_exits_at_once() -> None:
    """watch_parent given a parent that is not this process's parent (it died before the call): exit."""
    child = subprocess.run([sys.executable, "-c", "from telemetry_gen.lifeline import watch_parent\n"
                            "import os, time\nwatch_parent(os.getppid() + 100000)\ntime.sleep(60)"],
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60, check=False)
    assert child.returncode == ORPHAN_EXIT
