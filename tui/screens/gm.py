"""The interviewer's (game master's) screen: one candidate's session followed live from another process.

It shows what `game.api.look` gives (a snapshot of the session): the candidate's queries as they arrive (SQL,
rows or the error), the hypothesis board (labelled as the candidate sees it) with its pins, and what was delivered
and is waiting. The answer (the ground truth, which rivals each query ruled out, the running score)
shows once the candidate submitted, or from the start when the watch was opened with `reveal`
(`servedrill watch --reveal`): someone looking over the interviewer's shoulder would see the cause.

Reading the journal and scoring (which re-runs the candidate's queries on every hypothesis's world)
happen in a worker thread, one look at a time; the screen only lays out the snapshot. Keys send a
message (m), a hint (h) or an inject (i) into the candidate's session through its inbox; the
candidate's workspace shows them within a second. `servedrill watch SESSION` opens it; the command
palette offers it too.

The text of its panels is tui/gm_text.py's (pure functions of the snapshot)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tui.gm_text import (
    board_text,
    evidence_text,
    feed_text,
    is_revealed,
    query_detail,
    query_rows,
    score_text,
    status_text,
    truth_text,
)
from tui.text import one_line, template

if TYPE_CHECKING:
    from game.gameday.gm import Watch

POLL_S = 0.5
"""How often the screen looks for new lines in the candidate's journal and inbox."""

EXTRA_COMMANDS = (
    ("Send a message", "Write to the candidate; it shows on their screen at once.", "send('message')"),
    ("Send a hint", "The incident's next hint, or your own text at a cost in points.", "send('hint')"),
    ("Send an inject", "One of the incident's updates now, or your own.", "send('inject')"),
    ("Write the interview report", "Markdown and HTML next to the session file.", "write_report"),
)
"""Palette entries of this screen: (title, help, action)."""

# ---------------------------------------------------------------- sending


class SendScreen(ModalScreen[dict[str, Any] | None]):
    """What to send: text (and for a hint its cost); for an inject, one of the incident's or your own."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, kind: str, snap: dict[str, Any]) -> None:
        super().__init__()
        self.kind = kind
        self.snap = snap

    def compose(self) -> ComposeResult:
        with Vertical(id="gm-send-dialog", classes="dialog"):
            yield Label(f"Send the candidate {'an' if self.kind == 'inject' else 'a'} {self.kind}",
                        id="gm-send-title")
            if self.kind == "inject":
                open_ = [i for i in self.snap["injects"] if not i["delivered"]]
                options = [Option(Text(f"{one_line(i['from'], 40)}: {one_line(i['text'], 70)}", end=""),
                                  id=f"i{i['index']}") for i in open_]
                yield OptionList(*options, id="gm-inject-choice")
                yield Label("Enter sends the highlighted update; or write your own below." if open_
                            else "Every incident update was delivered; write your own.", classes="dialog-hint")
            if self.kind == "hint":
                nxt = self.snap["hints"]["next"]
                yield Label(f"Empty text sends the incident's next hint (hint {nxt['index'] + 1}, {nxt['cost']} "
                            "points); or write your own." if nxt else "No incident hints left: write your own.",
                            classes="dialog-hint")
            yield Input(placeholder="text (Enter sends)", id="gm-text")
            with Horizontal(classes="dialog-buttons"):
                yield Input(placeholder="from (default Interviewer)", id="gm-from")
                if self.kind == "hint":
                    yield Input("10", placeholder="cost in points", id="gm-cost", type="integer")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Send", id="gm-send", variant="primary")
                yield Button("Cancel", id="gm-cancel")

    def on_mount(self) -> None:
        self.query_one("#gm-text", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "gm-send":
            self._send()
        else:
            self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._send()

    @on(OptionList.OptionSelected, "#gm-inject-choice")
    def _chosen(self) -> None:
        self._send()

    def _send(self) -> None:
        text = self.query_one("#gm-text", Input).value.strip() or None
        sender = self.query_one("#gm-from", Input).value.strip() or None
        out: dict[str, Any] = {"kind": self.kind, "text": text, "sender": sender}
        if self.kind == "hint" and text is not None:
            raw = self.query_one("#gm-cost", Input).value.strip()
            out["cost"] = int(raw) if raw.lstrip("-").isdigit() else None
        if self.kind == "inject" and text is None:
            choice = self.query_one("#gm-inject-choice", OptionList)
            option = choice.highlighted_option if choice.option_count else None
            if option is None or option.id is None:
                self.notify("Write the update's text.", severity="warning")
                return
            out["index"] = int(option.id[1:])
        if self.kind == "message" and text is None:
            self.notify("Write the message first.", severity="warning")
            return
        self.dismiss(out)


class SessionChooser(ModalScreen[Path | None]):
    """Pick a session to watch, most recently active first."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, sessions: Sequence[Any]) -> None:
        super().__init__()
        self.sessions = list(sessions)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Watch which session?")
            # the player's name and the ids are data: literal Text, never markup
            yield OptionList(*[Option(Text(f"{one_line(s.player, 40)} · {one_line(s.incident_id, 60)} · {s.state} · "
                                           f"{s.queries} queries · {one_line(s.session_id, 80)}", end=""), id=str(n))
                               for n, s in enumerate(self.sessions)], id="gm-sessions")
            yield Label("Enter watches · Escape cancels", classes="dialog-hint")

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(Path(self.sessions[int(event.option.id or 0)].path))


