"""The `servedrill` commands for authors and engineers that work on the engine and the telemetry themselves:
calc (the estimation round on the engine model), bench (speed and memory), fidelity (the engine against
published benchmarks) and generate (simulate an incident and build its database).

A tool-facing module (tests/test_layers.py, CLI_TOOLS): it may import the lower layers directly, since what it
measures or builds lies below any game. COMMANDS lists them; game.cli.commands assembles the group."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from game.cli.core import CommandError, ProgressBar, emit, fail
from game.cli.fanout_options import ray_option, require_ray


# ----- calc ---------------------------------------------------------------------------------------
@click.command()
@click.option("--model", required=True,
              help="Model: a profile name in any case, a Hugging Face id or a short name, e.g. Llama-3.1-8B, "
                   "meta-llama/Llama-3.1-8B-Instruct, Llama-3-8B.")
@click.option("--gpu", required=True,
              help="GPU: a profile name in any case or a short name, e.g. H100-SXM, h100, h200.")
@click.option("--tp", default=1, show_default=True, help="Tensor-parallel degree.")
@click.option("--dtype", default="bf16", type=click.Choice(["bf16", "fp8", "int4"]), show_default=True)
@click.option("--kv-dtype", default="auto", type=click.Choice(["auto", "fp8"]), show_default=True)
@click.option("--context", default=4096, show_default=True,
              help="Context per request, tokens: KV capacity, decode context and the prefill figure.")
@click.option("--batch", default=1, show_default=True, help="Decode batch for the step-time figure.")
@click.option("--spec-k", default=0, show_default=True, help="Speculative draft tokens per step.")
@click.option("--spec-acceptance", default=0.0, show_default=True, help="Per-token acceptance rate, 0..1.")
@click.option("--rps", type=float, default=None, help="Traffic for the GPU count, requests/s.")
@click.option("--prompt", default=1024, show_default=True,
              help="Prompt tokens per request: the TTFT and request-latency figures and --rps sizing.")
@click.option("--output", default=256, show_default=True,
              help="Output tokens per request: the request-latency figure and --rps sizing.")
@click.option("--gpu-memory-utilization", type=float, default=None,
              help="Share of each GPU's memory the engine may use (default: vLLM's 0.9); too little for one "
                   "request of --context tokens and the engine would not start.")
@click.option("--max-num-seqs", type=int, default=None,
              help="Scheduler's limit on running sequences (default: vLLM V1's for the GPU, 1024 on 70 GiB-plus "
                   "cards other than A100, else 256): whether a batch that runs out of memory can be reached.")
@click.option("--max-num-batched-tokens", type=int, default=None,
              help="Scheduler's token budget per step (default: vLLM V1's for the GPU, 8192 on 70 GiB-plus cards "
                   "other than A100, else 2048); it sizes the activation reservation.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def calc(as_json: bool, **kw: Any) -> None:
    """The estimation round: memory, KV capacity, step times and GPU count from the engine model."""
    from engine_model.estimates import calc as run_calc
    from engine_model.estimates import format_calc

    try:
        result = run_calc(kw.pop("model"), kw.pop("gpu"), **kw)
    except (KeyError, ValueError) as exc:
        fail(str(exc).strip("'\""), as_json=as_json)
        return
    if as_json:
        emit(result)
    else:
        click.echo(format_calc(result))


# ----- bench --------------------------------------------------------------------------------------
@click.command()
@click.argument("targets", nargs=-1)
@ray_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench(targets: tuple[str, ...], ray: str | None, as_json: bool) -> None:
    """Measure speed and memory of the standard fleet (targets: engine, generate; default all)."""
    from game.cli.bench import DEFAULT_TARGETS, TARGETS, run_target

    chosen = targets or DEFAULT_TARGETS
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        fail(f"unknown bench target {unknown[0]!r}; known: {', '.join(TARGETS)}", as_json=as_json)
    if ray is not None and tuple(chosen) != ("fidelity",):
        fail("--ray fans out the fidelity points only: run it as `servedrill bench fidelity --ray ADDRESS`",
             as_json=as_json)
    require_ray(ray)
    results = {t: run_target(t, ray=ray) for t in chosen}
    if as_json:
        emit({"ok": all(r.get("ok") for r in results.values()), "results": results})
        return
    for t, r in results.items():
        click.echo(format_bench(t, r))


def format_bench(target: str, r: dict[str, Any]) -> str:
    """One line for a bench result (see game.cli.bench); for fidelity, the comparison table before it."""
    if not r.get("ok"):
        return f"{target}: FAILED {r.get('error')}"
    verdict = {True: "meets", False: "MISSES", None: "no"}[r["meets_target"]]
    if target == "worlds":
        speed = (f"worlds: {r['worlds']} worlds of {r['incident']} in {r['worlds_s']:.1f} s ({r['build_jobs']} "
                 f"background processes) after its own database in {r['own_database_s']:.1f} s; a "
                 f"{r['queries']}-query session scored in {r['assess_s']:.1f} s, again in {r['rescore_s']:.1f} s; "
                 f"{max(r['peak_mb'], r['builder_peak_mb']):.0f} MB peak - {verdict} target "
                 f"{r['limit_wall_s']} s / {r['limit_peak_mb']} MB")
        return speed
    speed = (f"{target}: {r['wall_s']:.2f} s wall, {r['peak_mb']:.0f} MB peak, {r['requests']} requests "
             f"({r['requests_per_wall_s']:.0f}/s)")
    if "loop_ratio" in r:
        speed += (f"; the whole process {r['process_wall_s']:.2f} s = {r['loop_ratio']:.1f}x the reference loop "
                  f"({r['loop_s']:.3f} s) - {verdict} target {r['limit_loop_ratio']:g}x / {r['limit_peak_mb']} MB")
    else:
        speed += f" - {verdict} target {r['limit_wall_s']} s / {r['limit_peak_mb']} MB"
    if target == "mitigation":  # CPU seconds beside the wall clock, and the game's own path on an incident
        inc = r["incident"]
        acts = " + ".join(inc["actions"])
        speed += (f"; {r['cpu_s']:.2f} s CPU for {r['simulated_s']:.0f} simulated s (decision at "
                  f"{r['decision_s']:.0f}); {inc['id']} with {acts}: {inc['wall_s']:.2f} s wall, "
                  f"{inc['cpu_s']:.2f} s CPU")
    if target == "fidelity":  # the comparison itself, not only how fast it ran
        from telemetry_gen.fidelity.harness import format_fidelity

        return format_fidelity(r) + "\n\n" + speed
    return speed


# ----- fidelity -----------------------------------------------------------------------------------
@click.command()
@click.option("--points", "points_file", type=click.Path(path_type=Path), default=None,
              help="A points file in the built-in file's format (default: the built-in public points).")
@click.option("--only", default="", metavar="TEXT", help="Only the points whose name contains TEXT (any case).")
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Processes to spread the points over (default: the CPUs available, at most 4).")
@ray_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def fidelity(points_file: Path | None, only: str, workers: int | None, ray: str | None, as_json: bool) -> None:
    """Replay published benchmark points through the engine model and compare (your own file with --points)."""
    from telemetry_gen.fidelity.harness import (
        POINTS_PATH,
        PointsError,
        format_fidelity,
        load_points,
        run_fidelity,
        select,
    )

    path = points_file or POINTS_PATH
    try:
        chosen = select(load_points(path), only)
    except PointsError as exc:
        raise CommandError(exc.problems[0], diagnostics=exc.problems, as_json=as_json) from None
    if not chosen:
        fail(f"no point of {path} has {only!r} in its name", as_json=as_json)
    require_ray(ray)
    result = run_fidelity(chosen, workers, ray=ray)
    result = {"ok": True, "points_file": str(path), "only": only or None, **result}
    if as_json:
        emit(result)
    else:
        click.echo(format_fidelity(result))


# ----- generate -----------------------------------------------------------------------------------
def _load(ref: str, seed: int, as_json: bool) -> Any:
    """The incident `ref` as the variant of `seed`: the database built is the one a player at that seed
    queries."""
    from incidents.loader import IncidentError, find_incident, load_incident

    try:
        return load_incident(find_incident(ref), seed=seed)
    except IncidentError as exc:
        lines = [str(d) for d in exc.diagnostics]
        # every problem, one a line (an author fixes them all at once); JSON keeps an empty list too
        raise CommandError(lines[0] if lines else "invalid incident", diagnostics=lines or ["invalid incident"],
                           as_json=as_json) from None


@click.command()
@click.argument("incident")
@click.option("--seed", default=0, show_default=True, help="Seed: same incident and seed, same telemetry.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also copy the database here.")
@click.option("--force", is_flag=True, help="Rebuild even if a cached database exists.")
@click.option("--allow-large", is_flag=True, help="Build even when the estimated cost exceeds the bounds "
              "(docs/authoring.md, 'Bounds').")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def generate(incident: str, seed: int, out: Path | None, force: bool, allow_large: bool, as_json: bool) -> None:
    """Simulate an incident and build its DuckDB database (cached by content, seed and code version)."""
    from incidents.loader import find_incident
    from telemetry_gen.cache import ensure_database
    from telemetry_gen.cost import ALLOW_LARGE_ENV, cost_diagnostics

    inc = _load(incident, seed, as_json)
    if not allow_large:
        # estimated before anything is simulated: a build over the bounds is refused at the knob's line
        lines = [str(d) for d in cost_diagnostics(inc, str(find_incident(incident)))]
        if lines:
            raise CommandError(lines[0], diagnostics=lines, as_json=as_json)
    else:
        os.environ[ALLOW_LARGE_ENV] = "1"  # the build's own guard (telemetry_gen.cost.refuse_large) too
    info = ensure_database(inc, seed, out=out, force=force, progress=None if as_json else ProgressBar(inc.id))
    if as_json:
        emit({"ok": True, **info.to_dict()})
        return
    click.echo(f"{info.path}")
    click.echo(f"  digest  {info.digest}")
    how = "cached" if info.cached else f"built in {info.build_s:.1f} s"
    click.echo(f"  span    {info.span_s:.0f} s from {info.start}  ({how})")
    for name, n in info.rows.items():
        click.echo(f"  {name:<9}{n:>10,} rows")


COMMANDS: tuple[click.Command, ...] = (calc, bench, fidelity, generate)
"""The tool commands defined here, in the order `servedrill --help` lists them."""
