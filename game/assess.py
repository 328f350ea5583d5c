"""Run a player's queries on every world of the incident and say which rivals each one ruled out.

This is where evidence comes from: the player sees only the truth world; for scoring, each query's
SQL is run again (through the same sandboxed gateway, with the same limits) on the noise world and on
every rival hypothesis's world, and `game.evidence` decides which rivals the result tells apart from
the truth. Nothing a transcript records about a query (its reads, rows or counts) is trusted: only
its SQL text is used, and the results are recomputed.
"""

from __future__ import annotations

import atexit
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from game.gateway import QueryResult
from game.observe import is_schema_exploration
from game.sandbox import Sandbox
from game.scoring import QueryEvidence, ScoreReport, score
from incidents.spec import Incident
from telemetry_gen.evidence import Shown, describe_feature, separating_features, shown_of
from telemetry_gen.worlds import NOISE, TRUTH, WorldProgress, Worlds, ensure_worlds, rivals

ASSESS_TIMEOUT_S = 10.0
"""Time limit per query per world when re-running for scoring (the player's own limit)."""


class Assessor:
    """Gateways on every world of one incident at one seed; `assess` is cached per SQL text and
    thread-safe. Build with `Assessor.open` (builds or reuses the worlds) or from `Worlds`."""

    def __init__(self, incident: Incident, worlds: Worlds, *, timeout_s: float = ASSESS_TIMEOUT_S) -> None:
        self.incident = incident
        self.worlds = worlds
        self.rivals = rivals(incident)
        self._timeout_s = timeout_s
        self._sandbox: Sandbox | None = None
        self._cache: dict[str, tuple[bool, int, tuple[str, ...], dict[str, str]]] = {}
        self._lock = threading.Lock()
        self._origin = incident.window.start

    @classmethod
    def open(cls, incident: Incident, seed: int, *, progress: WorldProgress | None = None) -> Assessor:
        return cls(incident, ensure_worlds(incident, seed, progress=progress))

    def _run(self, name: str, sql: str) -> QueryResult:
        # one worker process holds every world, so that scoring costs one process, not one per world
        if self._sandbox is None or self._sandbox.closed:
            self._sandbox = Sandbox({w: Path(p) for w, p in self.worlds.paths.items()}, timeout_s=self._timeout_s)
        return self._sandbox.run(sql, name)

    def assess(self, index: int, sql: str) -> QueryEvidence:
        """Evidence of query Q`index` with text `sql` (run on every world unless seen before)."""
        with self._lock:
            hit = self._cache.get(sql)
            if hit is None:
                hit = self._compute(sql)
                self._cache[sql] = hit
        ok, rows, ruled_out, why = hit
        schema = ok and is_schema_exploration(sql, [])
        return QueryEvidence(index, sql, ok, rows, schema, ruled_out, dict(why))

    def _compute(self, sql: str) -> tuple[bool, int, tuple[str, ...], dict[str, str]]:
        truth = self._run(TRUTH, sql)
        if not truth.ok:
            return False, 0, (), {}
        again = self._run(TRUTH, sql)
        if not again.ok or again.rows != truth.rows or again.columns != truth.columns:
            # random(), USING SAMPLE, ...: a result that changes between two runs of the same world
            # would separate worlds by chance, so it is evidence of nothing
            return True, truth.row_count, (), {}
        seen_truth = shown_of(truth, self._origin)
        if seen_truth.empty:
            # nothing shown on the truth: a rival can differ only by showing rows the truth lacks, and
            # the player saw none of them
            return True, 0, (), {}
        noise = self._shown(NOISE, sql)
        ruled: list[str] = []
        why: dict[str, str] = {}
        for rival in self.rivals:
            features = separating_features(seen_truth, self._shown(rival, sql), noise)
            if features:
                ruled.append(rival)
                why[rival] = describe_feature(features[0])
        return True, truth.row_count, tuple(ruled), why

    def _shown(self, name: str, sql: str) -> Shown:
        result = self._run(name, sql)
        # a query that fails on another world (its time limit, say) shows nothing there to compare
        return shown_of(result, self._origin) if result.ok else Shown({}, -1)

    def assess_all(self, queries: Iterable[tuple[int, str]]) -> dict[int, QueryEvidence]:
        """Evidence of every (index, sql)."""
        return {index: self.assess(index, sql) for index, sql in queries}

    def close(self) -> None:
        """Stop the worlds' query process; a later `assess` of new SQL starts it again."""
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None

    def __enter__(self) -> Assessor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def queries_of(events: Iterable[Any]) -> list[tuple[int, str]]:
    """(index, sql) of every query event, from Event objects or their dicts; nothing else is read."""
    out: list[tuple[int, str]] = []
    for e in events:
        kind = e.get("kind") if isinstance(e, Mapping) else getattr(e, "kind", None)
        data = e.get("data") if isinstance(e, Mapping) else getattr(e, "data", None)
        if kind != "query" or not isinstance(data, Mapping):
            continue
        index = data.get("index")
        number = index if isinstance(index, int) and not isinstance(index, bool) else len(out) + 1
        out.append((number, str(data.get("sql", ""))))
    return out


_SHARED: dict[tuple[str, int, str], Assessor] = {}
_SHARED_LOCK = threading.Lock()


@atexit.register
def _close_shared() -> None:
    with _SHARED_LOCK:
        for assessor in _SHARED.values():
            assessor.close()
        _SHARED.clear()


def shared_assessor(incident: Incident, seed: int, *, progress: WorldProgress | None = None) -> Assessor:
    """One Assessor per (incident content, seed) in this process, so its SQL cache is shared by every
    session of a game day."""
    from telemetry_gen.cache import incident_key

    key = (incident.id, int(seed), incident_key(incident, seed))
    with _SHARED_LOCK:
        found = _SHARED.get(key)
    if found is not None:
        return found
    made = Assessor.open(incident, seed, progress=progress)
    with _SHARED_LOCK:
        return _SHARED.setdefault(key, made)


def evidence_for(incident: Incident, seed: int, events: Iterable[Any],
                 progress: Callable[[str, int, int], None] | None = None) -> dict[int, QueryEvidence]:
    """Evidence of every query in `events`, recomputed from their SQL on the incident's worlds."""
    return shared_assessor(incident, seed, progress=progress).assess_all(queries_of(events))


def score_session(incident: Incident, seed: int, events: Iterable[Any],
                  progress: Callable[[str, int, int], None] | None = None) -> ScoreReport:
    """Score `events` (Event objects or dicts) of a session of `incident` at `seed`, recomputing every
    query's evidence from its SQL on the worlds (built or found in the cache)."""
    evs = list(events)
    return score(incident, evs, evidence_for(incident, seed, evs, progress))


def start_world_build(incident_path: Path | str, seed: int) -> subprocess.Popen[bytes] | None:
    """Start building the incident's worlds in a background process at low priority (the player reads
    the page and queries meanwhile; scoring later finds them in the cache). None if it cannot start."""
    try:
        # the child lowers its own priority (a preexec_fn could deadlock a threaded parent)
        return subprocess.Popen(
            [sys.executable, "-m", "telemetry_gen.worlds", "--nice", str(incident_path), str(int(seed))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
