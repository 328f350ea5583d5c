"""Fan-out for the front ends (the evaluation runner, autoplay sweeps): `telemetry_gen.fanout` as the game's API
offers it, since a front end imports `game.api` and nothing below it. Independent tasks run in local spawned
processes, or as Ray tasks with `ray=ADDRESS`; each result comes back as an `Outcome`, a failure as data."""

from __future__ import annotations

from telemetry_gen.fanout import CONNECT_HINT, RAY_HINT, FanoutError, Outcome, fan_out, ray_available

__all__ = ["CONNECT_HINT", "RAY_HINT", "FanoutError", "Outcome", "fan_out", "ray_available"]
