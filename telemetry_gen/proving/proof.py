"""Deep validation: does an incident's fault really produce what the incident claims?

`prove` simulates the incident twice with the same seed: as written, and with its faults
removed (the ablation; noise stays). Then, on the two databases:

1. every evidence symptom must hold with the faults and must not hold without them: otherwise the
   briefing is either false or true for reasons other than the fault. A `context: true` symptom (a
   fact of the situation: no crash before the patch) must hold on both runs instead;
2. every signal's expectation must hold on the fault run;
3. every signal must discriminate: its reference query's result changes materially when the
   faults are removed, or its likelihoods separate a true hypothesis from a distractor by at
   least MIN_LIKELIHOOD_RATIO. A signal that does neither cannot move the player's belief.

Then every hypothesis's family of worlds (`telemetry_gen.proving.worlds`: the same variant with that
hypothesis's faults in place of the real ones, on the player's traffic draw and on others) is
simulated too, and the truth on its other traffic draws:

4. every member of every distractor's family shows every symptom the page states (`briefed`): a
   distractor the page already rules out is a strawman;
5. the truth on its other traffic draws shows the page too: a page that holds on one draw only is luck;
6. some signal query or settling query rules each distractor's whole family out (`telemetry_gen.proving.evidence`:
   on a reading a reader reads, beyond the spread between traffic draws): otherwise no player could rule
   it out and the incident cannot be solved;
7. the page's own measurements (each briefed symptom's query, as the page states it) rule out no
   distractor: every world of its family shows the page, so measuring the page is no evidence against it;
8. in an incident of difficulty 2 or more, the editor's starter snippets (`incidents.snippets`) together
   do not rule out every distractor: the snippets teach the dialect, they must not solve the incident.

Databases go through the build cache (`telemetry_gen.cache`), so the game reuses the worlds a
validation built. Queries run read-only with file access disabled, each under a time limit.

`telemetry_gen.proving.pool.prove_many` proves many (file, seed) tasks in worker processes (`servedrill
validate --deep` proves the seed policy's sample, incidents.variants.PROOF_SEEDS); `proof_pool.located`
adds each failure's file:line; the checks' results are telemetry_gen.proving.report's, the pure comparisons
telemetry_gen.proving.result_diff's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb

from incidents.claims import evaluate_expectation, evaluate_symptom, symptom_sql
from incidents.snippets import snippets
from incidents.spec import Incident, Signal
from telemetry_gen.cache import ensure_database
from telemetry_gen.proving.evidence import FAILED, ROW_CAP, Shown, cite, describe_reading, ruling, shown
from telemetry_gen.proving.mitigation import check_mitigation
from telemetry_gen.proving.report import (
    MIN_LIKELIHOOD_RATIO,
    ClaimCheck,
    DiscriminationCheck,
    ExpectationCheck,
    ProofReport,
    WorldCheck,
    claim_margin,
)
from telemetry_gen.proving.result_diff import MATERIAL_CHANGE, likelihood_separation, result_difference
from telemetry_gen.proving.thresholds import label_columns, made_columns, threshold_reason
from telemetry_gen.proving.worlds import RIVAL_MEMBERS, TRUTH, build_world, family_names, rivals
from telemetry_gen.runner import Progress

__all__ = [
    "MATERIAL_CHANGE",
    "MIN_LIKELIHOOD_RATIO",
    "ClaimCheck",
    "DiscriminationCheck",
    "ExpectationCheck",
    "ProofReport",
    "WorldCheck",
    "check_databases",
    "check_worlds",
    "claim_margin",
    "likelihood_separation",
    "prove",
    "reference_queries",
    "result_difference",
]

MAX_COMPARED_ROWS = 10_000
"""Rows of each reference query result compared between the two runs."""
QUERY_TIMEOUT_S = 60.0
"""Wall-clock seconds one check query may run before it is interrupted."""




@contextlib.contextmanager
def _deadline(con: duckdb.DuckDBPyConnection, seconds: float) -> Iterator[None]:
    """Interrupt whatever `con` runs after `seconds` (the query then fails with an interrupt error)."""
    timer = threading.Timer(seconds, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    with _deadline(con, QUERY_TIMEOUT_S):
        con.execute(sql)
        columns = [d[0] for d in con.description or []]
        rows = con.fetchmany(MAX_COMPARED_ROWS)
    return columns, rows


def _discrimination(
    signal: Signal, incident: Incident, con: duckdb.DuckDBPyConnection, ablation: duckdb.DuckDBPyConnection
) -> DiscriminationCheck:
    separation, pair = likelihood_separation(signal, incident)
    try:
        cols_a, rows_a = _fetch(con, signal.query)
        cols_b, rows_b = _fetch(ablation, signal.query)
    except duckdb.Error as exc:
        error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return DiscriminationCheck(signal.id, None, separation, pair, query_error=error)
    change = result_difference(cols_a, rows_a, cols_b, rows_b)
    return DiscriminationCheck(signal.id, change, separation, pair)


def _open(path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(path), read_only=True, config={"enable_external_access": False})


FAILED_START_NOTE_CHARS = 200
"""How much of the engine's start-up error a note quotes."""


