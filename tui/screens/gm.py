"""The interviewer's (game master's) screen: one candidate's session followed live from another process.

It shows what `game.gm.Watch.snapshot` holds: the candidate's queries as they arrive (SQL, rows or the
error, the signals each observed), the hypothesis board and its confidences, next to the ground truth,
the decisive signals seen and not yet seen, and the running score. Keys send a message (m), a hint (h)
or an inject (i) into the candidate's session through its inbox; the candidate's workspace shows them
within a second. `servedrill watch SESSION` opens it; the command palette offers it too."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tui.formatting import cell_text, clock_text, one_line

POLL_S = 0.5
"""How often the screen looks for new lines in the candidate's journal and inbox."""

EXTRA_COMMANDS = (
    ("Send a message", "Write to the candidate; it shows on their screen at once.", "send('message')"),
    ("Send a hint", "The incident's next hint, or your own text at a cost in points.", "send('hint')"),
    ("Send an inject", "One of the incident's updates now, or your own.", "send('inject')"),
    ("Write the interview report", "Markdown and HTML next to the session file.", "write_report"),
)
"""Palette entries of this screen: (title, help, action)."""


# ---------------------------------------------------------------- text of the panels (pure)


def _clock(seconds: float | None) -> str:
    return "-:--" if seconds is None else clock_text(seconds)


def status_text(snap: dict[str, Any]) -> str:
    s = snap["session"]
    hints = snap["hints"]
    queries = f"queries {len(snap['queries'])}" + (f" / {s['query_budget']}" if s["query_budget"] else "")
    score = snap["score"]
    total = f"score {score['total']:.1f}" + ("" if score["submitted"] else " so far")
    waiting = [p for p in snap["pending"] if not p.get("problem")]
    pending = f"  ·  [b]{len(waiting)} waiting[/b]" if waiting else ""
    return (f"[b]{escape(s['player'])}[/b] on {escape(s['incident_id'])}  ·  {s['state']}  ·  "
            f"time {_clock(s['elapsed_s'])}  ·  {queries}  ·  hints {hints['taken']} / {hints['total']}  ·  "
            f"[b]{total}[/b]{pending}")


def query_rows(snap: dict[str, Any], width: int = 60) -> list[tuple[str, ...]]:
    rows = []
    for q in snap["queries"]:
        outcome = f"{q['row_count']} rows" if q["ok"] else "error"
        seen = ", ".join(q["signals"]) or ("schema" if q["schema_exploration"] else "-")
        if q["decomposes_latency"]:
            seen += " (latency split)"
        rows.append((f"Q{q['index']}", _clock(q["elapsed_s"]), outcome, seen, one_line(q["sql"], width)))
    return rows


def query_detail(query: dict[str, Any] | None) -> str:
    if query is None:
        return "[dim]No queries yet. They appear here as the candidate runs them.[/dim]"
    head = f"[b]Q{query['index']}[/b] at {_clock(query['elapsed_s'])}\n{escape(query['sql'].strip())}\n"
    if not query["ok"]:
        return head + f"[red]error: {escape(str(query['error']))}[/red]"
    cols = query["columns"]
    lines = ["  ".join(cols)] + ["  ".join(cell_text(v) for v in row) for row in query["rows"]]
    more = query["row_count"] - len(query["rows"])
    tail = f"\n… {more} more rows" if more > 0 else ""
    return head + escape("\n".join(lines)) + tail


def truth_text(snap: dict[str, Any]) -> str:
    lines = [f"[b green]{escape(t['title'])}[/] ({escape(t['id'])})\n{escape(t['explanation'])}" for t in snap["truth"]]
    return "\n".join(lines) or "(no true cause)"


def signals_text(snap: dict[str, Any]) -> str:
    rival = snap["board"]["rival"]
    lines = [f"[dim](★ tells the truth from their top rival, {escape(str(rival))})[/dim]" if rival else ""]
    for s in snap["signals"]:
        mark = f"[green]✓ Q{s['first_seen_query']}[/]" if s["seen"] else "[dim]· not yet[/]"
        star = "★" if s["decisive"] else " "
        lines.append(f"{star} {mark} [b]{escape(s['id'])}[/b]: {escape(one_line(s['shows'], 80))}")
    return "\n".join(line for line in lines if line)


