"""Run a player's queries on every world of the incident and say which rivals each one ruled out.

This is where evidence comes from: the player sees only the truth world; for scoring, each query's
SQL is run again (through the same sandboxed gateway, with the same limits and the same row cap) on the
truth's other traffic draws and on every member of every rival's family, and `telemetry_gen.proving.evidence`
decides which rivals what the player saw rules out. Nothing a transcript records about a query (its
reads, rows or counts) is trusted: only its SQL text is used, and the results are recomputed.

What a query showed on a world is cached on disk by the world's content and the SQL's digest, so
`score`, `replay`, `leaderboard` and `gameday collect` pay for a query once. Assessing one session has a
time budget (`ASSESS_BUDGET_S`): a query it cannot reach in time rules out nothing and says so.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from game.query.gateway import QueryResult
from game.query.limits import PLAYER_LIMITS
from game.query.sandbox import Sandbox
from game.rules.observe import is_schema_exploration
from game.rules.scoring import QueryEvidence, ScoreReport, score
from incidents.spec import Incident
from telemetry_gen.cache import cache_dir
from telemetry_gen.proving.evidence import FAILED, Shown, cite, describe_reading, ruling, shown_of
from telemetry_gen.proving.thresholds import label_columns, made_columns, threshold_reason
from telemetry_gen.proving.worlds import (
    RIVAL_MEMBERS,
    TRUTH,
    WorldProgress,
    Worlds,
    ensure_worlds,
    family_names,
    rivals,
    worlds_cached,
)

ASSESS_TIMEOUT_S = PLAYER_LIMITS.timeout_s
"""Time limit per query per world when re-running for scoring: the player's own limit."""
ASSESS_BUDGET_S = 180.0
"""Wall seconds one scoring (`assess_all`, or one `assess`) spends running queries not seen before; a
query left when it is spent is not assessed (it rules out nothing, and the debrief says why). Cached
results cost nothing. Per call, not per Assessor: a game day's players share one Assessor."""
CHANGED_BETWEEN_RUNS = "it showed something else when run again on the same world, so what it shows is luck"
"""The debrief's reason for a query whose result changes between two runs of one world."""
_TRANSIENT = ("timeout", "cancelled", "memory", "internal")
_EVIDENCE_SOURCE = Path(__file__).resolve().parents[2] / "telemetry_gen" / "proving" / "evidence.py"


def _evidence_version() -> str:
    try:
        return hashlib.sha256(_EVIDENCE_SOURCE.read_bytes()).hexdigest()[:12]
    except OSError:
        return "unknown"


