"""Commands for incident authors: `validate [--deep]`, `schema`, `new` and `list`.

`register(group)` adds them to the `servedrill` group. Every command with --json prints
exactly one JSON object (keys in docs/cli.md). None of them lets an exception escape as a
traceback: a problem with one file becomes a diagnostic naming that file.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

# a module reference, not names: game.cli imports this module to register it, possibly before it has finished
import game.cli as base
from incidents.coverage import topic_coverage
from incidents.loader import (
    LIBRARY_DIR,
    SCHEMA_COMMENT,
    Diagnostic,
    IncidentError,
    check_incident_file,
    find_incident,
    has_variables,
    iter_library,
    load_incident,
    render_template,
)
from incidents.spec import SCHEMA_PATH, did_you_mean, schema_text
from incidents.variants import PROOF_SEEDS, VALIDATION_SEEDS, describe, proof_seeds

# ----- validate -----------------------------------------------------------------------------------


@dataclass
class FileResult:
    """What `validate` found for one file; deep is a list of run dicts (one per seed, in seed order: a
    ProofReport's dict with `lines` and file positions, see telemetry_gen.proof.located) or None."""

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    deep: list[dict[str, Any]] | None = None
    claims_only: bool = False

    @property
    def ok(self) -> bool:
        return not self.diagnostics and all(run["ok"] for run in self.deep or [])

    def failed_seeds(self) -> list[int]:
        return [run["seed"] for run in self.deep or [] if not run["ok"]]

    def by_check(self) -> list[dict[str, Any]]:
        """Each failing check once, with every seed it fails on: {check, subject, at, line, column, seeds}."""
        found: dict[tuple[Any, ...], dict[str, Any]] = {}
        for run in self.deep or []:
            for f in run.get("failures", []):
                key = (f["check"], tuple(f["subject"]))
                entry = found.setdefault(key, {"check": f["check"], "subject": f["subject"], "at": f.get("at"),
                                               "line": f.get("line"), "column": f.get("column"), "seeds": []})
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
            "diagnostics": [
                {"line": d.line, "column": d.column, "message": d.message, "hint": d.hint}
                for d in self.diagnostics
            ],
            "deep": deep,
        }


def _internal(path: str, exc: BaseException) -> Diagnostic:
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
            out.append((raw, [_internal(raw, exc)]))
    return out


def chosen_seeds(seeds: tuple[int, ...] = (), sample: int | None = None) -> tuple[int, ...]:
    """Seeds `--deep` proves: those given with --seed, else the first `sample` seeds of the proof sample
    (default PROOF_SEEDS; see incidents.variants for why that many). Fixed incidents get the same seeds:
    a seed also draws the simulated traffic."""
    if seeds:
        return tuple(dict.fromkeys(seeds))
    return proof_seeds(PROOF_SEEDS if sample is None else sample)


def deep_seeds(path: str, seeds: tuple[int, ...]) -> tuple[int, ...]:
    """The seeds `--deep` proved before the seed policy: those given, else VALIDATION_SEEDS for an incident
    with variables, else 0. `validate` no longer uses it (see chosen_seeds); kept for existing callers."""
    if seeds:
        return seeds
    return VALIDATION_SEEDS if has_variables(path) else (0,)


def unobserved_signals(incident: Any, database: Path) -> list[str]:
    """Signals whose own reference query, run through the player's gateway on `database`, fails or does
    not observe the signal: a player could never get credit for that evidence. One line per problem."""
    from game.gateway import Gateway
    from game.observe import observed_signals

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


def validate_file(path: str, *, deep: bool, seeds: tuple[int, ...] = (), show_progress: bool = False,
                  sample: int | None = None, jobs: int = 1, claims_only: bool = False) -> FileResult:
    """Structure, names and cross-references of one file, then (deep) the simulated claims on every seed
    of `chosen_seeds(seeds, sample)`, `jobs` processes at a time.

    Without deep, explicit seeds of an incident with variables are also checked statically as variants;
    with deep, each seed's proof loads (and so checks) its own variant.
    """
    result = check_file(path, () if deep else seeds)
    if deep and not result.diagnostics:
        prove_files([result], chosen_seeds(seeds, sample), jobs=jobs, claims_only=claims_only,
                    progress=_Counter() if show_progress else None)
    return result


def check_file(path: str, seeds: tuple[int, ...] = ()) -> FileResult:
    """The static check of one file (the variants of VALIDATION_SEEDS, plus `seeds` for a template)."""
    result = FileResult(path)
    try:
        result.diagnostics = check_incident_file(path)
        for seed in seeds if has_variables(path) and not result.diagnostics else ():
            if seed not in VALIDATION_SEEDS:
                result.diagnostics += check_incident_file(path, seed)
    except IncidentError as exc:
        result.diagnostics = list(exc.diagnostics)
    except Exception as exc:
        result.diagnostics = [_internal(path, exc)]
    return result


