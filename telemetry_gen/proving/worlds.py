"""Every hypothesis of an incident as a family of worlds: the same incident and variant, with the
hypothesis's faults in place of the real ones, simulated on several traffic draws.

A player cannot know which traffic an alternative cause would have met, so one simulation per
hypothesis cannot say what that hypothesis "predicts": each hypothesis is a **family** of members.
Member 0 runs on the player's own traffic draw; member m runs on draw ``seed + m * NOISE_SEED_OFFSET``,
the same draw for every hypothesis (common random numbers: two members with the same index differ only
by their cause). The spread inside a family is the measure of chance (`telemetry_gen.proving.evidence`).

World names:
- ``truth``: the incident as written (what the player queries); ``truth~1``, ``truth~2``: the truth
  on other traffic draws (``noise`` is an alias of ``truth~1``);
- each false hypothesis's id, and ``<id>~1``: its `world` faults in place of `faults`, on draws 0 and 1;
  ``<id>~2``, ``<id>~3``, ...: each of its declared `members` (other severities, onsets, replicas) in
  place of `faults`, member k on draw k + 2; every one of them plus the truth's rolling restarts the
  hypothesis `keeps`, without their change (incidents.kept_events);
- ``baseline`` (built only for validation): the truth with its faults removed.

Noise events (deploys, bursts, restarts) are part of every world: they happen whatever the cause.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from incidents.kept_events import kept_restarts
from incidents.spec import Hypothesis, Incident
from telemetry_gen.cache import BuildInfo, ensure_database, is_cached

TRUTH = "truth"
BASELINE = "baseline"
MEMBER_MARK = "~"
"""A family member's name is its hypothesis's world name, this mark and the member's index."""
NOISE = f"{TRUTH}{MEMBER_MARK}1"
"""The truth on the first other traffic draw (the single "noise world" of earlier versions)."""
NOISE_ALIAS = "noise"
RESERVED = frozenset({TRUTH, NOISE_ALIAS, BASELINE})
NOISE_SEED_OFFSET = 7_919_003
"""Member m draws its traffic from seed + m * this (a prime far from any seed a player uses)."""
TRUTH_MEMBERS = 3
"""Members of the truth's family: the player's world and two other draws, to measure chance."""
RIVAL_MEMBERS = 2
"""Members of each rival's family: on the player's draw (common random numbers) and on draw 1."""

WorldProgress = Callable[[str, int, int], None]
"""Called with (world name, worlds done, worlds in all) before each world is built or looked up."""


def rivals(inc: Incident) -> list[str]:
    """Ids of the false hypotheses, in file order: the worlds a player has to rule out."""
    return [h.id for h in inc.hypotheses if not h.true]


def truth_ids(inc: Incident) -> list[str]:
    return [h.id for h in inc.hypotheses if h.true]


def member_name(hypothesis_world: str, member: int) -> str:
    """World name of member `member` of a family (``truth``, ``truth~1``, ``<id>``, ``<id>~1``)."""
    return hypothesis_world if member == 0 else f"{hypothesis_world}{MEMBER_MARK}{member}"


def split_member(name: str) -> tuple[str, int]:
    """(family, member index) of a world name; ``noise`` is ``truth~1``."""
    if name == NOISE_ALIAS:
        return TRUTH, 1
    head, mark, tail = name.rpartition(MEMBER_MARK)
    if mark and tail.isdigit() and head:
        return head, int(tail)
    return name, 0


def _hypothesis(inc: Incident, name: str) -> Hypothesis | None:
    return next((h for h in inc.hypotheses if h.id == name), None)


def family_size(inc: Incident, family: str) -> int:
    """How many worlds a family has: TRUTH_MEMBERS for the truth, RIVAL_MEMBERS plus the declared
    members for a rival."""
    if family == TRUTH:
        return TRUTH_MEMBERS
    hyp = _hypothesis(inc, family)
    return RIVAL_MEMBERS + (len(hyp.members) if hyp is not None else 0)


def family_names(inc: Incident, family: str) -> list[str]:
    """World names of one family's members: ``truth`` or a rival's id."""
    return [member_name(family, m) for m in range(family_size(inc, family))]


def world_of(inc: Incident, name: str) -> Incident:
    """The incident whose simulation is world `name` (``truth``, a hypothesis id, or a member of either)."""
    name, member = split_member(name)
    if name in (TRUTH, BASELINE):
        return inc
    hyp = _hypothesis(inc, name)
    if hyp is None:
        raise KeyError(f"no world {name!r}; worlds: {', '.join(world_names(inc))}")
    if hyp.true:
        return inc
    kept = kept_restarts(inc.faults, hyp.keeps)
    if member >= RIVAL_MEMBERS:
        if member - RIVAL_MEMBERS >= len(hyp.members):
            raise KeyError(f"no world {name}{MEMBER_MARK}{member}; {name} has {family_size(inc, name)} members")
        return inc.model_copy(update={"faults": [*hyp.members[member - RIVAL_MEMBERS], *kept]})
    return inc.model_copy(update={"faults": [*(hyp.world or []), *kept]})


