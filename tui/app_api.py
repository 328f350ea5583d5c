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
from typing import TYPE_CHECKING, Any, Protocol, cast

from textual.app import App

if TYPE_CHECKING:
    from game.api import Game, LibraryEntry, QueryLimits, Telemetry, Variant
    from game.query.sandbox import Gateway
    from game.session import Session
    from incidents.spec import Incident
    from telemetry_gen.cache import BuildInfo


@dataclass
class Play:
    """The game in progress, as it arrives piece by piece (`game.api`'s staged calls): its library entry,
    then the variant (the incident at `seed`), its telemetry (database and gateway) and the session."""

    entry: LibraryEntry
    seed: int = 0
    variant: Variant | None = None
    telemetry: Telemetry | None = None
    session: Session | None = None
    flush_draft: Callable[[], None] | None = None
    """Set by the workspace: writes its pending draft (the board, the editor) now."""

    @property
    def incident(self) -> Incident | None:
        """The incident as the variant of the game's seed (None until it has loaded)."""
        if self.session is not None:
            return self.session.incident
        return None if self.variant is None else self.variant.incident

    @property
    def build(self) -> BuildInfo | None:
        """The telemetry's database as built (or found in the cache): path, digest, rows, build time."""
        return None if self.telemetry is None else self.telemetry.build

    @property
    def gateway(self) -> Gateway | None:
        return None if self.telemetry is None else self.telemetry.gateway

    @property
    def game(self) -> Game:
        """The game once variant, telemetry and session are all there (the workspace and later)."""
        from game import api

        assert self.variant is not None and self.telemetry is not None and self.session is not None
        return api.Game(self.variant, self.telemetry, self.session)

    def close(self) -> None:
        """Stop any query, close the gateway, write the draft and release the session file (resumable
        later)."""
        if self.telemetry is not None:
            self.telemetry.close()
            self.telemetry = None
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
    `limits` for the query gateway (game.api.PLAYER_LIMITS unless a test passes others). `play`: the game in
    progress."""

    seed: int
    player: str
    data_root: Path | None
    clock: Callable[[], float]
    steady: bool
    limits: QueryLimits
    play: Play | None

    def mark(self, name: str) -> None: ...
    def begin_typeahead(self) -> None: ...
    def drop_typeahead(self) -> None: ...
    def release_typeahead(self) -> None: ...
    def start_world_build(self, incident_path: Path | str, seed: int) -> None: ...
    def open_briefing(self, entry: LibraryEntry, resume_path: Path | None = None) -> None: ...
    def open_history(self) -> None: ...
    def adopt_telemetry(self, telemetry: Telemetry) -> None: ...
    def adopt_session(self, session: Session) -> None: ...
    def start_session(self, session: Session) -> None: ...
    def enter_session(self) -> None: ...
    def show_debrief(self) -> None: ...
    def leave_game(self) -> None: ...
    def export_transcript(self, score: Mapping[str, float] | None = None) -> Path | None: ...


def game_app(app: App[Any]) -> GameApp:
    """`app` (a screen's self.app) as the GameApp it is when the servedrill app runs the screen."""
    return cast(GameApp, app)
