"""Scripted players: what an expert, a lucky guesser, a random player and a shotgun querier do.

These players are built from the incident's own file, answer key included: running one SPOILS the
incident (the CLI says so). A strategy first becomes a `Plan` (queries, a ranking, when to rank, and
pins), `play` carries it out on a session through any gateway, and `autoplay_session` does it against
the incident's real database and scores it the way every session is scored: each query re-run on
every hypothesis's world.

- expert: the schema, each signal's reference query and the debrief's settling queries; 90% on the
  truth; pins each signal query as supporting the truth and refuting the hypotheses the signal's
  likelihoods call unlikely.
- shotgun: the expert's queries plus many row counts that show nothing; the expert's ranking.
- lucky: one look at the schema, then 90% on the truth.
- random: a few random column samples and a random ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from game.query.gateway import Gateway
from game.rules.assess import score_session
from game.rules.scoring import ScoreReport, truth_ids
from game.session import Event, Session, file_digest
from incidents.spec import TABLE_COLUMNS, Incident

STRATEGIES = ("expert", "lucky", "random", "shotgun")
SHOTGUN_EXTRA = 30
UNLIKELY = 0.2
"""A signal whose likelihood under a hypothesis is at most this is read as evidence against it."""

CATALOG_SQL = 'SELECT "table", "column", description FROM catalog ORDER BY "table", "column"'
DATA_TABLES = tuple(t for t in TABLE_COLUMNS if t != "catalog")


@dataclass(frozen=True)
class PlannedQuery:
    """A query and why it is run: schema, signal:<id>, settling, filler or random."""

    sql: str
    purpose: str = ""


@dataclass(frozen=True)
class Plan:
    """What a scripted player does: run `queries`, rank after the first `rank_after` of them, pin
    (query index, hypothesis id, stance) once all queries ran, then submit `ranking` (percent, best first)."""

    strategy: str
    queries: tuple[PlannedQuery, ...]
    ranking: tuple[tuple[str, float], ...]
    rank_after: int
    pins: tuple[tuple[int, str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def signal_queries(incident: Incident) -> list[PlannedQuery]:
    """Every signal's reference query."""
    return [PlannedQuery(s.query, f"signal:{s.id}") for s in incident.signals]


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


def confident_ranking(incident: Incident, top: float = 90.0) -> tuple[tuple[str, float], ...]:
    """`top` percent shared by the true causes, the rest evenly over the others."""
    truth = truth_ids(incident)
    rest = [h.id for h in incident.hypotheses if not h.true]
    conf = _percentages(dict.fromkeys(truth, 1.0), top)
    conf.update(_percentages(dict.fromkeys(rest, 1.0), 100.0 - top))
    return _ordered(conf, truth)


def expert_pins(incident: Incident, queries: Sequence[PlannedQuery]) -> tuple[tuple[int, str, str], ...]:
    """Each signal query supports the truth and refutes what its likelihoods call unlikely."""
    by_id = {s.id: s for s in incident.signals}
    truth = truth_ids(incident)
    pins: list[tuple[int, str, str]] = []
    for i, q in enumerate(queries, start=1):
        if not q.purpose.startswith("signal:"):
            continue
        signal = by_id[q.purpose[7:]]
        pins += [(i, h, "supports") for h in truth]
        pins += [(i, h.id, "refutes") for h in incident.hypotheses
                 if not h.true and signal.likelihood(h.id) <= UNLIKELY]
    return tuple(pins)


