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

Then every hypothesis's world (`telemetry_gen.worlds`: the same seed with that hypothesis's faults
in place of the real ones) is simulated too, with a second seed of the truth for noise:

4. every distractor world shows every symptom the page states (`briefed`): a distractor the page
   already rules out is a strawman;
5. every distractor world differs materially from the truth (`telemetry_gen.evidence`: beyond the
   seed-to-seed noise) in the result of some signal query or settling query: otherwise no player
   could rule it out and the incident cannot be solved.

Databases go through the build cache (`telemetry_gen.cache`), so the game reuses the worlds a
validation built. Queries run read-only with file access disabled, each under a time limit.

`prove_many` proves many (file, seed) tasks in worker processes (`servedrill validate --deep` proves
the seed policy's sample, incidents.variants.PROOF_SEEDS); `located` adds each failure's file:line.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from incidents.claims import ClaimResult, evaluate_expectation, evaluate_symptom
from incidents.loader import IncidentError, SourceMap, load_variant, source_map
from incidents.spec import Incident, Signal
from incidents.variants import describe
from telemetry_gen.cache import ensure_database
from telemetry_gen.evidence import Shown, describe_feature, separating_features, shown
from telemetry_gen.runner import Progress
from telemetry_gen.worlds import NOISE, build_world, rivals

MATERIAL_CHANGE = 0.10
"""Relative change of a numeric cell (|a - b| / max(|a|, |b|)) that counts as material."""
MIN_LIKELIHOOD_RATIO = 3.0
"""L(true) / L(distractor), either way round, that makes a signal discriminating on its own."""
MAX_COMPARED_ROWS = 10_000
"""Rows of each reference query result compared between the two runs."""
QUERY_TIMEOUT_S = 60.0
"""Wall-clock seconds one check query may run before it is interrupted."""

_RATIO_SLACK = 1e-9  # 0.3 / 0.1 is 2.9999999999999996 in floating point
_SIGNAL_PREFIX = re.compile(r"^signal (\S+?):? ")


# ---------------------------------------------------------------- results


def claim_margin(result: ClaimResult, compare: str) -> float | None:
    """How far the observed quantity is on the passing side of the threshold (negative: short by that much).

    Same unit as the claim's value (a ratio, a difference, or the aggregate itself). None when
    the claim could not be evaluated.
    """
    observed, required = result.observed, result.required
    if not isinstance(observed, int | float) or not isinstance(required, int | float):
        return None
    if isinstance(observed, bool) or isinstance(required, bool):
        return None
    gap = float(observed) - float(required)
    return gap if compare.endswith("at_least") else -gap


def _num(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else str(x)


Loc = tuple[str | int, ...]
"""Where a check's subject sits in the incident file, list items named by id: ("symptoms", "ttft-up")."""


@dataclass(frozen=True)
class Failure:
    """One failed check: what kind of check, its subject in the file (for file:line) and why it failed."""

    check: str  # claim | expectation | discrimination | world | inspection | error
    subject: Loc
    problem: str


@dataclass(frozen=True)
class ClaimCheck:
    """One symptom evaluated on the fault run and on the ablation.

    An evidence claim (the default) must hold with the faults and not without them. A context claim
    (`context: true`: no crash before the patch, clocks nominal) states a fact of the situation, not an
    effect of the fault, so it must hold on both runs.
    """

    symptom_id: str
    claim: str
    compare: str
    with_faults: ClaimResult
    without_faults: ClaimResult
    context: bool = False

    @property
    def ok(self) -> bool:
        return self.with_faults.holds and self.without_faults.holds == self.context

    @property
    def subject(self) -> Loc:
        return ("symptoms", self.symptom_id)

    @property
    def problem(self) -> str | None:
        """Why the check fails, with observed against required; None when it passes."""
        kind = "context symptom" if self.context else "symptom"
        if not self.with_faults.holds:
            margin = claim_margin(self.with_faults, self.compare)
            short = f" (short by {_num(-margin)})" if margin is not None else ""
            head = f"{kind} {self.symptom_id} does not hold with the faults{short}"
            return f"{head}: {self.with_faults.message}"
        if self.context and not self.without_faults.holds:
            return (
                f"context symptom {self.symptom_id} does not hold without the faults, so it is an effect of the "
                f"fault, not context: {self.without_faults.message} (hint: remove `context: true` to claim it as "
                "evidence, or state what holds either way)"
            )
        if not self.context and self.without_faults.holds:
            return (
                f"symptom {self.symptom_id} also holds without the faults, so the fault is not what makes it "
                f"true: {self.without_faults.message} (hint: if the page states it as a fact of the situation "
                "rather than an effect, mark it `context: true`)"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        def side(r: ClaimResult) -> dict[str, Any]:
            return {
                "holds": r.holds,
                "observed": r.observed,
                "required": r.required,
                "margin": claim_margin(r, self.compare),
                "a_value": r.a_value,
                "b_value": r.b_value,
                "message": r.message,
            }

        return {
            "symptom": self.symptom_id,
            "claim": self.claim,
            "context": self.context,
            "ok": self.ok,
            "problem": self.problem,
            "with_faults": side(self.with_faults),
            "without_faults": side(self.without_faults),
        }


@dataclass(frozen=True)
class ExpectationCheck:
    """A signal's `expect` evaluated on its reference query in the fault run."""

    signal_id: str
    result: ClaimResult

    @property
    def ok(self) -> bool:
        return self.result.holds

    @property
    def subject(self) -> Loc:
        return ("signals", self.signal_id, "expect")

    @property
    def problem(self) -> str | None:
        if self.ok:
            return None
        detail = self.result.message.removeprefix(f"signal {self.signal_id}: ")
        return f"signal {self.signal_id} expectation fails: {detail}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal_id,
            "ok": self.ok,
            "observed": self.result.observed,
            "required": self.result.required,
            "message": self.result.message,
        }


@dataclass(frozen=True)
class DiscriminationCheck:
    """Whether a signal can tell the true cause from the distractors.

    data_change: the first material difference between the reference query's results with and
    without the faults, None when they agree (or the query failed: see query_error).
    separation: max over (true, distractor) pairs of |ln(L_true / L_distractor)|, nats; inf
    when exactly one of a pair is 0. pair: the (true, distractor) ids reaching it.
    """

    signal_id: str
    data_change: str | None
    separation: float
    pair: tuple[str, str] | None
    query_error: str | None = None

    @property
    def subject(self) -> Loc:
        return ("signals", self.signal_id)

    @property
    def by_likelihood(self) -> bool:
        return self.separation >= math.log(MIN_LIKELIHOOD_RATIO) - _RATIO_SLACK

    @property
    def ok(self) -> bool:
        return self.data_change is not None or self.by_likelihood

    @property
    def problem(self) -> str | None:
        if self.ok:
            return None
        data = "same result with and without the faults"
        if self.query_error:
            data = f"query failed ({self.query_error})"
        return f"signal {self.signal_id} does not discriminate: {data}, and {self._likelihood_text()}"

    def _likelihood_text(self) -> str:
        if self.pair is None:
            return "no true/distractor pair of hypotheses to compare"
        ratio = math.exp(self.separation)
        return (
            f"its likelihoods separate {self.pair[0]} from {self.pair[1]} by {_num(ratio)}x at best "
            f"(need {_num(MIN_LIKELIHOOD_RATIO)}x)"
        )

    def reason(self) -> str:
        """Why the signal discriminates (or why not), one phrase."""
        if self.data_change is not None:
            return f"data changes without the faults: {self.data_change}"
        if self.by_likelihood:
            return self._likelihood_text()
        return self.problem or ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal_id,
            "ok": self.ok,
            "data_change": self.data_change,
            "query_error": self.query_error,
            "likelihood_ratio": math.exp(self.separation) if math.isfinite(self.separation) else None,
            "pair": list(self.pair) if self.pair else None,
            "reason": self.reason(),
        }


@dataclass(frozen=True)
class WorldCheck:
    """One distractor's world: which briefed symptoms it fails to show (strawman), and the first
    reference query (signal id or settling query Sn) whose result tells it from the truth."""

    hypothesis_id: str
    missing: tuple[tuple[str, str], ...] = ()  # (symptom id, message) of briefed claims it does not show
    separated_by: str | None = None
    difference: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.missing and self.separated_by is not None

    @property
    def problem(self) -> str | None:
        parts = [problem for _, problem in self.parts()]
        return "; ".join(parts) if parts else None

    def parts(self) -> list[tuple[Loc, str]]:
        """(subject, problem) of each thing wrong with this world: a strawman points at the world, an
        unsolvable distractor at the hypothesis (the fix is a signal that tells it apart)."""
        world: Loc = ("hypotheses", self.hypothesis_id, "world")
        if self.error:
            return [(world, f"hypothesis {self.hypothesis_id}: its world failed to build: {self.error}")]
        parts = []
        for sid, message in self.missing:
            parts.append((world, f"hypothesis {self.hypothesis_id} is a strawman: its world does not show briefed "
                          f"symptom {sid} ({message}) (hint: make its world reproduce the page, or mark the symptom "
                          "briefed: false if the page does not state it)"))
        if self.separated_by is None:
            parts.append((("hypotheses", self.hypothesis_id),
                          f"hypothesis {self.hypothesis_id} cannot be ruled out: no signal or settling query gives a "
                          "result on its world that differs from the truth beyond seed-to-seed noise (hint: add a "
                          "signal whose query shows what only the true cause does)"))
        return parts

    def to_dict(self) -> dict[str, Any]:
        return {"hypothesis": self.hypothesis_id, "ok": self.ok, "missing": [list(m) for m in self.missing],
                "separated_by": self.separated_by, "difference": self.difference, "error": self.error,
                "problem": self.problem}


@dataclass
class ProofReport:
    """Everything `prove` found for one incident and seed. Times are wall-clock seconds.

    ok is True only when error is None and every claim, expectation and discrimination
    check passes. variant: what the incident's variables drew for this seed ({} when fixed).
    """

    incident_id: str
    seed: int
    variant: dict[str, Any] = field(default_factory=dict)
    claims: list[ClaimCheck] = field(default_factory=list)
    expectations: list[ExpectationCheck] = field(default_factory=list)
    discrimination: list[DiscriminationCheck] = field(default_factory=list)
    worlds: list[WorldCheck] = field(default_factory=list)
    worlds_wall_s: float | None = None
    fault_wall_s: float | None = None
    ablation_wall_s: float | None = None
    check_wall_s: float | None = None
    error: str | None = None
    # what the caller's `inspect` of the fault database found wrong, and whether it ran
    inspection: list[str] = field(default_factory=list)
    inspected: bool = False
    worlds_checked: bool = True  # False: prove(worlds=False) checked the claims only

    @property
    def ok(self) -> bool:
        checks = [*self.claims, *self.expectations, *self.discrimination, *self.worlds]
        return self.error is None and not self.inspection and all(c.ok for c in checks)

    def problems(self) -> list[str]:
        """One line per failed check (or the error that stopped the proof)."""
        out = [self.error] if self.error else []
        checks = [*self.claims, *self.expectations, *self.discrimination, *self.worlds]
        return out + [c.problem for c in checks if c.problem] + list(self.inspection)

    def failures(self) -> list[Failure]:
        """Every failed check with its subject in the file, in report order (a world with several problems
        gives one Failure each)."""
        out = [Failure("error", (), self.error)] if self.error else []
        for c in self.claims:
            out += [Failure("claim", c.subject, c.problem)] if c.problem else []
        for e in self.expectations:
            out += [Failure("expectation", e.subject, e.problem)] if e.problem else []
        for d in self.discrimination:
            out += [Failure("discrimination", d.subject, d.problem)] if d.problem else []
        for w in self.worlds:
            out += [Failure("world", subject, problem) for subject, problem in w.parts()]
        for problem in self.inspection:
            # the game layer's lines start "signal <id>: ..."
            found = _SIGNAL_PREFIX.match(problem)
            out.append(Failure("inspection", ("signals", found.group(1)) if found else (), problem))
        return out

    def lines(self, where: Callable[[Loc], str] | None = None) -> list[str]:
        """A human-readable report: header, timings, one line per check (failures marked FAIL). `where`
        turns a check's subject into `file:line:column`, which then leads each FAIL line."""

        def fail(subject: Loc, problem: str | None) -> str:
            return f"  FAIL {where(subject)}: {problem}" if where is not None and subject else f"  FAIL {problem}"

        problems = self.problems()
        verdict = "ok" if self.ok else f"FAILED ({len(problems)} problem{'s' * (len(problems) != 1)})"
        out = [f"{self.incident_id} seed {self.seed}: {verdict}"]
        if self.variant:
            out.append(f"  variant: {describe(self.variant)}")
        timing = []
        if self.fault_wall_s is not None:
            timing.append(f"simulation with faults {self.fault_wall_s:.1f} s")
        if self.ablation_wall_s is not None:
            timing.append(f"without faults {self.ablation_wall_s:.1f} s")
        if self.check_wall_s is not None:
            timing.append(f"checks {self.check_wall_s:.1f} s")
        if self.worlds_wall_s is not None:
            timing.append(f"hypothesis worlds {self.worlds_wall_s:.1f} s")
        if timing:
            out.append("  wall time: " + ", ".join(timing))
        if self.error:
            out.append(f"  FAIL {self.error}")
        for c in self.claims:
            if c.ok:
                how = "holds with the faults and without (context)" if c.context else \
                    "holds with the faults, not without"
                out.append(f"  ok   symptom {c.symptom_id}: {how}")
                out.append(f"         with:    {c.with_faults.message}")
                out.append(f"         without: {c.without_faults.message}")
            else:
                out.append(fail(c.subject, c.problem))
        for e in self.expectations:
            out.append(f"  ok   {e.result.message}" if e.ok else fail(e.subject, e.problem))
        for d in self.discrimination:
            ok_line = f"  ok   signal {d.signal_id} discriminates: {d.reason()}"
            out.append(ok_line if d.ok else fail(d.subject, d.problem))
        for w in self.worlds:
            subject = w.parts()[0][0] if not w.ok and w.parts() else ()
            out.append(f"  ok   world of {w.hypothesis_id}: shows the page; {w.separated_by} tells it from the "
                       f"truth ({w.difference})" if w.ok else fail(subject, w.problem))
        if not self.worlds_checked and self.error is None:
            out.append("  --   hypothesis worlds not checked (claims only)")
        if self.inspected and not self.inspection:
            out.append("  ok   every signal's reference query, run as a player would, observes its signal")
        out.extend(fail(f.subject, f.problem) for f in self.failures() if f.check == "inspection")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "incident": self.incident_id,
            "seed": self.seed,
            "variant": dict(self.variant),
            "ok": self.ok,
            "error": self.error,
            "problems": self.problems(),
            "wall_s": {
                "faults": self.fault_wall_s,
                "ablation": self.ablation_wall_s,
                "checks": self.check_wall_s,
                "worlds": self.worlds_wall_s,
            },
            "claims": [c.to_dict() for c in self.claims],
            "expectations": [e.to_dict() for e in self.expectations],
            "discrimination": [d.to_dict() for d in self.discrimination],
            "worlds": [w.to_dict() for w in self.worlds],
            "worlds_checked": self.worlds_checked,
            "inspection": list(self.inspection),
            "failures": [{"check": f.check, "subject": list(f.subject), "problem": f.problem}
                         for f in self.failures()],
        }