# ---------------------------------------------------------------- the screen


class Looked(Message):
    """A worker's look at the session: a fresh `snap` (None: nothing changed), or `error`."""

    def __init__(self, snap: dict[str, Any] | None, error: str | None = None) -> None:
        super().__init__()
        self.snap = snap
        self.error = error


class Done(Message):
    """A worker finished sending an item or writing the report: what to tell the interviewer."""

    def __init__(self, text: str, severity: SeverityLevel = "information") -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class GMScreen(Screen[None]):
    """Follows the session file at `path`. `clock` gives epoch seconds (tests freeze it); `reveal`
    shows the answer before the candidate submits."""

    EXTRA_COMMANDS = EXTRA_COMMANDS

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "send('message')", "Message", tooltip="Write to the candidate."),
        Binding("h", "send('hint')", "Hint", tooltip="Send a hint (it costs the candidate points)."),
        Binding("i", "send('inject')", "Inject", tooltip="Send an update from the incident or your own."),
        Binding("r", "write_report", "Report", tooltip="Write the interview report (Markdown and HTML)."),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, path: Path | str, *, clock: Callable[[], float] = time.time,
                 gm_watch: Watch | None = None, reveal: bool = False) -> None:
        super().__init__()
        self.path = Path(path)
        self.clock = clock
        # not `watch`: that is Textual's own method (DOMNode.watch) on every screen
        self.gm_watch = gm_watch
        self.reveal = reveal
        self.snap: dict[str, Any] | None = None
        self._query_count = -1
        self._lock = threading.Lock()  # one worker at a time uses the Watch
        self._looking = False
        self._again = False

    def compose(self) -> ComposeResult:
        yield Static("Opening the session…", id="gm-status")
        with Horizontal(id="gm-work"):
            with Vertical(id="gm-left"):
                table: DataTable[str] = DataTable(id="gm-queries", cursor_type="row", zebra_stripes=True)
                # fixed widths: the rows arrive from a worker after the first paint, and an auto-width
                # DataTable can keep lines it rendered before measuring them
                for label, width in (("Q", 3), ("at", 5), ("result", 9), ("ruled out", 9), ("SQL", 60)):
                    table.add_column(label, width=width)
                yield table
                with VerticalScroll(id="gm-detail-scroll"):
                    yield Static("", id="gm-detail")
            with VerticalScroll(id="gm-right"):
                yield Static("", id="gm-truth", classes="gm-panel")
                yield Static("", id="gm-evidence", classes="gm-panel")
                yield Static("", id="gm-board", classes="gm-panel")
                yield Static("", id="gm-score", classes="gm-panel")
        with VerticalScroll(id="gm-feed-scroll"):
            yield Static("", id="gm-feed")
        yield Footer(show_command_palette=False)  # ctrl+p is already among the bindings

    def on_mount(self) -> None:
        for wid, title in (("gm-truth", "Ground truth"), ("gm-evidence", "Rivals ruled out"),
                           ("gm-board", "Candidate's board"), ("gm-score", "Running score"),
                           ("gm-feed-scroll", "Delivered and waiting"), ("gm-left", "Candidate's queries")):
            self.query_one(f"#{wid}").border_title = title
        self.look(force=True)
        self.set_interval(POLL_S, self.tick)
        self.query_one(DataTable).focus()

    # ------------------------------------------------------------ looking (worker)

    def look(self, force: bool = False) -> None:
        """Read what the candidate's session and inbox gained, in a worker; with `force`, a fresh
        snapshot even when nothing changed. One look at a time: a request meanwhile runs after it."""
        if self._looking:
            self._again = self._again or force
            return
        self._looking = True
        self._look(force)

    @work(thread=True, group="gm-look", exit_on_error=False)
    def _look(self, force: bool) -> None:
        from game import api

        try:
            with self._lock:
                if self.gm_watch is None:
                    self.gm_watch = api.watch(self.path, reveal=self.reveal)
                    force = True
                snap = api.look(self.gm_watch, self.clock(), force=force)
        except api.GMError as exc:
            self.post_message(Looked(None, str(exc)))
            return
        except Exception as exc:  # the worker's boundary: show it, keep watching
            self.post_message(Looked(None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(Looked(snap))

    def on_looked(self, message: Looked) -> None:
        self._looking = False
        if message.error is not None:
            self.query_one("#gm-status", Static).update(template("[red]$error[/red]",
                                                                 error=one_line(message.error, 500)))
        elif message.snap is not None:
            self.render_snapshot(message.snap)
        if self._again:
            self._again = False
            self.look(force=True)

    def tick(self) -> None:
        self.look()
        if self.snap is not None and self.snap["session"]["state"] == "investigating":
            session = self.snap["session"]  # the clock moves between looks
            if session["started"] is not None:
                from game import api

                # the game clock as the candidate sees it: only while a process held the session
                session["elapsed_s"] = api.candidate_clock(self.path, session["started"], self.clock())
            self.query_one("#gm-status", Static).update(status_text(self.snap))

    def render_snapshot(self, snap: dict[str, Any]) -> None:
        self.snap = snap
        self.query_one("#gm-status", Static).update(status_text(snap))
        table = self.query_one("#gm-queries", DataTable)
        rows = query_rows(snap)
        at_end = table.cursor_row >= table.row_count - 1
        table.clear()  # redrawn each look: what a query ruled out appears once the answer is revealed
        for row in rows:
            table.add_row(*row)
        if table.row_count:
            cursor = table.row_count - 1 if at_end or len(rows) != self._query_count else table.cursor_row
            table.move_cursor(row=min(cursor, table.row_count - 1))
        self._query_count = len(rows)
        self._show_detail()
        revealed = is_revealed(snap)
        self.query_one("#gm-truth", Static).update(truth_text(snap))
        for wid, text in (("gm-evidence", evidence_text(snap)), ("gm-score", score_text(snap))):
            panel = self.query_one(f"#{wid}", Static)
            panel.update(text)
            panel.display = revealed
        self.query_one("#gm-board", Static).update(board_text(snap))
        self.query_one("#gm-feed", Static).update(feed_text(snap))
        self.app.call_after_refresh(getattr(self.app, "mark", lambda _name: None), "gm")

    def _show_detail(self) -> None:
        if self.snap is None:
            return
        table = self.query_one("#gm-queries", DataTable)
        queries = self.snap["queries"]
        query = queries[table.cursor_row] if queries and 0 <= table.cursor_row < len(queries) else None
        self.query_one("#gm-detail", Static).update(query_detail(query))

    @on(DataTable.RowHighlighted, "#gm-queries")
    def _highlighted(self) -> None:
        self._show_detail()

    # ------------------------------------------------------------ actions

    def action_send(self, kind: str) -> None:
        if self.snap is None:
            return

        def chosen(choice: dict[str, Any] | None) -> None:
            if choice:
                self._send(choice)

        self.app.push_screen(SendScreen(kind, self.snap), chosen)

    @work(thread=True, group="gm-send", exit_on_error=False)
    def _send(self, choice: dict[str, Any]) -> None:
        from game import api

        try:
            with self._lock:
                sent = api.send(self.path, choice.pop("kind"), follower=self.gm_watch, **choice)
        except api.GMError as exc:
            self.post_message(Done(str(exc), "error"))
            return
        self.post_message(Done(f"Sent the {sent.item['kind']}; it shows when the candidate's screen picks it up."))

    def action_write_report(self) -> None:
        if self.gm_watch is not None:
            self._write_report(self.gm_watch)

    @work(thread=True, group="gm-report", exit_on_error=False)
    def _write_report(self, watch: Watch) -> None:
        from game import api

        try:
            with self._lock:
                report = api.interview_report(watch)
            md, html = api.write_interview_report(report, self.path)
        except OSError as exc:
            self.post_message(Done(f"Cannot write the report: {exc.strerror or exc}", "error"))
            return
        self.post_message(Done(f"Interview report written to {md} and {html.name}"))

    def on_done(self, message: Done) -> None:
        self.notify(one_line(message.text, 500), severity=message.severity,
                    markup=False,
                    timeout=10 if message.severity == "information" else 5)
        self.look(force=True)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