class _Counter:
    """`proving 37/1062: oom-at-peak seed 6` on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.tty:
            return
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\rproving {done}/{total}: {what:<48.48}{end}")
        sys.stderr.flush()


def prove_files(results: list[FileResult], seeds: tuple[int, ...], *, jobs: int = 1, claims_only: bool = False,
                progress: Any = None, on_file: Any = None) -> None:
    """Prove every file in `results` (those without diagnostics) on every seed, `jobs` processes at a time,
    filling each result's `deep` (runs in seed order). on_file(result) is called for each file as soon as
    all its seeds are done, in file order, so output can stream while later files are still proving."""
    from telemetry_gen.proof import ProofTask, prove_many

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

    for done, (task, run) in enumerate(prove_many(tasks, jobs, inspect=unobserved_signals), start=1):
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
    return {
        "claim": f"symptom {ident}",
        "expectation": f"signal {ident} expectation",
        "discrimination": f"signal {ident} discrimination",
        "inspection": f"signal {ident} as a player's query",
        "world": f"hypothesis {ident} " + ("world" if subject[-1:] == ["world"] else "separation"),
    }.get(check, "the proof itself")


def _print_file(result: FileResult, verbose: bool = False) -> None:
    if result.ok and result.deep is None:
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
    bad = result.failed_seeds()
    what = " (claims only: no hypothesis worlds)" if result.claims_only else ""
    summary = f"{result.path}: deep check on {len(runs)} seed{'s' * (len(runs) != 1)} " \
        f"({seed_text([r['seed'] for r in runs])}){what}: {len(runs) - len(bad)} ok"
    click.echo(summary + (f", failing seeds: {seed_text(bad)}" if bad else ""))
    if len(runs) > 1:
        for entry in result.by_check():
            click.echo(f"  {entry['at'] or result.path}: {check_text(entry['check'], entry['subject'])} "
                       f"fails on {len(entry['seeds'])} of {len(runs)} seeds: {seed_text(entry['seeds'])}")


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
@click.option("--verbose", "-v", is_flag=True, help="Print every check of every seed, not only the failures.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def validate(paths: tuple[str, ...], deep: bool, sample: int | None, seeds: tuple[int, ...], jobs: int | None,
             claims_only: bool, verbose: bool, as_json: bool) -> None:
    """Check incident files (default: the whole library); PATHS may be files, folders or library ids.

    Prints every problem as file:line:column: message (hint: ...) and exits 1 if there is any.
    """
    from telemetry_gen.proof import default_jobs

    started = time.perf_counter()
    results: list[FileResult] = []
    for path, problems in expand_paths(paths):
        results.append(FileResult(path, problems) if problems else check_file(path, () if deep else seeds))
    printed = 0

    def show(upto: FileResult | None) -> None:
        # print files in order: everything before `upto` (which is now complete), then `upto` itself
        nonlocal printed
        while printed < len(results) and (upto is None or results[printed] is not upto):
            if not deep or results[printed].diagnostics:
                _print_file(results[printed], verbose)
            printed += 1
        if upto is not None and printed < len(results):
            _print_file(upto, verbose)
            printed += 1

    proving = [r for r in results if not r.diagnostics] if deep else []
    chosen = chosen_seeds(seeds, sample)
    workers = jobs or default_jobs()
    if proving:
        try:
            prove_files(results, chosen, jobs=workers, claims_only=claims_only,
                        progress=None if as_json else _Counter(), on_file=None if as_json else show)
        except Exception as exc:
            for r in proving:
                if r.deep is None:
                    r.diagnostics = [_internal(r.path, exc)]
    ok = all(r.ok for r in results)
    wall = time.perf_counter() - started
    if as_json:
        base.emit({"ok": ok, "files": [r.to_dict() for r in results],
                   **({"deep": {"seeds": list(chosen), "jobs": workers, "claims_only": claims_only,
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
                       f"{', claims only' if claims_only else ''}) in {wall:.0f} s with {workers} "
                       f"job{'s' * (workers != 1)}")
    sys.exit(0 if ok else 1)


# ----- schema -------------------------------------------------------------------------------------


def schema_is_current(path: Path) -> bool:
    """Whether the JSON at `path` equals the schema the incident models produce (formatting ignored)."""
    try:
        on_disk = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(on_disk == json.loads(schema_text()))


@click.command()
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Where to write it (default incidents/schema.json).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the file is missing or stale.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def schema(out: Path | None, check: bool, as_json: bool) -> None:
    """Write the incident JSON Schema that editors use for completion (from incidents/spec.py)."""
    target = out or SCHEMA_PATH
    if check:
        current = schema_is_current(target)
        if as_json:
            base.emit({"ok": current, "path": str(target), "current": current})
        elif current:
            click.echo(f"{target}: up to date")
        else:
            again = "servedrill schema" + (f" --out {out}" if out else "")
            click.echo(f"{target}: stale or missing; run `{again}` to regenerate it")
        sys.exit(0 if current else 1)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(schema_text(), encoding="utf-8")
    except OSError as exc:
        base.fail(f"cannot write {target}: {exc.strerror or exc}", as_json=as_json)
    if as_json:
        base.emit({"ok": True, "path": str(target)})
    else:
        click.echo(f"wrote {target}")


# ----- new ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """A symptom family `servedrill new` can start from: a coverage family (incidents/coverage.py), the
    short names an author may type for it, and the sections of the template it replaces (YAML text with
    top-level keys; each replaced section keeps the template's comments unless it brings its own)."""

    key: str
    aliases: tuple[str, ...]
    summary: str
    sections: str


_LATENCY = """\
title: First tokens got slow for some users after a morning deploy
tags: [ttft-after-deploy, latency, ttft, kv-cache]   # symptom family first, then interview topics
symptoms:
  # Evidence (the default): holds with the faults and not without them.
  - id: ttft-up
    claim: "Time to first token got worse in the second half of the window."
    metric: {table: requests, column: ttft_s, where: "status = 'ok'"}
    aggregate: p90
    a: {window: [900, 1800]}
    b: {window: [0, 900]}
    compare: ratio_at_least
    value: 1.1
  # Context: a fact the page states whatever the cause; it must hold with AND without the faults.
  # Counting aggregates are 0 over no rows, so "nothing failed" is a count at_most 0.
  - id: nothing-failed
    claim: "Requests are slow, not failing."
    context: true
    metric: {table: requests, column: request_id, where: "status = 'error'"}
    aggregate: count
    a: {window: [0, 1800]}
    compare: at_most
    value: 0
  # Timing: `first` is the time of the first selected row in seconds after t=0 (column ts).
  # Without the faults no row matches, the side is empty and the claim fails: evidence.
  - id: slow-after-the-deploy
    claim: "The first slow first token came after the 09:11 gateway deploy."
    briefed: false                    # a finding the player digs out; only the true world must show it
    metric: {table: requests, column: ts, where: "status = 'ok' AND ttft_s > 1.0"}
    aggregate: first
    a: {window: [0, 1800]}
    compare: at_least
    value: 700
"""

_TPOT = """\
title: Some answers stream slowly since mid-morning
tags: [one-slow-replica, tpot, latency, hbm]
briefing:
  reported_by: Chat product team (on-call)
  since: "about ten minutes into the window"
  summary: >-
    Placeholder: some users say answers now trickle out word by word while others see no
    change. Nothing was deployed on our side.
  evidence:
    - "Placeholder: the p90 time-per-output-token panel rose"
    - "Placeholder: a customer ticket about slow streaming"
faults:
  - kind: hbm_degradation             # one GPU's memory bandwidth drops: decode is bandwidth-bound
    at_s: 600
    scope: {replicas: [vllm-2]}
    params: {bw_factor: 0.5}
symptoms:
  - id: tpot-up
    claim: "Streaming got slower: time per output token rose after the first ten minutes."
    metric: {table: requests, column: tpot_s, where: "status = 'ok' AND output_tokens > 1"}
    aggregate: p90
    a: {window: [600, 1800]}
    b: {window: [0, 600]}
    compare: ratio_at_least
    value: 1.1
  - id: one-replica-slow
    claim: "The slow streams come from one replica."
    briefed: false                    # the page does not say so: only the true world must show it
    metric: {table: requests, column: tpot_s, where: "status = 'ok' AND output_tokens > 1"}
    aggregate: p50
    a: {window: [600, 1800], where: "replica = 'vllm-2'"}
    b: {window: [600, 1800], where: "replica <> 'vllm-2'"}
    compare: ratio_at_least
    value: 1.3
  # Context + distinct: how many different values a column takes, with and without the faults.
  - id: every-replica-serves
    claim: "All four replicas kept serving; none was taken out."
    context: true
    metric: {table: requests, column: replica, where: "status = 'ok'"}
    aggregate: distinct
    a: {window: [600, 1800]}
    compare: at_least
    value: 4
hypotheses:
  - id: hbm-degraded
    title: One GPU lost memory bandwidth
    explanation: >-
      Placeholder: a degraded HBM stack on vllm-2 halves its memory bandwidth. Decode reads the
      weights every step, so that replica streams tokens about half as fast; clocks stay nominal.
    true: true
  - id: traffic-surge
    title: More traffic than the fleet can take
    explanation: >-
      Placeholder: arrivals outgrew capacity, so batches grow on every replica and every stream slows.
    world:
      - kind: traffic_surge
        at_s: 600
        params: {factor: 1.6}
  - id: longer-answers
    title: Clients started asking for much longer answers
    explanation: >-
      Placeholder: longer outputs keep more sequences decoding at once on every replica.
    world:
      - kind: workload_shift
        at_s: 600
        params: {output_scale: 2.0}
  - id: gpu-throttling
    title: A GPU is thermally throttled
    explanation: >-
      Placeholder: lower SM clocks on one replica slow its steps; the clock gauge would show it.
    world:
      - kind: gpu_throttle
        at_s: 600
        scope: {replicas: [vllm-2]}
        params: {clock_factor: 0.5}
signals:
  - id: tpot-by-replica
    shows: "After 09:10 one replica streams at about half the speed of the others."
    reveals:
      - {table: requests, columns: [replica, tpot_s], window: [600, 1800]}
    query: >-
      SELECT replica, quantile_cont(tpot_s, 0.5) AS p50_tpot FROM requests
      WHERE status = 'ok' AND output_tokens > 1 AND ts >= TIMESTAMP '2025-03-04 09:10:00'
      GROUP BY replica ORDER BY p50_tpot DESC
    expect: {column: replica, op: "==", value: vllm-2}
    likelihoods: {hbm-degraded: 0.9, traffic-surge: 0.1, longer-answers: 0.1, gpu-throttling: 0.8}
  - id: clocks-nominal
    shows: "Every GPU's SM clock stays at its nominal value all along."
    reveals:
      - {table: metrics, columns: [name, value]}
    query: >-
      SELECT replica, min(value) AS min_clock_mhz FROM metrics
      WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica ORDER BY min_clock_mhz
    expect: {column: min_clock_mhz, op: ">", value: 1500}
    likelihoods: {hbm-degraded: 0.9, traffic-surge: 0.9, longer-answers: 0.9, gpu-throttling: 0.05}
  - id: answers-as-long-as-before
    shows: "Answers are as long after 09:10 as before."
    reveals:
      - {table: requests, columns: [ts, output_tokens]}
    query: >-
      SELECT ts >= TIMESTAMP '2025-03-04 09:10:00' AS after_change, avg(output_tokens) AS mean_output_tokens
      FROM requests WHERE status = 'ok' GROUP BY ALL ORDER BY after_change
    expect: {rows_at_least: 2}
    likelihoods: {hbm-degraded: 0.8, traffic-surge: 0.8, longer-answers: 0.05, gpu-throttling: 0.8}
debrief:
  summary: >-
    Placeholder: one paragraph on what happened and why it looked the way it did.
  causal_chain:
    - "HBM bandwidth of vllm-2's GPU halved at 09:10"
    - "each decode step on vllm-2 reads the weights at half speed"
    - "streams served by vllm-2 produce tokens about half as fast"
  settling_queries:
    - >-
      SELECT replica, quantile_cont(tpot_s, 0.5) AS p50_tpot FROM requests
      WHERE status = 'ok' AND output_tokens > 1 GROUP BY replica ORDER BY p50_tpot DESC
  mitigation: >-
    Placeholder: drain vllm-2 and replace the GPU; alert on per-replica TPOT against the fleet.
"""

_OOM = """\
title: Bursts of errors at the busiest moments
tags: [oom-at-peak, errors, memory, memory-leak]
briefing:
  reported_by: Customer support, then the error-rate alert
  since: "the error-rate alert fired during the traffic peak at 09:25"
  summary: >-
    Placeholder: customers saw bursts of 5xx errors while traffic was at its busiest, and the
    engine pods restarted on their own. A new engine image went out this morning.
  evidence:
    - "Placeholder: pods restarted with exit code 1"
    - "Placeholder: the errors coincided with the traffic peak"
window:
  start: "2025-03-04T09:00:00Z"
  duration_s: 2400
  scrape_interval_s: 10
fleet:
  model: Llama-3.1-8B
  gpu: A100-80GB
  replicas: 2
  engine:
    gpu_memory_utilization: 0.92
  router:
    policy: least_outstanding
  model_version: v1
workload:
  base_rps: 2.0
  daily_amplitude: 0.0
  start_hour: 9
  bursts:
    - {start_s: 1500, duration_s: 420, factor: 2.4}   # the peak
  apps: standard
faults:
  - kind: memory_leak                 # device memory kept per request served: the busier, the faster
    at_s: 630
    params: {bytes_per_request: 3591168}
noise:
  - {kind: deploy_event, at_s: 630, service: vllm-engine-image, version: 0.12.1-patch3}
symptoms:
  - id: errors-at-peak
    claim: "Requests fail in bursts once the traffic peak is on."
    metric: {table: requests, column: request_id, where: "status = 'error'"}
    aggregate: count
    a: {window: [1500, 2400]}
    compare: at_least
    value: 10
  # Context: no error before the peak, with the faults and without them.
  - id: quiet-before-the-peak
    claim: "Nothing failed before the peak."
    context: true
    briefed: false
    metric: {table: requests, column: request_id, where: "status = 'error'"}
    aggregate: count
    a: {window: [0, 1500]}
    compare: at_most
    value: 0
  # Timing: the first error came once the peak was on (seconds after t=0).
  - id: first-error-in-the-peak
    claim: "The first error came after the peak began."
    briefed: false
    metric: {table: requests, column: ts, where: "status = 'error'"}
    aggregate: first
    a: {window: [0, 2400]}
    compare: at_least
    value: 1500
  # Distinct: how many different replicas crashed.
  - id: both-replicas-crashed
    claim: "Both replicas crashed."
    briefed: false
    metric: {table: events, column: replica, where: "kind = 'crash'"}
    aggregate: distinct
    a: {window: [0, 2400]}
    compare: at_least
    value: 2
hypotheses:
  - id: gpu-memory-leak
    title: GPU memory leaks a little with every request
    explanation: >-
      Placeholder: the new image keeps a little device memory per request; the busiest minutes eat
      the activation headroom fastest, a large step fails with CUDA OOM and the engine restarts.
    true: true
  - id: steady-leak
    title: GPU memory leaks at a steady rate, whatever the traffic
    explanation: >-
      Placeholder: a background thread leaks a fixed amount per second; memory climbs in a straight line.
    world:
      - kind: memory_leak
        at_s: 630
        params: {bytes_per_s: 5500000}
  - id: utilization-too-high
    title: gpu_memory_utilization was raised too high before the peak
    explanation: >-
      Placeholder: nearly all memory reserved for weights and KV cache leaves no activation headroom.
    world:
      - kind: config_change
        at_s: 1260
        params: {gpu_memory_utilization: 0.995}
  - id: shared-gpu-job
    title: Another job on the same GPUs takes memory during the peak
    explanation: >-
      Placeholder: a second process allocates memory while it runs; memory jumps only when it starts.
    world:
      - kind: memory_leak
        at_s: 1530
        until_s: 1920
        params: {bytes_per_s: 40000000}
signals:
  - id: fb-used-climbs
    shows: "Used framebuffer memory climbs on both replicas from the image deploy until each crash."
    reveals:
      - {table: metrics, columns: [name, value]}
    query: >-
      SELECT replica, time_bucket(INTERVAL 5 MINUTE, ts) AS t, max(value) AS fb_used_mib
      FROM metrics WHERE name = 'DCGM_FI_DEV_FB_USED' GROUP BY ALL ORDER BY replica, t
    expect: {rows_at_least: 10}
    likelihoods: {gpu-memory-leak: 0.95, steady-leak: 0.9, utilization-too-high: 0.05, shared-gpu-job: 0.1}
  - id: oom-log-lines
    shows: "The crash logs say CUDA out of memory."
    reveals:
      - {table: logs, columns: [level, message]}
    query: >-
      SELECT ts, replica, message FROM logs WHERE level = 'ERROR' AND message LIKE '%out of memory%' ORDER BY ts
    expect: {rows_at_least: 1}
    likelihoods: {gpu-memory-leak: 0.9, steady-leak: 0.9, utilization-too-high: 0.6, shared-gpu-job: 0.9}
  - id: no-config-change
    shows: "No engine setting changed today: only deploys in the change log."
    reveals:
      - {table: events, columns: [kind]}
    query: >-
      SELECT kind, count(*) AS events, min(ts) AS first_ts FROM events GROUP BY kind ORDER BY kind
    expect: {column: kind, op: "!=", value: config_change}
    likelihoods: {gpu-memory-leak: 0.9, steady-leak: 0.9, utilization-too-high: 0.05, shared-gpu-job: 0.9}
debrief:
  summary: >-
    Placeholder: one paragraph on what happened and why it looked the way it did.
  causal_chain:
    - "the new engine image keeps 3.4 MiB of device memory per request served"
    - "the activation headroom shrinks with every request; the peak serves 2.4x the requests"
    - "a large step no longer fits: CUDA OOM kills the engine, in-flight requests fail"
  settling_queries:
    - >-
      SELECT replica, time_bucket(INTERVAL 5 MINUTE, ts) AS t, max(value) FROM metrics
      WHERE name = 'DCGM_FI_DEV_FB_USED' GROUP BY ALL ORDER BY 1, 2
  mitigation: >-
    Placeholder: roll back the image; alert on FB_USED growth per request served.
"""

_DETERMINISM = """\
title: The same prompt gets different answers
tags: [nondeterministic-outputs, quality, determinism, batch-invariance]
briefing:
  reported_by: Evaluation team
  since: "this morning's regression run"
  summary: >-
    Placeholder: greedy (temperature 0) requests that used to return identical text now
    sometimes differ between runs. Our test suite assumes they are reproducible.
  evidence:
    - "Placeholder: two runs of the same greedy prompt with different answers"
fleet:
  model: Qwen2.5-7B
  gpu: L40S
  replicas: 4
  engine:
    batch_invariant: true             # the kernels start batch-invariant; the fault switches that off
    max_num_batched_tokens: 4096
  router:
    policy: least_outstanding
  model_version: qwen25-7b-instruct-2026-09
workload:
  base_rps: 6
  daily_amplitude: 0.0
  start_hour: 9
  apps: standard
faults:
  - kind: batch_invariance_off
    at_s: 600
noise:
  - {kind: config_change, at_s: 600, params: {max_num_seqs: 288}}
  - {kind: deploy_event, at_s: 420, service: eval-harness-runner, version: 5.2.0}
symptoms:
  - id: probe-drift-appears
    claim: "Replayed greedy probes drift from their reference logprobs after the morning change."
    metric: {table: probes, column: logprob_drift}
    aggregate: max
    a: {window: [900, 1800]}
    b: {window: [0, 600]}
    compare: difference_at_least
    value: 0.0002
  # Distinct: more different probe answers after the change than before it.
  - id: more-distinct-answers
    claim: "The fixed probe prompts return more different answers after the change than before."
    briefed: false
    metric: {table: probes, column: output_hash}
    aggregate: distinct
    a: {window: [600, 1800]}
    b: {window: [0, 600]}
    compare: difference_at_least
    value: 1
  # Context: the served model version never changed, with the faults or without.
  - id: one-model-version
    claim: "Every request was served by the same model version."
    context: true
    briefed: false
    metric: {table: requests, column: model_version}
    aggregate: distinct
    a: {window: [0, 1800]}
    compare: at_most
    value: 1
hypotheses:
  - id: batch-invariance-off
    title: Batch-invariant kernels were switched off
    explanation: >-
      Placeholder: without batch-invariant kernels a greedy request's logits depend on the batch it
      shares, so answers drift on every replica while the model version stays the same.
    true: true
  - id: model-swap
    title: A different model version is being served
    explanation: >-
      Placeholder: an unannounced checkpoint changes every answer once, then they are stable again.
    world:
      - kind: model_rollout
        at_s: 600
        params: {version: qwen25-7b-instruct-2026-11}
  - id: mixed-builds
    title: One replica serves a different build than the others
    explanation: >-
      Placeholder: a stray canary answers differently, so results depend on where a request lands.
    world:
      - kind: model_rollout
        at_s: 600
        scope: {replicas: [vllm-2]}
        params: {version: qwen25-7b-instruct-2026-09-rc2}
  - id: fp8-kv-cache
    title: The KV cache was switched to FP8
    explanation: >-
      Placeholder: FP8 keys and values shift greedy answers once; then each prompt is stable again.
    world:
      - kind: model_rollout
        at_s: 600
        params: {version: qwen25-7b-instruct-2026-09-kvfp8, kv_cache_dtype: fp8}
signals:
  - id: probe-hashes-split
    shows: "After the change each probe prompt returns several different output hashes; before, one."
    reveals:
      - {table: probes, columns: [prompt_id, output_hash]}
    query: >-
      SELECT prompt_id, ts >= TIMESTAMP '2025-03-04 09:15:00' AS after_change,
             count(DISTINCT output_hash) AS distinct_outputs, count(*) AS probes
      FROM probes GROUP BY ALL ORDER BY distinct_outputs DESC, prompt_id
    expect: {column: distinct_outputs, op: ">", value: 1}
    likelihoods: {batch-invariance-off: 0.9, model-swap: 0.1, mixed-builds: 0.6, fp8-kv-cache: 0.1}
  - id: kernel-flag-flip
    shows: "The change at 09:10 set batch_invariant from True to False on every replica."
    reveals:
      - {table: events, columns: [detail, old_value, new_value]}
    query: >-
      SELECT detail AS setting, old_value, new_value, count(*) AS replicas
      FROM events WHERE kind = 'config_change' GROUP BY ALL ORDER BY setting
    expect: {column: setting, op: "==", value: batch_invariant}
    likelihoods: {batch-invariance-off: 0.9, model-swap: 0.05, mixed-builds: 0.05, fp8-kv-cache: 0.05}
  - id: same-model-version
    shows: "Every request is still served by the same model_version."
    reveals:
      - {table: requests, columns: [model_version]}
    query: >-
      SELECT model_version, count(*) AS requests FROM requests GROUP BY 1
    expect: {column: model_version, op: "==", value: qwen25-7b-instruct-2026-09}
    likelihoods: {batch-invariance-off: 0.9, model-swap: 0.05, mixed-builds: 0.05, fp8-kv-cache: 0.05}
debrief:
  summary: >-
    Placeholder: one paragraph on what happened and why it looked the way it did.
  causal_chain:
    - "batch_invariant switched off at 09:10"
    - "a request's reductions depend on the batch it shares"
    - "greedy argmax flips after a few tokens: the same prompt gets different answers"
  settling_queries:
    - >-
      SELECT prompt_id, count(DISTINCT output_hash) AS outputs FROM probes GROUP BY 1 ORDER BY 2 DESC
  mitigation: >-
    Placeholder: switch batch-invariant kernels back on; alert on probe output hashes that split.
"""

_QUALITY = """\
title: Math answers got worse this week
tags: [quantized-regression, quality, eval-regression, quantization]
briefing:
  reported_by: Tutoring product team
  since: "since this morning's model update"
  summary: >-
    Placeholder: teachers report more wrong answers to arithmetic word problems. Answers
    also stream faster than before, which nobody complained about.
  evidence:
    - "Placeholder: a screenshot of a wrong worked solution"
fleet:
  model: Llama-3.1-8B
  gpu: H100-SXM
  replicas: 4
  engine:
    max_num_seqs: 256
  router:
    policy: least_outstanding
  model_version: llama31-8b-instruct-bf16
faults:
  - kind: model_rollout
    at_s: 600
    params:
      version: llama31-8b-instruct-fp8
      weight_dtype: fp8
      eval_deltas: {gsm8k: -0.11, mmlu: -0.004, humaneval: -0.006, long_context_qa: -0.003, chat_judge: -0.002}
noise:
  - {kind: deploy_event, at_s: 200, service: eval-harness, version: 3.4.0}
symptoms:
  - id: faster-streams
    claim: "Answers stream faster since the update."
    metric: {table: requests, column: tpot_s, where: "status = 'ok' AND output_tokens > 1"}
    aggregate: p50
    a: {window: [900, 1800]}
    b: {window: [0, 600]}
    compare: ratio_at_most
    value: 0.9
  - id: gsm8k-drop
    claim: "The new version scores clearly lower on grade-school math than the old one."
    briefed: false
    metric: {table: evals, column: score, where: "task = 'gsm8k'"}
    aggregate: mean
    a: {where: "model_version = 'llama31-8b-instruct-fp8'"}
    b: {where: "model_version = 'llama31-8b-instruct-bf16'"}
    compare: difference_at_most
    value: -0.07
  # Timing: the new version served its first request after the rollout began.
  - id: new-version-after-rollout
    claim: "The new version served its first request after 09:10."
    briefed: false
    metric: {table: requests, column: ts, where: "model_version = 'llama31-8b-instruct-fp8'"}
    aggregate: first
    a: {window: [0, 1800]}
    compare: at_least
    value: 600
  # Context: answers are wrong, not failing, with the faults and without.
  - id: nothing-failed
    claim: "No request failed."
    context: true
    metric: {table: requests, column: request_id, where: "status = 'error'"}
    aggregate: count
    a: {window: [0, 1800]}
    compare: at_most
    value: 0
hypotheses:
  - id: fp8-weights
    title: FP8 weight quantization hurt multi-step math
    explanation: >-
      Placeholder: FP8 weights halve weight reads, so decode is faster, but long chains of arithmetic
      are sensitive to the small per-layer errors: math regresses while other tasks stay within noise.
    true: true
  - id: fp8-kv-cache
    title: FP8 KV-cache quantization hurt multi-step math
    explanation: >-
      Placeholder: an FP8 KV cache would round every cached key and value; long-context tasks would
      regress at least as much as math, and the config diff would show kv_cache_dtype.
    world:
      - kind: model_rollout
        at_s: 600
        params:
          version: llama31-8b-instruct-fp8-kv8
          weight_dtype: fp8
          kv_cache_dtype: fp8
          eval_deltas: {gsm8k: -0.1, long_context_qa: -0.12, mmlu: -0.006, humaneval: -0.008, chat_judge: -0.004}
  - id: eval-harness-bug
    title: The eval harness release broke math scoring
    explanation: >-
      Placeholder: the harness deploy changed answer extraction, so every version scores lower on math
      when re-evaluated, the old one included.
    world:
      - kind: model_rollout
        at_s: 600
        params:
          version: llama31-8b-instruct-fp8
          weight_dtype: fp8
          eval_deltas: {gsm8k: -0.004, mmlu: -0.003}
      - kind: eval_harness_change
        at_s: 200
        params:
          eval_deltas: {gsm8k: -0.11}
  - id: speculative-decoding
    title: Speculative decoding switched on in the update changed the math answers
    explanation: >-
      Placeholder: speculative decoding streams faster too; the config diff would show
      num_speculative_tokens and the checkpoint's offline evals would not move.
    world:
      - kind: config_change
        at_s: 600
        params: {num_speculative_tokens: 3, spec_acceptance_rate: 0.7}
signals:
  - id: eval-task-profile
    shows: "The new version loses about 11 points on gsm8k and stays within a point elsewhere."
    reveals:
      - {table: evals, columns: [model_version, task, score]}
    query: >-
      SELECT task, model_version, score, ci_low, ci_high FROM evals ORDER BY task, ts
    expect: {rows_at_least: 10}
    likelihoods: {fp8-weights: 0.9, fp8-kv-cache: 0.3, eval-harness-bug: 0.1, speculative-decoding: 0.05}
  - id: rollout-dtype-diff
    shows: "The update changed weight_dtype from bf16 to fp8; kv_cache_dtype stayed auto."
    reveals:
      - {table: events, columns: [detail, old_value, new_value]}
    query: >-
      SELECT detail AS setting, old_value, new_value, count(*) AS replicas
      FROM events WHERE kind = 'config_change' GROUP BY ALL ORDER BY setting DESC
    expect: {column: setting, op: "==", value: weight_dtype}
    likelihoods: {fp8-weights: 0.9, fp8-kv-cache: 0.05, eval-harness-bug: 0.9, speculative-decoding: 0.05}
  - id: old-version-scores-unchanged
    shows: "The old version's gsm8k score is what it always was: only the new version dropped."
    reveals:
      - {table: evals, columns: [model_version, task, score]}
    query: >-
      SELECT model_version, task, score, ts FROM evals WHERE task = 'gsm8k' ORDER BY ts
    expect: {rows_at_least: 2}
    likelihoods: {fp8-weights: 0.9, fp8-kv-cache: 0.9, eval-harness-bug: 0.1, speculative-decoding: 0.5}
debrief:
  summary: >-
    Placeholder: one paragraph on what happened and why it looked the way it did.
  causal_chain:
    - "the update switched the checkpoint to FP8 weights"
    - "small per-layer rounding errors add up over long arithmetic chains"
    - "gsm8k-style math regresses; other tasks stay within noise; decode gets faster"
  settling_queries:
    - >-
      SELECT task, model_version, score FROM evals ORDER BY task, ts
  mitigation: >-
    Placeholder: roll back to the bf16 checkpoint for the tutor; gate rollouts on per-task evals.
"""

FAMILIES: tuple[Family, ...] = (
    Family("ttft-after-deploy", ("latency", "ttft"), "slow first tokens after a change (TTFT)", _LATENCY),
    Family("one-slow-replica", ("throughput", "tpot"), "slow streaming on one replica (TPOT)", _TPOT),
    Family("oom-at-peak", ("errors", "oom"), "errors and crashes at peak (OOM)", _OOM),
    Family("nondeterministic-outputs", ("determinism",), "the same prompt, different answers", _DETERMINISM),
    Family("quantized-regression", ("quality",), "answers got worse after a rollout (evals)", _QUALITY),
)
"""The families `servedrill new --family` offers: every symptom family of incidents/coverage.py."""
DEFAULT_FAMILY = "ttft-after-deploy"


def find_family(name: str) -> Family | None:
    """The family with this key or alias (case-insensitive), or None."""
    wanted = name.strip().lower()
    return next((f for f in FAMILIES if wanted == f.key or wanted in f.aliases), None)


_TOP_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):")


