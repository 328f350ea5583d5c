"""Proving many (incident file, seed) tasks: in worker processes, each failure placed at its file:line
(`located`), a dead worker's tasks retried in a fresh pool. `servedrill validate --deep` runs through here."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from incidents.loader import IncidentError, SourceMap, load_variant, source_map
from incidents.spec import Incident
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
"""Times `prove_many` runs again a task that a dead worker process (or a lost Ray node) took down with it."""
PROOF_TASK_TIMEOUT_S = 3600.0
"""The longest one proof (one file at one seed, worlds included) may run before it is stopped as a failure: the
largest library incident's world proof takes minutes on a busy 2-core machine."""


def _failed_run(task: ProofTask, error: str) -> dict[str, Any]:
    hint = " (a script calling prove_many with jobs > 1 needs `if __name__ == '__main__':`)" \
        if "BrokenProcessPool" in error else ""
    report = ProofReport(Path(task.path).stem, task.seed, error=f"the proof process failed: {error}{hint}",
                         worlds_checked=task.worlds)
    return located(report, source_map(task.path))


def prove_many(tasks: Sequence[ProofTask], jobs: int = 1, inspect: Inspect | None = None, *,
               ray: str | None = None, task_timeout_s: float | None = PROOF_TASK_TIMEOUT_S,
               timeout_s: float | None = None) -> Iterator[tuple[ProofTask, dict[str, Any]]]:
    """Prove every task, `jobs` at a time in worker processes (1: one after the other in this process), or as
    Ray tasks on the cluster at `ray` (telemetry_gen.fanout), yielding (task, run) as each finishes. The build
    cache is shared: workers never build the same database twice, and a later run reuses what this one built
    (on Ray, each node's $SERVEDRILL_CACHE: shared when it is a shared folder).

    A worker that dies (killed, out of memory) takes its tasks down with it; they run again, up to
    POOL_RESTARTS times, so one crash does not fail a whole library run. A task past `task_timeout_s`, or left
    when the run passes `timeout_s`, becomes a failed run. Raises telemetry_gen.fanout.FanoutError only when the
    Ray backend cannot start (Ray missing, no cluster at `ray`)."""
    from telemetry_gen.fanout import fan_out

    work = partial(prove_task, inspect=inspect)
    for outcome in fan_out(work, tasks, ray=ray, jobs=jobs, task_timeout_s=task_timeout_s, timeout_s=timeout_s,
                           retries=POOL_RESTARTS):
        if outcome.value is not None:
            yield outcome.task, outcome.value
        else:
            yield outcome.task, _failed_run(outcome.task, outcome.error or "no result")
