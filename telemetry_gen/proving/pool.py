"""Proving many (incident file, seed) tasks: in worker processes, each failure placed at its file:line
(`located`), a dead worker's tasks retried in a fresh pool. `servedrill validate --deep` runs through here."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from incidents.loader import IncidentError, SourceMap, load_variant, source_map
from incidents.spec import Incident
from telemetry_gen.lifeline import watch_parent
from telemetry_gen.proving.proof import prove
from telemetry_gen.proving.report import Loc, ProofReport
from telemetry_gen.proving.suspects import suspects
from telemetry_gen.runner import Progress

Inspect = Callable[[Incident, Path], list[str]]
"""inspect(incident, fault database) -> problems: `prove`'s inspect hook, given the incident too so that a
worker process can call it (it must be a module-level function to travel to the worker)."""


@dataclass(frozen=True)
class ProofTask:
    """One incident file proved at one seed; `worlds` False checks the claims only."""

    path: str
    seed: int
    worlds: bool = True


def default_jobs() -> int:
    """Worker processes by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _position(where: SourceMap, loc: Loc) -> dict[str, Any]:
    pos = where.position(loc) if loc else None
    line, column = pos if pos else (0, 0)  # 0: the file as a whole, as in the loader's diagnostics
    return {"at": f"{where.path}:{line}:{column}" if pos else where.path, "line": line, "column": column}


def _suspects(report: ProofReport, where: SourceMap, incident: Incident | None) -> list[list[dict[str, Any]]]:
    """For each of report.failures(): the entries most likely at fault (telemetry_gen.proving.suspects), each
    {subject, why, at, line, column}; an entry at the failure's own line is left out."""
    out: list[list[dict[str, Any]]] = []
    for f in report.failures():
        found = [] if incident is None else suspects(f, incident)
        own = where.position(f.subject) if f.subject else None
        out.append([{"subject": list(s.subject), "why": s.why, **_position(where, s.subject)} for s in found
                    if where.position(s.subject) != own or own is None])
    return out


def located(report: ProofReport, where: SourceMap, incident: Incident | None = None) -> dict[str, Any]:
    """report.to_dict() plus `lines` (the text report, FAIL lines led by file:line:column, each followed by
    the entries most likely at fault when `incident` is given) and `at`, `line`, `column` on every failure
    and every check, placed by the file's SourceMap; each failure's `suspects` lists those entries."""
    run = report.to_dict()
    blamed = _suspects(report, where, incident)
    by_failure = {(f.subject, f.problem): entries for f, entries in zip(report.failures(), blamed, strict=True)}

    def explain(subject: Loc, problem: str) -> list[str]:
        return [f"         likely at fault: {s['at']}: {s['why']}" for s in by_failure.get((subject, problem), [])]

    run["lines"] = report.lines(where=where.where, explain=explain)
    for f, entries in zip(run["failures"], blamed, strict=True):
        f.update(_position(where, tuple(f["subject"])))
        f["suspects"] = entries
    for c in run["claims"]:
        c.update(_position(where, ("symptoms", c["symptom"])))
    for e in run["expectations"]:
        e.update(_position(where, ("signals", e["signal"], "expect")))
    for d in run["discrimination"]:
        d.update(_position(where, ("signals", d["signal"])))
    for w in run["worlds"]:
        w.update(_position(where, ("hypotheses", w["hypothesis"])))
    return run


def prove_task(task: ProofTask, inspect: Inspect | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Load the variant of `task.seed` from its file and prove it: `located(report)`. Never raises: a variant
    that does not load or a proof that crashes becomes the run's `error`."""
    where = source_map(task.path)
    try:
        incident, variant = load_variant(task.path, task.seed)
    except IncidentError as exc:
        first = str(exc.diagnostics[0]) if exc.diagnostics else "could not load the incident"
        report = ProofReport(Path(task.path).stem, task.seed, error=f"the variant of seed {task.seed} does not "
                             f"load: {first}", worlds_checked=task.worlds)
        return located(report, where)
    except Exception as exc:
        report = ProofReport(Path(task.path).stem, task.seed, error=f"loading failed: {exc!r}")
        return located(report, where)
    check = None if inspect is None else (lambda db: inspect(incident, db))
    report = prove(incident, task.seed, progress=progress, variant=variant, inspect=check, worlds=task.worlds)
    return located(report, where, incident)


POOL_RESTARTS = 2
"""Times `prove_many` starts a fresh pool for the tasks a dead worker process took down with it."""


def _failed_run(task: ProofTask, exc: BaseException) -> dict[str, Any]:
    hint = " (a script calling prove_many with jobs > 1 needs `if __name__ == '__main__':`)" \
        if isinstance(exc, BrokenProcessPool) else ""
    report = ProofReport(Path(task.path).stem, task.seed, error=f"the proof process failed: {exc!r}{hint}",
                         worlds_checked=task.worlds)
    return located(report, source_map(task.path))


def prove_many(tasks: Sequence[ProofTask], jobs: int = 1,
               inspect: Inspect | None = None) -> Iterator[tuple[ProofTask, dict[str, Any]]]:
    """Prove every task, `jobs` at a time in worker processes (1: one after the other in this process),
    yielding (task, run) as each finishes. The build cache is shared: workers never build the same
    database twice, and a later run reuses what this one built.

    A worker that dies (killed, out of memory) breaks its pool and every task still in it; those tasks
    go to a fresh pool, up to POOL_RESTARTS times, so one crash does not fail a whole library run."""
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield task, prove_task(task, inspect)
        return
    # spawn, not fork: the parent may hold DuckDB connections and threads a fork would copy mid-use
    context = multiprocessing.get_context("spawn")
    pending, restarts = list(tasks), 0
    while pending:
        again: list[ProofTask] = []
        with ProcessPoolExecutor(max_workers=min(jobs, len(pending)), mp_context=context,
                                 initializer=watch_parent) as pool:
            futures = {pool.submit(prove_task, task, inspect): task for task in pending}
            try:
                for future in as_completed(futures):
                    task = futures[future]
                    try:
                        run = future.result()
                    except BrokenProcessPool as exc:
                        if restarts < POOL_RESTARTS:
                            again.append(task)
                            continue
                        run = _failed_run(task, exc)
                    except Exception as exc:
                        run = _failed_run(task, exc)
                    yield task, run
            finally:
                for future in futures:
                    future.cancel()
        pending, restarts = again, restarts + 1
