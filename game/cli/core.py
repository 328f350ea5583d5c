"""The `servedrill` command line. Every command whose output a script could read takes --json
and then prints exactly one JSON object (keys documented in docs/cli.md)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from game.cli.fanout_options import ray_option, require_ray


def emit(obj: dict[str, Any]) -> None:
    click.echo(json.dumps(obj, default=str))


class CommandError(click.ClickException):
    """The one way a servedrill command fails: one line on stderr (``servedrill: message``), or with
    --json one JSON object on stdout ({"ok": false, "error", "diagnostics"?}), and exit code 1 (130 for
    an interrupt). `diagnostics`, when given, are printed one a line instead of the message (file:line
    problems). Raise it from a command; `GuardedGroup` turns every other exception into one."""

    def __init__(self, message: str, *, diagnostics: list[str] | None = None, exit_code: int = 1,
                 as_json: bool | None = None) -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics or [])
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it a class variable; per error here
        self.as_json = as_json
        """None: as the command line asked (`GuardedGroup` fills it in from --json)."""

    def show(self, file: Any = None) -> None:
        if self.as_json:
            emit({"ok": False, "error": self.message,
                  **({"diagnostics": self.diagnostics} if self.diagnostics else {})})
        elif self.diagnostics:
            for line in self.diagnostics:
                click.echo(line, err=True)
        else:
            click.echo(f"servedrill: {self.message}", err=True)


def command_error(exc: BaseException, *, as_json: bool | None = None) -> CommandError:
    """`exc` as the CommandError that reports it: the project's own errors by their one-line message, a
    file the system refused by its name and reason, anything else as an internal error (never a
    traceback: a command line is read by people and scripts)."""
    # imported here: the error types live with their layers, and most runs of the CLI raise nothing
    from game.gameday.gm import GMError
    from game.session import SessionError, TranscriptError
    from incidents.loader import IncidentError
    from telemetry_gen.fanout import FanoutError

    match exc:
        case CommandError():
            if exc.as_json is None:
                exc.as_json = as_json
            return exc
        case KeyboardInterrupt():
            return CommandError("interrupted", exit_code=130, as_json=as_json)
        case SessionError() | TranscriptError() | GMError() | FanoutError():
            return CommandError(str(exc), as_json=as_json)
        case IncidentError():
            return CommandError(str(exc.diagnostics[0]) if exc.diagnostics else "invalid incident", as_json=as_json)
        case OSError():
            where = f"{exc.filename}: " if exc.filename else ""
            return CommandError(f"{where}{exc.strerror or exc}", as_json=as_json)
        case _:
            first = str(exc).splitlines()[0] if str(exc) else ""
            return CommandError(f"internal error: {type(exc).__name__}: {first}", as_json=as_json)


def fail(message: str, *, as_json: bool | None = None, code: int = 1) -> NoReturn:
    """Stop the command with one clear line (or one JSON object): raises CommandError."""
    raise CommandError(message, exit_code=code, as_json=as_json)


class GuardedCommand(click.Command):
    """A command whose every failure is reported as a CommandError (one line, or one JSON object when
    the command was given --json), on whatever group it is mounted."""

    def invoke(self, ctx: click.Context) -> Any:
        return _guarded_invoke(super().invoke, ctx)


class GuardedGroup(click.Group):
    """The CLI boundary: its commands and subgroups are guarded (`GuardedCommand`), and so is whatever a
    command added from elsewhere raises: one line (or one JSON object with --json), never a traceback."""

    command_class = GuardedCommand
    group_class = type  # subgroups are GuardedGroups too

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["servedrill.json"] = "--json" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        return _guarded_invoke(super().invoke, ctx)


def _guarded_invoke(invoke: Callable[[click.Context], Any], ctx: click.Context) -> Any:
    """`invoke(ctx)` with every failure but click's own raised as a CommandError."""
    try:
        return invoke(ctx)
    except (click.exceptions.Exit, click.exceptions.Abort, SystemExit):
        raise
    except CommandError as exc:
        raise command_error(exc, as_json=_wants_json(ctx)) from None
    except click.ClickException:
        raise  # click's own usage errors print as click prints them
    except (KeyboardInterrupt, Exception) as exc:
        raise command_error(exc, as_json=_wants_json(ctx)) from exc


def _wants_json(ctx: click.Context) -> bool:
    """Whether the command line asked for JSON: the command's own --json, else any --json seen by the group."""
    return bool(ctx.params.get("as_json") or ctx.meta.get("servedrill.json"))


def new_group() -> click.Group:
    """An empty `servedrill` group (guarded, -h, --version). game.cli.commands.build_group fills one."""

    @click.group(name="servedrill", cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(package_name="servedrill")
    def main() -> None:
        """servedrill: an incident-debugging game for LLM inference engineers."""

    return main


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
              help="Scheduler's limit on running sequences (default: vLLM's 256): whether a batch that runs out "
                   "of memory can be reached.")
@click.option("--max-num-batched-tokens", type=int, default=None,
              help="Scheduler's token budget per step (default: vLLM's 8192); it sizes the activation reservation.")
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
    verdict = "meets" if r["meets_target"] else "MISSES"
    speed = (f"{target}: {r['wall_s']:.2f} s wall, {r['peak_mb']:.0f} MB peak, {r['requests']} requests "
            f"({r['requests_per_wall_s']:.0f}/s) - {verdict} target {r['limit_wall_s']} s / {r['limit_peak_mb']} MB")
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