def _sections(text: str) -> list[tuple[str | None, list[str], list[str]]]:
    """Top-level sections of YAML text as (key, comment lines above it, its own lines); key None holds
    what comes before the first key."""
    out: list[tuple[str | None, list[str], list[str]]] = [(None, [], [])]
    pending: list[str] = []
    for line in text.splitlines(keepends=True):
        found = _TOP_KEY.match(line)
        if found:
            out.append((found.group(1), pending, [line]))
            pending = []
        elif line.startswith("#") or not line.strip():
            pending.append(line)
        else:
            out[-1][2].extend([*pending, line])
            pending = []
    out[-1][2].extend(pending)
    return out


def family_text(template: str, family: Family) -> str:
    """The template with the family's sections in place of the template's own (same order, same comments
    unless the family brings its own)."""
    replacing = {key: (comments, lines) for key, comments, lines in _sections(family.sections) if key}
    out: list[str] = []
    for key, comments, lines in _sections(template):
        if key in replacing:
            own_comments, own_lines = replacing[key]
            out += (own_comments or comments) + own_lines
            if not own_lines[-1].endswith("\n"):
                out.append("\n")
        else:
            out += comments + lines
    return "".join(out)


def scaffold_text(incident_id: str, folder: Path, family: str | None = None) -> str:
    """The template for `incident_id` (for `family`, its sections swapped in), its schema comment pointing
    at incidents/schema.json from `folder`. Raises ValueError for a bad id or an unknown family."""
    text = render_template(incident_id)
    if family is not None:
        chosen = find_family(family)
        if chosen is None:
            names = [f.key for f in FAMILIES] + [a for f in FAMILIES for a in f.aliases]
            hint = did_you_mean(family, names) or "families: " + ", ".join(f.key for f in FAMILIES)
            raise ValueError(f"unknown symptom family '{family}' ({hint})")
        text = family_text(text, chosen)
    try:
        rel = Path(os.path.relpath(SCHEMA_PATH, folder.resolve())).as_posix()
    except ValueError:  # another drive on Windows: no relative path exists
        rel = SCHEMA_PATH.as_posix()
    if rel != "schema.json" and text.startswith(SCHEMA_COMMENT):
        text = text.replace(SCHEMA_COMMENT, f"# yaml-language-server: $schema={rel}", 1)
    return text