# ---------------------------------------------------------------- pure comparisons


def likelihood_separation(signal: Signal, incident: Incident) -> tuple[float, tuple[str, str] | None]:
    """(max |ln(L_true / L_distractor)| over true x distractor hypotheses, the pair reaching it).

    Unlisted hypotheses get the spec's default likelihood. 0 against a positive likelihood is
    infinitely separating; two zeros do not separate. (0.0, None) when there is no pair.
    """
    trues = [h.id for h in incident.hypotheses if h.true]
    others = [h.id for h in incident.hypotheses if not h.true]
    best, pair = 0.0, None
    for t in trues:
        for d in others:
            lt, ld = signal.likelihood(t), signal.likelihood(d)
            if lt == ld:
                sep = 0.0
            elif lt == 0 or ld == 0:
                sep = math.inf
            else:
                sep = abs(math.log(lt / ld))
            if pair is None or sep > best:
                best, pair = sep, (t, d)
    return best, pair


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def _numeric_columns(n_cols: int, *tables: Sequence[tuple[Any, ...]]) -> list[bool]:
    numeric = [True] * n_cols
    seen = [False] * n_cols
    for rows in tables:
        for row in rows:
            for i, v in enumerate(row):
                if v is None:
                    continue
                seen[i] = True
                if not _is_number(v):
                    numeric[i] = False
    # an all-NULL column compares as a key: NULL against NULL is no change
    return [n and s for n, s in zip(numeric, seen, strict=True)]


