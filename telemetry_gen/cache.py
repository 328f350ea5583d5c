"""Build an incident's database once and reuse it: keyed by incident content, seed and code version."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from incidents.spec import Incident, ReplayArrival
from telemetry_gen.runner import Progress, build_telemetry
from telemetry_gen.store import write_database

_PACKAGES = ("engine_model", "telemetry_gen")


def cache_dir() -> Path:
    """Where built databases live: $SERVEDRILL_CACHE, else $XDG_CACHE_HOME/servedrill, else ~/.cache/servedrill."""
    env = os.environ.get("SERVEDRILL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "servedrill"


# Modules and data of telemetry_gen that never shape a built database: the proof and benchmark tools and
# the cache itself. Leaving them out of code_version keeps cached databases and proof records valid across
# edits to them.
_NOT_TELEMETRY = frozenset({"cache.py", "cost.py", "fanout.py", "lifeline.py"})
_NOT_TELEMETRY_ROOMS = frozenset({"proving", "fidelity"})


@cache
def code_version() -> str:
    """Hash of the source that shapes a built database (the simulator and the telemetry builder, not the
    proof and benchmark tools), so a change to it invalidates the cache."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        for path in sorted((root / pkg).rglob("*")):
            if path.suffix not in (".py", ".csv", ".json") or "__pycache__" in path.parts:
                continue
            if pkg == "telemetry_gen" and (path.name in _NOT_TELEMETRY or path.name.startswith("fidelity_")
                                           or path.relative_to(root / pkg).parts[0] in _NOT_TELEMETRY_ROOMS):
                continue
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def trace_digests(inc: Incident) -> str:
    """Digests of the traces the workload replays: their rows are not in the incident's YAML."""
    apps = inc.workload.apps
    rows = [] if isinstance(apps, str) else [a.arrival._rows for a in apps if isinstance(a.arrival, ReplayArrival)]
    return ",".join(r.digest if r is not None else "unread" for r in rows)


def incident_key(inc: Incident, seed: int) -> str:
    payload = json.dumps(inc.model_dump(mode="json"), sort_keys=True)
    traces = trace_digests(inc)
    payload = f"{payload}|{traces}" if traces else payload  # keys of incidents without traces stay as they were
    return hashlib.sha256(f"{payload}|{seed}|{code_version()}".encode()).hexdigest()[:24]


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if needed): one builder per database at a time; the
    others wait and then find its result. The holder removes the file before it lets go, so nothing is
    left in the cache folder, built or failed; a waiter that then holds the lock of a removed file sees
    that the path no longer names its file and locks afresh."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                continue  # the holder before us removed it: ours is a stale file
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    path.unlink()
            return
        finally:
            os.close(fd)  # closing releases the lock


def _cached(db: Path, meta_path: Path) -> BuildInfo | None:
    if not (db.exists() and meta_path.exists()):
        return None
    try:
        meta = json.loads(meta_path.read_text())
        return BuildInfo(**{**meta, "cached": True, "path": str(db)})
    except (OSError, ValueError, TypeError):
        return None


@dataclass
class BuildInfo:
    """Where an incident's database is and what it holds. `span` in simulated seconds."""

    incident: str
    seed: int
    path: str
    digest: str
    rows: dict[str, int]
    span_s: float
    start: str
    cached: bool
    build_s: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def database_path(inc: Incident, seed: int = 0, *, telemetry_seed: int | None = None, ablate: bool = False) -> Path:
    """Where `ensure_database` keeps (or would build) the database of these arguments."""
    tseed = seed if telemetry_seed is None else int(telemetry_seed)
    key = incident_key(inc, seed)
    if tseed != seed or ablate:
        key = hashlib.sha256(f"{key}|{tseed}|{ablate}".encode()).hexdigest()[:24]
    return cache_dir() / f"{inc.id}-{key}.duckdb"


def is_cached(inc: Incident, seed: int = 0, *, telemetry_seed: int | None = None, ablate: bool = False) -> bool:
    """Whether `ensure_database` with these arguments would find its database built (and build nothing)."""
    db = database_path(inc, seed, telemetry_seed=telemetry_seed, ablate=ablate)
    return _cached(db, db.with_suffix(".json")) is not None


def ensure_database(inc: Incident, seed: int = 0, *, progress: Progress | None = None,
                    out: Path | None = None, force: bool = False, telemetry_seed: int | None = None,
                    ablate: bool = False) -> BuildInfo:
    """Return the incident's database, building it if needed (or if `force`). `out` copies it to a path.

    `seed` is the variant the incident was resolved with; `telemetry_seed` (default: `seed`) draws the
    workload, so the same variant can be rebuilt with other traffic. `ablate` builds the run with the
    faults removed. Safe to call from several processes at once: one builds, the others wait for it."""
    tseed = seed if telemetry_seed is None else int(telemetry_seed)
    db = database_path(inc, seed, telemetry_seed=telemetry_seed, ablate=ablate)
    folder = db.parent
    meta_path = db.with_suffix(".json")
    if not force and (info := _cached(db, meta_path)) is not None:
        return _maybe_copy(info, out)
    folder.mkdir(parents=True, exist_ok=True)
    with _build_lock(db.with_suffix(".lock")):
        if not force and (info := _cached(db, meta_path)) is not None:
            return _maybe_copy(info, out)
        from telemetry_gen.cost import refuse_large

        refuse_large(inc)  # before any simulation: a build past the bounds would take minutes and gigabytes
        t0 = time.perf_counter()
        tel = build_telemetry(inc, tseed, progress=progress, ablate=ablate)
        write_database(db, tel.tables)
        info = BuildInfo(
            incident=inc.id, seed=seed, path=str(db), digest=tel.digest, rows=tel.row_counts(),
            span_s=inc.window.duration_s, start=inc.window.start.isoformat(), cached=False,
            build_s=round(time.perf_counter() - t0, 3),
        )
        tmp = meta_path.with_name(f"{meta_path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(info.to_dict(), indent=1))
            tmp.replace(meta_path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk leaves no half-written .tmp behind
            raise
    return _maybe_copy(info, out)


def _maybe_copy(info: BuildInfo, out: Path | None) -> BuildInfo:
    if out is None:
        return info
    out = Path(out)
    if out.is_dir():
        out = out / Path(info.path).name
    out.write_bytes(Path(info.path).read_bytes())
    info.path = str(out)
    return info