def failed_starts(con: duckdb.DuckDBPyConnection) -> str | None:
    """A note when some replica's engine failed to start in this run (a config change whose KV cache cannot
    hold one request of max_model_len, say): the engine then comes back on its old config, so the change
    the author wrote had no effect there. None when every start succeeded."""
    with _deadline(con, QUERY_TIMEOUT_S):
        rows = con.execute(
            "SELECT replica, count(*) FROM events WHERE kind = 'crash' AND detail = 'engine failed to start' "
            "GROUP BY replica ORDER BY replica").fetchall()
        if not rows:
            return None
        first = con.execute(
            "SELECT message FROM logs WHERE level = 'ERROR' AND message LIKE 'ValueError:%' "
            "ORDER BY ts LIMIT 1").fetchone()
    where = ", ".join(f"{replica} {n}x" for replica, n in rows)
    error = str(first[0]) if first else "no error logged"
    if len(error) > FAILED_START_NOTE_CHARS:
        error = error[: FAILED_START_NOTE_CHARS - 3] + "..."
    return (f"note: in this run the engine failed to start ({where}) and came back on its old config, so the "
            f"change did not take effect there: {error}; `servedrill calc` shows the KV cache a config leaves")


def check_databases(
    incident: Incident, con: duckdb.DuckDBPyConnection, ablation: duckdb.DuckDBPyConnection
) -> tuple[list[ClaimCheck], list[ExpectationCheck], list[DiscriminationCheck]]:
    """Run every check on two open databases: `con` built with the faults, `ablation` without."""
    t0 = incident.window.start
    claims = []
    for s in incident.symptoms:
        with _deadline(con, QUERY_TIMEOUT_S):
            fault_result = evaluate_symptom(con, s, t0)
        with _deadline(ablation, QUERY_TIMEOUT_S):
            ablation_result = evaluate_symptom(ablation, s, t0)
        claims.append(ClaimCheck(s.id, s.claim, s.compare, fault_result, ablation_result, s.context))
    if any(not c.with_faults.holds for c in claims):  # only a failing claim is explained: no extra queries
        note = failed_starts(con)
        claims = [dataclasses.replace(c, note=note) for c in claims]
    expectations = []
    for sig in incident.signals:
        with _deadline(con, QUERY_TIMEOUT_S):
            expectations.append(ExpectationCheck(sig.id, evaluate_expectation(con, sig)))
    discrimination = [_discrimination(sig, incident, con, ablation) for sig in incident.signals]
    return claims, expectations, discrimination


def reference_queries(incident: Incident) -> list[tuple[str, str]]:
    """(name, SQL) of the queries an author offers as evidence: each signal's query, then the
    debrief's settling queries (S1, S2, ...)."""
    out = [(f"signal {sig.id}", sig.query) for sig in incident.signals]
    out += [(f"settling query S{i}", sql) for i, sql in enumerate(incident.debrief.settling_queries, start=1)]
    return out


def _shown_result(con: duckdb.DuckDBPyConnection, sql: str, incident: Incident) -> Shown:
    try:
        with _deadline(con, QUERY_TIMEOUT_S):
            cols, rows = _fetch(con, sql)
    except duckdb.Error:
        return FAILED
    return shown(cols, rows[:ROW_CAP], incident.window.start, truncated=len(rows) > ROW_CAP)


