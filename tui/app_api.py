"""What the screens may ask of the app: a small typed interface (`GameApp`) and the game in progress (`Play`).

The screens depend on this module, never on tui/app.py; the app imports the screens (lazily, when it shows
them) and satisfies GameApp. So the two never import each other, and a screen can be tested against any
App that provides these members (tests/test_tui_app_api.py checks that ServedrillApp does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from textual.app import App

from tui.library import LibraryEntry


@dataclass
class Play:
    """The game in progress: its incident file, and once ready its checked incident, telemetry
    database, query gateway and session. `seed` is the telemetry seed the database was built with."""

    entry: LibraryEntry
    seed: int = 0
    incident: Any = None
    build: Any = None
    gateway: Any = None
    session: Any = None
    flush_draft: Callable[[], None] | None = None
    """Set by the workspace: writes its pending draft (the board, the editor) now."""

    def close(self) -> None:
        """Stop any query, close the gateway, write the draft and release the session file (resumable
        later)."""
        if self.gateway is not None:
            self.gateway.close()
            self.gateway = None
        if self.flush_draft is not None:
            flush, self.flush_draft = self.flush_draft, None
            with contextlib.suppress(Exception):  # a draft is best effort; the journal is what counts
                flush()
        if self.session is not None:
            self.session.close()
            self.session = None


class GameApp(Protocol):
    """The app as the screens see it, besides Textual's own App API (push_screen, size, ...).

    Settings: `seed` (telemetry seed for new sessions), `player`, `data_root` (sessions and transcripts;
    None: game.session.data_dir()), `clock` (epoch seconds), `steady` (repeatable screenshots),
    `query_timeout_s` (seconds) and `row_cap` (rows) for the query gateway. `play`: the game in progress."""

    seed: int
    player: str
    data_root: Path | None
    clock: Callable[[], float]
    steady: bool
    query_timeout_s: float
    row_cap: int
    play: Play | None

    def mark(self, name: str) -> None: ...
    def begin_typeahead(self) -> None: ...
    def drop_typeahead(self) -> None: ...
    def release_typeahead(self) -> None: ...
    def start_world_build(self, incident_path: Path | str, seed: int) -> None: ...
    def open_briefing(self, entry: LibraryEntry, resume_path: Path | None = None) -> None: ...
    def adopt_telemetry(self, build: Any, gateway: Any, seed: int) -> None: ...
    def adopt_session(self, session: Any) -> None: ...
    def start_session(self, session: Any) -> None: ...
    def enter_session(self) -> None: ...
    def show_debrief(self) -> None: ...
    def leave_game(self) -> None: ...
    def export_transcript(self, score: Mapping[str, Any] | None = None) -> Path | None: ...


def game_app(app: App[Any]) -> GameApp:
    """`app` (a screen's self.app) as the GameApp it is when the servedrill app runs the screen."""
    return cast(GameApp, app)
