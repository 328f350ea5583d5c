"""The review after the game: every player's path through a round side by side, the team's evidence map,
the debrief's truth, and the results as one row per player per round (issue 31). `game.api` re-exports
these names; the CLI's `gameday review` is written on them.

Whose games are reviewed is the leaderboard's to say: `game_day_review` reads the results folder through
`game.reports.leaderboard.read_results`, so only the transcripts `servedrill leaderboard` counts (with the
game day's journal key: only those whose signed journal verifies) are reviewed, and what it skips is
listed as not reviewed. Each reviewed transcript is re-scored from its SQL on the incident's worlds, as
the score and the debrief are (`game.rules.assess`: nothing it records about its results is trusted). The
assessor's cache (in memory per incident and seed, on disk per world and SQL) means a query the leaderboard
has just re-run costs nothing again; what is new (a query not reached, the incident's reference queries
for the evidence map) is done within one time budget for the whole review (`REVIEW_BUDGET_S`), and what
the budget did not reach rules out nothing and says so (`Review.complete`). The leaderboard's own scoring,
before it, costs what `servedrill leaderboard` costs (each transcript within assessment's budget): on a
folder `gameday collect` scored, the cache answers it.

`transcript_review` is the same review of one transcript (an interview's candidate); `write_review`
writes a review as HTML, CSV and Parquet; `review_text` as text. The types are
`game.reports.review_report`'s."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from game.gameday.plan import GameDay
    from game.reports.leaderboard import Entry
    from game.reports.review_report import PlayerPath, Review, RoundReview
    from game.rules.assess import Assessor
    from game.session import Transcript

__all__ = ["REVIEW_BUDGET_S", "game_day_review", "review_text", "transcript_review", "write_review"]

REVIEW_BUDGET_S = 180.0
"""Wall seconds one review spends running queries on the worlds that no earlier scoring ran (assessment's
own budget, `game.rules.assess.ASSESS_BUDGET_S`, for the whole review). Cached results cost nothing."""


def game_day_review(gameday: GameDay, results: Path | None = None, *, key: bytes | None = None,
                    trust_players: bool = False, budget_s: float = REVIEW_BUDGET_S) -> Review:
    """The review of the game day's results folder (or `results`): the transcripts the leaderboard counts
    (with `key`, only verified ones; unsigned ones too, marked, with `trust_players`), per round in the
    plan's order. Raises OSError when the folder cannot be read."""
    from game.reports.leaderboard import read_results
    from game.reports.review_report import Review
    from game.session import TranscriptError, load_transcript

    folder = Path(results) if results is not None else gameday.results
    board = read_results(folder, gameday, key=key, trust_players=trust_players)
    deadline = time.perf_counter() + budget_s
    skipped = list(board.skipped)
    rounds: list[RoundReview] = []
    complete = True
    for b in board.incidents:
        entries = [e for e in board.entries if (e.incident_id, e.seed) == (b.incident_id, b.seed)]
        loaded: list[tuple[Entry, Transcript]] = []
        for e in entries:
            try:
                loaded.append((e, load_transcript(e.file)))
            except TranscriptError as exc:  # the leaderboard read it a moment ago: the file changed since
                skipped.append({"file": str(e.file), "reason": f"changed since it was scored: {exc}"})
        if not loaded:
            continue
        rnd, done = _round(b.round, loaded, deadline)
        complete = complete and done
        rounds.append(rnd)
    notices = list(board.notices)
    if not complete:
        notices.append(f"the review's time budget ({budget_s:g} s) ran out: a query not re-run rules out nothing")
    return Review(gameday.event, str(folder), rounds, skipped, notices, board.verified, complete)


def transcript_review(path: Path | str, *, budget_s: float = REVIEW_BUDGET_S) -> Review:
    """The same review of one transcript (an interview: one round, one candidate), re-scored from its SQL.
    Nothing is verified: the caller trusts the file as `servedrill score` does. Raises TranscriptError."""
    from game.reports.review_report import Review
    from game.session import load_transcript

    t = load_transcript(path)
    rnd, done = _round(None, [(None, t)], time.perf_counter() + budget_s)
    notices = [] if done else [f"the review's time budget ({budget_s:g} s) ran out: a query not re-run rules "
                               "out nothing"]
    return Review(None, str(path), [rnd], [], notices, False, done)


def review_text(review: Review) -> str:
    """The review as plain text for a terminal."""
    from game.reports.review_report import format_text

    return format_text(review)


def write_review(review: Review, *, html: Path | None = None, csv: Path | None = None,
                 parquet: Path | None = None) -> list[Path]:
    """Write the review as one self-contained HTML page, and its results (one row per player per round) as
    CSV and Parquet, each when its path is given; returns the files written. Raises OSError."""
    from game.reports.review_report import render_html, write_rows

    written: list[Path] = []
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html(review), encoding="utf-8")
        written.append(html)
    return written + write_rows(review, csv=csv, parquet=parquet)


# ---------------------------------------------------------------- building


