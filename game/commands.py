"""The full `servedrill` command set: the core group plus the commands defined next to the code they drive.

Kept apart from `game.cli` so the command modules can import its helpers without a cycle.
"""

from __future__ import annotations

from game.cli import main
from game.cli_game import register as register_game
from game.cli_gameday import register as register_gameday
from game.cli_incidents import register as register_incidents

register_game(main)
register_incidents(main)
register_gameday(main)

__all__ = ["main"]

if __name__ == "__main__":
    main()
