"""Fan-out for the front ends (the evaluation runner, autoplay sweeps): `telemetry_gen.fanout` as the game's API
offers it, since a front end imports `game.api` and nothing below it. Independent tasks run in local spawned
processes, or as Ray tasks with `ray=ADDRESS`; each result comes back as an `Outcome`, a failure as data."""

from __future__ import annotations

from telemetry_gen.fanout import CONNECT_HINT, RAY_HINT, FanoutError, Outcome, fan_out, import_ray, ray_available

__all__ = ["CONNECT_HINT", "RAY_HINT", "FanoutError", "Outcome", "default_jobs", "fan_out", "import_ray",
           "ray_available"]


def default_jobs() -> int:
    """Local processes a fan-out uses when not told: the proving pool's rule (the CPUs this process may use)."""
    from telemetry_gen.proving.pool import default_jobs as pool_jobs  # here: the pool imports the prover

    return pool_jobs()