# ----- incidents ----------------------------------------------------------------------------------
def _load(ref: str, as_json: bool) -> Any:
    from incidents.loader import IncidentError, find_incident, load_incident

    try:
        return load_incident(find_incident(ref))
    except IncidentError as exc:
        lines = [str(d) for d in exc.diagnostics]
        # every problem, one a line (an author fixes them all at once); JSON keeps an empty list too
        raise CommandError(lines[0] if lines else "invalid incident", diagnostics=lines or ["invalid incident"],
                           as_json=as_json) from None


class _Bar:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stderr.isatty()
        self.last = -1

    def __call__(self, fraction: float, stage: str) -> None:
        if not self.tty:
            return
        pct = int(fraction * 100)
        if pct == self.last:
            return
        self.last = pct
        filled = pct * 30 // 100
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {pct:3d}% {stage:<12}")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()


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

    inc = _load(incident, as_json)
    if not allow_large:
        # estimated before anything is simulated: a build over the bounds is refused at the knob's line
        lines = [str(d) for d in cost_diagnostics(inc, str(find_incident(incident)))]
        if lines:
            raise CommandError(lines[0], diagnostics=lines, as_json=as_json)
    else:
        os.environ[ALLOW_LARGE_ENV] = "1"  # the build's own guard (telemetry_gen.cost.refuse_large) too
    info = ensure_database(inc, seed, out=out, force=force, progress=None if as_json else _Bar(inc.id))
    if as_json:
        emit({"ok": True, **info.to_dict()})
        return
    click.echo(f"{info.path}")
    click.echo(f"  digest  {info.digest}")
    how = "cached" if info.cached else f"built in {info.build_s:.1f} s"
    click.echo(f"  span    {info.span_s:.0f} s from {info.start}  ({how})")
    for name, n in info.rows.items():
        click.echo(f"  {name:<9}{n:>10,} rows")


@click.command()
@click.argument("incident")
@click.option("--parquet", "parquet_dir", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def export(incident: str, parquet_dir: Path, seed: int, as_json: bool) -> None:
    """Write every table of an incident's database as Parquet files."""
    import duckdb

    from telemetry_gen.cache import ensure_database

    inc = _load(incident, as_json)
    info = ensure_database(inc, seed, progress=None if as_json else _Bar(inc.id))
    parquet_dir.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(info.path, read_only=True)
    files = {}
    try:
        for name in info.rows:
            target = parquet_dir / f"{name}.parquet"
            con.execute(f"COPY \"{name}\" TO '{target.as_posix()}' (FORMAT parquet)")
            files[name] = str(target)
    finally:
        con.close()
    if as_json:
        emit({"ok": True, "incident": inc.id, "seed": seed, "digest": info.digest, "files": files})
    else:
        for name, path in files.items():
            click.echo(f"{name:<9} {path}")


QUERY_CELL_CHARS = 120
"""`servedrill query` cuts a cell at this many characters (the game's own tables at
game.frontends.line_mode.CELL_CHARS)."""


@click.command(name="query")
@click.argument("incident")
@click.argument("sql")
@click.option("--seed", default=0, show_default=True)
@click.option("--world", default="truth", show_default=True, metavar="NAME",
              help="Authors: query another world of the incident: a hypothesis id (its `world` faults in place "
                   "of `faults`), a family member (truth~1, ID~1: the same on another traffic draw), noise "
                   "(= truth~1) or baseline (no faults). Spoils the answer.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def query_cmd(incident: str, sql: str, seed: int, world: str, as_json: bool) -> None:
    """Run one query through the sandboxed gateway and print the result."""
    from game.query.gateway import Gateway
    from telemetry_gen.cache import ensure_database
    from telemetry_gen.proving.worlds import BASELINE, NOISE_ALIAS, TRUTH, build_world, world_names

    inc = _load(incident, as_json)
    if world == TRUTH:
        info = ensure_database(inc, seed, progress=None if as_json else _Bar(inc.id))
    else:
        # on stderr, so stdout stays one result: the worlds are the incident's hypotheses, its answer key
        click.echo(f"servedrill query --world {world}: a world of the incident's answer key (this spoils the game)",
                   err=True)
        known = [*world_names(inc), NOISE_ALIAS, BASELINE, *(h.id for h in inc.hypotheses if h.true)]
        if world not in known:
            fail(f"no world {world!r} in {inc.id}; worlds: {', '.join(known)} "
                 "(hint: a hypothesis id, ID~1 for its other traffic draw, noise or baseline)", as_json=as_json)
        info = build_world(inc, seed, world)
    with Gateway(Path(info.path)) as gw:
        res = gw.run(sql)
    if as_json:
        emit({**res.to_dict(), "world": world})
        sys.exit(0 if res.ok else 1)
    if not res.ok:
        fail(res.error or "query failed")
    from game.frontends.line_mode import format_table, truncated_note

    # every row the gateway returned (at most game.query.limits.ROW_CAP), as the game shows them; wide cells: a
    # script or an author copies names from here (DCGM names run past 40 characters)
    click.echo(format_table(res.columns, res.rows, max_rows=None, cell_chars=QUERY_CELL_CHARS))
    click.echo(f"{res.row_count} rows{truncated_note(res)} in {res.duration_s * 1000:.0f} ms")



COMMANDS: tuple[click.Command, ...] = (calc, bench, fidelity, generate, export, query_cmd)
"""The core commands defined here (the others live beside the code they drive; game.cli.commands assembles all)."""