def board_text(snap: dict[str, Any]) -> str:
    titles = {h["id"]: h["title"] for h in snap["hypotheses"]}
    true = {h["id"] for h in snap["hypotheses"] if h["true"]}
    board = snap["board"]
    if not board["ranking"]:
        return "[dim]No ranking saved yet.[/dim]"
    lines = []
    for n, r in enumerate(board["ranking"], start=1):
        mark = " [green]◆ truth[/]" if r["id"] in true else ""
        lines.append(f"{n}. {escape(one_line(titles.get(r['id'], r['id']), 40))}  [b]{r['confidence']:.0f}%[/b]{mark}")
    history = board["history"]
    lines.append(f"[dim]{len(history)} ranking change{'s' if len(history) != 1 else ''}, "
                 f"last at {_clock(history[-1]['elapsed_s'])}[/dim]")
    sub = snap["submission"]
    if sub is not None:
        disc = sub.get("discriminator")
        lines.append(f"[b]Submitted[/b] at {_clock(sub['elapsed_s'])}; separating query: "
                     + (f"Q{disc}" if disc else "none named"))
    return "\n".join(lines)


def score_text(snap: dict[str, Any]) -> str:
    score = snap["score"]
    lines = [f"[b]{score['total']:.1f} / 100[/b]" + ("" if score["submitted"] else " (if submitted now)")]
    for c in score["components"]:
        pts = f"{c['points']:+.1f}" if c["group"] == "penalty" else f"{c['points']:.1f}/{c['max']:.0f}"
        lines.append(f"{escape(one_line(c['title'], 34)):<34} {pts:>9}")
    return "\n".join(lines)


