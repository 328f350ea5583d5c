"""`servedrill gameday room PLAN`: the facilitator's live room in this terminal (tui/room_app.py).

The game's `gameday` group (game/cli/gameday_commands.py) cannot open a Textual app (game never imports tui),
so `gameday_group()` here is a copy of it with `room` added; tui/cli.py puts it in the `servedrill` script in
place of the game's. A plan that does not check fails as every gameday command does: one
`file:line:column: what (hint: ...)` line a problem, no traceback."""

from __future__ import annotations

from pathlib import Path

import click

from game.cli.core import CommandError, GuardedGroup


@click.command("room")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--sessions", "sessions", multiple=True, type=click.Path(path_type=Path),
              help="Another SERVEDRILL_DATA folder the players play in (repeatable).")
def room(file: Path, sessions: tuple[Path, ...]) -> None:
    """The live room for a projector: the running round, its time left in big type, every player's status and
    the standings (no score and no answer while the round runs); keys start and end rounds and send messages
    and hints."""
    from game import api

    try:
        gameday = api.load_gameday(file)
    except api.GameDayError as exc:
        lines = [str(d) for d in exc.diagnostics] or [f"{file}: invalid game day"]
        raise CommandError(lines[0], diagnostics=lines) from None
    from tui.room_app import run
    from tui.serve_limits import served_app_setup

    served_app_setup()  # the room's tab of `serve --gameday`: end with the server
    run(gameday, api.data_folders(gameday, sessions))


def gameday_group() -> click.Group:
    """The game's `gameday` group with `room` beside its commands (a new group: the game's stays as it is)."""
    from game.cli.gameday_commands import gameday_group as game_group

    group = GuardedGroup("gameday", help=game_group.help, short_help=game_group.short_help)
    for command in (*game_group.commands.values(), room):
        group.add_command(command)
    return group
