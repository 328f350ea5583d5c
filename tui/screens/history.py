"""The player's past sessions: incident, score, solved or not, date, time taken; Enter reopens a debrief.

The list is `game.api.history` (one row per transcript the debrief wrote), read in a worker; a reopened
debrief is rebuilt from the transcript by `game.api.past_debrief` (tui/screens/debrief.py, `past=`), so it
works the same after a restart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tui.actions import bindings
from tui.app_api import GameApp, game_app
from tui.formatting import clock_text
from tui.messages import HistoryLoaded
from tui.text import literal, one_line, template
from tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from game.api import PastSession

__all__ = ["HISTORY_COLUMNS", "HistoryScreen", "score_text", "taken_text"]

HISTORY_COLUMNS = {"score": 7, "date": 16, "taken": 7, "queries": 7}
"""Widths of the history's short columns; the incident's title takes the rest."""


def score_text(past: PastSession) -> str:
    """The recorded score, with ✓ when it counts as solved (game.api.solved decides); "-" unscored."""
    if past.score is None:
        return "-"
    return f"{past.score:.1f}" + (" ✓" if past.solved else "")


def taken_text(past: PastSession) -> str:
    """Time from the start of the investigation to the submission, m:ss (h:mm:ss from an hour)."""
    taken = past.taken_s
    return "?" if taken is None else clock_text(taken)


class HistoryScreen(Screen[None]):
    """Past sessions, most recent first. Enter reopens the highlighted one's debrief; Escape goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings("history"),
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
    ]

    past: var[list[PastSession] | None] = var(None, init=False)
    """The sessions listed (None: not read yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.problem: str | None = None

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    def compose(self) -> ComposeResult:
        with Vertical(id="history"):
            yield Static("[b]Your past sessions[/b] · ✓ solved · Enter reopens a debrief", id="history-title")
            table: DataTable[Any] = DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
            yield table
            yield Static("Reading your transcripts…", id="history-detail")
        yield KeyBar("history")

    def on_mount(self) -> None:
        self._fill()
        self.query_one(DataTable).focus()
        self._load()

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def _load(self) -> None:
        from game import api

        try:
            found = api.history(self.served.player, self.served.data_root)
        except OSError as exc:  # the data folder unreadable: said on screen
            self.post_message(HistoryLoaded([], f"cannot read the transcripts: {exc.strerror or exc}"))
            return
        self.post_message(HistoryLoaded(found))

    def on_history_loaded(self, message: HistoryLoaded) -> None:
        self.problem = message.error
        self.past = message.past

    def watch_past(self) -> None:
        self._fill()
        self.call_after_refresh(self.served.mark, "history")

    def _title_width(self) -> int:
        table = self.query_one(DataTable)
        width = table.scrollable_content_region.width or self.app.size.width - 2
        fixed = sum(HISTORY_COLUMNS.values()) + 2 * (len(HISTORY_COLUMNS) + 1)
        titles = max([8] + [len(p.title) for p in self.past or []])
        return max(12, min(titles, width - fixed - 1))

    def on_resize(self) -> None:
        if self.is_mounted:
            self._fill(self.query_one(DataTable).cursor_row)

    def _fill(self, cursor: int = 0) -> None:
        table = self.query_one(DataTable)
        title_w = self._title_width()
        table.clear(columns=True)
        table.add_column("Incident", key="title", width=title_w)
        table.add_column("Score", key="score", width=HISTORY_COLUMNS["score"])
        table.add_column("Date (UTC)", key="date", width=HISTORY_COLUMNS["date"])
        table.add_column("Time", key="taken", width=HISTORY_COLUMNS["taken"])
        table.add_column("Queries", key="queries", width=HISTORY_COLUMNS["queries"])
        for past in self.past or []:
            # the title is the incident file's words: a literal Text cell, never markup
            table.add_row(literal(one_line(past.title, title_w)), score_text(past), past.date, taken_text(past),
                          str(past.queries), key=past.session_id)
        if self.past:
            table.move_cursor(row=max(0, min(cursor, len(self.past) - 1)))
        self._describe()

    @on(DataTable.RowHighlighted, "#history-table")
    def _highlighted(self) -> None:
        self._describe()

    @on(DataTable.RowSelected, "#history-table")
    def _selected(self) -> None:
        self.action_open_debrief()

    def _describe(self) -> None:
        detail = self.query_one("#history-detail", Static)
        if self.past is None:
            detail.update("Reading your transcripts…")
            return
        if self.problem:
            detail.update(template("[b red]$problem[/]", problem=one_line(self.problem, 300)))
            return
        past = self.highlighted
        if past is None:
            detail.update("No finished sessions yet: submit an incident, and its debrief is kept here. "
                          "Escape goes back to the incidents.")
            return
        detail.update(template("[b]$title[/b]\n$id · seed $seed · session $session",
                               title=one_line(past.title, 200), id=one_line(past.incident_id, 80),
                               seed=str(past.seed), session=one_line(past.session_id, 100)))

    @property
    def highlighted(self) -> PastSession | None:
        table = self.query_one(DataTable)
        if not self.past or table.cursor_row < 0:
            return None
        return self.past[min(table.cursor_row, len(self.past) - 1)]

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(DataTable)
        if self.past:
            table.move_cursor(row=max(0, min(table.cursor_row + delta, len(self.past) - 1)))

    def action_open_debrief(self) -> None:
        past = self.highlighted
        if past is None:
            return
        from tui.screens.debrief import PastDebriefScreen

        self.app.push_screen(PastDebriefScreen(past.transcript))

    def action_back(self) -> None:
        self.dismiss(None)