def feed_text(snap: dict[str, Any]) -> str:
    lines = []
    for u in snap["updates"]:
        who = "you" if u["source"] == "gm" else ("incident" if u["source"] == "incident" else "candidate")
        cost = f" -{u['cost']} pts" if u["cost"] else ""
        lines.append(f"{_clock(u['elapsed_s'])} [b]{u['kind']}[/b] ({who}{cost}) {escape(u['from'])}: "
                     f"{escape(one_line(u['text'], 90))}")
    for p in snap["pending"]:
        text = p.get("text") or (f"incident inject {p.get('index')}" if p["kind"] == "inject" else "next hint")
        state = f"[red]refused: {escape(p['problem'])}[/]" if p.get("problem") else "[yellow]waiting[/]"
        lines.append(f"{state} [b]{p['kind']}[/b] {escape(one_line(str(text), 90))}")
    return "\n".join(lines) or "[dim]Nothing delivered yet. m sends a message, h a hint, i an inject.[/dim]"


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
                options = [Option(f"{i['from']}: {one_line(i['text'], 70)}", id=f"i{i['index']}") for i in open_]
                yield OptionList(*options, id="gm-inject-choice")
                yield Label("Enter sends the highlighted update; or write your own below." if open_
                            else "Every incident update was delivered; write your own.", classes="dialog-hint")
            if self.kind == "hint":
                nxt = self.snap["hints"]["next"]
                yield Label(f"Empty text sends the incident's next hint ({nxt['cost']} points): "
                            f"{nxt['text']}" if nxt else "No incident hints left: write your own.",
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
            yield OptionList(*[Option(f"{s.player} · {s.incident_id} · {s.state} · {s.queries} queries · "
                                      f"{s.session_id}", id=str(n)) for n, s in enumerate(self.sessions)],
                             id="gm-sessions")
            yield Label("Enter watches · Escape cancels", classes="dialog-hint")

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(Path(self.sessions[int(event.option.id or 0)].path))


# ---------------------------------------------------------------- the screen


class GMScreen(Screen[None]):
    """Follows the session file at `path`. `clock` gives epoch seconds (tests freeze it)."""

    EXTRA_COMMANDS = EXTRA_COMMANDS

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "send('message')", "Message", tooltip="Write to the candidate."),
        Binding("h", "send('hint')", "Hint", tooltip="Send a hint (it costs the candidate points)."),
        Binding("i", "send('inject')", "Inject", tooltip="Send an update from the incident or your own."),
        Binding("r", "write_report", "Report", tooltip="Write the interview report (Markdown and HTML)."),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, path: Path | str, *, clock: Callable[[], float] = time.time, watch: Any = None) -> None:
        super().__init__()
        self.path = Path(path)
        self.clock = clock
        self.watch = watch
        self.snap: dict[str, Any] | None = None
        self._query_count = -1

    def compose(self) -> ComposeResult:
        yield Static("Opening the session…", id="gm-status")
        with Horizontal(id="gm-work"):
            with Vertical(id="gm-left"):
                table: DataTable[str] = DataTable(id="gm-queries", cursor_type="row", zebra_stripes=True)
                table.add_columns("Q", "at", "result", "signals observed", "SQL")
                yield table
                with VerticalScroll(id="gm-detail-scroll"):
                    yield Static("", id="gm-detail")
            with VerticalScroll(id="gm-right"):
                yield Static("", id="gm-truth", classes="gm-panel")
                yield Static("", id="gm-signals", classes="gm-panel")
                yield Static("", id="gm-board", classes="gm-panel")
                yield Static("", id="gm-score", classes="gm-panel")
        with VerticalScroll(id="gm-feed-scroll"):
            yield Static("", id="gm-feed")
        yield Footer(show_command_palette=False)  # ctrl+p is already among the bindings

    def on_mount(self) -> None:
        for wid, title in (("gm-truth", "Ground truth"), ("gm-signals", "Decisive signals"),
                           ("gm-board", "Candidate's board"), ("gm-score", "Running score"),
                           ("gm-feed-scroll", "Delivered and waiting"), ("gm-left", "Candidate's queries")):
            self.query_one(f"#{wid}").border_title = title
        if self.watch is None:
            from game.gm import GMError, Watch

            try:
                self.watch = Watch(self.path)
            except GMError as exc:
                self.query_one("#gm-status", Static).update(f"[red]{escape(str(exc))}[/red]")
                return
        self.render_snapshot()
        self.set_interval(POLL_S, self.tick)
        self.query_one(DataTable).focus()

    def tick(self) -> None:
        if self.watch is None:
            return
        if self.watch.refresh():
            self.render_snapshot()
        elif self.snap is not None and self.snap["session"]["state"] == "investigating":
            session = self.snap["session"]  # only the clock moved
            if session["started"] is not None:
                session["elapsed_s"] = max(0.0, self.clock() - session["started"])
            self.query_one("#gm-status", Static).update(status_text(self.snap))

    def render_snapshot(self) -> None:
        snap = self.snap = self.watch.snapshot(self.clock())
        self.query_one("#gm-status", Static).update(status_text(snap))
        table = self.query_one("#gm-queries", DataTable)
        if len(snap["queries"]) != self._query_count:
            at_end = table.cursor_row >= table.row_count - 1
            table.clear()
            for row in query_rows(snap):
                table.add_row(*row)
            self._query_count = len(snap["queries"])
            if at_end and table.row_count:
                table.move_cursor(row=table.row_count - 1)
        self._show_detail()
        self.query_one("#gm-truth", Static).update(truth_text(snap))
        self.query_one("#gm-signals", Static).update(signals_text(snap))
        self.query_one("#gm-board", Static).update(board_text(snap))
        self.query_one("#gm-score", Static).update(score_text(snap))
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

        def send(choice: dict[str, Any] | None) -> None:
            from game.gm import GMError, send

            if not choice:
                return
            try:
                item = send(self.path, choice.pop("kind"), watch=self.watch, **choice)
            except GMError as exc:
                self.notify(str(exc), severity="error")
                return
            self.notify(f"Sent the {item['kind']}; it shows when the candidate's screen picks it up.")
            self.watch.refresh()
            self.render_snapshot()

        self.app.push_screen(SendScreen(kind, self.snap), send)

    def action_write_report(self) -> None:
        from game.interview_report import build_report, to_html, to_markdown

        if self.watch is None:
            return
        self.watch.refresh()
        report = build_report(self.watch)
        md = self.path.with_name(self.path.stem + ".interview.md")
        html = md.with_suffix(".html")
        try:
            md.write_text(to_markdown(report), encoding="utf-8")
            html.write_text(to_html(report), encoding="utf-8")
        except OSError as exc:
            self.notify(f"Cannot write the report: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"Interview report written to {md} and {html.name}", timeout=10)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
