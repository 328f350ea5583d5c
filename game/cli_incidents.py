"""Commands for incident authors: `validate [--deep]`, `schema`, `new` and `list`.

`register(group)` adds them to the `servedrill` group. Every command with --json prints
exactly one JSON object (keys in docs/cli.md). None of them lets an exception escape as a
traceback: a problem with one file becomes a diagnostic naming that file.
"""

from __future__ import annotations

import json
import os
import sys
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
    load_variant,
    render_template,
)
from incidents.spec import SCHEMA_PATH, did_you_mean, schema_text
from incidents.variants import VALIDATION_SEEDS

# ----- validate -----------------------------------------------------------------------------------


@dataclass
class FileResult:
    """What `validate` found for one file; deep is a list of ProofReport dicts (one per seed) or None."""

    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    deep: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return not self.diagnostics and all(run["ok"] for run in self.deep or [])

    def to_dict(self) -> dict[str, Any]:
        deep = None
        if self.deep is not None:
            deep = {"ok": all(run["ok"] for run in self.deep), "runs": self.deep}
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


def deep_seeds(path: str, seeds: tuple[int, ...]) -> tuple[int, ...]:
    """Seeds `--deep` simulates: those given, else VALIDATION_SEEDS for an incident with variables, else 0."""
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


def _deep(path: str, seeds: tuple[int, ...], show_progress: bool) -> list[dict[str, Any]]:
    from telemetry_gen.proof import prove

    runs = []
    for seed in seeds:
        # each seed is its own variant of an incident with variables
        incident, variant = load_variant(path, seed)
        bar = base._Bar(f"{incident.id} seed {seed}") if show_progress else None
        report = prove(incident, seed, progress=bar, variant=variant,
                       inspect=lambda db, inc=incident: unobserved_signals(inc, db))
        runs.append({**report.to_dict(), "lines": report.lines()})
    return runs


def validate_file(
    path: str, *, deep: bool, seeds: tuple[int, ...] = (), show_progress: bool = False
) -> FileResult:
    """Structure, names and cross-references of one file, then (deep) the simulated claims.

    An incident with variables is checked as several variants (see `deep_seeds`); with explicit
    seeds, the structure check also covers each of their variants.
    """
    result = FileResult(path)
    try:
        result.diagnostics = check_incident_file(path)
        for seed in seeds if has_variables(path) and not result.diagnostics else ():
            if seed not in VALIDATION_SEEDS:
                result.diagnostics += check_incident_file(path, seed)
        if deep and not result.diagnostics:
            result.deep = _deep(path, deep_seeds(path, seeds), show_progress)
    except IncidentError as exc:
        result.diagnostics = list(exc.diagnostics)
    except Exception as exc:
        result.diagnostics = [_internal(path, exc)]
    return result


def _print_file(result: FileResult) -> None:
    if result.ok and result.deep is None:
        click.echo(f"{result.path}: ok")
    for d in result.diagnostics:
        click.echo(str(d))
    for run in result.deep or []:
        click.echo(f"{result.path}: deep check of " + run["lines"][0])
        for line in run["lines"][1:]:
            click.echo(line)


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--deep", is_flag=True, help="Also simulate with and without the faults and check every claim.")
@click.option("--seed", "seeds", type=int, multiple=True,
              help="Seed for --deep (repeatable; default 0, or 0, 1 and 2 for an incident with variables).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def validate(paths: tuple[str, ...], deep: bool, seeds: tuple[int, ...], as_json: bool) -> None:
    """Check incident files (default: the whole library); PATHS may be files, folders or library ids.

    Prints every problem as file:line:column: message (hint: ...) and exits 1 if there is any.
    """
    results: list[FileResult] = []
    for path, problems in expand_paths(paths):
        result = (
            FileResult(path, problems)
            if problems
            else validate_file(path, deep=deep, seeds=seeds, show_progress=not as_json)
        )
        results.append(result)
        if not as_json:
            _print_file(result)
    ok = all(r.ok for r in results)
    if as_json:
        base.emit({"ok": ok, "files": [r.to_dict() for r in results]})
    elif not results:
        click.echo("no incident files to check")
    else:
        bad = sum(not r.ok for r in results)
        what = "checked and simulated" if deep else "checked"
        files = f"{len(results)} file{'s' * (len(results) != 1)}"
        click.echo(f"{files} {what}: {len(results) - bad} ok, {bad} with errors")
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


def scaffold_text(incident_id: str, folder: Path) -> str:
    """The template for `incident_id`, its schema comment pointing at incidents/schema.json from `folder`."""
    text = render_template(incident_id)
    try:
        rel = Path(os.path.relpath(SCHEMA_PATH, folder.resolve())).as_posix()
    except ValueError:  # another drive on Windows: no relative path exists
        rel = SCHEMA_PATH.as_posix()
    if rel != "schema.json" and text.startswith(SCHEMA_COMMENT):
        text = text.replace(SCHEMA_COMMENT, f"# yaml-language-server: $schema={rel}", 1)
    return text


@click.command()
@click.argument("incident_id", metavar="ID")
@click.option("--dir", "folder", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Folder to write ID.yaml in (default: the library, incidents/).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def new(incident_id: str, folder: Path | None, as_json: bool) -> None:
    """Start a new incident from the template: writes DIR/ID.yaml, never over an existing file."""
    folder = folder or LIBRARY_DIR
    try:
        text = scaffold_text(incident_id, folder)
    except ValueError as exc:
        base.fail(str(exc), as_json=as_json)
        return
    target = folder / f"{incident_id}.yaml"
    if target.exists():
        base.fail(f"{target} already exists; choose another id or remove the file", as_json=as_json)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with target.open("x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        base.fail(f"{target} already exists; choose another id or remove the file", as_json=as_json)
    except OSError as exc:
        base.fail(f"cannot write {target}: {exc.strerror or exc}", as_json=as_json)
    steps = [f"servedrill validate {target}", f"servedrill validate --deep {target}"]
    if as_json:
        base.emit({"ok": True, "path": str(target), "next": steps})
        return
    click.echo(f"wrote {target}")
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
