"""The leaderboard as text (terminal), Markdown (with an SVG plot file per incident next to it and a
text sparkline), and one self-contained HTML page (inline SVG plots)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from markupsafe import Markup

from game.reports.leaderboard import IncidentBoard, Leaderboard
from game.reports.svgplot import sparkline, step_chart_svg
from game.reports.templates import render
from game.text import md_text, plain


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = round(seconds)
    return f"{s // 60}:{s % 60:02d}"


def _heading(b: IncidentBoard) -> str:
    where = f"Round {b.round}: " if b.round else ""
    return f"{where}{b.incident_id} (seed {b.seed})"


def _x_max(b: IncidentBoard) -> float:
    return max((x for pts in b.confidence.values() for x, _ in pts), default=60.0) or 60.0


def _chart(b: IncidentBoard) -> str:
    return step_chart_svg(b.confidence, title=f"Confidence in the true cause: {b.incident_id}", x_max_s=_x_max(b))


def _flags(p: dict[str, Any]) -> str:
    flags = [] if p.get("submitted", True) else ["not submitted"]
    if p.get("late"):
        flags.append("late")
    return ", ".join(flags)


def _team_rows(teams: list[dict[str, Any]]) -> list[list[Any]]:
    """rank, team, score, time, incidents: the overall teams table in every format."""
    return [[t["rank"], t["team"], f"{t['score']:.1f}", _time(t["time_s"]), t["incidents"]] for t in teams]


def _player_rows(players: list[dict[str, Any]]) -> list[list[Any]]:
    """rank, player, team, score, time, incidents: the overall players table."""
    return [[p["rank"], p["player"], p["team"] or "-", f"{p['score']:.1f}", _time(p["time_s"]), p["incidents"]]
            for p in players]


def _round_team_rows(b: IncidentBoard) -> list[list[Any]]:
    """rank, team, score, time, handed in: one incident's teams."""
    return [[t["rank"], t["team"], f"{t['score']:.1f}", _time(t["time_s"]), f"{t['handed_in']}/{t['size']}"]
            for t in b.teams]


def _round_player_rows(b: IncidentBoard) -> list[list[Any]]:
    """rank, player, team, score, time, note: one incident's players."""
    return [[p["rank"], _who(p), p["team"] or "-", f"{p['score']:.1f}", _time(p["time_s"]), _flags(p)]
            for p in b.players]


def _who(p: dict[str, Any]) -> str:
    """A round's player, or a team's shared game with its members: `blue (ana, ben)`."""
    members = p.get("members") or []
    return f"{p['player']} ({', '.join(members)})" if members else str(p["player"])


def format_text(board: Leaderboard) -> str:
    """Plain text for a terminal."""
    out = [f"Leaderboard{': ' + board.event if board.event else ''} ({len(board.entries)} transcripts)"]
    if board.teams:
        out.append("Teams overall:")
        out += [f"  {t['rank']:>2}. {t['team']:<14} {t['score']:6.1f}  time {_time(t['time_s']):>7}  "
                f"({t['incidents']} incidents)" for t in board.teams]
    out.append("Players overall:")
    out += [f"  {p['rank']:>2}. {p['player']:<14} {p['team'] or '-':<12} {p['score']:6.1f}  "
            f"time {_time(p['time_s']):>7}" for p in board.players]
    for b in board.incidents:
        out.append(f"{_heading(b)}: {b.title}")
        x_max = _x_max(b)
        for t in b.teams:
            spark = sparkline(b.confidence.get(t["team"], []), x_max)
            out.append(f"  team {t['rank']:>2}. {t['team']:<14} {t['score']:6.1f}  {spark}")
        for p in b.players:
            flags = _flags(p)
            out.append(f"  {p['rank']:>2}. {_who(p):<14} {p['team'] or '-':<12} {p['score']:6.1f}  "
                       f"time {_time(p['time_s']):>7}{'  (' + flags + ')' if flags else ''}")
    return "\n".join(out)


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        return md_text(v)

    return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(cell(v) for v in row) + " |" for row in rows), ""]


def plot_file(markdown: Path, b: IncidentBoard) -> Path:
    """Where the Markdown report's plot of incident board `b` goes: next to the report."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{b.incident_id}-seed{b.seed}")
    return markdown.with_name(f"{markdown.stem}-{slug}.svg")


def write_markdown(board: Leaderboard, target: Path) -> list[Path]:
    """Write the Markdown report and one SVG plot per incident next to it; returns the files written."""
    lines = [f"# Leaderboard{': ' + md_text(board.event) if board.event else ''}", "",
             f"{len(board.entries)} transcripts from {md_text(board.results_dir)}. Ranked by score (higher first), "
             "then time (shorter first).", ""]
    written = []
    if board.teams:
        lines += ["## Teams overall", ""]
        lines += _md_table(["rank", "team", "score", "time", "incidents"], _team_rows(board.teams))
    lines += ["## Players overall", ""]
    lines += _md_table(["rank", "player", "team", "score", "time", "incidents"], _player_rows(board.players))
    for b in board.incidents:
        lines += [f"## {md_text(_heading(b))}", "", md_text(b.title), ""]
        if b.truth:
            lines += [f"True cause: {md_text(', '.join(b.truth))}.", ""]
        if b.teams:
            lines += _md_table(["rank", "team", "score", "time", "handed in"], _round_team_rows(b))
        lines += _md_table(["rank", "player", "team", "score", "time", "note"], _round_player_rows(b))
        if b.confidence:
            svg = plot_file(target, b)
            svg.parent.mkdir(parents=True, exist_ok=True)
            svg.write_text(_chart(b) + "\n", encoding="utf-8")
            written.append(svg)
            lines += ["Confidence in the true cause over time (percent; minutes since each player started):", "",
                      f"![confidence in the true cause, {b.incident_id}]({svg.name})", "", "```"]
            x_max = _x_max(b)
            lines += [f"{plain(name, 40).replace('`', chr(39)):<14} {sparkline(pts, x_max)} {pts[-1][1]:5.1f}%"
                      for name, pts in b.confidence.items()]
            lines += ["```", ""]
    if board.skipped:
        lines += ["## Skipped files", ""]
        lines += [f"- {md_text(s['file'])}: {md_text(s['reason'])}" for s in board.skipped]
        lines.append("")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines), encoding="utf-8")
    return [target, *written]


_CSS = """body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}td.num{text-align:right}.note{color:#a33}figure{margin:0 0 2em}"""


def render_html(board: Leaderboard) -> str:
    """One self-contained page: tables and an inline SVG plot per incident (template
    game/reports/templates/leaderboard.html.j2; every value escaped there)."""
    return render(
        "leaderboard.html.j2",
        title=f"Leaderboard{': ' + board.event if board.event else ''}", css=_CSS, transcripts=len(board.entries),
        teams=_team_rows(board.teams), players=_player_rows(board.players),
        incidents=[{
            "heading": _heading(b), "title": b.title, "truth": ", ".join(b.truth),
            "teams": _round_team_rows(b), "players": _round_player_rows(b),
            # game.reports.svgplot escapes every name it draws: its output is markup already
            "chart": Markup(_chart(b)) if b.confidence else None,
        } for b in board.incidents],
        skipped=board.skipped,
    )
