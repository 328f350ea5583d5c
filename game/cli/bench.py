"""Benchmarks behind `servedrill bench`: each target runs in a fresh process so its peak memory is its own.

Targets (on the standard fleet: 8 replicas of Llama-3.1-8B on H100-SXM, 1 hour, 30 requests/s), each
reporting whether the engine ran as its mypyc-compiled build (`compiled`; see setup.py):
- engine: workload generation + simulation;
- generate: the same, plus building every table and writing the DuckDB file;
- worlds: what scoring adds for the library's largest incident (WORLDS_INCIDENT, seed 0) on a cold
  cache: building every hypothesis's family of worlds (telemetry_gen.proving.worlds) after the player's own
  database, then scoring a 30-query session on them (the expert's queries, then whole-table scans and
  per-minute aggregates up to 30), cold and again from the result cache. Reported, with no target to
  meet (`meets_target` null). Not run by default (`servedrill bench worlds`).
- fidelity: replays the documented public benchmark setups of telemetry_gen/data/fidelity_points.yaml
  through the engine model and reports model vs published, with the median relative error per
  metric pooled, per engine and per group (held out: nothing fitted to the point; fitted)
  (telemetry_gen.fidelity.harness). `meets_target` is the speed target like the others;
  `fidelity_meets_target` is decided on held-out vLLM points only (TTFT and TPOT median |error| at
  most 15 %, no point off by more than 2x; `fidelity_target` holds the figures), so fitted points cannot pass
  it. Not run by default (`servedrill bench fidelity`).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS = ("engine", "generate", "worlds", "fidelity")
DEFAULT_TARGETS = ("engine", "generate")
TARGET_LIMITS = {
    "engine": {"wall_s": 3.0, "peak_mb": 500.0},
    "generate": {"wall_s": 5.0, "peak_mb": 600.0},
    # issue 14's harness: 439 points, 1.8 M simulated requests; bench wall 62.6-71.5 s on 2 cores (measured 2026-12-06)
    "fidelity": {"wall_s": 120.0, "peak_mb": 600.0},
}
WORLDS_INCIDENT = "ttft-tripled-after-deploy"
"""The library incident with the most requests (about 35,000 in 25 minutes on 8 replicas)."""


def worlds_run() -> dict[str, Any]:
    """Build WORLDS_INCIDENT's database, then its worlds, in a fresh cache; then score the expert's
    queries on them. Seconds; peak memory is the whole process's (one world is in memory at a time)."""
    import os

    with tempfile.TemporaryDirectory() as cache:
        os.environ["SERVEDRILL_CACHE"] = cache
        from game.frontends.autoplay import CATALOG_SQL, signal_queries
        from game.rules.assess import Assessor
        from incidents.loader import find_incident, load_incident
        from telemetry_gen.cache import ensure_database
        from telemetry_gen.proving.worlds import ensure_worlds, world_names

        inc = load_incident(find_incident(WORLDS_INCIDENT), 0)
        t0 = time.perf_counter()
        ensure_database(inc, 0)
        own_s = time.perf_counter() - t0
        per_world: dict[str, float] = {}
        last = [time.perf_counter()]

        def tick(name: str, i: int, n: int) -> None:
            now = time.perf_counter()
            if i > 0:
                per_world[world_names(inc)[i - 1]] = round(now - last[0], 3)
            last[0] = now

        worlds = ensure_worlds(inc, 0, progress=tick)
        worlds_s = time.perf_counter() - t0 - own_s
        sqls = [CATALOG_SQL, *(q.sql for q in signal_queries(inc)), *inc.debrief.settling_queries]
        heavy = [f"SELECT * FROM {t}" for t in ("requests", "metrics", "logs")] + [
            f"SELECT time_bucket(INTERVAL {m} MINUTE, ts) AS t, replica, {agg} AS v FROM requests GROUP BY ALL "
            "ORDER BY ALL" for m in (1, 2, 5)
            for agg in ("avg(ttft_s)", "quantile_cont(ttft_s, 0.99)", "avg(tpot_s)", "count(*)", "avg(queue_s)",
                        "max(prompt_tokens)", "avg(output_tokens)", "quantile_cont(tpot_s, 0.9)")]
        session = (sqls + heavy)[:30]
        t1 = time.perf_counter()
        with Assessor(inc, worlds) as assessor:
            assessor.assess_all(enumerate(session, start=1))
        assess_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        with Assessor(inc, worlds) as again:  # a second scoring (replay, leaderboard): the result cache
            again.assess_all(enumerate(session, start=1))
        rescore_s = time.perf_counter() - t2
        size = sum(os.path.getsize(p) for p in worlds.paths.values()) / 1e6
    return {"incident": WORLDS_INCIDENT, "worlds": len(worlds.paths), "own_database_s": round(own_s, 3),
            "worlds_s": round(worlds_s, 3), "per_world_s": per_world, "queries": len(session),
            "assess_s": round(assess_s, 3), "rescore_s": round(rescore_s, 3), "worlds_disk_mb": round(size, 1),
            "wall_s": round(time.perf_counter() - t0, 3)}


