"""Pick an incident: the library as a table, filtered as you type; Enter opens its briefing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from game import api
from game.api import SOLVED_SCORE
from tui import screen_start
from tui.actions import bindings
from tui.app_api import GameApp, game_app
from tui.formatting import one_line
from tui.messages import LibraryScanned
from tui.text import literal, template
from tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from textual.timer import Timer

    from game.api import LibraryEntry
    from game.session import SessionSummary

__all__ = ["SOLVED_SCORE", "PickerScreen", "coverage_line", "scan_library", "stars"]

FIXED_COLUMNS = {"difficulty": 10, "best": 4, "session": 8}
"""Widths of the picker's short columns; the title and the tags share the rest."""

SCAN_DELAY_S = 0.4
"""Seconds on the picker before unfinished sessions and best scores are looked up."""


def stars(difficulty: int | None) -> str:
    if difficulty is None:
        return "?"
    return "★" * difficulty + "☆" * max(0, 5 - difficulty)


def scan_library(root: Path | None, player: str, seed: int | None = None
                 ) -> tuple[dict[str, list[SessionSummary]], dict[str, float]]:
    """Unfinished sessions (at `seed`, or any) by incident id, and the player's best submitted score by
    incident id (`game.api.player_record`)."""
    record = api.player_record(player, root, seed=seed)
    return record.unfinished, record.best


def coverage_line(entries: Sequence[LibraryEntry], best: dict[str, float] | None, player: str = "") -> str:
    """One line: how many incidents the player has solved (a best score of SOLVED_SCORE or more) and how
    many interview topics those cover, of what the library covers. `best` None: not looked up yet."""
    got = api.coverage(entries, best or {})
    who = f"{player}: " if player else ""
    if best is None:
        return (f"{who}solved … of {got.incidents} incidents · … of the {got.topics_covered} topics the "
                "library covers")
    return (f"{who}solved {got.solved} of {got.incidents} incidents (score {SOLVED_SCORE:.0f}+) · "
            f"{got.topics_solved} of the {got.topics_covered} topics the library covers")