def world_names(inc: Incident, *, baseline: bool = False) -> list[str]:
    """Worlds scoring needs (every member of the truth's family, then of each rival's), plus the
    fault-free one if `baseline`. Member 0 of every family comes first, so a caller that builds in this
    order can start comparing before the later draws are in."""
    families = [TRUTH, *rivals(inc)]
    sizes = {f: family_size(inc, f) for f in families}
    out = [member_name(f, m) for m in range(max(sizes.values())) for f in families if m < sizes[f]]
    return out + ([BASELINE] if baseline else [])


def _world_build(inc: Incident, seed: int, name: str) -> tuple[Incident, dict[str, Any]]:
    """World `name` of `inc` at `seed`, and the options `ensure_database` builds it with."""
    world = world_of(inc, name)
    _, member = split_member(name)
    if member:
        return world, {"telemetry_seed": seed + member * NOISE_SEED_OFFSET}
    return world, {"ablate": name == BASELINE}


def build_world(inc: Incident, seed: int, name: str) -> BuildInfo:
    """Build (or find in the cache) world `name` of `inc` resolved at `seed`."""
    world, options = _world_build(inc, seed, name)
    return ensure_database(world, seed, **options)


def worlds_cached(inc: Incident, seed: int) -> bool:
    """Whether every world scoring needs (`world_names`) is in the cache already: then a background build
    has nothing to do (a few milliseconds per world to tell, against an interpreter's start to find out)."""
    for name in world_names(inc):
        world, options = _world_build(inc, seed, name)
        if not is_cached(world, seed, **options):
            return False
    return True


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


BUILD_JOBS = 2
"""Processes a background build uses at most (never more than the CPUs): the largest incident's families
build within a minute on two cores (`servedrill bench worlds`)."""


def default_build_jobs() -> int:
    return max(1, min(BUILD_JOBS, os.cpu_count() or 1))


def _part(spec: str) -> tuple[int, int] | None:
    """`K/N` -> (K, N) with 0 <= K < N; None if malformed."""
    k, slash, n = spec.partition("/")
    if not (slash and k.isdigit() and n.isdigit()) or not 0 <= int(k) < int(n):
        return None
    return int(k), int(n)


def main(argv: list[str] | None = None) -> int:
    """`python -m telemetry_gen.proving.worlds [--nice] [--jobs N | --part K/N] INCIDENT_FILE SEED`: build
    every world of the incident's variant at SEED into the cache (what the game starts in the background
    while the player reads the page). With `--jobs N` (default: BUILD_JOBS, at most the CPUs) the worlds
    are shared out over N processes, this one and N - 1 children each building `--part K/N` (every N-th
    world from the K-th); the cache makes an overlap harmless. Prints one line per world; exit status 1
    when the incident does not load or a part failed, 2 on bad arguments."""
    import subprocess
    import sys

    from incidents.loader import IncidentError, load_incident

    args = list(sys.argv[1:] if argv is None else argv)
    nice = args[:1] == ["--nice"]
    if nice:
        # a background build must not slow the game in front of it
        args = args[1:]
        with contextlib.suppress(OSError):
            os.nice(10)
    jobs, part = default_build_jobs(), (0, 1)
    if len(args) >= 2 and args[0] in ("--jobs", "--part"):
        flag, value = args[0], args[1]
        args = args[2:]
        parsed = _part(value) if flag == "--part" else ((0, int(value)) if value.isdigit() and int(value) > 0
                                                          else None)
        if parsed is None:
            print(f"{flag} {value}: expected {'K/N with 0 <= K < N' if flag == '--part' else 'a count >= 1'}",
                  file=sys.stderr)
            return 2
        jobs, part = (1, parsed) if flag == "--part" else (parsed[1], (0, 1))
    if len(args) != 2 or not args[1].lstrip("-").isdigit():
        print("usage: python -m telemetry_gen.proving.worlds [--nice] [--jobs N | --part K/N] INCIDENT_FILE SEED",
              file=sys.stderr)
        return 2
    try:
        inc = load_incident(args[0], int(args[1]))
    except (IncidentError, OSError) as exc:
        print(f"{args[0]}: {str(exc).splitlines()[0] if str(exc) else exc}", file=sys.stderr)
        return 1
    if jobs > 1:
        part = (0, jobs)
        helpers = [subprocess.Popen([sys.executable, "-m", "telemetry_gen.proving.worlds",
                                     *(["--nice"] if nice else []), "--part", f"{k}/{jobs}", *args],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
                   for k in range(1, jobs)]
    else:
        helpers = []
    k, n = part
    names = world_names(inc)[k::n]
    worlds = ensure_worlds(inc, int(args[1]), names=names, progress=lambda name, i, total: print(
        f"{i}/{total} {name}" if name else f"{total}/{total} done", flush=True))
    failed = sum(1 for h in helpers if h.wait() != 0)
    print(f"built in {worlds.built_s:.1f} s" + (f"; {failed} of {len(helpers)} other parts failed" if failed else ""),
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    from telemetry_gen.lifeline import watch_parent

    watch_parent()  # the game that started this background build is the only one waiting for it
    raise SystemExit(main())
