"""`servedrill bench tui`: how fast the interface answers, measured in fresh processes.

- briefing_s: from spawning a process to the briefing screen being painted, opening the default
  incident from the picker (headless, 120x36, its telemetry database already cached). The median
  of a few spawns; target 0.8 s. Also picker_s (first screen painted) and ready_s (incident checked,
  cached database open, the start key live) and briefing_cpu_s (CPU seconds the child spent up to
  the briefing, which does not grow with other load on the machine; load_avg_1m says how busy it was).
- query_ms: from pressing F5 on a simple GROUP BY to its rows being painted, through Textual's
  Pilot, median of `runs`; target 100 ms.

The database is built first if needed (not timed); sessions go to a temporary data directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LIMITS = {"briefing_s": 0.8, "query_ms": 100.0}
SPAWNS = 3
SIZE = (120, 36)
QUERY = ("SELECT replica, count(*) AS requests, avg(ttft_s) AS mean_ttft_s FROM requests "
         "GROUP BY replica ORDER BY replica")


async def _wait(app: Any, pilot: Any, name: str, timeout_s: float = 120.0) -> float:
    """Wait until the app marks `name` (see ServedrillApp.mark); returns the mark's epoch time."""
    deadline = time.monotonic() + timeout_s
    while name not in app.marks:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the app never showed '{name}'")
        await asyncio.sleep(0.001)
    return float(app.marks[name])


def _child_briefing(incident: str, seed: int, data_root: str) -> None:
    """Child process: open the picker, press Enter, report when the briefing was painted."""
    from tui.app import ServedrillApp

    app = ServedrillApp(incidents=[incident], preselect=incident, seed=seed, data_root=Path(data_root))
    out: dict[str, float] = {}

    async def go() -> None:
        async with app.run_test(size=SIZE) as pilot:
            out["picker_at"] = await _wait(app, pilot, "picker")
            await pilot.press("enter")
            out["briefing_at"] = await _wait(app, pilot, "briefing")
            # CPU seconds so far, all threads: what the path costs, whatever else the machine runs
            out["briefing_cpu_s"] = time.process_time()
            out["ready_at"] = await _wait(app, pilot, "ready")

    asyncio.run(go())
    print(json.dumps(out))


def _child_queries(incident: str, seed: int, data_root: str, runs: int) -> None:
    """Child process: start a session, then time `runs` queries from F5 to painted rows."""
    from tui.app import ServedrillApp
    from tui.widgets.sql_editor import SqlEditor

    app = ServedrillApp(incidents=[incident], preselect=incident, seed=seed, data_root=Path(data_root))
    times: list[float] = []

    async def go() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await _wait(app, pilot, "picker")
            await pilot.press("enter")
            await _wait(app, pilot, "ready")
            await pilot.press("enter")
            while type(app.screen).__name__ != "WorkspaceScreen":
                await asyncio.sleep(0.005)
            await app.workers.wait_for_complete()
            editor = app.screen.query_one("#editor", SqlEditor)
            for _ in range(runs):
                editor.load_text(QUERY)
                app.marks.pop("rows", None)
                t0 = time.time()
                await pilot.press("f5")
                times.append(await _wait(app, pilot, "rows") - t0)
                await pilot.pause()

    asyncio.run(go())
    print(json.dumps({"query_s": times}))


def _spawn(code: str) -> tuple[float, dict[str, Any]]:
    started = time.time()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(tail)
    return started, json.loads(proc.stdout.strip().splitlines()[-1])


def run_tui_bench(incident: str = "one-slow-replica", seed: int = 0, runs: int = 20,
                  spawns: int = SPAWNS) -> dict[str, Any]:
    """Run both measurements in child processes; figures in seconds and milliseconds as named.
    `runs` 0 skips the query measurement (its figures are then 0)."""
    try:
        from game import api

        path = api.find_incident(incident).resolve()
        t0 = time.perf_counter()
        telemetry = api.open_telemetry(api.load_variant(path, seed))
        telemetry.close()  # the build is what is timed here; each child opens its own gateway
        build_s = 0.0 if telemetry.build.cached else round(time.perf_counter() - t0, 3)
        briefing: list[float] = []
        picker: list[float] = []
        ready: list[float] = []
        cpu: list[float] = []
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as data_root:
            for _ in range(spawns):
                started, marks = _spawn("from tui.bench import _child_briefing; "
                                        f"_child_briefing({str(path)!r}, {seed}, {data_root!r})")
                briefing.append(marks["briefing_at"] - started)
                picker.append(marks["picker_at"] - started)
                ready.append(marks["ready_at"] - started)
                cpu.append(marks["briefing_cpu_s"])
            queried: dict[str, Any] = {"query_s": []}
            if runs > 0:
                _, queried = _spawn("from tui.bench import _child_queries; "
                                    f"_child_queries({str(path)!r}, {seed}, {data_root!r}, {runs})")
    except Exception as exc:  # report, never a traceback
        return {"target": "tui", "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    query_ms = [round(1000 * q, 2) for q in queried["query_s"]] or [0.0]
    result = {
        "target": "tui",
        "ok": True,
        "incident": path.stem,
        "rows": telemetry.build.rows.get("requests", 0),
        "database_build_s": build_s,
        "picker_s": round(statistics.median(picker), 3),
        "briefing_s": round(statistics.median(briefing), 3),
        "briefing_runs_s": [round(b, 3) for b in briefing],
        "briefing_cpu_s": round(statistics.median(cpu), 3),
        "ready_s": round(statistics.median(ready), 3),
        "query_ms": round(statistics.median(query_ms), 2),
        "query_max_ms": max(query_ms),
        "query_runs": len(queried["query_s"]),
        "load_avg_1m": round(load, 2),
        "limit_briefing_s": LIMITS["briefing_s"],
        "limit_query_ms": LIMITS["query_ms"],
    }
    result["meets_target"] = (result["briefing_s"] <= LIMITS["briefing_s"]
                              and result["query_ms"] <= LIMITS["query_ms"])
    return result


def format_tui(result: dict[str, Any]) -> str:
    if not result.get("ok"):
        return f"tui: FAILED {result.get('error')}"
    verdict = "meets" if result["meets_target"] else "MISSES"
    return (f"tui: briefing painted {result['briefing_s']:.2f} s after process start (picker "
            f"{result['picker_s']:.2f} s); query to rows {result['query_ms']:.0f} ms median of "
            f"{result['query_runs']} (max {result['query_max_ms']:.0f} ms) - {verdict} target "
            f"{result['limit_briefing_s']} s / {result['limit_query_ms']:.0f} ms")
