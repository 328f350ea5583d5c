"""The review after a game day (or an interview): what it holds and how it is written.

A `Review` has one `RoundReview` per round (an interview: one round, one player). A round sets its players'
paths side by side (`PlayerPath`: each query in order with its time and what it ruled out, as the assessor
re-ran it; the belief in the true cause over time; the player's notes), the team's evidence map (`RivalMap`:
per rival, which players ruled it out and with which query, and a query of the incident's that rules it
out, the one to offer when nobody did) and the debrief's truth.

Built by `game.api.postgame` (from the leaderboard's collection of verified hand-ins, re-scored on the
worlds); rendered here as one self-contained HTML page (template templates/review.html.j2: no script, no
outside resource, every text autoescaped, player-written text bounded where it is read in), as text, and
as one row per player per round (`ROW_COLUMNS`) written as CSV and Parquet through DuckDB. Pure apart from
the writers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from game.reports.svgplot import step_chart_svg
from game.reports.templates import render
from game.text import plain

NAME_CHARS = 64
"""A player's or team's name is cut to this many characters in a review."""
NOTE_CHARS = 500
"""A player's note is cut to this many characters in a review."""
SQL_CHARS = 2000
"""A query's SQL is cut to this many characters in a review."""

ROW_COLUMNS: tuple[tuple[str, str], ...] = (
    ("player", "VARCHAR"), ("team", "VARCHAR"), ("round", "BIGINT"), ("incident", "VARCHAR"), ("seed", "BIGINT"),
    ("score", "DOUBLE"), ("conclusion", "DOUBLE"), ("evidence", "DOUBLE"), ("pins", "DOUBLE"),
    ("penalties", "DOUBLE"), ("queries", "BIGINT"), ("time_s", "DOUBLE"), ("hints", "BIGINT"),
    ("solved", "BOOLEAN"), ("submitted", "BOOLEAN"), ("verified", "BOOLEAN"),
)
"""The results table, one row per player per round: (column, DuckDB type). `score` is the total and
`conclusion`, `evidence`, `pins` and `penalties` its parts (penalties <= 0: idle queries, the budget,
hints); `time_s` from leaving the briefing to submitting (null when not submitted); `hints` the hints taken."""


@dataclass(frozen=True)
class Step:
    """One query of a player's path: Qn, seconds since the player's start, the SQL (bounded), and what the
    assessor found when it re-ran it on the worlds: the rivals it ruled out (`new`: not ruled out by an
    earlier query) with the reading that did (`why`); `assessed` False when the budget ran out first."""

    index: int
    at_s: float | None
    sql: str
    ok: bool
    rows: int
    ruled_out: list[str]
    new: list[str]
    why: dict[str, str]
    assessed: bool = True


@dataclass(frozen=True)
class Belief:
    """A ranking the player gave (or submitted): seconds since their start, percent on the true cause, and
    the whole ranking [[hypothesis id, percent], ...]."""

    at_s: float
    truth_pct: float
    ranking: list[list[Any]]
    submitted: bool = False


@dataclass(frozen=True)
class Note:
    """A note the player wrote on a hypothesis (text bounded to NOTE_CHARS)."""

    at_s: float | None
    hypothesis: str
    text: str