def fidelity_run(ray: str | None = None) -> dict[str, Any]:
    """Every fidelity point, simulated and compared (telemetry_gen.fidelity.harness.run_fidelity; on the Ray
    cluster at `ray` when given), plus the request count the speed report needs."""
    from telemetry_gen.fidelity.harness import run_fidelity

    res = run_fidelity(ray=ray)
    res["requests"] = sum(int(row["num_prompts"]) for row in res["points"])
    res["fidelity_meets_target"] = res.pop("meets_target")
    return res


def standard_fleet_run(write_db: bool) -> dict[str, Any]:
    """Run the standard fleet in this process; returns figures (seconds, counts)."""
    from engine_model.config import EngineConfig
    from engine_model.simulation import FleetSpec, PoolSpec, Simulation
    from telemetry_gen.workload import generate_requests, standard_workload

    t0 = time.perf_counter()
    spec = standard_workload(3600.0, 30.0)
    reqs = generate_requests(spec, seed=1)
    t_work = time.perf_counter() - t0
    fleet = FleetSpec(primary=PoolSpec("Llama-3.1-8B", "H100-SXM", 8, EngineConfig()))
    run = Simulation(fleet, reqs, [], spec.duration_s).run()
    t_sim = time.perf_counter() - t0 - t_work
    out: dict[str, Any] = {
        "requests": len(reqs),
        "completed": run.num_requests,
        "sim_events": int(run.stats["events"]),
        "engine_steps": int(run.stats["steps"]),
        "workload_s": round(t_work, 3),
        "simulate_s": round(t_sim, 3),
    }
    if write_db:
        from datetime import datetime

        from engine_model.profiles import get_gpu
        from telemetry_gen import tables as T
        from telemetry_gen.store import table_digest, write_database

        t1 = time.perf_counter()
        ctx = T.TelemetryContext(t0=datetime(2026, 11, 18, 10, 0, 0), gpu=get_gpu("H100-SXM"), seed=1)
        tables = T.build_tables(run, ctx)
        out["digest"] = table_digest(tables)
        t2 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            write_database(Path(d) / "bench.duckdb", tables)
        out["tables_s"] = round(t2 - t1, 3)
        out["write_s"] = round(time.perf_counter() - t2, 3)
        out["rows"] = {k: len(v) for k, v in tables.items()}
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    return out


def _child(target: str, ray: str | None = None) -> None:
    t_start = time.perf_counter()
    import engine_model

    if target == "worlds":
        res = worlds_run()
    elif target == "fidelity":
        res = fidelity_run(ray)
    else:
        res = standard_fleet_run(write_db=(target == "generate"))
    res["compiled"] = engine_model.COMPILED
    res["process_s"] = round(time.perf_counter() - t_start, 3)
    res["peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
    if res.get("workers", 1) > 1:
        # worker processes (fidelity): the largest child's peak, counted once per worker, is an upper
        # bound on what the workers held at once
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
        res["children_peak_mb"] = round(child, 1)
        res["peak_mb"] = round(res["peak_mb"] + res["workers"] * child, 1)
    print(json.dumps(res))


def run_target(target: str, ray: str | None = None) -> dict[str, Any]:
    """Run one target in a child process (fidelity: its points on the Ray cluster at `ray` when given); adds the
    limits and whether they were met."""
    if target not in TARGETS:
        raise ValueError(f"unknown bench target {target!r}; known: {', '.join(TARGETS)}")
    proc = subprocess.run(
        [sys.executable, "-c", f"from game.cli.bench import _child; _child({target!r}, {ray!r})"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        return {"target": target, "ok": False, "error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    if target not in TARGET_LIMITS:
        res.update(target=target, ok=True, limit_wall_s=None, limit_peak_mb=None, meets_target=None)
        return res
    limits = TARGET_LIMITS[target]
    res.update(
        target=target,
        ok=True,
        limit_wall_s=limits["wall_s"],
        limit_peak_mb=limits["peak_mb"],
        meets_target=res["wall_s"] <= limits["wall_s"] and res["peak_mb"] <= limits["peak_mb"],
        requests_per_wall_s=round(res["requests"] / max(res["wall_s"], 1e-9), 1),
    )
    return res
