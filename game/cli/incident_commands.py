"""Commands for incident authors: `validate [--deep]` (game.cli.validate_commands), `schema`, `new` and `list`.

game.cli.commands assembles COMMANDS into the `servedrill` group. Every command with --json prints
exactly one JSON object (keys in docs/cli.md). None of them lets an exception escape as a
traceback: a problem with one file becomes a diagnostic naming that file.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

# game.cli.core's helpers (emit, fail), as a module reference
import game.cli.core as base
from game.api import SOLVED_SCORE
from game.authoring.families import DEFAULT_FAMILY, FAMILIES, find_family, scaffold_text
from game.cli.validate_commands import internal_error, validate
from incidents.coverage import topic_coverage, visible_tags
from incidents.loader import LIBRARY_DIR, IncidentError, iter_library, load_incident
from incidents.spec import SCHEMA_PATH, did_you_mean, schema_text

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
            invalid.append({"path": str(path), "error": str(internal_error(str(path), exc))})
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


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """Left-aligned columns, nothing truncated (titles and tag lists are what the reader came for)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [header, tuple("-" * w for w in widths), *rows]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)


def with_progress(incidents: Sequence[dict[str, Any]], player: str) -> list[dict[str, Any]]:
    """`incidents` (library_listing's) with the player's progress: `best` (their best recorded score, or
    None), `solved` (game.api.solved decides) and `new` (a difficulty or symptom tags none of the incidents
    they finished had; game.api.new_to_player)."""
    from game import api

    best = api.player_record(player).best
    entries = {e.id: e for e in api.library([Path(inc["path"]) for inc in incidents])}
    seen = api.met(entries.values(), best)
    out = []
    for inc in incidents:
        score = best.get(inc["id"])
        entry = entries.get(inc["id"])
        fresh = [] if score is not None or entry is None else api.new_to_player(entry, seen)
        out.append({**inc, "best": score, "solved": api.solved(score), "new": fresh})
    return out


def _best_text(inc: dict[str, Any]) -> str:
    score = inc["best"]
    return "-" if score is None else f"{score:.0f}" + (" ✓" if inc["solved"] else "")


@click.command(name="list")
@click.option("--tag", default=None, help="Only incidents with this tag.")
@click.option("--difficulty", type=click.IntRange(1, 5), default=None, help="Only this difficulty.")
@click.option("--covers", "topics", multiple=True, metavar="TOPIC",
              help="Only incidents with a tag containing TOPIC, e.g. kv (repeatable: all of them).")
@click.option("--all-tags", is_flag=True,
              help="Authors: show every tag and which incidents teach each topic (spoils the causes).")
@click.option("--library", "root", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Library folder (default: incidents/).")
@click.option("--player", default=None, help="Whose best scores and new marks to show (default $USER).")
@click.option("--unsolved", is_flag=True, help="Only incidents the player has not solved yet.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_incidents(
    tag: str | None, difficulty: int | None, topics: tuple[str, ...], all_tags: bool, root: Path | None,
    player: str | None, unsolved: bool, as_json: bool,
) -> None:
    """The incident library: id, title, difficulty and symptom tags, and how many incidents cover each tag.

    Topic tags (kv-cache, memory-leak, ...) name what an incident teaches, which is often its cause, so a
    player sees them only with --all-tags; filters and counts then also use every tag.
    """
    incidents, invalid = library_listing(root or LIBRARY_DIR)
    every_topic = topic_coverage([(inc["id"], inc["tags"]) for inc in incidents])
    if all_tags:
        click.echo("servedrill list --all-tags: the tags and topics name the causes (this spoils the game)",
                   err=True)
    else:
        incidents = [{**inc, "tags": visible_tags(inc["tags"])} for inc in incidents]
    who = player or os.environ.get("USER") or "player"
    incidents = with_progress(incidents, who)
    shown = select(incidents, tag, difficulty, topics)
    if unsolved:
        shown = [inc for inc in shown if not inc["solved"]]
    coverage = tag_coverage(incidents)
    topic_counts = {key: len(ids) for key, ids in every_topic.items()}
    if as_json:
        base.emit({"incidents": shown, "invalid": invalid, "coverage": coverage,
                   "topics": every_topic if all_tags else None, "topic_counts": topic_counts,
                   "spoils": all_tags, "player": who, "solved": sum(inc["solved"] for inc in incidents)})
        return
    if shown:
        rows = [(inc["id"], inc["title"], str(inc["difficulty"]), _best_text(inc), "new" if inc["new"] else "",
                 ", ".join(inc["tags"])) for inc in shown]
        click.echo(_table(("id", "title", "difficulty", "best", "new", "tags"), rows))
    else:
        click.echo("no incidents" + (" match" if tag or difficulty or topics or unsolved else " in the library"))
        for topic in topics:
            if not any(covers(inc, topic) for inc in incidents):
                hint = did_you_mean(topic, coverage)
                click.echo(f"no tag contains '{topic}'" + (f"; {hint}" if hint else ""))
        if (tag or topics) and not all_tags:
            click.echo("only symptom tags are shown and matched; --all-tags uses every tag (and spoils the causes)")
    if coverage:
        click.echo("coverage: " + ", ".join(f"{t} {n}" for t, n in coverage.items()))
    click.echo(f"{who}: solved {sum(inc['solved'] for inc in incidents)} of {len(incidents)} incidents "
               f"(a best score of {SOLVED_SCORE:.0f} or more; best from your scored transcripts)")
    uncovered = [key for key, n in topic_counts.items() if not n]
    click.echo(f"interview topics covered: {len(topic_counts) - len(uncovered)} of {len(topic_counts)}"
               + (f" (missing: {', '.join(uncovered)})" if uncovered else ""))
    for bad in invalid:
        click.echo(f"invalid: {bad['error']}")


# ----- wiring -------------------------------------------------------------------------------------


COMMANDS: tuple[click.Command, ...] = (validate, schema, new, list_incidents)
"""The authors' commands."""
