"""Interviewer commands: `watch` (the game-master screen, or a JSON snapshot), `send` (a message, hint or
inject into a candidate's session) and `report` (the interview report as Markdown and HTML).

`register(group)` adds them to a click group; tui/cli.py wires them into the `servedrill` script. The
JSON keys are in docs/cli.md."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from game.cli.core import emit, fail


def _session_path(ref: str, as_json: bool) -> Path:
    from game import api

    try:
        return api.find_session(ref)
    except api.SessionError as exc:
        fail(str(exc), as_json=as_json)
        raise AssertionError from None  # fail exits


@click.command("watch")
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON snapshot of the session and exit.")
@click.option("--reveal", is_flag=True,
              help="Show the answer (truth, what each query ruled out, the running score) before the "
                   "candidate submits; without it the answer appears only after submission.")
def watch(session: str, as_json: bool, reveal: bool) -> None:
    """Follow a candidate's SESSION live (an id, a unique prefix of one, or a session file): their
    queries and board, with keys to send a message (m), a hint (h) or an inject (i). The ground truth
    and the running score appear once they submit (or at once with --reveal)."""
    from game import api

    path = _session_path(session, as_json)
    try:
        follower = api.watch(path, reveal=reveal)
    except api.GMError as exc:
        fail(str(exc), as_json=as_json)
        return
    if as_json:
        emit(follower.snapshot())
        return
    from tui.app import ServedrillApp

    ServedrillApp(watch_session=path, watch_reveal=reveal).run()

@click.command("send")
@click.argument("session")
@click.argument("kind", type=click.Choice(["message", "hint", "inject"]))
@click.argument("text", required=False)
@click.option("--from", "sender", default=None, help="Who it is from (default Interviewer).")
@click.option("--cost", type=int, default=None,
              help="Points your own hint costs (default 10); the incident's hints cost what they say.")
@click.option("--index", type=int, default=None, help="inject: which of the incident's injects (0-based).")
@click.option("--json", "as_json", is_flag=True, help="Print the item sent as one JSON object.")
def send(session: str, kind: str, text: str | None, sender: str | None, cost: int | None,
         index: int | None, as_json: bool) -> None:
    """Send a message, a hint or an inject into a candidate's SESSION; their screen shows it at once.
    A hint without TEXT is the incident's next hint; an inject without TEXT needs --index."""
    from game import api

    path = _session_path(session, as_json)
    try:
        sent = api.send(path, kind, text=text, sender=sender, cost=cost, index=index)
    except api.GMError as exc:
        fail(str(exc), as_json=as_json)
        return
    if as_json:
        emit({"ok": True, "item": sent.item, "inbox": str(sent.inbox)})
    else:
        click.echo(f"Sent {kind} {sent.item['id']} to {path.stem}.")

@click.command("report")
@click.argument("session")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report as Markdown here.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report as HTML here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--reveal", is_flag=True, help="Include the answer and the score before the candidate submits.")
def report(session: str, markdown_path: Path | None, html_path: Path | None, as_json: bool,
           reveal: bool) -> None:
    """The interview report of a SESSION: timeline, first looks, what each query ruled out, the pins,
    the score breakdown and room for notes (the answer and score once submitted, or with --reveal).
    Without --markdown, --html or --json it prints Markdown."""
    from game import api

    path = _session_path(session, as_json)
    try:
        doc = api.interview_report(path, reveal=reveal)
    except api.GMError as exc:
        fail(str(exc), as_json=as_json)
        return
    written: dict[str, str] = {}
    formats: tuple[tuple[Path | None, Literal["markdown", "html"]], ...] = ((markdown_path, "markdown"),
                                                                           (html_path, "html"))
    for target, key in formats:
        if target is None:
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(api.render_report(doc, key), encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {target}: {exc.strerror or exc}", as_json=as_json)
        written[key] = str(target)
    if as_json:
        emit({**doc, "written": written})
    elif written:
        click.echo("Wrote " + " and ".join(written.values()))
    else:
        click.echo(api.render_report(doc, "markdown"))

COMMANDS: tuple[click.Command, ...] = (watch, send, report,)
"""The commands of this module, in the order `servedrill --help` lists them."""