def _interactive() -> bool:
    """Whether `new` may ask questions: a person at a terminal, not a script."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _ask_family() -> str:
    """Prompt for a family on a terminal: a numbered list, the default first."""
    click.echo("Pick the symptom family the page is about:")
    for i, f in enumerate(FAMILIES, start=1):
        click.echo(f"  {i}. {f.key:<26} {f.summary} (also: {', '.join(f.aliases)})")
    while True:
        answer = str(click.prompt("family", default="1")).strip()
        if answer.isdigit() and 1 <= int(answer) <= len(FAMILIES):
            return FAMILIES[int(answer) - 1].key
        if find_family(answer) is not None:
            return answer
        click.echo(f"not a family: {answer!r}; type a number from 1 to {len(FAMILIES)} or a name")


@click.command()
@click.argument("incident_id", metavar="ID")
@click.option("--family", default=None, metavar="FAMILY",
              help="Symptom family to start from: " + ", ".join(f.key for f in FAMILIES) + " (or latency, tpot, "
              "errors, quality, determinism). Asked on a terminal when omitted; default ttft-after-deploy.")
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Folder to write ID.yaml in (default: the library, incidents/).")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="File to write instead of DIR/ID.yaml.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def new(incident_id: str, family: str | None, folder: Path | None, out: Path | None, as_json: bool) -> None:
    """Start a new incident from a symptom family's skeleton: writes DIR/ID.yaml (or --out), never over an
    existing file. The skeleton validates as written; --deep then shows what to tune."""
    if out is not None and folder is not None:
        base.fail("give --dir or --out, not both", as_json=as_json)
    if family is None and not as_json and _interactive():
        family = _ask_family()
    chosen = find_family(family or DEFAULT_FAMILY)
    target = out if out is not None else (folder or LIBRARY_DIR) / f"{incident_id}.yaml"
    try:
        text = scaffold_text(incident_id, target.parent, family or DEFAULT_FAMILY)
    except ValueError as exc:
        base.fail(str(exc), as_json=as_json)
        return
    if target.exists():
        base.fail(f"{target} already exists; choose another id or remove the file", as_json=as_json)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        base.fail(f"{target} already exists; choose another id or remove the file", as_json=as_json)
    except OSError as exc:
        base.fail(f"cannot write {target}: {exc.strerror or exc}", as_json=as_json)
    steps = [f"servedrill validate {target}", f"servedrill validate --deep --seeds 3 {target}",
             f"servedrill validate --deep {target}"]
    assert chosen is not None  # scaffold_text refused an unknown family
    if as_json:
        base.emit({"ok": True, "path": str(target), "family": chosen.key, "next": steps})
        return
    click.echo(f"wrote {target} ({chosen.key}: {chosen.summary})")
    click.echo("next: replace the placeholders (docs/authoring.md describes every field), then run")
    for step in steps:
        click.echo(f"  {step}")


# ----- list ---------------------------------------------------------------------------------------


def library_listing(root: Path = LIBRARY_DIR) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(incidents as {id, title, difficulty, tags, path, variants}, files that fail as {path, error}).

    variants: whether the incident has variables (each seed deals another variant).

    error is the file's first diagnostic.
    """
    incidents: list[dict[str, Any]] = []
    invalid: list[dict[str, str]] = []
    for path in iter_library(root):
        try:
            inc = load_incident(path)
        except IncidentError as exc:
            first = str(exc.diagnostics[0]) if exc.diagnostics else f"{path}: could not load the incident"
            invalid.append({"path": str(path), "error": first})
            continue
        except Exception as exc:
            invalid.append({"path": str(path), "error": str(_internal(str(path), exc))})
            continue
        incidents.append(
            {
                "id": inc.id,
                "title": inc.title,
                "difficulty": inc.difficulty,
                "tags": list(inc.tags),
                "path": str(path),
                "variants": bool(inc.variables),
            }
        )
    return incidents, invalid


