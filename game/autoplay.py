"""Scripted players: what an expert, a lucky guesser, a random player and a shotgun querier do.

A strategy first becomes a `Plan` (queries with the reads the gateway should report for them, a
ranking, when to rank, which query to name as the discriminator), built only from the incident's
own data. `play` carries a plan out on a session through any gateway; `autoplay` does it against
the incident's real database. `PlannedGateway` answers a plan's queries with the planned reads and
no database, which lets scoring checks run many plans in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np

from game.gateway import Gateway, QueryResult, TableRead
from game.observe import Read, is_latency_incident
from game.scoring import ScoreReport, log_ratio, posterior, score, truth_ids
from game.session import Event, Session, file_digest
from incidents.spec import TABLE_COLUMNS, Incident, Reveal

STRATEGIES = ("expert", "lucky", "random", "shotgun")
SHOTGUN_EXTRA = 30

CATALOG_SQL = 'SELECT "table", "column", description FROM catalog ORDER BY "table", "column"'
DECOMPOSE_SQL = (
    "SELECT replica, count(*) AS n, avg(queue_s) AS queue_s, avg(prefill_s) AS prefill_s, "
    "avg(decode_s) AS decode_s, quantile_cont(ttft_s, 0.9) AS p90_ttft_s "
    "FROM requests GROUP BY replica ORDER BY replica"
)
DECOMPOSE_READS = (Read("requests", ("replica", "queue_s", "prefill_s", "decode_s", "ttft_s")),)
DATA_TABLES = tuple(t for t in TABLE_COLUMNS if t != "catalog")


@dataclass(frozen=True)
class PlannedQuery:
    """A query and the reads the gateway is expected to report for it. `purpose`: schema, decompose,
    signal:<id>, filler or random."""

    sql: str
    reads: tuple[Read, ...] = ()
    purpose: str = ""


@dataclass(frozen=True)
class Plan:
    """What a scripted player does: run `queries`, rank after the first `rank_after` of them, then
    submit `ranking` (percent, best first) naming query `discriminator` (1-based) or none."""

    strategy: str
    queries: tuple[PlannedQuery, ...]
    ranking: tuple[tuple[str, float], ...]
    rank_after: int
    discriminator: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def reveal_reads(incident: Incident, reveal: Reveal) -> Read:
    """The read a query shows when it looks exactly at `reveal`, with filters in the gateway's spelling."""
    filters: list[str] = []
    if reveal.replica is not None:
        name = reveal.replica if isinstance(reveal.replica, str) else f"vllm-{reveal.replica}"
        filters.append(f"replica = '{name}'")
    if reveal.window is not None:
        t0 = incident.window.start
        start, end = (t0 + timedelta(seconds=s) for s in reveal.window)
        filters += [f"ts >= '{start}'::TIMESTAMP", f"ts < '{end}'::TIMESTAMP"]
    return Read(reveal.table, tuple(reveal.columns), tuple(filters), counted=reveal.counts)


def signal_queries(incident: Incident) -> list[PlannedQuery]:
    """Every signal's reference query, with reads built from the signal's reveals."""
    return [PlannedQuery(s.query, tuple(reveal_reads(incident, r) for r in s.reveals), f"signal:{s.id}")
            for s in incident.signals]


def _percentages(weights: dict[str, float], total: float) -> dict[str, float]:
    norm = sum(weights.values())
    if norm <= 0:
        return {h: total / len(weights) for h in weights}
    return {h: total * w / norm for h, w in weights.items()}


def _ordered(confidences: dict[str, float], first: Sequence[str] = ()) -> tuple[tuple[str, float], ...]:
    """Best first; ties put `first` ids ahead. Rounded to 0.01 with the residue on the top entry."""
    rounded = {h: round(c, 2) for h, c in confidences.items()}
    order = sorted(rounded, key=lambda h: (-rounded[h], h not in first, h))
    rounded[order[0]] = round(rounded[order[0]] + 100.0 - sum(rounded.values()), 2)
    return tuple((h, rounded[h]) for h in order)


def expert_ranking(incident: Incident) -> tuple[tuple[str, float], ...]:
    """Truth first with the confidence all signals justify, held within 70..90%; the rest by posterior."""
    truth = truth_ids(incident)
    post = posterior(incident, [s.id for s in incident.signals])
    top = 100.0 * min(0.9, max(0.7, sum(post[h] for h in truth)))
    conf = _percentages({h: post[h] for h in truth}, top)
    conf.update(_percentages({h.id: post[h.id] for h in incident.hypotheses if not h.true}, 100.0 - top))
    # the truth must lead even when its posterior share is split over several true causes
    lead = max(conf[h] for h in truth)
    for h in conf:
        if h not in truth and conf[h] > lead:
            conf[h] = lead
    conf = _percentages(conf, 100.0)
    return _ordered(conf, truth)


def best_discriminator(incident: Incident, queries: Sequence[PlannedQuery], a: str, b: str) -> int | None:
    """1-based index of the signal query whose signal best separates hypotheses a and b."""
    by_id = {s.id: s for s in incident.signals}
    best, best_gap = None, 0.0
    for i, q in enumerate(queries, start=1):
        if q.purpose.startswith("signal:"):
            gap = abs(log_ratio(by_id[q.purpose[7:]], a, b))
            if gap > best_gap:
                best, best_gap = i, gap
    return best


