"""`servedrill validate [--deep]`: check incident files, and with --deep prove their claims by simulating
with and without the faults. With --json it prints exactly one JSON object (keys in docs/cli.md); a
problem with one file becomes a diagnostic naming that file, never a traceback.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

# game.cli.core's helpers (emit, fail), as a module reference
import game.cli.core as base
from game.cli.fanout_options import ray_option, require_ray
from incidents.loader import (
    Diagnostic,
    IncidentError,
    check_incident_file,
    find_incident,
    has_variables,
    iter_library,
)
from incidents.variants import PROOF_SEEDS, VALIDATION_SEEDS, describe, proof_seeds


@dataclass
class FileResult:
    """What `validate` found for one file; deep is a list of run dicts (one per seed, in seed order: a
    ProofReport's dict with `lines` and file positions, see telemetry_gen.proving.pool.located) or None."""

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    deep: list[dict[str, Any]] | None = None
    claims_only: bool = False
    current: bool = False
    """--changed-only found its proof record still standing: not proven again."""

    @property
    def ok(self) -> bool:
        return not self.diagnostics and all(run["ok"] for run in self.deep or [])

    def failed_seeds(self) -> list[int]:
        return [run["seed"] for run in self.deep or [] if not run["ok"]]

    def by_check(self) -> list[dict[str, Any]]:
        """Each failing check once, with every seed it fails on: {check, subject, at, line, column, seeds,
        suspects} (suspects: the entries most likely at fault on any of those seeds, each once)."""
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        for run in self.deep or []:
            for f in run.get("failures", []):
                key = (f["check"], tuple(f["subject"]))
                entry = found.setdefault(key, {"check": f["check"], "subject": f["subject"], "at": f.get("at"),
                                               "line": f.get("line"), "column": f.get("column"), "seeds": [],
                                               "suspects": []})
                for suspect in f.get("suspects", []):
                    if suspect["at"] not in [s["at"] for s in entry["suspects"]]:
                        entry["suspects"].append({k: suspect[k] for k in ("subject", "at", "line", "column", "why")})
                if run["seed"] not in entry["seeds"]:
                    entry["seeds"].append(run["seed"])
        return list(found.values())

    def to_dict(self) -> dict[str, Any]:
        deep = None
        if self.deep is not None:
            deep = {"ok": all(run["ok"] for run in self.deep), "runs": self.deep,
                    "seeds": [run["seed"] for run in self.deep], "failed_seeds": self.failed_seeds(),
                    "claims_only": self.claims_only, "by_check": self.by_check()}
        return {
            "path": self.path,
            "ok": self.ok,
            "current": self.current,
            "diagnostics": [
                {"line": d.line, "column": d.column, "message": d.message, "hint": d.hint}
                for d in self.diagnostics
            ],
            "deep": deep,
        }


def internal_error(path: str, exc: BaseException) -> Diagnostic:
    hint = "please report this with the file"
    return Diagnostic(path, 0, 0, f"internal error while validating: {exc!r}", hint)


def expand_paths(paths: tuple[str, ...]) -> list[tuple[str, list[Diagnostic]]]:
    """(file, diagnostics that stop it being checked) for each argument; folders expand to their *.yaml.

    No arguments means the whole library. A name that is neither a file nor a folder may be a
    library id; anything else gets a diagnostic instead of a file to check.
    """
    if not paths:
        return [(str(p), []) for p in iter_library()]
    out: list[tuple[str, list[Diagnostic]]] = []
    for raw in paths:
        try:
            candidate = Path(raw)
            if candidate.is_dir():
                files = iter_library(candidate)
                if not files:
                    out.append((raw, [Diagnostic(raw, 0, 0, "no incident files (*.yaml) in this folder")]))
                out += [(str(p), []) for p in files]
                continue
            out.append((str(find_incident(raw)), []))
        except IncidentError as exc:
            out.append((raw, list(exc.diagnostics)))
        except Exception as exc:
            out.append((raw, [internal_error(raw, exc)]))
    return out


def chosen_seeds(seeds: tuple[int, ...] = (), sample: int | None = None) -> tuple[int, ...]:
    """Seeds `--deep` proves: those given with --seed, else the first `sample` seeds of the proof sample
    (default PROOF_SEEDS; see incidents.variants for why that many). Fixed incidents get the same seeds:
    a seed also draws the simulated traffic."""
    if seeds:
        return tuple(dict.fromkeys(seeds))
    return proof_seeds(PROOF_SEEDS if sample is None else sample)


def unobserved_signals(incident: Any, database: Path) -> list[str]:
    """Signals whose own reference query, run through the player's gateway on `database`, fails or does
    not observe the signal: a player could never get credit for that evidence. One line per problem."""
    from game.query.gateway import Gateway
    from game.rules.observe import observed_signals

    problems = []
    with Gateway(database) as gateway:
        for signal in incident.signals:
            result = gateway.run(signal.query)
            if not result.ok:
                problems.append(f"signal {signal.id}: its query fails in the player's gateway: {result.error}")
            elif signal.id not in observed_signals(incident, result.reads):
                read = "; ".join(f"{r.table}({', '.join(r.columns)})" for r in result.reads) or "nothing"
                problems.append(f"signal {signal.id}: its own query does not observe it as a player would "
                                f"(the gateway saw it read {read}) (hint: list in reveals only columns the "
                                "query reads; count(*) reads no column)")
    return problems


def check_file(path: str, seeds: tuple[int, ...] = (), *, allow_large: bool = False) -> FileResult:
    """The static check of one file (the variants of VALIDATION_SEEDS, plus `seeds` for a template), and
    unless `allow_large` its build's estimated cost against the bounds (telemetry_gen.cost)."""
    from telemetry_gen.cost import check_file_cost

    result = FileResult(path)
    try:
        result.diagnostics = check_incident_file(path)
        for seed in seeds if has_variables(path) and not result.diagnostics else ():
            if seed not in VALIDATION_SEEDS:
                result.diagnostics += check_incident_file(path, seed)
        if not result.diagnostics and not allow_large:
            result.diagnostics = check_file_cost(path, tuple(dict.fromkeys((*VALIDATION_SEEDS, *seeds))))
    except IncidentError as exc:
        result.diagnostics = list(exc.diagnostics)
    except Exception as exc:
        result.diagnostics = [internal_error(path, exc)]
    return result


class _Counter:
    """`proving 37/1062: oom-at-peak seed 6` on stderr: rewritten in place on a terminal; elsewhere (a log, a
    pipe, CI) one line per proof done, at most every LOG_EVERY_S seconds and always the last, with the
    time so far, so that a long proof shows it is alive."""

    LOG_EVERY_S = 10.0

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.logged = -math.inf

    def __call__(self, done: int, total: int, what: str) -> None:
        if self.tty:
            end = "\n" if done >= total else ""
            sys.stderr.write(f"\rproving {done}/{total}: {what:<48.48}{end}")
        else:
            now = time.monotonic()
            if done < total and now - self.logged < self.LOG_EVERY_S:
                return
            self.logged = now
            sys.stderr.write(f"proving {done}/{total}: {what} done, {now - self.started:.0f} s in\n")
        sys.stderr.flush()


def prove_files(results: list[FileResult], seeds: tuple[int, ...], *, jobs: int = 1, claims_only: bool = False,
                progress: Any = None, on_file: Any = None, ray: str | None = None) -> None:
    """Prove every file in `results` (those without diagnostics) on every seed, `jobs` processes at a time (or
    as Ray tasks on the cluster at `ray`, `jobs` at a time when given, else one per CPU of the cluster), filling
    each result's `deep` (runs in seed order). on_file(result) is called for each file as soon as all its seeds
    are done, in file order, so output can stream while later files are still proving."""
    from telemetry_gen.proving.pool import ProofTask, prove_many

    todo = [r for r in results if not r.diagnostics]
    runs: dict[str, dict[int, dict[str, Any]]] = {r.path: {} for r in todo}
    tasks = [ProofTask(r.path, seed, worlds=not claims_only) for r in todo for seed in seeds]
    ready = 0

    def flush() -> None:
        nonlocal ready
        while ready < len(todo) and len(runs[todo[ready].path]) == len(seeds):
            result = todo[ready]
            result.deep = [runs[result.path][seed] for seed in seeds]
            result.claims_only = claims_only
            if on_file is not None:
                on_file(result)
            ready += 1

    for done, (task, run) in enumerate(prove_many(tasks, jobs, inspect=unobserved_signals, ray=ray), start=1):
        runs[task.path][task.seed] = run
        if progress is not None:
            progress(done, len(tasks), f"{Path(task.path).stem} seed {task.seed}")
        flush()
    flush()


def seed_text(seeds: list[int] | tuple[int, ...]) -> str:
    """0, 1, 2, 3, 7 -> '0-3, 7'."""
    parts: list[str] = []
    ordered = sorted(set(seeds))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


def check_text(check: str, subject: list[Any]) -> str:
    """What failed, in words: 'symptom ttft-up', 'signal clock-drop expectation', 'hypothesis h world'."""
    ident = str(subject[1]) if len(subject) > 1 else ""
    if check == "world" and subject[:1] == ["faults"]:
        return "the truth on other traffic draws"  # a WorldCheck of kind draw: the page on every draw
    if check == "world" and subject[:1] == ["difficulty"]:
        return "starter snippets"  # a WorldCheck of kind snippets: they must not settle it alone
    return {
        "claim": f"symptom {ident}",
        "expectation": f"signal {ident} expectation",
        "discrimination": f"signal {ident} discrimination",
        "inspection": f"signal {ident} as a player's query",
        "world": f"hypothesis {ident} " + ("world" if subject[-1:] == ["world"] else "separation"),
    }.get(check, "the proof itself")


def _print_file(result: FileResult, verbose: bool = False) -> None:
    if result.current:
        click.echo(f"{result.path}: ok (its proof record stands: not proven again)")
    elif result.ok and result.deep is None:
        click.echo(f"{result.path}: ok")
    for d in result.diagnostics:
        click.echo(str(d))
    runs = result.deep or []
    if not runs:
        return
    if verbose or len(runs) == 1:
        for run in runs:
            click.echo(f"{result.path}: deep check of " + run["lines"][0])
            for line in run["lines"][1:]:
                click.echo(line)
    else:
        for run in runs:
            variant = f" [{describe(run['variant'])}]" if run.get("variant") else ""
            verdict = "ok" if run["ok"] else f"FAILED ({len(run['problems'])} problem" \
                f"{'s' * (len(run['problems']) != 1)})"
            click.echo(f"{result.path}: seed {run['seed']}: {verdict}{variant}")
            for f in run.get("failures", []):
                click.echo(f"{f.get('at') or result.path}: seed {run['seed']}: {f['problem']}")
                for suspect in f.get("suspects", []):
                    click.echo(f"  likely at fault: {suspect['at']}: {suspect['why']}")
    bad = result.failed_seeds()
    what = " (claims only: no hypothesis worlds)" if result.claims_only else ""
    summary = f"{result.path}: deep check on {len(runs)} seed{'s' * (len(runs) != 1)} " \
        f"({seed_text([r['seed'] for r in runs])}){what}: {len(runs) - len(bad)} ok"
    click.echo(summary + (f", failing seeds: {seed_text(bad)}" if bad else ""))
    if len(runs) > 1:
        for entry in result.by_check():
            click.echo(f"  {entry['at'] or result.path}: {check_text(entry['check'], entry['subject'])} "
                       f"fails on {len(entry['seeds'])} of {len(runs)} seeds: {seed_text(entry['seeds'])}")
            for suspect in entry["suspects"]:
                click.echo(f"    likely at fault: {suspect['at']}: {suspect['why']}")


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--deep", is_flag=True, help="Also simulate with and without the faults and check every claim, "
              f"on {PROOF_SEEDS} seeds unless --seeds or --seed says otherwise.")