class PickerScreen(Screen[None]):
    """The incident library. Filter with the input; Enter opens the highlighted incident."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings("picker"),
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
    ]

    def __init__(self, entries: Sequence[LibraryEntry], preselect: str | Path | None = None) -> None:
        super().__init__()
        # easiest first, then by title: the order a player reads a library in (the tutorial leads)
        self.entries = api.by_difficulty(entries)
        self.shown: list[LibraryEntry] = list(self.entries)
        self.preselect = preselect
        self.unfinished: dict[str, list[SessionSummary]] = {}
        self.best: dict[str, float] = {}
        self.met = api.Met()
        """The symptom tags and difficulties of the incidents the player has finished (the "new" marks)."""
        self.scanned = False
        # scans finished: a rescan on return keeps the old figures on show (scanned stays True) until it lands
        self.scans = 0
        self._scan_timer: Timer | None = None
        self._shown_widths: tuple[int, int] | None = None

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    def compose(self) -> ComposeResult:
        screen_start.preset(self)  # before the widgets are styled, not after (tui.screen_start)
        with Vertical(id="picker"):
            yield Static("[b]servedrill[/b] · pick an incident to investigate", id="picker-title")
            yield Input(placeholder="Filter by title, id or tag…", id="picker-filter", compact=True)
            table: DataTable[Any] = DataTable(id="picker-table", cursor_type="row", zebra_stripes=True)
            yield table
            yield Static("", id="picker-detail")
            yield Static("", id="picker-coverage")
        yield KeyBar("picker")

    def on_mount(self) -> None:
        self._fill(api.preselected(self.entries, self.preselect))
        self.query_one(Input).focus()
        if self.served.steady:
            self.query_one(Input).cursor_blink = False
        self.call_after_refresh(self.served.mark, "picker")

    def _widths(self) -> tuple[int, int]:
        """(title, tags) widths that fit the table's width beside the fixed columns (no scrolling)."""
        table = self.query_one(DataTable)
        width = table.scrollable_content_region.width or self.app.size.width - 4
        spare = max(24, width - sum(FIXED_COLUMNS.values()) - 2 * (len(FIXED_COLUMNS) + 2))
        titles = max([8] + [len(e.title) + (len(e.problem) + 4 if e.problem else 0) for e in self.shown])
        tags = max([4] + [len(", ".join(e.shown_tags[:4])) for e in self.shown])
        title = min(titles, max(spare - min(tags, max(12, spare * 2 // 5)), spare * 3 // 5))
        return title, max(4, spare - title)

    def on_resize(self) -> None:
        if self.is_mounted and self._widths() != self._shown_widths:
            self._fill(self.query_one(DataTable).cursor_row)

    def _fill(self, cursor: int = 0) -> None:
        table = self.query_one(DataTable)
        title_w, tags_w = self._shown_widths = self._widths()
        table.clear(columns=True)
        table.add_column("Incident", key="title", width=title_w)
        table.add_column("Difficulty", key="difficulty", width=FIXED_COLUMNS["difficulty"])
        table.add_column("Best", key="best", width=FIXED_COLUMNS["best"])
        table.add_column("Session", key="session", width=FIXED_COLUMNS["session"])
        table.add_column("Tags", key="tags", width=tags_w)
        for entry in self.shown:
            sessions = self.unfinished.get(entry.id, [])
            marker = f"● {len(sessions)} open" if sessions else ("" if self.scanned else "…")
            score = self.best.get(entry.id)
            best = ((f"{score:.0f}" + ("✓" if api.solved(score) else "")) if score is not None
                    else ("…" if not self.scanned else "new" if api.new_to_player(entry, self.met) else "-"))
            title = entry.title if entry.problem is None else f"{entry.title} (! {entry.problem})"
            # Text cells: the titles and tags are the incident files' words, and a DataTable reads a str
            # cell as markup
            table.add_row(literal(one_line(title, title_w)), stars(entry.difficulty), best, marker,
                          literal(one_line(", ".join(entry.shown_tags[:4]), tags_w)), key=str(entry.path))
        if self.shown:
            table.move_cursor(row=max(0, min(cursor, len(self.shown) - 1)))
        self._describe()
        # literal: the player's name is theirs to choose (a browser tab asks for it)
        self.query_one("#picker-coverage", Static).update(
            literal(coverage_line(self.entries, self.best if self.scanned else None, self.served.player), 300))

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def _scan(self) -> None:
        unfinished, best = scan_library(self.served.data_root, self.served.player, self.served.seed)
        self.post_message(LibraryScanned(unfinished, best))

    def on_library_scanned(self, message: LibraryScanned) -> None:
        first = not self.scanned
        self.unfinished, self.best, self.scanned = message.unfinished, message.best, True
        self.met = api.met(self.entries, self.best)
        self.scans += 1
        cursor = self.query_one(DataTable).cursor_row
        if first and self.shown == self.entries and cursor == api.preselected(self.shown, self.preselect):
            # the player has not moved yet: a newcomer starts on the tutorial
            record = api.PlayerRecord(self.unfinished, self.best)
            cursor = api.preselected(self.shown, self.preselect, record=record, player=self.served.player)
        self._fill(cursor)

    @on(Input.Changed, "#picker-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.shown = api.filter_library(self.entries, event.value)
        self._fill(0)

    @on(Input.Submitted, "#picker-filter")
    def _submitted(self) -> None:
        self.action_open()

    @on(DataTable.RowSelected, "#picker-table")
    def _selected(self) -> None:
        self.action_open()

    @on(DataTable.RowHighlighted, "#picker-table")
    def _highlighted(self) -> None:
        self._describe()

    def _describe(self) -> None:
        entry = self.highlighted
        detail = self.query_one("#picker-detail", Static)
        if entry is None:
            detail.update("No incident matches the filter." if self.entries else "The library is empty.")
            return
        limits = []
        if entry.time_limit_s:
            limits.append(f"{entry.time_limit_s / 60:.0f} min")
        if entry.query_budget:
            limits.append(f"{entry.query_budget} queries")
        sessions = self.unfinished.get(entry.id, [])
        resume = (f" · you have an unfinished session here ({sessions[0].queries} queries)"
                  if sessions else "")
        # topic tags can name the cause: what an incident teaches shows once the player has finished it
        teaches = api.teaches(entry, finished=entry.id in self.best)
        tag_line = ", ".join(entry.shown_tags)
        fresh = api.new_to_player(entry, self.met) if self.scanned and entry.id not in self.best else []
        # what is new to the player goes on the id line: the summary below may take every line left
        detail.update(template("[b]$title[/b]\n$id · $stars · $limits$resume · $tags"
                               + (" · [b]new to you[/b]: $fresh" if fresh else "") + "\n$summary"
                               + ("\n[dim]teaches: $teaches[/dim]" if teaches else ""),
                               title=one_line(entry.title, 200), id=one_line(entry.id, 80),
                               stars=stars(entry.difficulty), limits=" · ".join(limits) or "no limits",
                               resume=resume, tags=one_line(tag_line, 200) or "no tags",
                               summary=one_line(entry.briefing.summary, 400), teaches=", ".join(teaches),
                               fresh=one_line(", ".join(fresh), 200)))

    @property
    def highlighted(self) -> LibraryEntry | None:
        table = self.query_one(DataTable)
        if not self.shown or table.cursor_row < 0:
            return None
        return self.shown[min(table.cursor_row, len(self.shown) - 1)]

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(DataTable)
        if self.shown:
            table.move_cursor(row=max(0, min(table.cursor_row + delta, len(self.shown) - 1)))

    def action_focus_filter(self) -> None:
        """`/`: to the filter, its text selected so what is typed next replaces it (a priority binding:
        the slash never lands in the filter)."""
        field = self.query_one(Input)
        field.focus()
        field.select_all()

    def action_random_incident(self) -> None:
        self._open_drawn(api.random_incident(self.entries))

    def action_incident_of_the_day(self) -> None:
        self._open_drawn(api.incident_of_the_day(self.entries))

    def _open_drawn(self, entry: LibraryEntry | None) -> None:
        if entry is None:
            self.query_one("#picker-detail", Static).update("Nothing to draw: no incident here can be opened "
                                                            "(the tutorial is never drawn).")
            return
        self.served.open_briefing(entry)

    def action_history(self) -> None:
        """F4: the player's past sessions, each debrief one key away."""
        self.served.open_history()

    def action_open(self) -> None:
        entry = self.highlighted
        if entry is not None:
            self.served.open_briefing(entry)

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        screen_start.first_resume(self, event)
        # Also on first show; coming back from a game, sessions and scores may have changed. The scan
        # imports the game modules, so it waits until the player has looked at the list for a moment
        # rather than competing (for the GIL) with painting the next screen.
        self._scan_timer = self.set_timer(SCAN_DELAY_S, self._scan)

    def on_screen_suspend(self) -> None:
        if self._scan_timer is not None:
            self._scan_timer.stop()
            self._scan_timer = None
