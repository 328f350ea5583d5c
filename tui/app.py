"""The servedrill Textual app: picker -> briefing -> workspace -> submit -> debrief.

The app only presents `game/`: sessions, the query gateway, scoring and the debrief text all come
from there. Heavy modules (DuckDB, pandas, pydantic models, the simulator) are imported inside
worker threads, so the first screen paints before they load.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.app import App, SystemCommand
from textual.screen import Screen

from game import api
from tui.actions import bindings, commands
from tui.app_api import Play

if TYPE_CHECKING:
    import subprocess

    from game.api import LibraryEntry, QueryLimits, Telemetry
    from game.session import Session

CSS_FILE = Path(__file__).with_name("servedrill.tcss")

TYPEAHEAD_MAX = 4096
"""Keys kept while the investigation opens (see ServedrillApp.begin_typeahead); more are dropped."""

TYPEAHEAD_PASS = frozenset({"ctrl+q", "ctrl+c", "escape"})
"""Keys that act at once even while the investigation opens: quit, and back to the incident list."""

TYPEAHEAD_WAIT_S = 0.02
"""How often a held replay looks again for the workspace's editor to have focus."""

EXIT_GRACE_S = 0.8
"""Once the terminal is gone and the session saved, the process ends within this, however Textual's
shutdown fares writing to a terminal that is not there."""