def _round(number: int | None, games: Sequence[tuple[Entry | None, Transcript]], deadline: float) -> tuple[
        RoundReview, bool]:
    """One round's review from its games (the leaderboard's entry, when there is one, and the transcript)."""
    from game.reports.review_report import RivalMap, RoundReview
    from game.rules.assess import missed_queries, shared_assessor

    first = games[0][1]
    incident, seed = first.incident, first.header.seed
    assessor = shared_assessor(incident, seed)
    titles = {h.id: h.title for h in incident.hypotheses}
    players: list[PlayerPath] = [_path(assessor, e, t, deadline) for e, t in games]
    complete = all(p.complete for p in players)
    rivals = list(assessor.rivals)
    settled = missed_queries(assessor, rivals, deadline) if time.perf_counter() < deadline else {}
    if len(settled) < len(rivals) and time.perf_counter() >= deadline:
        complete = False
    evidence = []
    for rival in rivals:
        by = []
        for p in players:
            if rival in p.ruled_out:
                step = next((s for s in p.steps if s.index == p.ruled_out[rival]), None)
                by.append({"player": p.player, "team": p.team, "query": p.ruled_out[rival],
                           "why": step.why.get(rival, "") if step else ""})
        evidence.append(RivalMap(rival, titles.get(rival, rival), by, settled.get(rival)))
    rnd = RoundReview(
        number, incident.id, seed, incident.title, titles, [h.id for h in incident.hypotheses if h.true],
        incident.debrief.summary.strip(), list(incident.debrief.causal_chain),
        [q.strip() for q in incident.debrief.settling_queries], players, evidence)
    return rnd, complete


def _path(assessor: Assessor, entry: Entry | None, t: Transcript, deadline: float) -> PlayerPath:
    """One player's path: each query's evidence re-run (within `deadline`), the score on it, the beliefs."""
    from game.api.shelf import solved
    from game.reports.review_report import NAME_CHARS, NOTE_CHARS, SQL_CHARS, Belief, Note, PlayerPath, Step, bounded
    from game.rules.assess import queries_of
    from game.rules.scoring import score
    from game.session import HINT, NOTE, RANK, START, SUBMIT

    events = list(t.events)
    evidence = {i: assessor.assess(i, sql, deadline) for i, sql in queries_of(events)}
    report = score(t.incident, events, evidence)
    start = next((e.time for e in events if e.kind == START), None)

    def at(moment: float) -> float | None:
        return None if start is None else round(max(0.0, moment - start), 1)

    truth = set(report.truth)
    sql_time = {int(e.data.get("index", 0)): e.time for e in events if e.kind == "query"}
    steps = [Step(q["index"], at(sql_time[q["index"]]) if q["index"] in sql_time else None,
                  bounded(evidence[q["index"]].sql, SQL_CHARS) if q["index"] in evidence else "", q["ok"], q["rows"],
                  list(q["ruled_out"]), list(q["new"]), {k: bounded(v, 500) for k, v in q["why"].items()},
                  bool(q.get("assessed", True))) for q in report.per_query]
    belief = []
    for e in events:
        if e.kind in (RANK, SUBMIT) and start is not None:
            pairs = [(str(r["id"]), float(r["confidence"])) for r in e.data.get("ranking", [])]
            if pairs:
                belief.append(Belief(at(e.time) or 0.0, round(sum(c for h, c in pairs if h in truth), 2),
                                     [[h, c] for h, c in pairs], e.kind == SUBMIT))
    notes = [Note(at(e.time), str(e.data.get("hypothesis", "")), bounded(e.data.get("text", ""), NOTE_CHARS))
             for e in events if e.kind == NOTE]
    parts = {c.key: c.points for c in report.components}
    penalties = round(sum(c.points for c in report.components if c.group == "penalty"), 2)
    total = round(float(report.total), 1)
    if entry is not None:
        player, team, file, verified, time_s = entry.player, entry.team, str(entry.file), entry.verified, entry.time_s
        if entry.members:  # a team round's shared game: the team's one path, naming its members
            player = f"{entry.player} ({', '.join(entry.members)})"
    else:
        submit_at = next((e.time for e in events if e.kind == SUBMIT), None)
        player, team, file, verified = t.header.player, None, str(t.path), False
        time_s = None if submit_at is None or start is None else round(submit_at - start, 1)
    return PlayerPath(
        bounded(player, NAME_CHARS), None if team is None else bounded(team, NAME_CHARS), t.header.session_id, file,
        verified, total,
        {"conclusion": parts.get("conclusion", 0.0), "evidence": parts.get("evidence", 0.0),
         "pins": parts.get("pins", 0.0), "penalties": penalties},
        report.queries, time_s, sum(1 for e in events if e.kind == HINT), report.hint_cost, report.submitted,
        report.submitted and solved(total), steps, belief, notes, dict(report.ruled_out),
        [r for r in report.rivals if r not in report.ruled_out],
        all(bool(q.get("assessed", True)) for q in report.per_query))