def tag_coverage(incidents: list[dict[str, Any]]) -> dict[str, int]:
    """Incidents per tag, most covered first (ties by name)."""
    counts = Counter(tag for inc in incidents for tag in inc["tags"])
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def covers(incident: dict[str, Any], topic: str) -> bool:
    """Whether one of the incident's tags contains `topic` (case-insensitive): "kv" covers kv-cache."""
    wanted = topic.strip().lower()
    return bool(wanted) and any(wanted in tag.lower() for tag in incident["tags"])


def select(
    incidents: list[dict[str, Any]], tag: str | None = None, difficulty: int | None = None,
    topics: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """The incidents with tag `tag` (exactly), of `difficulty`, covering every topic in `topics`."""
    return [
        inc for inc in incidents
        if (tag is None or tag in inc["tags"])
        and (difficulty is None or inc["difficulty"] == difficulty)
        and all(covers(inc, t) for t in topics)
    ]


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Left-aligned columns, nothing truncated (titles and tag lists are what the reader came for)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [header, tuple("-" * w for w in widths), *rows]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)


@click.command(name="list")
@click.option("--tag", default=None, help="Only incidents with this tag.")
@click.option("--difficulty", type=click.IntRange(1, 5), default=None, help="Only this difficulty.")
@click.option("--covers", "topics", multiple=True, metavar="TOPIC",
              help="Only incidents with a tag containing TOPIC, e.g. kv (repeatable: all of them).")
