"""Hostile players, written as action lists, on every library incident (seed 0) and a second variant of
two (the cases of tests/test_players.py): queries that show no reading a reader could use must not earn a
confident score.

Each player runs one kind of query that carries no evidence about the cause, pins every hypothesis
(supporting the truth, refuting every rival) and submits either 90% on the truth or an even board. The
score of such a game may not pass 35 (90%) or 20 (even). The kinds:

- a number cast to text (the text of a mean is a number, not a group only one world shows);
- the page's own symptoms, measured as the validator measures them and re-measured per 5 minutes: every
  rival's world shows the page, so its measure tells none of them apart;
- a mean divided by the value the player saw (a constant of the player's choosing makes any magnitude
  look like 1, so a size is read only where the incident says what sizes a cause can have);
- a mean compared with, or offset by, the value the player saw, or set beside it as rows of typed
  numbers (a threshold of the player's own turns a size into a word or a sign);
- labels of a threshold on a count or a latency (``CASE WHEN row_number() OVER () > 1.2 * n THEN 'many'``):
  whether a label shows is a maximum compared with the player's number, so its presence reads as nothing;
- SUMMARIZE (one row per column: its rows compare unlike columns) and EXPLAIN (a plan, not the data);
- texts the query makes: the first and last text in sort order (one extra ERROR line makes 'INFO' go
  missing from min(level)), a time stamp cast to text (its minute read as a level), numbers as letters;
- coin flips: sixty parities and sines of a sum, each a pseudo-random sign per world, one of which
  would part the truth from a rival by luck;
- whole-table dumps of the big tables (requests, metrics, logs), cut at the row cap (what is missing
  from a cut result may be in the rows not shown; identifiers are not evidence), and the distinct log
  messages (hundreds of lines: a missing line is found by asking for it, and digits are values);
- the starter snippets the editor offers (they teach the dialect on the whole fleet);

(A whole listing of a short table, the change log or the evaluations, is not among them: it fits on one
screen and reading it is what an on-call engineer does first, so a cause that needs a change it does not
show is fairly ruled out by it; docs/scoring.md.)
- queries that return nothing.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from test_players import CASES as PLAYER_CASES

from game.query.gateway import QueryResult
from game.rules.assess import Assessor, queries_of
from game.rules.scoring import ScoreReport, score
from game.session import Session
from incidents.claims import symptom_series_sql, symptom_sql
from incidents.loader import load_incident
from incidents.snippets import snippets
from incidents.spec import Incident
from telemetry_gen.proving.worlds import TRUTH, ensure_worlds

CASES = PLAYER_CASES  # the incidents and seeds the honest players play: their worlds are built once

pytestmark = [pytest.mark.usefixtures("in_library_cache"), pytest.mark.slow]


class _Echo:
    """Queries are scored from their SQL on the worlds; what the session records of them is not read."""

    def run(self, sql: str) -> QueryResult:
        return QueryResult(sql, ok=True, columns=["x"], rows=[(1,)], row_count=1)


@cache
def _assessor(path: Path, seed: int) -> tuple[Incident, Assessor]:
    incident = load_incident(path, seed)
    return incident, Assessor(incident, ensure_worlds(incident, seed))


def _ranking(incident: Incident, truth_share: float | None) -> list[tuple[str, float]]:
    hyps = [h.id for h in incident.hypotheses]
    if truth_share is None:
        return [(h, 100.0 / len(hyps)) for h in hyps]
    truth = [h.id for h in incident.hypotheses if h.true]
    rest = [h for h in hyps if h not in truth]
    return [(t, truth_share / len(truth)) for t in truth] + [(r, (100.0 - truth_share) / len(rest)) for r in rest]


def play(path: Path, seed: int, sqls: list[str], truth_share: float | None) -> ScoreReport:
    """Run `sqls`, pin every query to every hypothesis the way a gamer would (supports the truth, refutes
    each rival), submit."""
    incident, assessor = _assessor(path, seed)
    session = Session.in_memory(incident, seed, "gamer")
    session.start()
    for sql in sqls:
        session.run_query(_Echo(), sql)
    for q in range(1, len(sqls) + 1):
        for h in incident.hypotheses:
            session.pin(q, h.id, "supports" if h.true else "refutes")
    session.submit(_ranking(incident, truth_share))
    return score(incident, session.events, assessor.assess_all(queries_of(session.events)))


def _mean_seen(path: Path, seed: int) -> float:
    _, assessor = _assessor(path, seed)
    result = assessor._run(TRUTH, "SELECT avg(ttft_s) FROM requests")
    assert result.ok and result.rows and result.rows[0][0], result.error
    return float(result.rows[0][0])


def hostile_queries(path: Path, seed: int) -> dict[str, list[str]]:
    incident, _ = _assessor(path, seed)
    t0 = incident.window.start
    briefed = [s for s in incident.symptoms if s.briefed]
    mean = _mean_seen(path, seed)
    _, assessor = _assessor(path, seed)
    count = int(assessor._run(TRUTH, "SELECT count(*) FROM requests").rows[0][0])
    return {
        "cast to text": ["SELECT CAST(avg(ttft_s) AS VARCHAR) AS v FROM requests",
                         "SELECT CAST(quantile_cont(ttft_s, 0.99) AS VARCHAR) AS p99 FROM requests"],
        "page symptoms": [symptom_sql(s, t0) for s in briefed],
        "page symptoms per 5 minutes": [symptom_series_sql(s, t0) for s in briefed],
        "divided by what was seen": [f"SELECT avg(ttft_s) / {mean!r} AS ratio FROM requests"],
        "compared with what was seen": [
            f"SELECT CASE WHEN avg(ttft_s) BETWEEN 0.85 * {mean!r} AND 1.15 * {mean!r} THEN 'as seen' "
            "ELSE 'different' END AS verdict FROM requests",
            f"SELECT sign(avg(ttft_s) - 1.15 * {mean!r}) AS above FROM requests",
            f"SELECT 1.15 * {mean!r} - avg(ttft_s) AS headroom FROM requests",
            f"SELECT 'what I saw' AS k, {mean!r} AS v UNION ALL SELECT 'now', avg(ttft_s) FROM requests "
            f"UNION ALL SELECT 'also seen', {mean!r}"],
        "labels of a threshold": [
            f"SELECT DISTINCT CASE WHEN row_number() OVER () > {int(count * 1.2)} THEN 'many' ELSE 'few' END AS k "
            "FROM requests",
            f"SELECT DISTINCT request_id > {int(count * 1.5)} AS many FROM requests",
            f"SELECT DISTINCT ttft_s > {3 * mean!r} AS slow, app FROM requests"],
        "summaries and plans": ["SUMMARIZE requests", "SUMMARIZE logs", "SUMMARIZE events",
                                "EXPLAIN SELECT * FROM requests WHERE ttft_s > 1"],
        "texts made from numbers and sort order": [
            "SELECT min(level) AS lo, max(level) AS hi FROM logs",
            "SELECT min(kind) AS lo, max(kind) AS hi FROM events",
            "SELECT CAST(quantile_disc(ts, 0.75) AS VARCHAR) AS q75 FROM requests",
            "SELECT DISTINCT chr(65 + CAST(least(floor(ttft_s * 10), 25) AS INT)) AS bucket FROM requests"],
        "coin flips": [
            "SELECT " + ", ".join(f"CAST(floor(sum(e2e_s) * {1000003 + 7919 * k}) AS BIGINT) % 2 * 2 - 1 AS c{k}"
                                  for k in range(60)) + " FROM requests",
            "SELECT " + ", ".join(f"sign(sin(sum(prefill_s) * {1000 + 37 * k})) AS s{k}" for k in range(60))
            + " FROM requests"],
        "big-table dumps": ["SELECT * FROM requests", "SELECT * FROM metrics", "SELECT * FROM logs"],
        "distinct log messages": ["SELECT DISTINCT message FROM logs"],
        "starter snippets": [s.sql for s in snippets(t0, incident.window.duration_s)],
        "nothing shown": ["SELECT * FROM requests LIMIT 0", "SELECT * FROM logs WHERE false"],
    }


KINDS = ["cast to text", "page symptoms", "page symptoms per 5 minutes", "divided by what was seen",
         "compared with what was seen", "labels of a threshold", "summaries and plans",
         "texts made from numbers and sort order", "coin flips", "big-table dumps",
         "distinct log messages", "starter snippets", "nothing shown"]


@pytest.mark.parametrize(("path", "seed"), CASES, ids=lambda c: c.stem if isinstance(c, Path) else f"seed{c}")
def test_queries_that_show_no_reading_earn_no_confident_score(path: Path, seed: int) -> None:
    queries = hostile_queries(path, seed)
    failures = []
    for kind in KINDS:
        sure = play(path, seed, queries[kind], 90.0)
        even = play(path, seed, queries[kind], None)
        if sure.total > 35 or even.total > 20:
            why = {r: q["why"].get(r) for q in sure.per_query for r in q["ruled_out"]}
            failures.append(f"{kind}: 90% -> {sure.total}, even -> {even.total}; ruled out {why}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("path", "seed"), CASES[:: max(1, len(CASES) // 5)],
                         ids=lambda c: c.stem if isinstance(c, Path) else f"seed{c}")
def test_the_page_never_rules_out_a_rival_whose_world_shows_it(path: Path, seed: int) -> None:
    """Every rival's world shows the page (the validator proves it), so measuring the page as it is stated
    rules out none. (Re-measured per 5 minutes over the whole fleet, a symptom is another reading: a fleet
    median that stays flat may rightly rule out a cause that would move it; the score test above bounds it.)"""
    _, assessor = _assessor(path, seed)
    queries = hostile_queries(path, seed)
    for i, sql in enumerate(queries["page symptoms"], start=1):
        evidence = assessor.assess(i, sql)
        assert evidence.ok and not evidence.ruled_out, (sql, evidence.why)