@dataclass
class PlayerPath:
    """One player's game in one round."""

    player: str
    team: str | None
    session_id: str
    file: str
    verified: bool
    score: float
    parts: dict[str, float]
    """conclusion, evidence, pins, penalties (points)."""
    queries: int
    time_s: float | None
    hints: int
    hint_cost: int
    submitted: bool
    solved: bool
    steps: list[Step]
    belief: list[Belief]
    notes: list[Note]
    ruled_out: dict[str, int]
    """rival -> the first query (Qn) that ruled it out."""
    still_open: list[str]
    complete: bool = True
    """False when the review's time budget ran out before every query of the path was re-run."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RivalMap:
    """One rival on the team's evidence map: who ruled it out ([{player, team, query, why}]) and a query of the
    incident's (its signals, then the debrief's settling queries) that rules it out ({query, sql, why}, None
    when none does or the budget ran out)."""

    rival: str
    title: str
    ruled_out_by: list[dict[str, Any]]
    settled_by: dict[str, str] | None

    @property
    def nobody(self) -> bool:
        return not self.ruled_out_by

    def to_dict(self) -> dict[str, Any]:
        return {"rival": self.rival, "title": self.title, "ruled_out_by": self.ruled_out_by,
                "nobody": self.nobody, "settled_by": self.settled_by}


@dataclass
class RoundReview:
    """One round: the incident, the debrief's truth, the players' paths and the evidence map."""

    round: int | None
    incident_id: str
    seed: int
    title: str
    hypotheses: dict[str, str]
    """id -> title, in the incident's order."""
    truth: list[str]
    summary: str
    causal_chain: list[str]
    settling_queries: list[str]
    players: list[PlayerPath]
    evidence: list[RivalMap]

    @property
    def nobody(self) -> list[str]:
        """The rivals no player ruled out."""
        return [m.rival for m in self.evidence if m.nobody]

    def teams(self) -> dict[str, dict[str, list[str]]]:
        """Per team (a player without one: their own name), the rivals someone on it ruled out and those
        nobody on it did, each in the incident's order."""
        out: dict[str, dict[str, list[str]]] = {}
        for p in self.players:
            out.setdefault(p.team or p.player, {"ruled_out": [], "still_open": []})
        for name, sides in out.items():
            mine = [p for p in self.players if (p.team or p.player) == name]
            for m in self.evidence:
                ruled = any(m.rival in p.ruled_out for p in mine)
                sides["ruled_out" if ruled else "still_open"].append(m.rival)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "incident": self.incident_id, "seed": self.seed, "title": self.title,
                "hypotheses": self.hypotheses, "truth": self.truth, "summary": self.summary,
                "causal_chain": self.causal_chain, "settling_queries": self.settling_queries,
                "players": [p.to_dict() for p in self.players], "evidence": [m.to_dict() for m in self.evidence],
                "teams": self.teams(), "nobody_ruled_out": self.nobody}


@dataclass
class Review:
    """The review of a game day (or of one interview: `event` None, one round, one player)."""

    event: str | None
    source: str
    """The results folder (a game day) or the transcript (an interview)."""
    rounds: list[RoundReview]
    skipped: list[dict[str, str]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    verified: bool = False
    complete: bool = True
    """False when the time budget ran out: some query was not re-run (it then rules out nothing, as in
    scoring) or some rival's settling query was not looked for."""

    def rows(self) -> list[dict[str, Any]]:
        """One row per player per round, the columns of ROW_COLUMNS."""
        out = []
        for r in self.rounds:
            for p in r.players:
                out.append({
                    "player": p.player, "team": p.team, "round": r.round, "incident": r.incident_id, "seed": r.seed,
                    "score": p.score, "conclusion": p.parts["conclusion"], "evidence": p.parts["evidence"],
                    "pins": p.parts["pins"], "penalties": p.parts["penalties"], "queries": p.queries,
                    "time_s": p.time_s, "hints": p.hints, "solved": p.solved, "submitted": p.submitted,
                    "verified": p.verified,
                })
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, "source": self.source, "verified": self.verified, "complete": self.complete,
                "rows": self.rows(), "rounds": [r.to_dict() for r in self.rounds], "skipped": self.skipped,
                "notices": self.notices}


def bounded(text: Any, limit: int) -> str:
    """Player-written (or data) text as a review holds it: one line, no control characters, at most `limit`
    characters. Escaping is the renderer's (autoescape, or DuckDB's CSV quoting)."""
    return plain(text, limit)


# ---------------------------------------------------------------- writing


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    return f"{s // 60}:{s % 60:02d}"


def belief_points(p: PlayerPath, n_hypotheses: int, n_truth: int) -> list[tuple[float, float]]:
    """The step curve of the player's confidence in the true cause: the even spread until their first
    ranking, then each ranking's."""
    start = (0.0, 100.0 * n_truth / max(n_hypotheses, 1))
    return [start, *((b.at_s, b.truth_pct) for b in p.belief)]


def _chart(r: RoundReview, p: PlayerPath, x_max: float) -> str:
    points = belief_points(p, len(r.hypotheses), len(r.truth))
    return step_chart_svg({p.player: points}, title=f"{p.player}: confidence in the true cause", x_max_s=x_max,
                          width=360, height=180)