@click.option("--library", "root", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Library folder (default: incidents/).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_incidents(
    tag: str | None, difficulty: int | None, topics: tuple[str, ...], root: Path | None, as_json: bool
) -> None:
    """The incident library: id, title, difficulty and tags, and how many incidents cover each tag."""
    incidents, invalid = library_listing(root or LIBRARY_DIR)
    shown = select(incidents, tag, difficulty, topics)
    coverage = tag_coverage(incidents)
    topics = topic_coverage([(inc["id"], inc["tags"]) for inc in incidents])
    if as_json:
        base.emit({"incidents": shown, "invalid": invalid, "coverage": coverage, "topics": topics})
        return
    if shown:
        rows = [(inc["id"], inc["title"], str(inc["difficulty"]), ", ".join(inc["tags"])) for inc in shown]
        click.echo(_table(("id", "title", "difficulty", "tags"), rows))
    else:
        click.echo("no incidents" + (" match" if tag or difficulty or topics else " in the library"))
        for topic in topics:
            if not any(covers(inc, topic) for inc in incidents):
                hint = did_you_mean(topic, coverage)
                click.echo(f"no tag contains '{topic}'" + (f"; {hint}" if hint else ""))
    if coverage:
        click.echo("coverage: " + ", ".join(f"{t} {n}" for t, n in coverage.items()))
    uncovered = [key for key, ids in topics.items() if not ids]
    click.echo(f"interview topics covered: {len(topics) - len(uncovered)} of {len(topics)}"
               + (f" (missing: {', '.join(uncovered)})" if uncovered else ""))
    for bad in invalid:
        click.echo(f"invalid: {bad['error']}")


# ----- wiring -------------------------------------------------------------------------------------


def register(group: click.Group) -> None:
    """Add validate, schema, new and list to `group` (the `servedrill` command group)."""
    for command in (validate, schema, new, list_incidents):
        group.add_command(command)