class ServedrillApp(App[None]):
    """The game; the screens see it through tui.app_api.GameApp. Arguments:

    - `incidents`: incident files for the picker (default: the library);
    - `preselect`: incident id or path highlighted first (default: one-slow-replica, else the first);
    - `seed`: telemetry seed for new sessions; `player`: name recorded in sessions;
    - `data_root`: where sessions and transcripts live (default: game.session.data_dir());
    - `resume_session`: open this session file straight away instead of the picker;
    - `watch_session`: open the interviewer's screen on this (another player's) session file;
    - `watch_reveal`: that screen shows the answer (truth, evidence, score) before the candidate submits;
    - `clock`: wall clock in epoch seconds for the elapsed-time display;
    - `steady`: no blinking cursors and no query timings, so screenshots are repeatable;
    - `limits`: the query gateway's limits (default the player's, game.api.PLAYER_LIMITS)."""

    CSS_PATH = CSS_FILE
    TITLE = "servedrill"
    BINDINGS = bindings("app")
    # Textual annotates these `ClassVar[list[tuple[int, str]]] | None` on App, which mypy cannot read as a
    # ClassVar (ClassVar must be outermost) and takes for an instance variable; they are class variables
    # (ruff's RUF012 wants them marked so), hence the targeted ignores
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (110, "-wide")]  # type: ignore[misc]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-short"), (34, "-tall")]  # type: ignore[misc]

    def __init__(
        self,
        *,
        incidents: Sequence[Path | str] | None = None,
        preselect: str | Path | None = None,
        seed: int = 0,
        player: str | None = None,
        data_root: Path | None = None,
        resume_session: Path | None = None,
        watch_session: Path | None = None,
        watch_reveal: bool = False,
        clock: Callable[[], float] = time.time,
        steady: bool = False,
        limits: QueryLimits = api.PLAYER_LIMITS,
        ask_player: bool = False,
    ) -> None:
        super().__init__()
        self.incident_paths = [Path(p) for p in incidents] if incidents is not None else None
        self.preselect = preselect
        self.seed = seed
        self.player = player or _default_player()
        self.data_root = data_root
        self.resume_session = resume_session
        self.watch_session = watch_session
        self.watch_reveal = watch_reveal
        self.clock = clock
        self.steady = steady
        self.limits = limits
        self.ask_player = ask_player
        self.play: Play | None = None
        self.marks: dict[str, float] = {}
        self.mark_hook: Callable[[str], None] | None = None
        # background processes building every hypothesis's world, by (incident file, seed)
        self.world_builds: dict[tuple[str, int], subprocess.Popen[bytes] | None] = {}
        self._world_lock = threading.Lock()
        self._exiting = False
        self._terminal_watch: Any = None
        self.gone: str | None = None  # why the terminal went away, once it has
        self._typeahead: list[events.Event] | None = None  # keys held since the player started
        self._typeahead_early: list[events.Event] = []  # keys the screen had been given before that
        self._typeahead_typing = False  # a key other than Enter was held (Enter is no longer the start key)

    # ------------------------------------------------------------ lifecycle

    def on_mount(self) -> None:
        from tui.screens.picker import PickerScreen

        if self.steady:
            self.theme = "textual-dark"
        # in a game-day round, only the round's incident (game.api.round_library)
        self.push_screen(PickerScreen(api.round_library(api.library(self.incident_paths)), self.preselect))
        if self.ask_player:
            from tui.screens.dialogs import PlayerNameScreen

            self.push_screen(PlayerNameScreen(self.player), self._set_player)
        if self.resume_session is not None:
            self.open_briefing(api.session_entry(self.resume_session), resume_path=self.resume_session)
        elif self.watch_session is not None:
            self.open_watch(self.watch_session, reveal=self.watch_reveal)
        if not self.is_headless:
            self._watch_terminal()

    def _set_player(self, name: str | None) -> None:
        # the picker rescans sessions and best scores for this name when it shows again
        if name:
            self.player = name

    def on_unmount(self) -> None:
        if self._terminal_watch is not None:
            self._terminal_watch.stop()
        self._close_play()
        self.stop_world_builds()

    # ------------------------------------------------------------ type-ahead

    def begin_typeahead(self) -> None:
        """Hold the keys (and pastes) the player types from now until the workspace's editor has focus,
        then give them to it in order (`release_typeahead`). Called when the player starts the
        investigation: a fast typist (or a browser tab typing at machine speed) starts typing the first
        query while the session opens and the workspace mounts, and those keys used to land on the
        briefing (where "n" means "new session") or on a workspace with no focus yet, and were lost.
        A repeated Enter before any other key is the start key pressed again, not a blank line."""
        if self._typeahead is None:
            self._typeahead, self._typeahead_early, self._typeahead_typing = [], [], False

    def drop_typeahead(self) -> None:
        """Forget the held keys (the investigation did not open) and stop holding."""
        self._typeahead, self._typeahead_early = None, []

    @property
    def holding_keys(self) -> bool:
        return self._typeahead is not None

    def release_typeahead(self) -> None:
        """Replay the held keys once the workspace's editor has focus (the workspace calls this from its
        on_mount). Keys that arrive meanwhile join the held ones, so the order is kept."""
        if self._typeahead is not None:
            self.call_later(self._replay_typeahead, 0)

    async def _replay_typeahead(self, tries: int) -> None:
        from tui.screens.workspace import WorkspaceScreen

        if self._typeahead is None:
            return
        screen = self.screen
        if not (isinstance(screen, WorkspaceScreen) and screen.editor_ready):
            if tries * TYPEAHEAD_WAIT_S < 10.0:
                self.set_timer(TYPEAHEAD_WAIT_S, partial(self._replay_typeahead, tries + 1))
            else:
                self.drop_typeahead()
            return
        held = self._typeahead_early + self._typeahead
        self._typeahead, self._typeahead_early = None, []
        for event in held:
            await super().on_event(event)

    async def on_event(self, event: events.Event) -> None:
        """Input while keys are held (`begin_typeahead`) is kept instead of handled. A key straight from
        the terminal is held; a key coming back up from a screen was handed to it before holding began
        (the app had passed it on before the screen's binding started the investigation): it is kept
        too, ahead of every key held here, which all came later."""
        held = self._typeahead
        if held is not None and isinstance(event, events.Key | events.Paste):
            if isinstance(event, events.Paste):
                self._typeahead_typing = True
                (self._typeahead_early if event.is_forwarded else held).append(events.Paste(event.text))
                return
            if event.key not in TYPEAHEAD_PASS:
                into = self._typeahead_early if event.is_forwarded else held
                if event.key != "enter":
                    self._typeahead_typing = True  # from here on Enter is a new line of the query
                if self._typeahead_typing and len(self._typeahead_early) + len(held) < TYPEAHEAD_MAX:
                    into.append(events.Key(event.key, event.character))
                return
        await super().on_event(event)

    # ------------------------------------------------------------ the terminal going away

    def _watch_terminal(self) -> None:
        """Exit, the session saved, when the terminal goes away: SIGHUP (or SIGTERM), or a hangup or
        error on standard input or output (tui.terminal: no SIGHUP arrives under `make play`, and a
        browser tab's app only sees its input pipe close)."""
        import asyncio
        import signal

        from tui.terminal import TerminalWatch

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.terminal_gone, signal.Signals(signum).name)

        def gone(reason: str) -> None:  # the watch's thread
            loop.call_soon_threadsafe(self.terminal_gone, reason)
            # should the event loop be stuck, save from here and leave anyway
            time.sleep(EXIT_GRACE_S * 2)
            with contextlib.suppress(Exception):
                self._close_play()
            os._exit(0)

        self._terminal_watch = TerminalWatch(gone)
        self._terminal_watch.start()

    def terminal_gone(self, reason: str) -> None:
        """Save the session (journal, draft, the time held) and exit: nobody is there to play. Textual's
        own shutdown writes to the dead terminal, so the process ends within EXIT_GRACE_S regardless."""
        if self.gone is not None:
            return
        self.gone = reason
        self._close_play()
        self.stop_world_builds(wait_s=0.5)
        timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(0,))
        timer.daemon = True
        timer.start()
        self.exit()

    def start_world_build(self, incident_path: Path | str, seed: int) -> None:
        """Start building the incident's worlds in a background process (`game.api.build_worlds`) unless one
        was started for this file and seed already. Safe from a worker thread."""
        key = (str(Path(incident_path).resolve()), int(seed))
        with self._world_lock:
            if self._exiting or key in self.world_builds:
                return
            self.world_builds[key] = api.build_worlds(incident_path, seed)

    def stop_world_builds(self, wait_s: float = 5.0) -> None:
        """Stop the world builds still running (the cache keeps what they finished); each gets `wait_s`
        seconds after SIGTERM before it is killed."""
        import subprocess

        with self._world_lock:
            self._exiting = True
            procs = [p for p in self.world_builds.values() if p is not None]
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def mark(self, name: str) -> None:
        """Record when something became visible (epoch seconds); the benchmark and tests wait on these."""
        self.marks[name] = time.time()
        if self.mark_hook is not None:
            self.mark_hook(name)

    def _close_play(self) -> None:
        if self.play is not None:
            self.play.close()
            self.play = None

    # ------------------------------------------------------------ flow

    def open_briefing(self, entry: LibraryEntry, resume_path: Path | None = None) -> None:
        from tui.screens.briefing import BriefingScreen

        self._close_play()
        self.play = Play(entry, seed=self.seed)
        self.push_screen(BriefingScreen(entry, resume_path=resume_path))

    def open_history(self) -> None:
        """The player's past sessions (tui/screens/history.py), over the incident list."""
        from tui.screens.history import HistoryScreen

        self.push_screen(HistoryScreen())

    def adopt_telemetry(self, telemetry: Telemetry) -> None:
        """Take over freshly opened telemetry (closing any previous one)."""
        if self.play is None:
            telemetry.close()
            return
        if self.play.telemetry is not None and self.play.telemetry is not telemetry:
            self.play.telemetry.close()
        self.play.telemetry, self.play.seed = telemetry, telemetry.seed

    def adopt_session(self, session: Session) -> None:
        if self.play is None:
            session.close()
            return
        if self.play.session is not None and self.play.session is not session:
            self.play.session.close()
        self.play.session = session
        self.play.variant = api.variant_of(session)

    def start_session(self, session: Session) -> None:
        """Leave the briefing of a session still in its briefing state."""
        if self.play is None or self.play.telemetry is None:
            return
        try:
            api.start(session, self.play.telemetry)
        except api.SessionError as exc:
            self.notify(str(exc), severity="error", markup=False)
            self.drop_typeahead()
            return
        self.enter_session()

    def enter_session(self) -> None:
        """Show the screen for the session's state: the workspace, or the debrief once submitted."""
        assert self.play is not None and self.play.session is not None
        if self.play.session.state == "investigating":
            from tui.screens.workspace import WorkspaceScreen

            self.switch_screen(WorkspaceScreen())
        else:
            self.show_debrief()

    def show_debrief(self) -> None:
        from tui.screens.debrief import DebriefScreen

        self.drop_typeahead()  # the debrief's single-letter keys are no place for typed SQL
        hold = None
        if self.play is not None and self.play.session is not None:
            hold = api.debrief_hold(self.play.session, self.clock())  # a game-day round holds it till it ends
        if hold is not None:
            from tui.screens.held import HeldDebriefScreen

            self.switch_screen(HeldDebriefScreen(hold))
            return
        self.switch_screen(DebriefScreen())

    def leave_game(self) -> None:
        """Close the game and go back to the picker."""
        from tui.screens.picker import PickerScreen

        self.drop_typeahead()
        self._close_play()
        while len(self.screen_stack) > 1 and not isinstance(self.screen, PickerScreen):
            self.pop_screen()

    def export_transcript(self, score: Mapping[str, float] | None = None) -> Path | None:
        """Write the session's transcript to the transcripts folder, with `score` (`{"total": ...}`
        once scored: what the picker shows as the best score); None (and a notice) on failure."""
        play = self.play
        if play is None or play.session is None:
            return None
        try:
            return api.export_transcript(play.session, play.telemetry, score, root=self.data_root)
        except (OSError, api.SessionError) as exc:
            self.call_later(self.notify, f"Cannot write the transcript: {exc}", severity="error", markup=False)
            return None

    def open_watch(self, path: Path, reveal: bool = False) -> None:
        """The interviewer's screen on a session file (another process may be playing it); `reveal`
        shows the answer before the candidate submits."""
        from tui.screens.gm import GMScreen

        self.push_screen(GMScreen(path, clock=self.clock, reveal=reveal))

    def action_watch_session(self) -> None:
        """Choose a session of the data directory to watch as the interviewer."""
        from tui.screens.gm import SessionChooser

        sessions = api.sessions(self.data_root)
        if not sessions:
            self.notify("No sessions to watch yet.", severity="warning")
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.open_watch(path)

        self.push_screen(SessionChooser(sessions), chosen)

    # ------------------------------------------------------------ actions and palette

    def action_help(self) -> None:
        """The keys of the screen the player is on, the focused pane's first."""
        from tui.screens.dialogs import HelpScreen

        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        scopes: list[str] = []
        focus_scope = getattr(screen, "focus_scope", None)
        if callable(focus_scope) and (pane := focus_scope()):
            scopes.append(pane)
        if (scope := _scope_of(screen)) is not None:
            scopes.append(scope)
        self.push_screen(HelpScreen(scopes))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        scope = _scope_of(screen)
        for command in commands("app") + (commands(scope) if scope else []):
            if command.palette and command.action != "help":
                yield SystemCommand(command.title, command.help,
                                    _runner(screen if command.scope != "app" else self, command.action))
        # a pane's keys the palette offers too (the editor's select all, clear...): run on that pane
        palette_panes = getattr(screen, "palette_panes", None)
        for pane_scope, widget in (palette_panes() if callable(palette_panes) else {}).items():
            for command in commands(pane_scope):
                if command.palette and command.bound:
                    yield SystemCommand(command.title, command.help, _runner(widget, command.action))
        for title, help_text, action in getattr(screen, "EXTRA_COMMANDS", ()):
            yield SystemCommand(title, help_text, _runner(screen, action))
        if scope in (None, "picker"):
            yield SystemCommand("Watch a session (interviewer)",
                                "Follow a candidate's session live and send messages, hints and injects",
                                self.action_watch_session)
        yield SystemCommand("Help", "Every key of every screen", self.action_help)


