"""Every hypothesis of an incident as a world of its own: the same incident, seed and workload, with
the hypothesis's faults in place of the real ones (common random numbers, so two worlds differ only
by their cause).

World names:
- ``truth``: the incident as written (what the player queries);
- each false hypothesis's id: its `world` faults in place of `faults`;
- ``noise``: the truth's variant with traffic drawn from another seed. Two seeds of one world differ
  only by chance, so the gap between ``truth`` and ``noise`` is what "material" is measured against;
- ``baseline`` (built only for validation): the truth with its faults removed.

Noise events (deploys, bursts, restarts) are part of every world: they happen whatever the cause.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from incidents.spec import Incident
from telemetry_gen.cache import BuildInfo, ensure_database

TRUTH = "truth"
NOISE = "noise"
BASELINE = "baseline"
RESERVED = frozenset({TRUTH, NOISE, BASELINE})
NOISE_SEED_OFFSET = 7_919_003
"""Added to the seed to draw the noise world's traffic (a prime far from any seed a player uses)."""

WorldProgress = Callable[[str, int, int], None]
"""Called with (world name, worlds done, worlds in all) before each world is built or looked up."""


def rivals(inc: Incident) -> list[str]:
    """Ids of the false hypotheses, in file order: the worlds a player has to rule out."""
    return [h.id for h in inc.hypotheses if not h.true]


def truth_ids(inc: Incident) -> list[str]:
    return [h.id for h in inc.hypotheses if h.true]


def world_of(inc: Incident, name: str) -> Incident:
    """The incident whose simulation is world `name` (``truth``, ``noise`` or a hypothesis id)."""
    if name in (TRUTH, NOISE, BASELINE):
        return inc
    hyp = next((h for h in inc.hypotheses if h.id == name), None)
    if hyp is None:
        raise KeyError(f"no world {name!r}; worlds: {', '.join(world_names(inc))}")
    if hyp.true:
        return inc
    return inc.model_copy(update={"faults": list(hyp.world or [])})


def world_names(inc: Incident, *, baseline: bool = False) -> list[str]:
    """Worlds scoring needs (truth, noise, one per rival), plus the fault-free one if `baseline`."""
    return [TRUTH, NOISE, *rivals(inc)] + ([BASELINE] if baseline else [])


def build_world(inc: Incident, seed: int, name: str) -> BuildInfo:
    """Build (or find in the cache) world `name` of `inc` resolved at `seed`."""
    world = world_of(inc, name)
    if name == NOISE:
        return ensure_database(world, seed, telemetry_seed=seed + NOISE_SEED_OFFSET)
    return ensure_database(world, seed, ablate=name == BASELINE)


@dataclass
class Worlds:
    """Database paths of an incident's worlds at one seed."""

    incident: str
    seed: int
    paths: dict[str, str]
    built_s: float

    def path(self, name: str) -> str:
        return self.paths[name]


def ensure_worlds(inc: Incident, seed: int, *, names: Iterable[str] | None = None,
                  progress: WorldProgress | None = None) -> Worlds:
    """Build every world scoring needs (or `names`), reusing the cache; safe across processes."""
    wanted = list(names) if names is not None else world_names(inc)
    paths: dict[str, str] = {}
    total = 0.0
    for i, name in enumerate(wanted):
        if progress is not None:
            progress(name, i, len(wanted))
        info = build_world(inc, seed, name)
        paths[name] = info.path
        total += 0.0 if info.cached else info.build_s
    if progress is not None:
        progress("", len(wanted), len(wanted))
    return Worlds(inc.id, seed, paths, round(total, 3))


def main(argv: list[str] | None = None) -> int:
    """`python -m telemetry_gen.worlds [--nice] INCIDENT_FILE SEED`: build every world of the incident's
    variant at SEED into the cache (what the game starts in the background while the player reads the
    page). Prints one line per world; exit status 1 when the incident does not load."""
    import sys

    from incidents.loader import IncidentError, load_incident

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--nice"]:
        # a background build must not slow the game in front of it
        args = args[1:]
        with contextlib.suppress(OSError):
            os.nice(10)
    if len(args) != 2 or not args[1].lstrip("-").isdigit():
        print("usage: python -m telemetry_gen.worlds INCIDENT_FILE SEED", file=sys.stderr)
        return 2
    try:
        inc = load_incident(args[0], int(args[1]))
    except (IncidentError, OSError) as exc:
        print(f"{args[0]}: {str(exc).splitlines()[0] if str(exc) else exc}", file=sys.stderr)
        return 1
    worlds = ensure_worlds(inc, int(args[1]), progress=lambda name, i, n: print(
        f"{i}/{n} {name}" if name else f"{n}/{n} done", flush=True))
    print(f"built in {worlds.built_s:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
