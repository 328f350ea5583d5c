"""The `servedrill` command line. Every command whose output a script could read takes --json
and then prints exactly one JSON object (keys documented in docs/cli.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click


def emit(obj: dict[str, Any]) -> None:
    click.echo(json.dumps(obj, default=str))


def fail(message: str, *, as_json: bool = False, code: int = 1) -> None:
    """One clear line (or one JSON object) and a non-zero exit, never a traceback."""
    if as_json:
        emit({"ok": False, "error": message})
    else:
        click.echo(f"servedrill: {message}", err=True)
    sys.exit(code)


class GuardedGroup(click.Group):
    """The CLI boundary: whatever a command raises becomes one line (or one JSON object with --json) and
    exit code 1, never a traceback. A file the system refuses names the file and the reason."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["servedrill.json"] = "--json" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            fail("interrupted", as_json=_wants_json(ctx), code=130)
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}", as_json=_wants_json(ctx))
        except Exception as exc:
            fail(f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                 as_json=_wants_json(ctx))


def _wants_json(ctx: click.Context) -> bool:
    return bool(ctx.meta.get("servedrill.json"))


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="servedrill")
def main() -> None:
    """servedrill: an incident-debugging game for LLM inference engineers."""


# ----- calc ---------------------------------------------------------------------------------------
@main.command()
@click.option("--model", required=True, help="Model name, e.g. Llama-3.1-8B.")
@click.option("--gpu", required=True, help="GPU name, e.g. H100-SXM.")
@click.option("--tp", default=1, show_default=True, help="Tensor-parallel degree.")
@click.option("--dtype", default="bf16", type=click.Choice(["bf16", "fp8", "int4"]), show_default=True)
@click.option("--kv-dtype", default="auto", type=click.Choice(["auto", "fp8"]), show_default=True)
@click.option("--context", default=4096, show_default=True, help="Context length, tokens.")
@click.option("--batch", default=1, show_default=True, help="Decode batch for the step-time figure.")
@click.option("--spec-k", default=0, show_default=True, help="Speculative draft tokens per step.")
@click.option("--spec-acceptance", default=0.0, show_default=True, help="Per-token acceptance rate, 0..1.")
@click.option("--rps", type=float, default=None, help="Traffic for the GPU count, requests/s.")
@click.option("--prompt", default=1024, show_default=True, help="Prompt tokens per request (with --rps).")
@click.option("--output", default=256, show_default=True, help="Output tokens per request (with --rps).")
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
@main.command()
@click.argument("targets", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench(targets: tuple[str, ...], as_json: bool) -> None:
    """Measure speed and memory of the standard fleet (targets: engine, generate; default all)."""
    from game.bench import DEFAULT_TARGETS, TARGETS, run_target

    chosen = targets or DEFAULT_TARGETS
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        fail(f"unknown bench target {unknown[0]!r}; known: {', '.join(TARGETS)}", as_json=as_json)
    results = {t: run_target(t) for t in chosen}
    if as_json:
        emit({"ok": all(r.get("ok") for r in results.values()), "results": results})
        return
    for t, r in results.items():
        click.echo(format_bench(t, r))


def format_bench(target: str, r: dict[str, Any]) -> str:
    """One line for an engine or generate bench result (see game.bench)."""
    if not r.get("ok"):
        return f"{target}: FAILED {r.get('error')}"
    verdict = "meets" if r["meets_target"] else "MISSES"
    return (f"{target}: {r['wall_s']:.2f} s wall, {r['peak_mb']:.0f} MB peak, {r['requests']} requests "
            f"({r['requests_per_wall_s']:.0f}/s) - {verdict} target {r['limit_wall_s']} s / {r['limit_peak_mb']} MB")


# ----- incidents ----------------------------------------------------------------------------------
def _load(ref: str, as_json: bool) -> Any:
    from incidents.loader import IncidentError, find_incident, load_incident

    try:
        return load_incident(find_incident(ref))
    except IncidentError as exc:
        lines = [str(d) for d in exc.diagnostics]
        if as_json:
            emit({"ok": False, "error": lines[0] if lines else "invalid incident", "diagnostics": lines})
            sys.exit(1)
        for line in lines:
            click.echo(line, err=True)
        sys.exit(1)


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


@main.command()
@click.argument("incident")
@click.option("--seed", default=0, show_default=True, help="Seed: same incident and seed, same telemetry.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Also copy the database here.")
@click.option("--force", is_flag=True, help="Rebuild even if a cached database exists.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def generate(incident: str, seed: int, out: Path | None, force: bool, as_json: bool) -> None:
    """Simulate an incident and build its DuckDB database (cached by content, seed and code version)."""
    from telemetry_gen.cache import ensure_database

    inc = _load(incident, as_json)
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


@main.command()
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


@main.command(name="query")
@click.argument("incident")
@click.argument("sql")
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def query_cmd(incident: str, sql: str, seed: int, as_json: bool) -> None:
    """Run one query through the sandboxed gateway and print the result."""
    from game.gateway import Gateway
    from telemetry_gen.cache import ensure_database

    inc = _load(incident, as_json)
    info = ensure_database(inc, seed, progress=None if as_json else _Bar(inc.id))
    with Gateway(Path(info.path)) as gw:
        res = gw.run(sql)
    if as_json:
        emit(res.to_dict())
        sys.exit(0 if res.ok else 1)
    if not res.ok:
        fail(res.error or "query failed")
    from game.plain import format_table

    click.echo(format_table(res.columns, res.rows, max_rows=50))
    more = " (truncated)" if res.truncated else ""
    click.echo(f"{res.row_count} rows{more} in {res.duration_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
