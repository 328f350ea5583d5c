"""The full `servedrill` command set, assembled in one place: the core commands (game.cli.core), the tools
(game.cli.tool_commands) and those defined next to the code they drive (game.cli.game_commands,
game.cli.incident_commands, game.cli.gameday_commands, game.cli.agent_commands).

Every command is a module-level object; nothing is added to a group at import time except here, where
`build_group` makes a fresh group. tui.cli builds its own with its play/resume/bench/serve and the
interviewer's commands in place of or besides the game's, leaving `main` here as it is.
"""

from __future__ import annotations

import click

from game.cli import agent_commands, core, game_commands, gameday_commands, incident_commands, tool_commands

GAME_COMMANDS: dict[str, click.Command] = {
    str(c.name): c for c in (*core.COMMANDS, *tool_commands.COMMANDS, *game_commands.COMMANDS,
                             *incident_commands.COMMANDS, *gameday_commands.COMMANDS, *agent_commands.COMMANDS)
}
"""Every game command by name (the line-mode play and resume, the engine-only bench)."""


def build_group(*commands: click.Command) -> click.Group:
    """A new `servedrill` group holding GAME_COMMANDS, then `commands` (replacing a game command of the same
    name)."""
    group = core.new_group()
    for command in (*GAME_COMMANDS.values(), *commands):
        group.add_command(command)
    return group


main = build_group()

__all__ = ["GAME_COMMANDS", "build_group", "main"]

if __name__ == "__main__":
    main()
