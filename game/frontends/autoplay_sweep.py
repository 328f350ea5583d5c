"""`servedrill autoplay --seeds ...`: one scripted player over many seeds of an incident, each seed an
independent game (`game.frontends.autoplay.autoplay_session`) fanned out to local processes or Ray tasks
(`game.api.fanout`). Every game is scored as a single autoplay game is; the sweep collects the scores."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

SEED_TIMEOUT_S = 1800.0
"""The longest one seed's game may take (its telemetry and worlds built when no cache holds them yet)."""


@dataclass(frozen=True)
class SweepGame:
    """One seed of a sweep: the incident (library id or file), the seed and the strategy."""

    incident: str
    seed: int
    strategy: str


def play_one(game: SweepGame) -> dict[str, Any]:
    """Play and score one seed: {seed, incident, queries, total, parts}. Runs in a worker or a Ray task."""
    from game import api
    from game.frontends.autoplay import autoplay_session

    session, report = autoplay_session(api.find_incident(game.incident), game.seed, game.strategy)
    return {"seed": game.seed, "incident": session.incident.id, "queries": len(session.queries),
            "total": round(report.total, 2), "parts": {c.key: round(c.points, 2) for c in report.components}}


def sweep(incident: str, seeds: list[int], strategy: str, *, jobs: int = 1, ray: str | None = None) -> dict[str, Any]:
    """Every seed played (in seed order in the result); a seed whose game failed keeps its row with `error`.
    Raises FanoutError when Ray cannot start."""
    from game.api.fanout import fan_out

    started = time.perf_counter()
    games = [SweepGame(incident, s, strategy) for s in seeds]
    rows: dict[int, dict[str, Any]] = {}
    for outcome in fan_out(play_one, games, ray=ray, jobs=jobs, task_timeout_s=SEED_TIMEOUT_S):
        row = outcome.value if outcome.value is not None else \
            {"seed": outcome.task.seed, "queries": 0, "total": None, "parts": {}}
        rows[outcome.task.seed] = {**row, "error": outcome.error, "seconds": outcome.seconds}
    ordered = [rows[s] for s in seeds]
    totals = [r["total"] for r in ordered if r["total"] is not None]
    return {"strategy": strategy, "seeds": list(seeds), "runs": ordered,
            "mean": round(sum(totals) / len(totals), 2) if totals else None,
            "failed": [r["seed"] for r in ordered if r["error"]], "ray": ray,
            "wall_s": round(time.perf_counter() - started, 2)}
