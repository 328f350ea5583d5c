"""The result of the last query: a capped table or a plot, and one line saying what it is."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.widgets import ContentSwitcher, DataTable, Static

from tui.actions import bindings
from tui.plotting import Marker, plot_spec
from tui.resultview import ResultView
from tui.text import literal, one_line
from tui.widgets.plot_view import PlotView

MAX_COLUMN_CHARS = 40
"""A column name longer than this is cut in the table's header (the row detail shows it whole)."""


class ResultsPanel(Vertical):
    """Shows one ResultView at a time. `mode` is "table" or "plot". The table's cursor is a cell: arrows
    move between cells (long ones are cut), v shows the cell in full and Enter the whole row."""

    BINDINGS = bindings("results")
    ALLOW_MAXIMIZE = True

    def __init__(self, initial: ResultView | None = None, show_timing: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view: ResultView | None = None
        self.markers: list[Marker] = []
        self.show_timing = show_timing
        self._initial = initial

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="results-table", id="results-switcher"):
            table: DataTable[Text] = DataTable(id="results-table", zebra_stripes=True, cursor_type="cell")
            yield table
            yield PlotView(id="results-plot")
        yield Static("No query yet. Write SQL above and press F5.", id="results-info")

    def on_mount(self) -> None:
        if self._initial is not None:
            # the screen may go away before this mount runs (an app closing as it opens): nothing to show then
            with contextlib.suppress(NoMatches):
                self.show(self._initial)

    @property
    def mode(self) -> str:
        return "plot" if self.query_one(ContentSwitcher).current == "results-plot" else "table"

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#results-table", DataTable)

    @property
    def plot(self) -> PlotView:
        return self.query_one(PlotView)

    def running(self, sql: str) -> None:
        del sql
        info = self.query_one("#results-info", Static)
        info.set_class(False, "error")
        info.update("Running… (Esc cancels)")

    def show(self, view: ResultView) -> None:
        """Replace the table (and the plot, if it is showing) with `view`."""
        self.view = view
        info = self.query_one("#results-info", Static)
        info.set_class(not view.ok, "error")
        info.update(literal(one_line(view.summary(self.show_timing), 1000)))
        table = self.table
        table.clear(columns=True)
        if view.ok:
            # Text, not str: DataTable reads a str cell or label as markup ("[/x]" in a value would crash
            # it, "[rank0]" would vanish); the cells are already visible and capped (tui.formatting)
            table.add_columns(*(literal(one_line(name, MAX_COLUMN_CHARS)) for name in self._unique(view.columns)))
            table.add_rows([tuple(Text(cell, end="") for cell in row) for row in view.cells])
        if self.mode == "plot":
            self.plot.draw(view.plot, self.markers)

    @staticmethod
    def _unique(columns: Sequence[str]) -> list[str]:
        # DataTable keys columns by label; SELECT a, a would otherwise collide
        seen: dict[str, int] = {}
        out = []
        for name in columns:
            n = seen.get(name, 0)
            seen[name] = n + 1
            out.append(name if n == 0 else f"{name}_{n}")
        return out

    @on(DataTable.CellSelected, "#results-table")
    def _cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        self.action_row_detail()

    def action_row_detail(self) -> None:
        """Every value of the highlighted row in full (the table cuts long values), or the whole
        error of a failed query."""
        from tui.screens.dialogs import RowDetailScreen

        view = self.view
        if view is None:
            return
        if not view.ok:
            self.app.push_screen(RowDetailScreen(f"{view.label}: error", [("error", view.error or "")]))
            return
        row = self.table.cursor_row
        if not 0 <= row < min(len(view.raw_rows), len(view.cells)):
            return
        values = list(view.raw_rows[row])
        self.app.push_screen(RowDetailScreen(f"{view.label} · row {row + 1:,} of {view.row_count:,}",
                                             list(zip(view.columns, values, strict=False)),
                                             focus_field=self.table.cursor_column))

    def action_cell_detail(self) -> None:
        """The highlighted cell's value in full."""
        from tui.screens.dialogs import RowDetailScreen

        view = self.view
        if view is None or not view.ok:
            self.action_row_detail()
            return
        row, column = self.table.cursor_row, self.table.cursor_column
        if not (0 <= row < min(len(view.raw_rows), len(view.cells)) and 0 <= column < len(view.columns)):
            return
        self.app.push_screen(RowDetailScreen(f"{view.label} · row {row + 1:,} · {one_line(view.columns[column], 60)}",
                                             [(view.columns[column], view.raw_rows[row][column])]))

    def toggle(self) -> str:
        """Switch between table and plot; returns the new mode."""
        switcher = self.query_one(ContentSwitcher)
        if self.mode == "table":
            switcher.current = "results-plot"
            self.plot.draw(self.view.plot if self.view else "no result yet", self.markers)
        else:
            switcher.current = "results-table"
        return self.mode

    def set_markers(self, markers: Sequence[Marker]) -> None:
        self.markers = list(markers)
        if self.mode == "plot" and self.view is not None:
            self.plot.draw(self.view.plot, self.markers)

    def action_next_column(self) -> None:
        view, spec = self.view, self.plot.spec
        if view is None or spec is None or len(spec.value_columns) < 2:
            return
        names = spec.value_columns
        following = names[(names.index(spec.value_column) + 1) % len(names)]
        view.plot = plot_spec(view.columns, view.types, view.raw_rows, value_column=following)
        self.plot.draw(view.plot, self.markers)
