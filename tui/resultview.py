"""A query result prepared for the screen, off the UI thread: text cells, counts and a plot spec."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from game.api import ROW_CAP
from tui.formatting import duration_text, table_rows
from tui.plotting import PlotSpec, plot_spec

SHOWN_ROWS = ROW_CAP
"""Rows that go into the results table: every row the gateway returns (game.api.ROW_CAP; a DataTable
costs ~0.15 ms a row to load)."""


@dataclass
class ResultView:
    """One result as the results panel shows it.

    `row_count` is rows fetched (the gateway's cap applies), `cells` the first SHOWN_ROWS of them as
    text, `raw_rows` all fetched rows (for re-plotting another column). `from_journal` marks a result
    read back from the session file (only its first rows were kept) rather than run just now."""

    index: int
    sql: str
    ok: bool
    error: str | None = None
    columns: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    cells: list[tuple[str, ...]] = field(default_factory=list)
    raw_rows: Sequence[Sequence[Any]] = field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    duration_s: float | None = None
    from_journal: bool = False
    plot: PlotSpec | str = "no result yet"

    @property
    def counted(self) -> bool:
        """Whether the session recorded this query (index 0: a statement that failed, not counted)."""
        return self.index > 0

    @property
    def label(self) -> str:
        """Qn, or what a statement that was not recorded is."""
        return f"Q{self.index}" if self.counted else "Not counted"

    def summary(self, show_timing: bool = True) -> str:
        """One line: Qn, rows, how long, and what was cut."""
        if not self.ok:
            if not self.counted:
                return f"error (not counted: a statement that fails costs no query): {self.error}"
            return f"Q{self.index}: error: {self.error}"
        parts = [self.label, f"{self.row_count:,} row{'s' if self.row_count != 1 else ''}"]
        if self.from_journal:
            parts.append("from the session file (first rows kept); run it again for all")
        elif show_timing and self.duration_s is not None:
            parts.append(duration_text(self.duration_s))
        if self.truncated:
            parts.append("truncated: the gateway stopped fetching at its row cap")
        if self.row_count > len(self.cells):
            parts.append(f"showing the first {len(self.cells):,}")
        return " · ".join(parts)


def from_result(index: int, result: Any, shown: int = SHOWN_ROWS) -> ResultView:
    """From a gateway QueryResult."""
    view = ResultView(index, result.sql, bool(result.ok), result.error, list(result.columns),
                      list(result.types), table_rows(result.rows, shown), list(result.rows),
                      int(result.row_count), bool(result.truncated), float(result.duration_s))
    view.plot = plot_spec(view.columns, view.types, view.raw_rows) if view.ok else "the query failed"
    return view


def from_event(data: Mapping[str, Any], shown: int = SHOWN_ROWS) -> ResultView:
    """From a journalled query event's data (it keeps columns and the first rows, not the types)."""
    rows = [list(r) for r in data.get("rows") or []]
    view = ResultView(int(data.get("index", 0)), str(data.get("sql", "")), bool(data.get("ok")),
                      data.get("error"), list(data.get("columns") or []), [], table_rows(rows, shown), rows,
                      int(data.get("row_count", len(rows))), bool(data.get("truncated")),
                      data.get("duration_s"), from_journal=True)
    view.plot = plot_spec(view.columns, [], rows) if view.ok else "the query failed"
    return view
