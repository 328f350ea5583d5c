"""The debrief: the score with its reasons, what happened, the player's queries against the faults,
evidence seen and missed, and the shortest settling path. Text from `game.debrief`; score from
`game.scoring`; this screen only lays them out and writes the files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Markdown, Static

from tui.actions import bindings
from tui.messages import DebriefReady
from tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from tui.app import ServedrillApp

GROUPS = (("ranking", "ranking"), ("evidence", "evidence"), ("discipline", "discipline"))


def score_markup(report: Any) -> str:
    """Total and points per group, as Rich markup."""
    parts = []
    for group, title in GROUPS:
        got = sum(c.points for c in report.components if c.group == group)
        out_of = sum(c.max for c in report.components if c.group == group)
        parts.append(f"{title} {got:.1f}/{out_of:.0f}")
    penalty = sum(c.points for c in report.components if c.group == "penalty")
    parts.append(f"penalties {penalty:+.1f}")
    return f"[b]Score {report.total:.1f} / 100[/b]   " + " · ".join(parts)


def debrief_document(incident: Any, events: list[Any], report: Any) -> str:
    """debrief_markdown followed by the query timeline."""
    from game.debrief import debrief_markdown
    from tui.timeline import timeline_markdown

    return debrief_markdown(incident, events, report).rstrip() + "\n\n" + timeline_markdown(
        incident, events, report.first_seen)


class DebriefScreen(Screen[None]):
    BINDINGS = bindings("debrief")

    def __init__(self) -> None:
        super().__init__()
        self.report: Any = None
        self.markdown = ""
        self.transcript: Path | None = None

    @property
    def served(self) -> ServedrillApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static("Scoring…", id="debrief-score")
        with VerticalScroll(id="debrief-scroll"):
            yield Markdown("", id="debrief-body")
        yield Static("", id="debrief-status")
        yield KeyBar("debrief")

    def on_mount(self) -> None:
        self._prepare()

    @work(thread=True, exclusive=True, group="debrief", exit_on_error=False)
    def _prepare(self) -> None:
        from game.scoring import score

        served = self.served
        session = served.play.session  # type: ignore[union-attr]
        try:
            events = session.events
            report = score(session.incident, events)
            document = debrief_document(session.incident, events, report)
            if session.state == "submitted":
                session.view_debrief()
            path = served.export_transcript()
        except Exception as exc:  # the worker's boundary: report it on screen
            self.post_message(DebriefReady(None, "", None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(DebriefReady(report, document, None if path is None else str(path)))

    async def on_debrief_ready(self, message: DebriefReady) -> None:
        status = self.query_one("#debrief-status", Static)
        if message.error:
            status.update(f"[b red]Could not build the debrief:[/] {message.error}")
            return
        self.report, self.markdown = message.report, message.markdown
        self.transcript = Path(message.transcript) if message.transcript else None
        self.query_one("#debrief-score", Static).update(score_markup(message.report))
        await self.query_one(Markdown).update(message.markdown)
        saved = "Transcript saved" if self.transcript else "Transcript not saved"
        status.update(f"{saved} · [b]s[/b] score details · [b]t[/b] timeline · [b]e[/b] export as Markdown")
        if self.transcript and not self.served.steady:  # a path under a temporary folder in tests
            self.notify(f"Transcript: {self.transcript}", timeout=8)
        self.served.mark("debrief")

    def action_export_markdown(self) -> None:
        if not self.markdown:
            return
        if self.transcript is None:
            self.notify("No transcript was saved, so there is nowhere to put the Markdown.", severity="error")
            return
        target = self.transcript.with_suffix(".md")
        try:
            target.write_text(self.markdown, encoding="utf-8")
        except OSError as exc:
            self.notify(f"Cannot write {target}: {exc.strerror or exc}", severity="error")
            return
        self.query_one("#debrief-status", Static).update(f"Debrief written to [b]{target}[/b]")
        self.notify(f"Debrief written to {target}", timeout=10)

    def action_goto(self, anchor: str) -> None:
        self.query_one(Markdown).goto_anchor(anchor)

    def action_done(self) -> None:
        self.served.leave_game()