def plan(incident: Incident, strategy: str, rng: np.random.Generator | None = None) -> Plan:
    """The plan of one scripted player. `rng` drives the random strategy (default seed 0)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    rng = rng if rng is not None else np.random.default_rng(0)
    schema = PlannedQuery(CATALOG_SQL, (), "schema")
    if strategy in ("expert", "shotgun"):
        queries = [schema]
        if is_latency_incident(incident):
            queries.append(PlannedQuery(DECOMPOSE_SQL, DECOMPOSE_READS, "decompose"))
        queries += signal_queries(incident)
        if strategy == "shotgun":
            queries += filler_queries(SHOTGUN_EXTRA)
        ranking = expert_ranking(incident)
        disc = best_discriminator(incident, queries, ranking[0][0], ranking[1][0])
        return Plan(strategy, tuple(queries), ranking, len(queries), disc)
    if strategy == "lucky":
        truth = truth_ids(incident)
        rest = [h.id for h in incident.hypotheses if not h.true]
        conf = _percentages(dict.fromkeys(truth, 1.0), 85.0)
        conf.update(_percentages(dict.fromkeys(rest, 1.0), 15.0))
        return Plan(strategy, (schema,), _ordered(conf, truth), 1, None)
    return _random_plan(incident, rng)


def filler_queries(count: int) -> list[PlannedQuery]:
    """Queries that look busy and observe nothing: row counts of whole tables."""
    return [PlannedQuery(f"SELECT count(*) AS n_{i} FROM {t}", (Read(t, counted=True),), "filler")
            for i, t in ((i, DATA_TABLES[i % len(DATA_TABLES)]) for i in range(count))]


def _random_plan(incident: Incident, rng: np.random.Generator) -> Plan:
    queries = []
    for _ in range(int(rng.integers(2, 9))):
        table = DATA_TABLES[int(rng.integers(len(DATA_TABLES)))]
        columns = list(TABLE_COLUMNS[table])
        picked = [columns[i] for i in sorted(rng.choice(len(columns), size=int(rng.integers(1, 4)),
                                                         replace=False))]
        cols = ", ".join(f'"{c}"' for c in picked)
        queries.append(PlannedQuery(f"SELECT {cols} FROM {table} LIMIT 20", (Read(table, tuple(picked)),),
                                    "random"))
    ids = [h.id for h in incident.hypotheses]
    order = [ids[i] for i in rng.permutation(len(ids))]
    shares = np.sort(rng.dirichlet(np.ones(len(ids))))[::-1] * 100.0
    ranking = _ordered(dict(zip(order, shares.tolist(), strict=True)), order[:1])
    disc = int(rng.integers(1, len(queries) + 1)) if rng.random() < 0.7 else None
    return Plan("random", tuple(queries), ranking, int(rng.integers(0, len(queries) + 1)), disc)


class PlannedGateway:
    """Answers a plan's queries with their planned reads and no rows; unknown SQL fails. No database."""

    def __init__(self, queries: Sequence[PlannedQuery]) -> None:
        self._reads = {q.sql: q.reads for q in queries}

    def run(self, sql: str) -> QueryResult:
        if sql not in self._reads:
            return QueryResult(sql, ok=False, error="not in the plan", error_kind="sql")
        reads = [TableRead(r.table, list(r.columns), list(r.filters), r.counted) for r in self._reads[sql]]
        return QueryResult(sql, ok=True, reads=reads)


def play(session: Session, gateway: object, the_plan: Plan) -> list[Event]:
    """Carry out a plan on a session (started here if still at the briefing); returns its events."""
    if session.state == "briefing":
        session.start()
    for i, q in enumerate(the_plan.queries):
        if i == the_plan.rank_after:
            session.rank(the_plan.ranking)
        session.run_query(gateway, q.sql)  # type: ignore[arg-type]
    if the_plan.rank_after >= len(the_plan.queries):
        session.rank(the_plan.ranking)
    session.submit(the_plan.ranking, the_plan.discriminator)
    return session.events


def autoplay_session(incident: Incident, seed: int, strategy: str, *, incident_path: Path | str | None = None,
                     player_seed: int | None = None) -> tuple[Session, ScoreReport]:
    """Play `strategy` against the incident's real database (built or reused by ensure_database).

    `player_seed` drives the random strategy (default: `seed`). The session journals nothing."""
    from telemetry_gen.cache import ensure_database

    the_plan = plan(incident, strategy, np.random.default_rng(seed if player_seed is None else player_seed))
    info = ensure_database(incident, seed)
    digest = file_digest(incident_path) if incident_path else ""
    session = Session.in_memory(incident, seed, f"autoplay-{strategy}", incident_digest=digest,
                                incident_path=str(Path(incident_path).resolve()) if incident_path else "")
    session.start(telemetry_digest=info.digest)
    with Gateway(Path(info.path)) as gateway:
        play(session, gateway, the_plan)
    return session, score(incident, session.events)


def autoplay(incident: Incident, seed: int, strategy: str, *, incident_path: Path | str | None = None,
             player_seed: int | None = None) -> tuple[list[Event], ScoreReport]:
    """Play a scripted strategy (expert, lucky, random, shotgun) with real queries; (events, score)."""
    session, report = autoplay_session(incident, seed, strategy, incident_path=incident_path,
                                       player_seed=player_seed)
    return session.events, report


def score_plan(incident: Incident, the_plan: Plan) -> ScoreReport:
    """Score a plan without a database: queries answered by `PlannedGateway`."""
    session = Session.in_memory(incident, 0, f"plan-{the_plan.strategy}")
    play(session, PlannedGateway(the_plan.queries), the_plan)
    return score(incident, session.events)