def format_text(review: Review) -> str:
    """The review as plain text for a terminal: per round, each player's queries and the evidence map."""
    out = [f"Review{': ' + plain(review.event, 200) if review.event else ''} ({review.source})"]
    for r in review.rounds:
        where = f"Round {r.round}: " if r.round else ""
        out.append(f"{where}{r.incident_id} (seed {r.seed}): {r.title}")
        out.append(f"  true cause: {', '.join(r.hypotheses.get(t, t) for t in r.truth)}")
        for p in r.players:
            out.append(f"  {plain(p.player)} ({plain(p.team or '-')}): {p.score:.1f} points, "
                       f"{p.queries} quer{'y' if p.queries == 1 else 'ies'}, "
                       f"time {_clock(p.time_s)}{'' if p.complete else ' (budget spent: not every query re-run)'}")
            for s in p.steps:
                ruled = ", ".join(r.hypotheses.get(x, x) for x in s.ruled_out) or "nothing"
                out.append(f"    Q{s.index} at {_clock(s.at_s)}: ruled out {ruled}")
        for m in r.evidence:
            if m.nobody:
                offer = f"; {m.settled_by['query']} would have" if m.settled_by else ""
                out.append(f"  nobody ruled out {m.title}{offer}")
            else:
                who = ", ".join(f"{plain(x['player'])} (Q{x['query']})" for x in m.ruled_out_by)
                out.append(f"  {m.title}: ruled out by {who}")
    return "\n".join(out)


_CSS = """body{font-family:sans-serif;max-width:90em;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;
vertical-align:top}th{background:#f3f3f3}.paths{display:flex;gap:1em;overflow-x:auto;align-items:flex-start}
.path{flex:0 0 24em;border:1px solid #ccc;padding:.5em;min-width:0}.path figure{margin:0}
.path svg{max-width:100%;height:auto}.path ol{padding-left:1.5em}
code,pre{background:#f6f6f6;white-space:pre-wrap;word-break:break-word}.note{color:#a33}.muted{color:#777}
.nobody{background:#fff4e5}"""


def render_html(review: Review) -> str:
    """One self-contained page (template game/reports/templates/review.html.j2; every text escaped there)."""
    rounds = []
    for r in review.rounds:
        x_max = max((b.at_s for p in r.players for b in p.belief), default=60.0)
        x_max = max([x_max, *(p.time_s or 0.0 for p in r.players), 60.0])
        rounds.append({
            "r": r,
            # game.reports.svgplot escapes every name it draws: its output is markup already
            "charts": {p.session_id: Markup(_chart(r, p, x_max)) for p in r.players},
        })
    title = f"Review{': ' + review.event if review.event else ''}"
    return render("review.html.j2", title=title, css=_CSS, review=review, rounds=rounds, clock=_clock, names=_names,
                  cell=_cell, columns=[c for c, _ in ROW_COLUMNS], rows=review.rows())


def _cell(column: str, value: Any) -> str:
    """A results-table cell as the page shows it: times as m:ss, flags as yes/no, nothing as -."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if column == "time_s":
        return _clock(value)
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _names(r: RoundReview, ids: list[str]) -> str:
    return ", ".join(r.hypotheses.get(h, h) for h in ids)


def write_rows(review: Review, *, csv: Path | None = None, parquet: Path | None = None) -> list[Path]:
    """Write the results table (ROW_COLUMNS, one row per player per round) as CSV and/or Parquet through
    DuckDB; returns the files written. Raises OSError when a file cannot be written."""
    import duckdb

    targets = [(p, fmt) for p, fmt in ((csv, "CSV, HEADER"), (parquet, "PARQUET")) if p is not None]
    if not targets:
        return []
    con = duckdb.connect()
    try:
        con.execute("CREATE TABLE review (" + ", ".join(f"{c} {t}" for c, t in ROW_COLUMNS) + ")")
        rows = review.rows()
        if rows:
            con.executemany(f"INSERT INTO review VALUES ({', '.join('?' for _ in ROW_COLUMNS)})",
                            [[row[c] for c, _ in ROW_COLUMNS] for row in rows])
        written = []
        for path, fmt in targets:
            path.parent.mkdir(parents=True, exist_ok=True)
            literal = str(path).replace("'", "''")
            try:
                con.execute(f"COPY (SELECT * FROM review ORDER BY round NULLS LAST, incident, seed, player) "
                            f"TO '{literal}' (FORMAT {fmt})")
            except duckdb.IOException as exc:
                raise OSError(f"{path}: {str(exc).strip().splitlines()[0]}") from exc
            written.append(path)
        return written
    finally:
        con.close()
