"""The debrief: the score with its reasons, what happened, what each query ruled out, the player's
queries against the faults, and the shortest settling path. Text from `game.rules.debrief`; the score from
`game.rules.assess.score_session`, which re-runs every query on each hypothesis's world (quick when the
background build started with the session has filled the cache, tens of seconds when cold: it runs in
a worker, with a progress line); this screen only lays them out and writes the files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Markdown, Static

from tui.actions import bindings
from tui.app_api import GameApp, game_app
from tui.formatting import column_widths
from tui.messages import DebriefReady, ScoringProgress
from tui.text import bounded, editable, one_line, template
from tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from game.api import Debrief, PastDebrief
    from game.rules.scoring import ScoreReport
    from game.session import Event, Session
    from game.session.hypotheses import Shown
    from incidents.spec import Incident

MAX_DEBRIEF_CHARS = 2_000_000
"""The debrief document shown (and exported) is cut at this many characters."""

GROUPS = (("conclusion", "conclusion"), ("evidence", "evidence"), ("pins", "pins"))
"""Score component groups shown on the score line, with their names there; penalties follow."""


def score_markup(report: ScoreReport) -> str:
    """Total, points per group and the penalties, as Rich markup."""
    parts = []
    for group, title in GROUPS:
        got = sum(c.points for c in report.components if c.group == group)
        out_of = sum(c.max for c in report.components if c.group == group)
        parts.append(f"{title} {got:.1f}/{out_of:.0f}")
    penalty = sum(c.points for c in report.components if c.group == "penalty")
    parts.append(f"penalties {penalty:+.1f}")
    ruled = f"   rivals ruled out {len(report.ruled_out)}/{len(report.rivals)}" if report.rivals else ""
    return f"[b]Score {report.total:.1f} / 100[/b]   " + " · ".join(parts) + ruled


def progress_markup(name: str, done: int, total: int) -> str:
    """The score line while scoring: which world is being built or opened."""
    what = {"truth": "what you saw", "noise": "a second run of it"}.get(name, "a rival hypothesis")
    return (f"Scoring: re-running your queries on every hypothesis's world · world {min(done + 1, total)} "
            f"of {total} ({what})…")


def debrief_document(session: Session, debrief: Debrief) -> str:
    """The game's debrief followed by the query timeline (rivals named by the session's board labels)."""
    return _document(session.incident, session.events, session.board, debrief)


def past_document(past: PastDebrief) -> str:
    """The same document for a finished session reopened from its transcript (`game.api.past_debrief`)."""
    return _document(past.incident, past.events, past.board, past.debrief)


def _document(incident: Incident, events: Sequence[Event], board: Sequence[Shown], debrief: Debrief) -> str:
    from tui.timeline import timeline_markdown

    document = debrief.markdown.rstrip() + "\n\n" + timeline_markdown(
        incident, list(events), debrief.report.per_query, list(board))
    # the player's SQL, notes and the interviewer's words are in it: no control character reaches the
    # terminal (Markdown does not read Rich markup, so "[/x]" is already shown as written)
    return bounded(editable(document), MAX_DEBRIEF_CHARS)


class DebriefScreen(Screen[None]):
    """The debrief of the game just submitted, or (`past`: a transcript from the history) of a finished
    session, rebuilt from its transcript; Escape then goes back to the history, and no transcript is written
    (`PastDebriefScreen`)."""

    BINDINGS = bindings("debrief")
    SCOPE = "debrief"
    """The actions table's scope of the key bar (tui/actions.py)."""

    def __init__(self, past: Path | None = None) -> None:
        super().__init__()
        self.past = past
        self.report: ScoreReport | None = None
        self.markdown = ""
        self.transcript: Path | None = None
        self.mitigated = False  # the debrief shows the player's mitigation

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    def compose(self) -> ComposeResult:
        yield Static("Scoring: re-running your queries on every hypothesis's world…", id="debrief-score")
        with VerticalScroll(id="debrief-scroll"):
            yield Markdown("", id="debrief-body")
        yield Static("", id="debrief-status")
        # the mitigation phase: shown by `m` when the incident has one and the session has not acted
        yield Input(placeholder="act: rollback; set max_num_seqs=256; drain vllm-2 (Enter applies)",
                    id="debrief-act")
        yield KeyBar(self.SCOPE)

    def on_mount(self) -> None:
        self.query_one("#debrief-act", Input).display = False
        if self.past is not None:
            self._reopen(self.past)
        else:
            self._prepare()

    @work(thread=True, exclusive=True, group="debrief", exit_on_error=False)
    def _reopen(self, transcript: Path) -> None:
        from game import api

        try:
            done = api.past_debrief(transcript, progress=self._progress)
            document = past_document(done)
        except api.SessionError as exc:  # unreadable, the incident changed, a round not over: said on screen
            self.post_message(DebriefReady(None, "", None, str(exc)))
            return
        except Exception as exc:  # the worker's boundary: report it on screen
            self.post_message(DebriefReady(None, "", None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(DebriefReady(done.debrief.report, document, str(transcript)))

    def _can_act(self) -> bool:
        from game.api import mitigation_actions

        play = self.served.play
        if self.past is not None or play is None or play.session is None:  # a reopened debrief only reads
            return False
        session = play.session
        return bool(mitigation_actions(session.incident)) and not any(e.kind == "act" for e in session.events)

    def action_mitigate(self) -> None:
        from game.api import mitigation_actions

        if not self._can_act() or self.report is None:
            return
        box = self.query_one("#debrief-act", Input)
        box.display = True
        box.focus()
        assert self.served.play is not None and self.served.play.session is not None
        offered = mitigation_actions(self.served.play.session.incident)
        self.query_one("#debrief-status", Static).update(
            template("Mitigate: $offered (several: separate them with ;)", offered=" · ".join(offered)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "debrief-act":
            return
        texts = [t.strip() for t in event.value.split(";") if t.strip()]
        if not texts:
            return
        self.query_one("#debrief-status", Static).update("Simulating the fleet on from the decision with your "
                                                         "actions…")
        self._act(texts)

    @work(thread=True, exclusive=True, group="mitigate", exit_on_error=False)
    def _act(self, texts: list[str]) -> None:
        from game.api import SessionError, act

        play = self.served.play
        assert play is not None and play.session is not None
        try:
            acted = act(play.session, texts)
            acted.telemetry.close()
        except SessionError as exc:
            self.app.call_from_thread(self._act_refused, str(exc))
            return
        except Exception as exc:  # the worker's boundary: report it on screen
            self.app.call_from_thread(self._act_refused, f"{type(exc).__name__}: {exc}")
            return
        self.app.call_from_thread(self._acted)

    def _act_refused(self, why: str) -> None:
        status = self.query_one("#debrief-status", Static)
        status.update(template("[b red]Not applied:[/] $why", why=one_line(why, 500)))

    def _acted(self) -> None:
        box = self.query_one("#debrief-act", Input)
        box.display = False
        box.value = ""
        self.report = None  # the debrief is written again, with the mitigation's section
        self._prepare()

    @work(thread=True, exclusive=True, group="debrief", exit_on_error=False)
    def _prepare(self) -> None:
        from game.api import debrief

        served = self.served
        assert served.play is not None and served.play.session is not None  # the debrief follows a session
        session = served.play.session
        try:
            done = debrief(session, progress=self._progress)
            report = done.report
            document = debrief_document(session, done)
            path = served.export_transcript({"total": report.total})
        except Exception as exc:  # the worker's boundary: report it on screen
            self.post_message(DebriefReady(None, "", None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(DebriefReady(report, document, None if path is None else str(path)))

    def _progress(self, name: str, done: int, total: int) -> None:
        self.post_message(ScoringProgress(name, done, total))  # from the worker thread

    def on_scoring_progress(self, message: ScoringProgress) -> None:
        if self.report is None:
            self.query_one("#debrief-score", Static).update(
                progress_markup(message.name, message.done, message.total))

    async def on_debrief_ready(self, message: DebriefReady) -> None:
        status = self.query_one("#debrief-status", Static)
        if message.error:
            status.update(template("[b red]Could not build the debrief:[/] $error", error=one_line(message.error, 500)))
            return
        assert message.report is not None  # only an error comes without a report
        self.report, self.markdown = message.report, message.markdown
        self.transcript = Path(message.transcript) if message.transcript else None
        self.query_one("#debrief-score", Static).update(score_markup(message.report))
        await self.query_one(Markdown).update(message.markdown)
        saved = ("Reopened from your history" if self.past is not None
                 else "Transcript saved" if self.transcript else "Transcript not saved")
        can_act = self._can_act()
        if can_act:  # what acting needs is simulated while the player reads the debrief
            from game.api import prepare_mitigation

            assert self.served.play is not None and self.served.play.session is not None
            prepare_mitigation(self.served.play.session)
        mitigate = " · [b]m[/b] mitigate: act on the fleet" if can_act else ""
        status.update(f"{saved} · [b]s[/b] score details · [b]t[/b] timeline · [b]e[/b] export as Markdown{mitigate}")
        self.mitigated = "## Mitigation\n\nAt t=" in message.markdown
        self.call_after_refresh(self.fit_tables)
        self.call_after_refresh(self.served.mark, "debrief")

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_tables)

    def fit_tables(self) -> None:
        """Give each column of the debrief's tables its content's width where it fits, and share the rest
        among the columns that need more (Textual's grid would shrink every column alike, leaving "Ruled
        out" nine characters wide beside a half-empty one)."""
        from textual.widgets._markdown import MarkdownTableContent

        for table in self.query(MarkdownTableContent):
            cells = [[c.plain for c in table.headers], *[[c.plain for c in row] for row in table.rows]]
            parent = table.parent
            available = (parent.size.width if isinstance(parent, Widget) else 0) or table.size.width
            if available <= 0:
                continue
            # the keylines and gutters between and around the columns take about a cell per column and more
            widths = column_widths(cells, available - 3 * len(cells[0]) - 2)
            spec = " ".join(str(w) for w in widths)
            if str(table.styles.grid_columns) != spec:
                table.styles.grid_columns = spec
            table.fitted = widths  # type: ignore[attr-defined]

    def action_export_markdown(self) -> None:
        if not self.markdown:
            return
        status = self.query_one("#debrief-status", Static)
        # said on the status line under the page, never in a toast over it
        if self.transcript is None:
            status.update("[b red]No transcript was saved, so there is nowhere to put the Markdown.[/]")
            return
        target = self.transcript.with_suffix(".md")
        try:
            target.write_text(self.markdown, encoding="utf-8")
        except OSError as exc:
            status.update(template("[b red]Cannot write $path:[/] $why", path=str(target),
                                   why=one_line(str(exc.strerror or exc), 200)))
            return
        status.update(template("Debrief written to [b]$path[/b]", path=str(target)))

    def action_goto(self, anchor: str) -> None:
        self.query_one(Markdown).goto_anchor(anchor)

    def action_done(self) -> None:
        if self.past is not None:
            self.dismiss(None)  # back to the history it was opened from
            return
        self.served.leave_game()


class PastDebriefScreen(DebriefScreen):
    """A finished session's debrief reopened from the history: the same page; Escape goes back there."""

    BINDINGS = bindings("past_debrief")
    SCOPE = "past_debrief"

    def __init__(self, past: Path) -> None:
        super().__init__(past=past)