def _cell_text(v: Any) -> str:
    return "NULL" if v is None else str(v)


def _shown(v: Any) -> str:
    return "NULL" if v is None else f"{float(v):.4g}"


def _sort_value(v: Any) -> float:
    if v is None:
        return -math.inf
    x = float(v)
    return -math.inf if math.isnan(x) else x


def _material(a: Any, b: Any, rel: float) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) != math.isnan(y)
    if x == y:
        return False
    return abs(x - y) / max(abs(x), abs(y)) > rel


def result_difference(
    columns: Sequence[str],
    with_faults: Sequence[tuple[Any, ...]],
    other_columns: Sequence[str],
    without_faults: Sequence[tuple[Any, ...]],
    rel: float = MATERIAL_CHANGE,
) -> str | None:
    """The first material difference between two query results, or None when they agree.

    Material: different columns, a different number of rows, a row whose non-numeric cells
    (strings, timestamps, ...) appear in only one result, or a numeric cell that changed by
    more than `rel` relative to the larger magnitude. Row order is ignored (rows are matched
    by their non-numeric cells, then by their numbers), so an unordered GROUP BY that comes
    back in another order is not a change.
    """
    if list(columns) != list(other_columns):
        return f"columns ({', '.join(columns)}) vs ({', '.join(other_columns)})"
    if len(with_faults) != len(without_faults):
        return f"{len(with_faults)} rows with the faults, {len(without_faults)} without"
    numeric = _numeric_columns(len(columns), with_faults, without_faults)
    key_idx = [i for i, n in enumerate(numeric) if not n]
    num_idx = [i for i, n in enumerate(numeric) if n]

    def split(row: tuple[Any, ...]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        return tuple(_cell_text(row[i]) for i in key_idx), tuple(row[i] for i in num_idx)

    def order(item: tuple[tuple[str, ...], tuple[Any, ...]]) -> tuple[Any, ...]:
        return item[0], tuple(_sort_value(v) for v in item[1])

    a = sorted((split(r) for r in with_faults), key=order)
    b = sorted((split(r) for r in without_faults), key=order)

    def where(key: tuple[str, ...]) -> str:
        text = ", ".join(f"{columns[i]}={k}" for i, k in zip(key_idx, key, strict=True))
        return text or "an all-numeric row"

    keys_a, keys_b = [k for k, _ in a], [k for k, _ in b]
    if keys_a != keys_b:
        set_a, set_b = set(keys_a), set(keys_b)
        only_a = [k for k in keys_a if k not in set_b]
        if only_a:
            return f"row with {where(only_a[0])} only with the faults"
        only_b = [k for k in keys_b if k not in set_a]
        if only_b:
            return f"row with {where(only_b[0])} only without the faults"
        return "the same rows occur a different number of times"
    for (key, xs), (_, ys) in zip(a, b, strict=True):
        for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if _material(x, y, rel):
                name = columns[num_idx[j]]
                change = ""
                if x is not None and y is not None and float(y) != 0:
                    change = f" ({(float(x) - float(y)) / abs(float(y)):+.0%})"
                at = f" in row {where(key)}" if key_idx else ""
                return f"{name} {_shown(x)} with the faults vs {_shown(y)} without{change}{at}"
    return None


# ---------------------------------------------------------------- running the checks


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


def _shown_result(con: duckdb.DuckDBPyConnection, sql: str, incident: Incident) -> Shown | None:
    try:
        with _deadline(con, QUERY_TIMEOUT_S):
            cols, rows = _fetch(con, sql)
    except duckdb.Error:
        return None
    return shown(cols, rows, incident.window.start)


def check_worlds(incident: Incident, seed: int, truth_db: Path,
                 progress: Progress | None = None) -> list[WorldCheck]:
    """Build every distractor's world and the noise world, then check each distractor shows the page and
    can be told from the truth (see the module docstring). Never raises for a world that fails to build."""
    say = progress or (lambda f, s: None)
    names = rivals(incident)
    briefed = [sym for sym in incident.symptoms if sym.briefed]
    t0 = incident.window.start
    say(0.0, "noise world")
    noise_db = Path(build_world(incident, seed, NOISE).path)
    queries = reference_queries(incident)
    with contextlib.closing(_open(truth_db)) as truth_con, contextlib.closing(_open(noise_db)) as noise_con:
        truth_seen = [_shown_result(truth_con, sql, incident) for _, sql in queries]
        noise_seen = [_shown_result(noise_con, sql, incident) for _, sql in queries]
    checks = []
    for i, name in enumerate(names):
        say((i + 1) / (len(names) + 1), f"world of {name}")
        try:
            db = Path(build_world(incident, seed, name).path)
        except Exception as exc:
            checks.append(WorldCheck(name, error=repr(exc)))
            continue
        with contextlib.closing(_open(db)) as con:
            missing = []
            for sym in briefed:
                with _deadline(con, QUERY_TIMEOUT_S):
                    result = evaluate_symptom(con, sym, t0)
                if not result.holds:
                    missing.append((sym.id, result.message))
            separated_by = difference = None
            for (label, sql), seen_t, seen_n in zip(queries, truth_seen, noise_seen, strict=True):
                if seen_t is None or seen_n is None or seen_t.empty:
                    continue
                seen_w = _shown_result(con, sql, incident)
                if seen_w is None:
                    continue
                features = separating_features(seen_t, seen_w, seen_n)
                if features:
                    separated_by, difference = label, describe_feature(features[0])
                    break
        checks.append(WorldCheck(name, tuple(missing), separated_by, difference))
    return checks


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
        report.fault_wall_s = fault.build_s
        stage = "simulation without the faults"
        ablation = ensure_database(incident, seed, ablate=True,
                                   progress=lambda f, s: say(0.3 + 0.2 * f, f"ablation: {s}"))
        report.ablation_wall_s = ablation.build_s
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
        report.worlds_wall_s = time.perf_counter() - started
    except Exception as exc:
        report.error = f"{stage} failed: {exc!r}"
    say(1.0, "done")
    return report


# ---------------------------------------------------------------- many seeds, many processes

Inspect = Callable[[Incident, Path], list[str]]
"""inspect(incident, fault database) -> problems: `prove`'s inspect hook, given the incident too so that a
worker process can call it (it must be a module-level function to travel to the worker)."""


@dataclass(frozen=True)
class ProofTask:
    """One incident file proved at one seed; `worlds` False checks the claims only."""

    path: str
    seed: int
    worlds: bool = True


def default_jobs() -> int:
    """Worker processes by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _position(where: SourceMap, loc: Loc) -> dict[str, Any]:
    pos = where.position(loc) if loc else None
    line, column = pos if pos else (0, 0)  # 0: the file as a whole, as in the loader's diagnostics
    return {"at": f"{where.path}:{line}:{column}" if pos else where.path, "line": line, "column": column}


def located(report: ProofReport, where: SourceMap) -> dict[str, Any]:
    """report.to_dict() plus `lines` (the text report, FAIL lines led by file:line:column) and `at`, `line`,
    `column` on every failure and every check, placed by the file's SourceMap."""
    run = report.to_dict()
    run["lines"] = report.lines(where=where.where)
    for f in run["failures"]:
        f.update(_position(where, tuple(f["subject"])))
    for c in run["claims"]:
        c.update(_position(where, ("symptoms", c["symptom"])))
    for e in run["expectations"]:
        e.update(_position(where, ("signals", e["signal"], "expect")))
    for d in run["discrimination"]:
        d.update(_position(where, ("signals", d["signal"])))
    for w in run["worlds"]:
        w.update(_position(where, ("hypotheses", w["hypothesis"])))
    return run


def prove_task(task: ProofTask, inspect: Inspect | None = None,
               progress: Progress | None = None) -> dict[str, Any]:
    """Load the variant of `task.seed` from its file and prove it: `located(report)`. Never raises: a variant
    that does not load or a proof that crashes becomes the run's `error`."""
    where = source_map(task.path)
    try:
        incident, variant = load_variant(task.path, task.seed)
    except IncidentError as exc:
        first = str(exc.diagnostics[0]) if exc.diagnostics else "could not load the incident"
        report = ProofReport(Path(task.path).stem, task.seed, error=f"the variant of seed {task.seed} does not "
                             f"load: {first}", worlds_checked=task.worlds)
        return located(report, where)
    except Exception as exc:
        report = ProofReport(Path(task.path).stem, task.seed, error=f"loading failed: {exc!r}")
        return located(report, where)
    check = None if inspect is None else (lambda db: inspect(incident, db))
    report = prove(incident, task.seed, progress=progress, variant=variant, inspect=check, worlds=task.worlds)
    return located(report, where)


POOL_RESTARTS = 2
"""Times `prove_many` starts a fresh pool for the tasks a dead worker process took down with it."""


def _failed_run(task: ProofTask, exc: BaseException) -> dict[str, Any]:
    hint = " (a script calling prove_many with jobs > 1 needs `if __name__ == '__main__':`)" \
        if isinstance(exc, BrokenProcessPool) else ""
    report = ProofReport(Path(task.path).stem, task.seed, error=f"the proof process failed: {exc!r}{hint}",
                         worlds_checked=task.worlds)
    return located(report, source_map(task.path))


def prove_many(tasks: Sequence[ProofTask], jobs: int = 1,
               inspect: Inspect | None = None) -> Iterator[tuple[ProofTask, dict[str, Any]]]:
    """Prove every task, `jobs` at a time in worker processes (1: one after the other in this process),
    yielding (task, run) as each finishes. The build cache is shared: workers never build the same
    database twice, and a later run reuses what this one built.

    A worker that dies (killed, out of memory) breaks its pool and every task still in it; those tasks
    go to a fresh pool, up to POOL_RESTARTS times, so one crash does not fail a whole library run."""
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield task, prove_task(task, inspect)
        return
    # spawn, not fork: the parent may hold DuckDB connections and threads a fork would copy mid-use
    context = multiprocessing.get_context("spawn")
    pending, restarts = list(tasks), 0
    while pending:
        again: list[ProofTask] = []
        with ProcessPoolExecutor(max_workers=min(jobs, len(pending)), mp_context=context) as pool:
            futures = {pool.submit(prove_task, task, inspect): task for task in pending}
            try:
                for future in as_completed(futures):
                    task = futures[future]
                    try:
                        run = future.result()
                    except BrokenProcessPool as exc:
                        if restarts < POOL_RESTARTS:
                            again.append(task)
                            continue
                        run = _failed_run(task, exc)
                    except Exception as exc:
                        run = _failed_run(task, exc)
                    yield task, run
            finally:
                for future in futures:
                    future.cancel()
        pending, restarts = again, restarts + 1