def plan(incident: Incident, strategy: str, rng: np.random.Generator | None = None) -> Plan:
    """The plan of one scripted player. `rng` drives the random strategy (default seed 0)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    rng = rng if rng is not None else np.random.default_rng(0)
    schema = PlannedQuery(CATALOG_SQL, "schema")
    if strategy in ("expert", "shotgun"):
        queries = [schema, *signal_queries(incident)]
        queries += [PlannedQuery(sql, "settling") for sql in incident.debrief.settling_queries]
        pins = expert_pins(incident, queries) if strategy == "expert" else ()
        if strategy == "shotgun":
            queries += filler_queries(SHOTGUN_EXTRA)
        return Plan(strategy, tuple(queries), confident_ranking(incident), len(queries), pins)
    if strategy == "lucky":
        return Plan(strategy, (schema,), confident_ranking(incident), 1)
    return _random_plan(incident, rng)


def filler_queries(count: int) -> list[PlannedQuery]:
    """Queries that look busy and show nothing about the cause: row counts of whole tables."""
    return [PlannedQuery(f"SELECT count(*) AS n_{i} FROM {t}", "filler")
            for i, t in ((i, DATA_TABLES[i % len(DATA_TABLES)]) for i in range(count))]


def _random_plan(incident: Incident, rng: np.random.Generator) -> Plan:
    queries = []
    for _ in range(int(rng.integers(2, 9))):
        table = DATA_TABLES[int(rng.integers(len(DATA_TABLES)))]
        columns = list(TABLE_COLUMNS[table])
        picked = [columns[i] for i in sorted(rng.choice(len(columns), size=int(rng.integers(1, 4)),
                                                         replace=False))]
        cols = ", ".join(f'"{c}"' for c in picked)
        queries.append(PlannedQuery(f"SELECT {cols} FROM {table} LIMIT 20", "random"))
    ids = [h.id for h in incident.hypotheses]
    order = [ids[i] for i in rng.permutation(len(ids))]
    shares = np.sort(rng.dirichlet(np.ones(len(ids))))[::-1] * 100.0
    ranking = _ordered(dict(zip(order, shares.tolist(), strict=True)), order[:1])
    return Plan("random", tuple(queries), ranking, int(rng.integers(0, len(queries) + 1)))


def play(session: Session, gateway: Gateway, the_plan: Plan) -> list[Event]:
    """Carry out a plan on a session (started here if still at the briefing); returns its events."""
    if session.state == "briefing":
        session.start()
    for i, q in enumerate(the_plan.queries):
        if i == the_plan.rank_after:
            session.rank(the_plan.ranking)
        session.run_query(gateway, q.sql)
    if the_plan.rank_after >= len(the_plan.queries):
        session.rank(the_plan.ranking)
    for index, hypothesis, stance in the_plan.pins:
        session.pin(index, hypothesis, stance)
    session.submit(the_plan.ranking)
    return session.events


def autoplay_session(incident: Incident, seed: int, strategy: str, *, incident_path: Path | str | None = None,
                     player_seed: int | None = None) -> tuple[Session, ScoreReport]:
    """Play `strategy` against the incident's real database (built or reused by ensure_database) and
    score it on the worlds. `player_seed` drives the random strategy (default: `seed`). The session
    journals nothing."""
    from telemetry_gen.cache import ensure_database

    the_plan = plan(incident, strategy, np.random.default_rng(seed if player_seed is None else player_seed))
    info = ensure_database(incident, seed)
    digest = file_digest(incident_path) if incident_path else ""
    session = Session.in_memory(incident, seed, f"autoplay-{strategy}", incident_digest=digest,
                                incident_path=str(Path(incident_path).resolve()) if incident_path else "")
    session.start(telemetry_digest=info.digest)
    with Gateway(Path(info.path)) as gateway:
        play(session, gateway, the_plan)
    return session, score_session(incident, seed, session.events)


def autoplay(incident: Incident, seed: int, strategy: str, *, incident_path: Path | str | None = None,
             player_seed: int | None = None) -> tuple[list[Event], ScoreReport]:
    """Play a scripted strategy (expert, lucky, random, shotgun) with real queries; (events, score)."""
    session, report = autoplay_session(incident, seed, strategy, incident_path=incident_path,
                                       player_seed=player_seed)
    return session.events, report
