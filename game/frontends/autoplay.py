"""Scripted players: what an expert, a lucky guesser, a random player and a shotgun querier do.

These players are built from the incident's own file, answer key included: running one SPOILS the
incident (the CLI says so). A strategy first becomes a `Plan` (queries, a ranking, when to rank, and
pins), `play` carries it out on a session through any gateway, and `autoplay_session` does it on a game
opened through `game.api` (the incident's variant at the seed, its real telemetry, a session that journals
nothing) and scores it the way every session is scored: each query re-run on every hypothesis's world.
Like every front end it calls `game.api` and nothing below it.

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
from typing import TYPE_CHECKING

import numpy as np

from game import api

if TYPE_CHECKING:
    from game.rules.scoring import ScoreReport
    from game.session import Event, Session
    from incidents.spec import Incident

STRATEGIES = ("expert", "lucky", "random", "shotgun")
SHOTGUN_EXTRA = 30
UNLIKELY = 0.2
"""A signal whose likelihood under a hypothesis is at most this is read as evidence against it."""

CATALOG_SQL = 'SELECT "table", "column", description FROM catalog ORDER BY "table", "column"'
DATA_TABLES = tuple(t for t in api.TABLE_COLUMNS if t != "catalog")


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


def truth_ids(incident: Incident) -> list[str]:
    """The true hypotheses' ids, in the file's order: the answer key these players are built from."""
    return [h.id for h in incident.hypotheses if h.true]


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
        columns = list(api.TABLE_COLUMNS[table])
        picked = [columns[i] for i in sorted(rng.choice(len(columns), size=int(rng.integers(1, 4)),
                                                         replace=False))]
        cols = ", ".join(f'"{c}"' for c in picked)
        queries.append(PlannedQuery(f"SELECT {cols} FROM {table} LIMIT 20", "random"))
    ids = [h.id for h in incident.hypotheses]
    order = [ids[i] for i in rng.permutation(len(ids))]
    shares = np.sort(rng.dirichlet(np.ones(len(ids))))[::-1] * 100.0
    ranking = _ordered(dict(zip(order, shares.tolist(), strict=True)), order[:1])
    return Plan("random", tuple(queries), ranking, int(rng.integers(0, len(queries) + 1)))


def play(session: Session, gateway: api.Telemetry | api.Runs, the_plan: Plan) -> list[Event]:
    """Carry out a plan on a session (started here if still at the briefing) on `gateway` (the game's
    telemetry, or any gateway in a test) through `game.api`, under the session's rules; returns its events."""
    if session.state == "briefing":
        api.start(session, None)
    for i, q in enumerate(the_plan.queries):
        if i == the_plan.rank_after:
            api.rank(session, the_plan.ranking)
        api.run_query(session, gateway, q.sql)
    if the_plan.rank_after >= len(the_plan.queries):
        api.rank(session, the_plan.ranking)
    for index, hypothesis, stance in the_plan.pins:
        api.pin(session, index, hypothesis, stance)
    api.submit(session, the_plan.ranking)
    return session.events


def autoplay_session(incident_path: Path | str, seed: int, strategy: str, *,
                     player_seed: int | None = None) -> tuple[Session, ScoreReport]:
    """Play `strategy` on the incident file at `incident_path` as the variant of `seed`, against its real
    telemetry (built or found in the cache), and score it on the worlds. `player_seed` drives the random
    strategy (default: `seed`). The session journals nothing."""
    game = api.open_game(incident_path, seed, f"autoplay-{strategy}", journal=False)
    try:
        the_plan = plan(game.variant.incident, strategy,
                        np.random.default_rng(seed if player_seed is None else player_seed))
        game.start()
        play(game.session, game.telemetry, the_plan)
    finally:
        game.close()
    return game.session, api.score_hand_in(game.session)


def autoplay(incident_path: Path | str, seed: int, strategy: str, *,
             player_seed: int | None = None) -> tuple[list[Event], ScoreReport]:
    """Play a scripted strategy (expert, lucky, random, shotgun) with real queries; (events, score)."""
    session, report = autoplay_session(incident_path, seed, strategy, player_seed=player_seed)
    return session.events, report
