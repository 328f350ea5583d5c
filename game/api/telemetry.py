"""The telemetry outside a game: a variant's tables written out as Parquet files, and, for authors, the worlds of
its hypotheses to query. A world is a hypothesis's cause simulated on the incident's fleet, so opening one
SPOILS the answer: the player's commands never do it unasked (`servedrill query --world` says so on stderr).
`game.api` re-exports these names; the CLI's `export` and `query` are written on them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from game.api.play import BuildProgress, Telemetry, Variant, open_telemetry
from game.query.limits import PLAYER_LIMITS, QueryLimits

__all__ = ["TRUTH_WORLD", "Exported", "export_parquet", "open_world", "world_names"]

TRUTH_WORLD = "truth"
"""The world the player queries: the incident as it happened (`open_telemetry`). Spelled out, not imported from
telemetry_gen.proving.worlds (`TRUTH`), which would load the simulator with `game.api`; a test holds them equal."""


@dataclass(frozen=True)
class Exported:
    """A variant's tables written as Parquet: the database's digest and each table's file."""

    digest: str
    files: dict[str, str]


def export_parquet(variant: Variant, folder: Path, *, progress: BuildProgress | None = None) -> Exported:
    """Write every table of the variant's telemetry (built, or found in the cache) into `folder` (made if
    missing) as `<table>.parquet`."""
    import duckdb

    from telemetry_gen.cache import ensure_database

    build = ensure_database(variant.incident, variant.seed, progress=progress)
    folder.mkdir(parents=True, exist_ok=True)
    # read-only on the cached file, outside the player's sandbox: the tables are copied whole, no SQL of a
    # player's runs here
    con = duckdb.connect(build.path, read_only=True)
    files = {}
    try:
        for name in build.rows:
            target = folder / f"{name}.parquet"
            con.execute(f"COPY \"{name}\" TO '{target.as_posix()}' (FORMAT parquet)")
            files[name] = str(target)
    finally:
        con.close()
    return Exported(build.digest, files)


def world_names(variant: Variant) -> list[str]:
    """The worlds of the variant `open_world` opens: every member of the truth's family and of each rival's
    (`truth`, `truth~1`, `ID`, `ID~1`, ...), `noise` (= truth~1), `baseline` (no fault) and the true
    hypotheses' ids."""
    from telemetry_gen.proving.worlds import BASELINE, NOISE_ALIAS
    from telemetry_gen.proving.worlds import world_names as names

    inc = variant.incident
    return [*names(inc), NOISE_ALIAS, BASELINE, *(h.id for h in inc.hypotheses if h.true)]


def open_world(variant: Variant, world: str = TRUTH_WORLD, *, limits: QueryLimits = PLAYER_LIMITS,
               progress: BuildProgress | None = None) -> Telemetry:
    """The telemetry of one world of the variant (a name from `world_names`; built or found in the cache) with a
    gateway on it under `limits`: `TRUTH_WORLD` is the player's own (`open_telemetry`, which `progress`
    follows); any other spoils the answer. Raises KeyError for a world the incident does not have."""
    if world == TRUTH_WORLD:
        return open_telemetry(variant, limits=limits, progress=progress)
    from game.query.sandbox import Gateway
    from telemetry_gen.proving.worlds import build_world

    build = build_world(variant.incident, variant.seed, world)
    gateway = Gateway(Path(build.path), memory_limit=limits.memory_limit, row_cap=limits.row_cap,
                      timeout_s=limits.timeout_s)
    return Telemetry(build, gateway, variant.seed)