def _scope_of(screen: Screen[Any]) -> str | None:
    name = type(screen).__name__
    return {"PickerScreen": "picker", "BriefingScreen": "briefing", "WorkspaceScreen": "workspace",
            "SubmitScreen": "submit", "DebriefScreen": "debrief", "HistoryScreen": "history",
            "PastDebriefScreen": "past_debrief"}.get(name)


def _runner(target: Any, action: str) -> Callable[[], Any]:
    async def run() -> None:
        await target.run_action(action)

    return run


def _default_player() -> str:
    import os

    return os.environ.get("USER") or "player"


def run(incident: Path | str | None = None, seed: int = 0, player: str | None = None,
        incidents: Sequence[Path | str] | None = None, ask_player: bool = False) -> None:
    """Play in the terminal: the picker with `incident` highlighted (an id or a file path). A file
    outside the library joins the list. `ask_player`: ask the player's name first (browser tabs)."""
    paths: list[Path] | None = None
    if incident is not None and Path(str(incident)).is_file():
        paths = [*api.library_files(incidents or None), Path(str(incident))]
    elif incidents is not None:
        paths = [Path(p) for p in incidents]
    ServedrillApp(incidents=paths, preselect=incident, seed=seed, player=player, ask_player=ask_player).run()


def resume(session_path: Path | str) -> None:
    """Continue a session file in the terminal."""
    ServedrillApp(resume_session=Path(session_path)).run()