class Assessor:
    """Gateways on every world of one incident at one seed; `assess` is cached per SQL text (in memory,
    and per world on disk) and thread-safe. Build with `Assessor.open` (builds or reuses the worlds) or
    from `Worlds`."""

    def __init__(self, incident: Incident, worlds: Worlds, *, timeout_s: float = ASSESS_TIMEOUT_S,
                 budget_s: float = ASSESS_BUDGET_S, disk_cache: bool = True) -> None:
        self.incident = incident
        self.worlds = worlds
        self.rivals = rivals(incident)
        self._timeout_s = timeout_s
        self._budget_s = budget_s
        self._sandbox: Sandbox | None = None
        self._cache: dict[str, QueryEvidence] = {}
        self._lock = threading.Lock()
        self._origin = incident.window.start
        self._span_s = float(incident.window.duration_s)
        self._disk = cache_dir() / "shown" if disk_cache else None
        self._version = _evidence_version()

    @classmethod
    def open(cls, incident: Incident, seed: int, *, progress: WorldProgress | None = None) -> Assessor:
        return cls(incident, ensure_worlds(incident, seed, progress=progress))

    def _run(self, name: str, sql: str) -> QueryResult:
        # one worker process holds every world, so that scoring costs one process, not one per world
        if self._sandbox is None or self._sandbox.closed:
            self._sandbox = Sandbox({w: Path(p) for w, p in self.worlds.paths.items()}, timeout_s=self._timeout_s)
        return self._sandbox.run(sql, name)

    def assess(self, index: int, sql: str, deadline: float | None = None) -> QueryEvidence:
        """Evidence of query Q`index` with text `sql` (run on every world unless seen before). `deadline`
        (time.perf_counter() seconds; default: the budget from now) is when new work stops."""
        deadline = time.perf_counter() + self._budget_s if deadline is None else deadline
        with self._lock:
            hit = self._cache.get(sql)
            if hit is None:
                if time.perf_counter() >= deadline:
                    return QueryEvidence(index, sql, True, 0, False, (), {}, assessed=False)
                hit = self._compute(sql)
                self._cache[sql] = hit
        return QueryEvidence(index, sql, hit.ok, hit.rows, hit.ok and is_schema_exploration(sql, []),
                             hit.ruled_out, dict(hit.why), margins=dict(hit.margins), note=hit.note)

    def _compute(self, sql: str) -> QueryEvidence:
        truth = self._run(TRUTH, sql)
        if not truth.ok:
            return QueryEvidence(0, sql, False)
        made = threshold_reason(sql)
        if made is not None:
            # a threshold, offset, remainder or sample of the player's own makes the figure: nothing to read
            return QueryEvidence(0, sql, True, truth.row_count, note=made)
        again = self._run(TRUTH, sql)
        if not again.ok or again.rows != truth.rows or again.columns != truth.columns:
            # a result that changes between two runs of the same world would separate worlds by chance,
            # so it is evidence of nothing (the policy refuses what is known to: random(), the clock)
            return QueryEvidence(0, sql, True, truth.row_count, note=CHANGED_BETWEEN_RUNS)
        seen = shown_of(truth, self._origin)
        if seen.empty:
            # nothing shown on the truth: a rival can differ only by showing rows the truth lacks, and
            # the player saw none of them
            return QueryEvidence(0, sql, True, 0)
        computed, labels = made_columns(sql, seen.columns), label_columns(sql, seen.columns)
        others = [self._shown(name, sql) for name in family_names(self.incident, TRUTH)[1:]]
        ruled: list[str] = []
        why: dict[str, str] = {}
        margins: dict[str, float] = {}
        for rival in self.rivals:
            family = [self._shown(name, sql) for name in family_names(self.incident, rival)]
            readings = ruling(seen, others, family, span_s=self._span_s,
                              draws=RIVAL_MEMBERS, made=computed, labels=labels)
            if readings:
                ruled.append(rival)
                why[rival] = describe_reading(cite(readings, seen), self._origin)
                margins[rival] = round(readings[0].margin, 3)
        return QueryEvidence(0, sql, True, truth.row_count, False, tuple(ruled), why, margins=margins)

    def _disk_path(self, name: str, sql: str) -> Path | None:
        path = self.worlds.paths.get(name)
        if self._disk is None or path is None:
            return None
        digest = hashlib.sha256(f"{self._version}|{sql}".encode()).hexdigest()[:32]
        return self._disk / Path(path).stem / f"{digest}.json"

    def _shown(self, name: str, sql: str) -> Shown:
        if name not in self.worlds.paths:
            return FAILED
        cached = self._disk_path(name, sql)
        if cached is not None:
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                return Shown.from_json(json.loads(cached.read_text()))
        result = self._run(name, sql)
        # a query that fails on another world (its time limit, say) shows nothing there to compare
        out = shown_of(result, self._origin) if result.ok else FAILED
        # a result that depends on the machine's load (a time limit, memory) is not kept
        if cached is not None and (result.ok or result.error_kind not in _TRANSIENT):
            with contextlib.suppress(OSError):
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_name(f"{cached.name}.{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps(out.to_json()))
                tmp.replace(cached)
        return out

    def assess_all(self, queries: Iterable[tuple[int, str]]) -> dict[int, QueryEvidence]:
        """Evidence of every (index, sql), within one budget."""
        deadline = time.perf_counter() + self._budget_s
        return {index: self.assess(index, sql, deadline) for index, sql in queries}

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


def missed_queries(assessor: Assessor, open_rivals: Iterable[str],
                   deadline: float | None = None) -> dict[str, dict[str, str]]:
    """For each rival in `open_rivals`, the first of the incident's reference queries (its signals, then
    the debrief's settling queries) that rules it out, with the reading that does: what the debrief offers
    a player who never ruled it out. A rival no reference query rules out is left out. `deadline`
    (time.perf_counter() seconds; default: the budget from now) is when new work stops."""
    from telemetry_gen.proving.proof import reference_queries

    wanted = list(open_rivals)
    out: dict[str, dict[str, str]] = {}
    deadline = time.perf_counter() + ASSESS_BUDGET_S if deadline is None else deadline
    for label, sql in reference_queries(assessor.incident):
        if len(out) == len(wanted):
            break
        evidence = assessor.assess(0, sql, deadline)
        for rival in evidence.ruled_out:
            if rival in wanted and rival not in out:
                out[rival] = {"query": label, "sql": sql, "why": evidence.why.get(rival, "")}
    return out


def score_session(incident: Incident, seed: int, events: Iterable[Any],
                  progress: Callable[[str, int, int], None] | None = None) -> ScoreReport:
    """Score `events` (Event objects or dicts) of a session of `incident` at `seed`, recomputing every
    query's evidence from its SQL on the worlds (built or found in the cache), and say for each rival the
    player never ruled out which of the incident's queries would have."""
    evs = list(events)
    assessor = shared_assessor(incident, seed, progress=progress)
    report = score(incident, evs, assessor.assess_all(queries_of(evs)))
    report.missed = missed_queries(assessor, [r for r in report.rivals if r not in report.ruled_out])
    return report


def start_world_build(incident_path: Path | str, seed: int) -> subprocess.Popen[bytes] | None:
    """Start building the incident's worlds in a background process at low priority (the player reads
    the page and queries meanwhile; scoring later finds them in the cache). None if it cannot start, or
    has nothing to do: every world is in the cache already (a game day's round after its first player, or
    prepared the day before), which takes milliseconds to tell here and an interpreter's start there."""
    if _worlds_cached(incident_path, seed):
        return None
    try:
        # the child lowers its own priority (a preexec_fn could deadlock a threaded parent)
        return subprocess.Popen(
            [sys.executable, "-m", "telemetry_gen.proving.worlds", "--nice", str(incident_path), str(int(seed))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _worlds_cached(incident_path: Path | str, seed: int) -> bool:
    """Whether every world of the incident at `seed` is cached; False when that cannot be told (the build
    process then finds out, and reports what is wrong as it always did)."""
    from incidents.loader import load_incident

    try:
        return worlds_cached(load_incident(incident_path, int(seed)), int(seed))
    except Exception:
        return False
