"""A small step-line chart as standalone SVG text, and a text sparkline: no plotting dependency.

Used by the leaderboard for "confidence in the true cause over time". x is in seconds (shown as
minutes), y in percent 0..100. Each series is a list of (x, y) points held until the next point.
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22")
SPARKS = "▁▂▃▄▅▆▇█"


def _nice_step(span: float, ticks: int = 6) -> float:
    raw = max(span, 1e-9) / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)


def step_chart_svg(series: dict[str, list[tuple[float, float]]], *, title: str, x_max_s: float | None = None,
                   width: int = 640, height: int = 300) -> str:
    """An SVG step chart: one line per series (x seconds since the player started, y percent).

    The x axis is labelled in minutes. Returns the `<svg>` element as text (valid standalone and inline
    in HTML)."""
    left, right, top, bottom = 48, 130, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    x_end = x_max_s if x_max_s else max((x for pts in series.values() for x, _ in pts), default=60.0)
    x_end = max(x_end, 60.0)

    def sx(x: float) -> float:
        return left + plot_w * min(max(x, 0.0), x_end) / x_end

    def sy(y: float) -> float:
        return top + plot_h * (1.0 - min(max(y, 0.0), 100.0) / 100.0)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
           'font-family="sans-serif" font-size="11">',
           f'<title>{escape(title)}</title>',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for pct in (0, 25, 50, 75, 100):
        y = sy(pct)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{pct}%</text>')
    step_min = _nice_step(x_end / 60.0)
    tick = 0.0
    while tick * 60.0 <= x_end + 1e-6:
        x = sx(tick * 60.0)
        out.append(f'<line x1="{x:.1f}" y1="{top + plot_h}" x2="{x:.1f}" y2="{top + plot_h + 4}" stroke="#555"/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{tick:g}</text>')
        tick += step_min
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">'
               'minutes since the player started</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#555"/>')
    for i, (name, points) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(points)
        if pts:
            coords = []
            for k, (x, y) in enumerate(pts):
                if k:
                    coords.append(f"{sx(x):.1f},{sy(pts[k - 1][1]):.1f}")
                coords.append(f"{sx(x):.1f},{sy(y):.1f}")
            out.append(f'<polyline class="series" data-series="{escape(name)}" fill="none" stroke="{color}" '
                       f'stroke-width="2" points="{" ".join(coords)}"/>')
            last_x, last_y = pts[-1]
            out.append(f'<circle cx="{sx(last_x):.1f}" cy="{sy(last_y):.1f}" r="3" fill="{color}"/>')
        ly = top + 12 + 16 * i
        out.append(f'<line x1="{left + plot_w + 10}" y1="{ly - 4}" x2="{left + plot_w + 28}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="3"/>')
        out.append(f'<text x="{left + plot_w + 32}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def sparkline(points: list[tuple[float, float]], x_max_s: float, width: int = 24) -> str:
    """The step function of `points` (x seconds, y percent) sampled at `width` even times from 0 to x_max_s."""
    if not points:
        return ""
    pts = sorted(points)
    chars = []
    for k in range(width):
        t = x_max_s * k / max(width - 1, 1)
        y = next((y for x, y in reversed(pts) if x <= t), pts[0][1])
        chars.append(SPARKS[min(len(SPARKS) - 1, int(max(0.0, min(y, 100.0)) / 100.0 * len(SPARKS)))])
    return "".join(chars)
