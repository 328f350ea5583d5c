"""The `servedrill` command line: its one way to fail and print (`CommandError`, `emit`, `fail`), the guarded
group, and the player's telemetry commands `query` and `export`. Every command whose output a script could
read takes --json and then prints exactly one JSON object (keys documented in docs/cli.md).

A player-facing module (tests/test_layers.py, CLI_PLAYER): it calls `game.api` and nothing below it. The
authoring and engineering tools (calc, bench, fidelity, generate) are in game.cli.tool_commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from game import api


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
    from game.api.fanout import FanoutError  # here: most runs of the CLI raise nothing

    match exc:
        case CommandError():
            if exc.as_json is None:
                exc.as_json = as_json
            return exc
        case KeyboardInterrupt():
            return CommandError("interrupted", exit_code=130, as_json=as_json)
        case api.SessionError() | api.TranscriptError() | api.GMError() | FanoutError():
            return CommandError(str(exc), as_json=as_json)
        case api.IncidentError():
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


class ProgressBar:
    """A one-line progress bar on stderr, only when stderr is a terminal (an `api.BuildProgress`)."""

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


# ----- the player's telemetry --------------------------------------------------------------------
def _variant(ref: str, seed: int, as_json: bool) -> api.Variant:
    """Incident `ref` (library id or file) as the variant of `seed`: the telemetry of that seed is that
    variant's, as in a game."""
    try:
        return api.load_variant(api.find_incident(ref), seed)
    except api.IncidentError as exc:
        lines = [str(d) for d in exc.diagnostics]
        # every problem, one a line (an author fixes them all at once); JSON keeps an empty list too
        raise CommandError(lines[0] if lines else "invalid incident", diagnostics=lines or ["invalid incident"],
                           as_json=as_json) from None


@click.command()
@click.argument("incident")
@click.option("--parquet", "parquet_dir", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def export(incident: str, parquet_dir: Path, seed: int, as_json: bool) -> None:
    """Write every table of an incident's database as Parquet files."""
    variant = _variant(incident, seed, as_json)
    inc = variant.incident
    exported = api.export_parquet(variant, parquet_dir, progress=None if as_json else ProgressBar(inc.id))
    files = exported.files
    if as_json:
        emit({"ok": True, "incident": inc.id, "seed": seed, "digest": exported.digest, "files": files})
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
@click.option("--world", default=api.TRUTH_WORLD, show_default=True, metavar="NAME",
              help="Authors: query another world of the incident: a hypothesis id (its `world` faults in place "
                   "of `faults`), a family member (truth~1, ID~1: the same on another traffic draw), noise "
                   "(= truth~1) or baseline (no faults). Spoils the answer.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def query_cmd(incident: str, sql: str, seed: int, world: str, as_json: bool) -> None:
    """Run one query through the sandboxed gateway and print the result."""
    variant = _variant(incident, seed, as_json)
    inc = variant.incident
    if world != api.TRUTH_WORLD:
        # on stderr, so stdout stays one result: the worlds are the incident's hypotheses, its answer key
        click.echo(f"servedrill query --world {world}: a world of the incident's answer key (this spoils the game)",
                   err=True)
        known = api.world_names(variant)
        if world not in known:
            fail(f"no world {world!r} in {inc.id}; worlds: {', '.join(known)} "
                 "(hint: a hypothesis id, ID~1 for its other traffic draw, noise or baseline)", as_json=as_json)
    telemetry = api.open_world(variant, world, progress=None if as_json else ProgressBar(inc.id))
    try:
        res = api.glance(telemetry, sql)  # one statement, no session: nothing to record it in
    finally:
        telemetry.close()
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



COMMANDS: tuple[click.Command, ...] = (export, query_cmd)
"""The core commands defined here (the others live beside the code they drive; game.cli.commands assembles all)."""