def _missing_symptoms(con: duckdb.DuckDBPyConnection, incident: Incident) -> list[tuple[str, str]]:
    out = []
    for sym in (s for s in incident.symptoms if s.briefed):
        with _deadline(con, QUERY_TIMEOUT_S):
            result = evaluate_symptom(con, sym, incident.window.start)
        if not result.holds:
            out.append((sym.id, result.message))
    return out


def check_worlds(incident: Incident, seed: int, truth_db: Path,
                 progress: Progress | None = None) -> list[WorldCheck]:
    """Build every member of every hypothesis's family (`telemetry_gen.proving.worlds`), then check that the truth's
    other traffic draws and every member of every distractor's family show the page, and that some
    reference query rules each distractor's whole family out (see the module docstring). Never raises for
    a world that fails to build. One WorldCheck per distractor (its members' problems named by member),
    then one per other draw of the truth."""
    say = progress or (lambda f, s: None)
    names = rivals(incident)
    t0 = incident.window.start
    reference = reference_queries(incident)
    # the page's claims as the page states them; re-measured per 5 minutes over the whole fleet a symptom
    # is another reading (a fleet's median that stays flat can rightly rule out a cause that would move it)
    page = [(f"symptom {sym.id}", symptom_sql(sym, t0)) for sym in incident.symptoms if sym.briefed]
    starter = [(f"snippet {sn.key}", sn.sql) for sn in snippets(t0, incident.window.duration_s)]
    queries = reference + page + starter
    kinds = ["reference"] * len(reference) + ["page"] * len(page) + ["snippet"] * len(starter)
    # a query whose figure the author's own constants make is read as nothing, as a player's is
    made = [threshold_reason(sql) is not None for _, sql in queries]
    span = float(incident.window.duration_s)
    draws = family_names(incident, TRUTH)[1:]
    total = len(draws) + sum(len(family_names(incident, n)) for n in names)
    done = 0

    def shown_on(db: Path) -> tuple[list[tuple[str, str]], list[Shown]]:
        with contextlib.closing(_open(db)) as con:
            return _missing_symptoms(con, incident), [_shown_result(con, sql, incident) for _, sql in queries]

    with contextlib.closing(_open(truth_db)) as truth_con:
        truth_seen = [_shown_result(truth_con, sql, incident) for _, sql in queries]
    computed = [made_columns(sql, seen.columns) for (_, sql), seen in zip(queries, truth_seen, strict=True)]
    labels = [label_columns(sql, seen.columns) for (_, sql), seen in zip(queries, truth_seen, strict=True)]
    draw_checks: list[WorldCheck] = []
    draw_seen: list[list[Shown]] = []
    for name in draws:
        say(done / total, f"world {name}")
        done += 1
        try:
            missing, seen = shown_on(Path(build_world(incident, seed, name).path))
        except Exception as exc:
            draw_checks.append(WorldCheck(name, error=repr(exc), kind="draw"))
            continue
        draw_seen.append(seen)
        draw_checks.append(WorldCheck(name, tuple(missing), kind="draw", missing_in=(name,) if missing else ()))
    checks = []
    snippet_readings: list[tuple[str, str]] = []
    for name in names:
        family: list[list[Shown]] = []
        missing_all: list[tuple[str, str]] = []
        missing_in: list[str] = []
        error = note = None
        for member in family_names(incident, name):
            say(done / total, f"world {member}")
            done += 1
            try:
                db = Path(build_world(incident, seed, member).path)
                missing, seen = shown_on(db)
            except Exception as exc:
                error = f"{member}: {exc!r}"
                break
            family.append(seen)
            tag = "" if member == name else f" on {member}"
            missing_all += [(sid, f"{message}{tag}") for sid, message in missing]
            missing_in += [member] if missing else []
            if missing and note is None:
                with contextlib.closing(_open(db)) as con:
                    note = failed_starts(con)
        if error is not None:
            checks.append(WorldCheck(name, error=error))
            continue
        first: dict[str, tuple[str, str]] = {}  # per kind of query: the first that rules the family out
        for i, (label, _) in enumerate(queries):
            if kinds[i] in first or made[i]:
                continue
            readings = ruling(truth_seen[i], [d[i] for d in draw_seen], [m[i] for m in family], span_s=span,
                              draws=RIVAL_MEMBERS, made=computed[i], labels=labels[i])
            if readings:
                first[kinds[i]] = (label, describe_reading(cite(readings, truth_seen[i]), t0))
        separated_by, difference = first.get("reference", (None, None))
        if separated_by is None and note is None:
            with contextlib.closing(_open(Path(build_world(incident, seed, name).path))) as con:
                note = failed_starts(con)
        page_reading = first.get("page")
        checks.append(WorldCheck(name, tuple(missing_all), separated_by, difference, note=note,
                                 missing_in=tuple(missing_in),
                                 page_rules_out=f"{page_reading[0]}: {page_reading[1]}" if page_reading else None))
        if "snippet" in first:
            snippet_readings.append((name, f"{first['snippet'][0]}: {first['snippet'][1]}"))
    if incident.difficulty >= 2 and names:
        settled = {h for h, _ in snippet_readings}
        if len(settled) == len(names):
            checks.append(WorldCheck("starter snippets", kind="snippets", settled_by=tuple(snippet_readings)))
        else:  # said too, so that an author sees the check ran
            checks.append(WorldCheck("starter snippets", kind="snippets",
                                     left_open=tuple(n for n in names if n not in settled)))
    return checks + draw_checks


