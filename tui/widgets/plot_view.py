"""Lines over time for a result (textual-plot), with the change log's deploys and restarts marked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.plotting import Marker, PlotSpec, clock_label, clock_ticks, markers_in_range
from tui.text import one_line, template

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

    def draw(self, spec: PlotSpec | str, markers: Sequence[Marker] = ()) -> None:
        """Show `spec`, or the reason (a str) why the result cannot be plotted."""
        caption = self.query_one("#plot-caption", Static)
        if isinstance(spec, str):
            self.spec = None
            self.drawn_series = 0
            self.drawn_markers = []
            caption.update(template("Nothing to plot: $why.", why=one_line(spec, 200)))
            if self._plot is not None:
                self._plot.display = False
            return
        self.spec = spec
        if self._plot is None:
            from textual_plot import PlotWidget

            self._plot = PlotWidget(id="plot-widget", allow_pan_and_zoom=True)
            self.mount(self._plot)
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
        plot.clear()
        plot.set_x_formatter(_clock_formatter())
        from textual_plot import HiResMode

        for i, series in enumerate(spec.series):
            plot.plot(series.x, series.y, line_style=LINE_COLOURS[i % len(LINE_COLOURS)],
                      hires_mode=HiResMode.BRAILLE,
                      label=one_line(series.label, MAX_LEGEND_CHARS) if spec.group_column else None)
        span = spec.x_range
        shown = markers_in_range(markers, *span) if span else []
        for marker in shown:
            plot.add_v_line(marker.x, line_style=MARKER_STYLE, label=one_line(marker.label, MAX_LEGEND_CHARS))
        plot.show_legend(is_visible=bool(spec.group_column or shown))
        self.drawn_series = len(spec.series)
        self.drawn_markers = shown