@click.option("--seeds", "sample", type=click.IntRange(1, 10_000), default=None, metavar="N",
              help=f"--deep proves the first N seeds, 0..N-1 (default {PROOF_SEEDS}: catches a claim that fails "
              "on 1 seed in 20 with probability 0.95).")
@click.option("--seed", "seeds", type=int, multiple=True,
              help="Prove this seed only (repeatable); replaces --seeds.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="Processes proving seeds at once (default: the cores available).")
@click.option("--claims-only", is_flag=True,
              help="--deep without the hypothesis worlds: 2 simulations per seed instead of 3 plus 1 per distractor.")
@click.option("--record", is_flag=True,
              help="--deep also writes each file's proof record (proofs/<id>.json beside it), which CI checks "
              "the library against; seeds already recorded from the same YAML and telemetry are kept.")
@click.option("--changed-only", is_flag=True,
              help="With --deep --record: skip a file whose record still stands (same YAML, the whole policy "
              "proven, and this code or code that simulates seed 0 to the same telemetry).")
@click.option("--verbose", "-v", is_flag=True, help="Print every check of every seed, not only the failures.")
@click.option("--allow-large", is_flag=True, help="Accept an incident whose estimated build cost exceeds the "
              "bounds (docs/authoring.md, 'Bounds'): for authors who mean a long, large or finely scraped run.")
@ray_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def validate(paths: tuple[str, ...], deep: bool, sample: int | None, seeds: tuple[int, ...], jobs: int | None,
             claims_only: bool, record: bool, changed_only: bool, verbose: bool, allow_large: bool,
             ray: str | None, as_json: bool) -> None:
    """Check incident files (default: the whole library); PATHS may be files, folders or library ids.

    Prints every problem as file:line:column: message (hint: ...) and exits 1 if there is any.
    """
    from telemetry_gen.fanout import FanoutError
    from telemetry_gen.proving.pool import default_jobs

    if record and not deep:
        raise click.UsageError("--record needs --deep: a record says what the simulation proved")
    if changed_only and not record:
        raise click.UsageError("--changed-only needs --deep --record: it skips files whose record still stands")
    if ray is not None and not deep:
        raise click.UsageError("--ray needs --deep: only the proofs fan out")
    require_ray(ray)
    if allow_large:
        from telemetry_gen.cost import ALLOW_LARGE_ENV

        os.environ[ALLOW_LARGE_ENV] = "1"  # --deep's builds, here and in its workers, pass the build guard too
    started = time.perf_counter()
    results: list[FileResult] = []
    for path, problems in expand_paths(paths):
        results.append(FileResult(path, problems) if problems
                       else check_file(path, () if deep else seeds, allow_large=allow_large))
    printed = 0

    def show(upto: FileResult | None) -> None:
        # print files in order: everything before `upto` (which is now complete), then `upto` itself
        nonlocal printed
        while printed < len(results) and (upto is None or results[printed] is not upto):
            if not deep or results[printed].diagnostics or results[printed].current:
                _print_file(results[printed], verbose)
            printed += 1
        if upto is not None and printed < len(results):
            _print_file(upto, verbose)
            printed += 1

    records: list[Path] = []

    def finished(result: FileResult) -> None:
        # a file's record is written as soon as its seeds are done: an interrupted library run keeps them
        if record:
            records.extend(write_records([result]))
        if not as_json:
            show(result)

    if changed_only:
        from telemetry_gen.proving.record import still_proven

        for r in results:
            if not r.diagnostics and still_proven(r.path, claims_only=claims_only):
                r.current = True  # its record stands: nothing to prove again
    proving = [r for r in results if not r.diagnostics and not r.current] if deep else []
    chosen = chosen_seeds(seeds, sample)
    workers = jobs or (0 if ray else default_jobs())  # on Ray, 0: as many at once as the cluster has CPUs
    if proving:
        try:
            prove_files(proving, chosen, jobs=workers, claims_only=claims_only,
                        progress=None if as_json else _Counter(), on_file=finished, ray=ray)
        except FanoutError as exc:
            raise base.CommandError(str(exc)) from None
        except Exception as exc:
            for r in proving:
                if r.deep is None:
                    r.diagnostics = [internal_error(r.path, exc)]
    ok = all(r.ok for r in results)
    wall = time.perf_counter() - started
    if as_json:
        base.emit({"ok": ok, "files": [r.to_dict() for r in results],
                   **({"records": [str(p) for p in records]} if record else {}),
                   **({"deep": {"seeds": list(chosen), "jobs": workers, "ray": ray, "claims_only": claims_only,
                                "proofs": len(proving) * len(chosen), "wall_s": round(wall, 1)}} if deep else {})})
    elif not results:
        click.echo("no incident files to check")
    else:
        show(None)
        bad = sum(not r.ok for r in results)
        what = "checked and simulated" if deep else "checked"
        files = f"{len(results)} file{'s' * (len(results) != 1)}"
        click.echo(f"{files} {what}: {len(results) - bad} ok, {bad} with errors")
        if proving:
            n, f, k = len(proving) * len(chosen), len(proving), len(chosen)
            click.echo(f"deep: {n} proof{'s' * (n != 1)} ({f} file{'s' * (f != 1)} x {k} seed{'s' * (k != 1)}"
                       f"{', claims only' if claims_only else ''}) in {wall:.0f} s "
                       + (f"on Ray at {ray}" if ray else f"with {workers} job{'s' * (workers != 1)}"))
        for written in records:
            click.echo(f"recorded {written}")
    sys.exit(0 if ok else 1)


def write_records(results: list[FileResult]) -> list[Path]:
    """Write the proof record of every file that was proven (telemetry_gen.proving.record); their paths."""
    from telemetry_gen.proving.record import write_record

    written = []
    for r in results:
        if r.deep:
            written.append(write_record(r.path, str(r.deep[0].get("incident") or Path(r.path).stem), r.deep))
    return written