def prove(
    incident: Incident,
    seed: int = 0,
    *,
    progress: Progress | None = None,
    variant: Mapping[str, Any] | None = None,
    inspect: Callable[[Path], list[str]] | None = None,
    worlds: bool = True,
) -> ProofReport:
    """Simulate `incident` with and without its faults (same seed) and check its claims; never raises
    for a problem in the incident (a failing simulation becomes `error`).

    An incident with variables must come resolved for `seed` (`incidents.loader.load_variant`);
    `variant` (the values drawn) only labels the report. progress(fraction 0..1, stage) is called
    as the two simulations and the checks advance. `inspect(fault_db)`, if given, runs while the
    database with the faults exists and returns problems found in it (the game layer checks there that
    players' queries observe what the signals say they reveal). `worlds=False` checks the claims only (two
    simulations instead of two plus one per distractor and the noise world).
    """
    say = progress or (lambda f, s: None)
    report = ProofReport(incident.id, seed, dict(variant or {}), worlds_checked=worlds)
    stage = "simulation with the faults"
    try:
        fault = ensure_database(incident, seed, progress=lambda f, s: say(0.3 * f, f"faults: {s}"))
        report.fault_wall_s, report.fault_digest = fault.build_s, fault.digest
        stage = "simulation without the faults"
        ablation = ensure_database(incident, seed, ablate=True,
                                   progress=lambda f, s: say(0.3 + 0.2 * f, f"ablation: {s}"))
        report.ablation_wall_s, report.ablation_digest = ablation.build_s, ablation.digest
        stage = "checking the claims"
        say(0.5, "checking")
        started = time.perf_counter()
        con, abl = _open(Path(fault.path)), _open(Path(ablation.path))
        try:
            report.claims, report.expectations, report.discrimination = check_databases(incident, con, abl)
        finally:
            con.close()
            abl.close()
        if inspect is not None:
            stage = "inspecting the fault database"
            report.inspection = list(inspect(Path(fault.path)))
            report.inspected = True
        report.check_wall_s = time.perf_counter() - started
        if not worlds:
            say(1.0, "done")
            return report
        stage = "simulating the hypothesis worlds"
        started = time.perf_counter()
        report.worlds = check_worlds(incident, seed, Path(fault.path),
                                     progress=lambda f, s: say(0.55 + 0.45 * f, s))
        report.notes = [f"{label}: its query reads as nothing to a player ({reason}), so it rules no world out"
                        for label, sql in reference_queries(incident)
                        if (reason := threshold_reason(sql)) is not None]
        report.worlds_wall_s = time.perf_counter() - started
        if incident.mitigation is not None:
            stage = "simulating the mitigation's action lists"
            say(0.97, "mitigation")
            report.mitigation = check_mitigation(incident, seed)
    except Exception as exc:
        report.error = f"{stage} failed: {exc!r}"
    say(1.0, "done")
    return report
