"""The page: an alert card with the reporter's words, the budgets, and a key to start.

While the player reads, a worker checks the incident with the full loader, builds (or opens the cached)
telemetry database with a progress bar, and opens the query gateway on it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from game import api
from tui import screen_start
from tui.actions import bindings
from tui.app_api import GameApp, Play, game_app
from tui.formatting import clock_text
from tui.messages import (
    BuildProgress,
    IncidentLoaded,
    PrepareFailed,
    SessionFailed,
    SessionOpened,
    TelemetryReady,
)
from tui.text import clean, literal, one_line, template
from tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from game.api import LibraryEntry
    from game.session import Session, SessionSummary


def alert_card(entry: LibraryEntry, hints: list[str] | None = None) -> Content:
    """The alert card. Every word of it comes from the incident file (or a hint's text): literal text in
    a template, never markup, control characters visible, each part bounded."""
    b = entry.briefing
    parts: list[Content] = [template("[b]⚠ $title[/b]\n", title=one_line(entry.title, 200))]
    who = " · ".join(x for x in (f"Reported by {one_line(b.reported_by, 120)}" if b.reported_by else "",
                                 f"since {one_line(b.since, 120)}" if b.since else "") if x)
    if who:
        parts.append(template("\n[i]$who[/i]\n", who=who))
    parts.append(template("\n$summary", summary=clean(b.summary, 4000, multiline=True, lines=40)))
    if b.evidence:
        parts.append(template("\n\n[b]Attached[/b]"))
        parts += [template("\n  • $e", e=clean(e, 1000, multiline=True, lines=10)) for e in b.evidence[:40]]
    if entry.hypotheses:
        parts.append(template(f"\n\n[b]Hypotheses on the board[/b] ({len(entry.hypotheses)})"))
        parts += [template("\n  [b]$label[/b]  $title", label=one_line(label, 4), title=one_line(title, 200))
                  for label, title in entry.hypotheses]
    if hints:
        parts.append(template("\n\n[b]Hints taken[/b]"))
        parts += [template(f"\n  {i}. $hint", hint=clean(h, 2000, multiline=True, lines=20))
                  for i, h in enumerate(hints, start=1)]
    return Content("").join(parts)


def limits_text(entry: LibraryEntry, now: float | None = None) -> str:
    """The time limit and the query budget; in a game-day round (with `now`) the round's limit, not the
    incident's (game.api.round_clock)."""
    round_clock = None if now is None else api.round_clock(now)
    parts = [api.round_limits_text(round_clock) if round_clock is not None else
             f"Time limit {clock_text(entry.time_limit_s)}" if entry.time_limit_s else "No time limit",
             f"query budget {entry.query_budget}" if entry.query_budget else "no query budget"]
    return " · ".join(parts)


class BriefingScreen(Screen[None]):
    """Briefing before play (prepares the game), or a read-only review from the workspace (`review`)."""

    BINDINGS = bindings("briefing")

    def __init__(self, entry: LibraryEntry, *, resume_path: Path | None = None, review: bool = False,
                 hints: list[str] | None = None) -> None:
        super().__init__()
        self.entry = entry
        self.resume_path = resume_path
        self.review = review
        self.hints = hints or []
        self.unfinished: list[SessionSummary] = []
        self.ready = False
        self.failed = False
        self.wanted: str | None = None  # "continue" or "new", pressed before the telemetry was ready
        self.opening = False  # a session is being opened for the player (once per briefing)
        self._last_pct = -1

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    @property
    def play(self) -> Play:
        assert self.served.play is not None
        return self.served.play

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        screen_start.first_resume(self, event)

    def compose(self) -> ComposeResult:
        screen_start.preset(self)  # before the widgets are styled, not after (tui.screen_start)
        with VerticalScroll(id="briefing"):
            yield Static(alert_card(self.entry, self.hints), id="alert-card")
        with Vertical(id="briefing-bottom"):
            yield Static(limits_text(self.entry, self.served.clock()), id="briefing-limits")
            with Vertical(id="prepare"):
                yield Static("Checking the incident…", id="prepare-stage")
                yield ProgressBar(total=100, show_eta=False, id="prepare-bar")
            yield Static("", id="briefing-action")
        yield KeyBar("briefing")

    def on_mount(self) -> None:
        if self.review:
            self.query_one("#prepare").display = False
            self.query_one("#briefing-action", Static).update("Escape or Enter: back to the investigation")
            return
        self.call_after_refresh(self._painted)

    def _painted(self) -> None:
        self.served.mark("briefing")
        # heavy imports start only now: a busy worker thread would hold the GIL and delay the first paint
        self._prepare(self.resume_path)

    # ------------------------------------------------------------ preparing (worker thread)

    @work(thread=True, exclusive=True, group="prepare", exit_on_error=False)
    def _prepare(self, resume_path: Path | None) -> None:
        served = self.served
        try:
            if resume_path is not None:
                session = api.resume_session(resume_path)
                variant = api.variant_of(session)
                self.post_message(IncidentLoaded(variant, [], session.board))
                self.post_message(SessionOpened(session, list(session.warnings)))
            else:
                # the variant of the game's seed: the card, the board and the telemetry all come from it
                variant = api.load_variant(self.entry.path, served.seed)
                # a session open elsewhere (another tab of `servedrill serve`, another terminal) is not ours
                mine = api.unfinished_sessions(served.player, variant.incident.id, served.data_root, seed=served.seed)
                self.post_message(IncidentLoaded(variant, mine, variant.board))
            telemetry = api.open_telemetry(variant, limits=served.limits, progress=self._progress)
        except api.IncidentError as exc:
            self.post_message(PrepareFailed([str(d) for d in exc.diagnostics] or ["invalid incident"]))
            return
        except api.SessionError as exc:
            self.post_message(PrepareFailed([str(exc)]))
            return
        except Exception as exc:  # the worker's boundary: show it, never crash the app
            self.post_message(PrepareFailed([f"internal error: {type(exc).__name__}: {exc}"]))
            return
        if not self.post_message(TelemetryReady(telemetry)):
            telemetry.close()  # the player left this briefing meanwhile

    def _progress(self, fraction: float, stage: str) -> None:
        pct = int(fraction * 100)
        if pct != self._last_pct:
            self._last_pct = pct
            self.post_message(BuildProgress(fraction, stage))

    # ------------------------------------------------------------ messages

    def on_build_progress(self, message: BuildProgress) -> None:
        self.query_one("#prepare-stage", Static).update(
            f"Simulating the fleet and building telemetry: {message.stage} (first time only)")
        self.query_one(ProgressBar).update(progress=message.fraction * 100)

    def on_incident_loaded(self, message: IncidentLoaded) -> None:
        self.play.variant = message.variant
        # the card was painted from a quick peek at the file; now show this seed's variant of it
        self.entry = api.briefing_entry(self.entry, message.variant.incident, message.board)
        self.query_one("#alert-card", Static).update(alert_card(self.entry, self.hints))
        self.query_one("#briefing-limits", Static).update(limits_text(self.entry, self.served.clock()))
        self.unfinished = message.unfinished
        self.query_one("#prepare-stage", Static).update("Opening telemetry…")
        self._show_action()
        self.refresh_bindings()

    def on_telemetry_ready(self, message: TelemetryReady) -> None:
        telemetry = message.telemetry
        self.served.adopt_telemetry(telemetry)
        self.ready = True
        rows = telemetry.build.rows.get("requests", 0)
        how = "cached" if telemetry.build.cached else f"built in {telemetry.build.build_s:.1f} s"
        self.query_one("#prepare-stage", Static).update(f"Telemetry ready ({how}): {rows:,} requests.")
        # the seed picks the variant and the telemetry: what a player quotes to replay this exact game
        limits = limits_text(self.entry, self.served.clock())
        self.query_one("#briefing-limits", Static).update(f"{limits} · seed {telemetry.seed}")
        self.query_one(ProgressBar).update(progress=100)
        self.served.mark("ready")
        self._show_action()
        session = self.play.session
        if session is not None and session.state != "briefing":
            self.served.enter_session()
        elif self.wanted is not None:
            self._begin(self.wanted)

    def on_prepare_failed(self, message: PrepareFailed) -> None:
        self.failed = True
        self.served.drop_typeahead()
        self.query_one("#prepare-stage", Static).update("[b red]This incident cannot be played:[/b red]")
        self.query_one("#briefing-action", Static).update(
            literal("\n".join(one_line(line, 300) for line in message.lines[:8]), multiline=True))
        self.query_one("#briefing-action", Static).add_class("error")

    def on_session_opened(self, message: SessionOpened) -> None:
        self.served.adopt_session(message.session)
        for line in message.warnings:
            self.notify(one_line(line, 500), title="Session file", severity="warning", markup=False)
        if message.session.state != "briefing":
            self.served.begin_typeahead()  # the workspace opens by itself: keys typed meanwhile are its
        if self.ready and message.session.state != "briefing":
            self.served.enter_session()

    def on_session_failed(self, message: SessionFailed) -> None:
        self.wanted = None
        self.opening = False
        self.served.drop_typeahead()
        self.notify(one_line(message.error, 500), title="Cannot open the session", severity="error", timeout=8,
                    markup=False)
        self._show_action()

    def _show_action(self) -> None:
        action = self.query_one("#briefing-action", Static)
        if self.failed:
            return
        if self.wanted is not None:
            action.update("Starting as soon as the telemetry is ready…")
        elif self.play.session is not None:
            action.update("[b]Enter[/b]: start the investigation" if self.ready else "Preparing…")
        elif self.unfinished:
            s = self.unfinished[0]
            action.update(f"You have an unfinished session ({s.state}, {s.queries} queries). "
                          "[b]Enter[/b]: continue it · [b]n[/b]: start a new one")
        else:
            action.update("[b]Enter[/b]: start the investigation · [b]Escape[/b]: back")

    # ------------------------------------------------------------ actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "begin_new":
            return bool(self.unfinished) and not self.review
        return True

    def action_begin(self) -> None:
        if self.review:
            self.dismiss()
            return
        self._begin("continue")

    def action_begin_new(self) -> None:
        self._begin("new")

    def action_back(self) -> None:
        if self.review:
            self.dismiss()
            return
        self.served.leave_game()

    def _begin(self, how: str) -> None:
        if self.failed or self.opening:
            return
        # from here on, what the player types is for the SQL editor: held until it has focus
        self.served.begin_typeahead()
        if not self.ready or self.play.incident is None:
            self.wanted = how
            self._show_action()
            return
        self.wanted = None
        session = self.play.session
        if session is not None:
            if session.state != "briefing":
                return  # resumed mid-investigation: the workspace opens by itself
            # resumed from the command line and still in its briefing
            self.served.start_session(session)
            return
        # one session per start: a second Enter while this one opens must not open another
        self.opening = True
        resume = self.unfinished[0].path if how == "continue" and self.unfinished else None
        self.query_one("#briefing-action", Static).update("Opening the session…")
        self._open_session(resume)

    @work(thread=True, exclusive=True, group="session", exit_on_error=False)
    def _open_session(self, resume_path: Path | None) -> None:
        served, play = self.served, self.play
        try:
            if resume_path is not None:
                session = api.resume_session(resume_path)
                if session.header.seed != play.seed:
                    self._reopen_telemetry(session)
            else:
                assert play.variant is not None  # _begin waits for the incident to load
                session = api.new_session(play.variant, served.player, root=served.data_root)
            if session.state == "briefing":
                assert play.telemetry is not None  # _begin waits for the telemetry
                api.start(session, play.telemetry)
        except api.SessionError as exc:
            self.post_message(SessionFailed(str(exc)))
            return
        except Exception as exc:  # the worker's boundary: say it, and let go of the held keys
            self.post_message(SessionFailed(f"internal error: {type(exc).__name__}: {exc}"))
            return
        if not self.post_message(SessionOpened(session, list(session.warnings))):
            session.close()  # the player left this briefing meanwhile

    def _reopen_telemetry(self, session: Session) -> None:
        """A resumed session with another seed needs its own variant's database (worker thread)."""
        telemetry = api.open_telemetry(api.variant_of(session), limits=self.served.limits, progress=self._progress)
        self.app.call_from_thread(self.served.adopt_telemetry, telemetry)
