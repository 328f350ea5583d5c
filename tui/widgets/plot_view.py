"""Lines over time for a result (textual-plot), with the change log's deploys and restarts marked.

The legend sits under the plot, outside its area (textual-plot's own legend is drawn over the lines and,
given a label per vertical line, listed every event): one line naming each series in its colour, and the
events as what they are, vertical marks, summarised by kind when there are many."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from tui.plotting import Marker, PlotSpec, clock_label, clock_ticks, markers_in_range
from tui.text import one_line, template

MAX_LISTED_MARKERS = 3
"""Up to this many events are named one by one in the legend; more are counted by kind."""

MAX_LEGEND_CHARS = 40
"""A series or marker label (a value from the data) is cut to this in the legend."""

# readable on dark and light backgrounds alike
LINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
MARKER_STYLE = "bold #d62728"


def _clock_formatter() -> Any:
    from textual_plot import NumericAxisFormatter

    class ClockFormatter(NumericAxisFormatter):
        """x axis in wall-clock time (UTC), on round minutes when the span allows."""

        def get_ticks(self, min_: float, max_: float, max_ticks: int = 6) -> list[float]:
            return clock_ticks(min_, max_, max_ticks=min(max_ticks, 6))

        def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
            step = ticks[1] - ticks[0] if len(ticks) > 1 else 60.0
            return [clock_label(t, step) for t in ticks]

    return ClockFormatter()


class PlotView(Vertical):
    """A caption and, once something is plottable, a PlotWidget (imported on first use: it brings numpy)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec: PlotSpec | None = None
        self.drawn_series = 0
        self.drawn_markers: list[Marker] = []
        self._plot: Any = None

    def compose(self) -> ComposeResult:
        yield Static("Run a query with a time column and a numeric column to plot it.", id="plot-caption")
        yield Static("", id="plot-legend")

    @property
    def focus_target(self) -> Widget:
        """What takes the focus for the plot pane: the plot once there is one (its keys zoom and pan)."""
        return self._plot if self._plot is not None and self._plot.display else self

    @property
    def legend_text(self) -> str:
        return self.query_one("#plot-legend", Static).render().plain  # type: ignore[union-attr]

    def draw(self, spec: PlotSpec | str, markers: Sequence[Marker] = ()) -> None:
        """Show `spec`, or the reason (a str) why the result cannot be plotted."""
        caption = self.query_one("#plot-caption", Static)
        if isinstance(spec, str):
            self.spec = None
            self.drawn_series = 0
            self.drawn_markers = []
            caption.update(template("Nothing to plot: $why.", why=one_line(spec, 200)))
            self.query_one("#plot-legend", Static).update("")
            if self._plot is not None:
                self._plot.display = False
            return
        self.spec = spec
        if self._plot is None:
            from textual_plot import PlotWidget

            self._plot = PlotWidget(id="plot-widget", allow_pan_and_zoom=True)
            self.mount(self._plot, before="#plot-legend")
            self.call_after_refresh(self._render_spec, spec, list(markers))
        else:
            self._render_spec(spec, list(markers))
        self._plot.display = True
        group = f" by {spec.group_column}" if spec.group_column else ""
        others = [c for c in spec.value_columns if c != spec.value_column]
        cycle = " · y: next column" if others else ""
        caption.update(template("$what over $time (UTC)$cycle", what=one_line(f"{spec.value_column}{group}", 120),
                                time=one_line(spec.time_column, 60), cycle=cycle))

    def _render_spec(self, spec: PlotSpec, markers: list[Marker]) -> None:
        plot = self._plot
        # room for the tick labels only: the legend and the caption live outside the plot
        plot.margin_top, plot.margin_bottom = 1, 2
        plot.clear()
        plot.set_x_formatter(_clock_formatter())
        from textual_plot import HiResMode

        for i, series in enumerate(spec.series):
            plot.plot(series.x, series.y, line_style=LINE_COLOURS[i % len(LINE_COLOURS)],
                      hires_mode=HiResMode.BRAILLE)
        span = spec.x_range
        shown = markers_in_range(markers, *span) if span else []
        for marker in shown:
            plot.add_v_line(marker.x, line_style=MARKER_STYLE)
        plot.show_legend(is_visible=False)
        self.drawn_series = len(spec.series)
        self.drawn_markers = shown
        self.query_one("#plot-legend", Static).update(legend(spec, shown))


def legend(spec: PlotSpec, markers: Sequence[Marker]) -> Text:
    """The legend line(s): each series in its colour (when grouped), then the marked events: named when
    few, else counted by kind. Literal text: the labels are values from the data."""
    out = Text(end="")
    if spec.group_column:
        for i, series in enumerate(spec.series):
            if i:
                out.append("  ")
            out.append("━━ ", style=LINE_COLOURS[i % len(LINE_COLOURS)])
            out.append(one_line(series.label, MAX_LEGEND_CHARS))
    if markers:
        if out:
            out.append("   ")
        out.append("│ ", style=MARKER_STYLE)
        if len(markers) <= MAX_LISTED_MARKERS:
            out.append(", ".join(f"{clock_label(m.x, 1)} {one_line(m.label, MAX_LEGEND_CHARS)}" for m in markers))
        else:
            kinds: dict[str, int] = {}
            for m in markers:
                for label in m.label.split(", "):
                    kind = label.split(" ", 1)[0]
                    kinds[kind] = kinds.get(kind, 0) + 1
            counted = ", ".join(f"{one_line(k, 20)} ×{n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
            out.append(f"{sum(kinds.values())} events marked ({counted})")
    return out
