"""What a deep validation found: one check per claim, expectation, signal and world, and the ProofReport that
holds them (its text lines, its JSON dict, its failures with where they sit in the incident file)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from incidents.claims import ClaimResult
from incidents.variants import describe

if TYPE_CHECKING:
    from telemetry_gen.proving.mitigation import MitigationCheck

MIN_LIKELIHOOD_RATIO = 3.0
"""L(true) / L(distractor), either way round, that makes a signal discriminating on its own."""

_RATIO_SLACK = 1e-9  # 0.3 / 0.1 is 2.9999999999999996 in floating point
_SIGNAL_PREFIX = re.compile(r"^signal (\S+?):? ")


def is_ceiling(message: str) -> bool:
    """Whether a failed claim's message (incidents.claims: '...; required OP VALUE') is of an upper bound
    ('required <= 0': nothing failed), which a stronger fault cannot mend."""
    return "required <" in message


def draw_fix(message: str) -> str:
    """How to make a briefed symptom that failed on another traffic draw hold on every draw: a ceiling
    broken on that draw was pushed over by the fault or the traffic."""
    if is_ceiling(message):
        return ("the draw went over the claim's ceiling: make the fault gentler where it pushes this measure up "
                "(a rollout that leaves no replica serving fails requests: give stagger_s more than a drain and "
                "restart_s), or the ceiling looser")
    return "make the fault stronger or the claim's threshold looser"


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
    side: str | None = None  # a claim's: "with" (fails with the faults) or "without" (wrong without them)
    worlds: tuple[str, ...] = ()  # a world check's: the worlds (family members, draws) that miss the page


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
    note: str | None = None  # what else went on in the run with the faults (a changed config that failed to start)

    @property
    def ok(self) -> bool:
        return self.with_faults.holds and self.without_faults.holds == self.context

    @property
    def subject(self) -> Loc:
        return ("symptoms", self.symptom_id)

    @property
    def failed_side(self) -> str | None:
        """"with" when the claim fails on the run with the faults, "without" when the fault-free run is what
        is wrong (it holds there, or a context claim does not), None when the check passes."""
        if not self.with_faults.holds:
            return "with"
        return None if self.ok else "without"

    @property
    def problem(self) -> str | None:
        """Why the check fails, with observed against required; None when it passes."""
        kind = "context symptom" if self.context else "symptom"
        if not self.with_faults.holds:
            margin = claim_margin(self.with_faults, self.compare)
            short = f" (short by {_num(-margin)})" if margin is not None else ""
            head = f"{kind} {self.symptom_id} does not hold with the faults{short}"
            return f"{head}: {self.with_faults.message}" + (f" ({self.note})" if self.note else "")
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
    note: str | None = None  # what else went on in the world (a changed config that failed to start)
    kind: str = "rival"  # "rival": a distractor's family; "draw": the truth on another traffic draw;
    # "snippets": whether the editor's starter snippets alone settle the incident
    missing_in: tuple[str, ...] = ()  # world names (telemetry_gen.proving.worlds) of the members that miss the page
    page_rules_out: str | None = None  # a measurement of the page that rules this family out, and how
    settled_by: tuple[tuple[str, str], ...] = ()  # kind "snippets": (distractor, snippet reading) for every one
    left_open: tuple[str, ...] = ()  # kind "snippets": the distractors the starter snippets leave open

    @property
    def ok(self) -> bool:
        if self.kind == "snippets":
            return not self.settled_by
        return (self.error is None and not self.missing and self.page_rules_out is None
                and (self.kind == "draw" or self.separated_by is not None))

    @property
    def problem(self) -> str | None:
        parts = [problem for _, problem in self.parts()]
        return "; ".join(parts) if parts else None

    def parts(self) -> list[tuple[Loc, str]]:
        """(subject, problem) of each thing wrong with this world: a strawman points at the world, an
        unsolvable distractor at the hypothesis (the fix is a signal that tells it apart)."""
        if self.kind == "snippets":
            if not self.settled_by:
                return []
            how = "; ".join(f"{h}: {reading}" for h, reading in self.settled_by)
            return [(("difficulty",), f"the starter snippets alone rule out every distractor ({how}): an "
                     "incident of difficulty 2 or more must need the player's own queries (hint: give the "
                     "distractors families that share what the snippets show, with members or keeps, or "
                     "lower the difficulty)")]
        if self.kind == "draw":
            where: Loc = ("faults",)
            if self.error:
                return [(where, f"the truth on traffic draw {self.hypothesis_id} failed to build: {self.error}")]
            return [(where, f"the truth on another traffic draw ({self.hypothesis_id}) does not show briefed symptom "
                     f"{sid} ({message}): the page holds by luck of this seed's traffic (hint: "
                     f"{draw_fix(message)})") for sid, message in self.missing]
        world: Loc = ("hypotheses", self.hypothesis_id, "world")
        if self.error:
            return [(world, f"hypothesis {self.hypothesis_id}: its world failed to build: {self.error}")]
        parts = []
        note = f" ({self.note})" if self.note else ""
        for sid, message in self.missing:
            parts.append((world, f"hypothesis {self.hypothesis_id} is a strawman: its world does not show briefed "
                          f"symptom {sid} ({message}){note} (hint: make its world reproduce the page, or mark the "
                          "symptom briefed: false if the page does not state it)"))
        if self.page_rules_out is not None:
            parts.append((world, f"the page's own measurement rules hypothesis {self.hypothesis_id} out "
                          f"({self.page_rules_out}), though every world of its family shows the page: measuring the "
                          "page is no evidence (hint: declare members that span the page's size, or state the "
                          "page by what every hypothesis shares)"))
        if self.separated_by is None:
            parts.append((("hypotheses", self.hypothesis_id),
                          f"hypothesis {self.hypothesis_id} cannot be ruled out: no signal or settling query shows "
                          f"a reading (a group against its peers, a series' shape, a row's presence) that every "
                          f"world of its family lacks{note} (hint: add a signal whose query shows what only the "
                          "true cause does)"))
        return parts

    def to_dict(self) -> dict[str, Any]:
        return {"hypothesis": self.hypothesis_id, "kind": self.kind, "ok": self.ok,
                "missing": [list(m) for m in self.missing],
                "separated_by": self.separated_by, "difference": self.difference, "error": self.error,
                "note": self.note, "page_rules_out": self.page_rules_out,
                "settled_by": [list(x) for x in self.settled_by], "left_open": list(self.left_open),
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
    # content digests of the telemetry with and without the faults (telemetry_gen.store.table_digest): what
    # a proof record (telemetry_gen.proving.record) ties its verdict to
    fault_digest: str | None = None
    ablation_digest: str | None = None
    # the mitigation section's action lists, checked with the worlds (telemetry_gen.proving.mitigation)
    mitigation: list[MitigationCheck] = field(default_factory=list)
    # what the author should know and nothing fails on: a reference query that reads as nothing to a
    # player (telemetry_gen.proving.thresholds), say
    notes: list[str] = field(default_factory=list)

    def _checks(self) -> list[ClaimCheck | ExpectationCheck | DiscriminationCheck | WorldCheck | MitigationCheck]:
        return [*self.claims, *self.expectations, *self.discrimination, *self.worlds, *self.mitigation]

    @property
    def ok(self) -> bool:
        return self.error is None and not self.inspection and all(c.ok for c in self._checks())

    def problems(self) -> list[str]:
        """One line per failed check (or the error that stopped the proof)."""
        out = [self.error] if self.error else []
        checks = self._checks()
        return out + [c.problem for c in checks if c.problem] + list(self.inspection)

    def failures(self) -> list[Failure]:
        """Every failed check with its subject in the file, in report order (a world with several problems
        gives one Failure each)."""
        out = [Failure("error", (), self.error)] if self.error else []
        for c in self.claims:
            out += [Failure("claim", c.subject, c.problem, side=c.failed_side)] if c.problem else []
        for e in self.expectations:
            out += [Failure("expectation", e.subject, e.problem)] if e.problem else []
        for d in self.discrimination:
            out += [Failure("discrimination", d.subject, d.problem)] if d.problem else []
        for w in self.worlds:
            missing = w.missing_in or ((w.hypothesis_id,) if w.missing else ())
            # the page's misses belong to the world entry (a strawman) or the draw; not ruled out, to the hypothesis
            out += [Failure("world", subject, problem, worlds=missing if subject[-1:] == ("world",) or w.kind == "draw"
                            else ()) for subject, problem in w.parts()]
        for m in self.mitigation:
            out += [Failure("mitigation", m.subject, m.problem)] if m.problem else []
        for problem in self.inspection:
            # the game layer's lines start "signal <id>: ..."
            found = _SIGNAL_PREFIX.match(problem)
            out.append(Failure("inspection", ("signals", found.group(1)) if found else (), problem))
        return out

    def lines(self, where: Callable[[Loc], str] | None = None,
              explain: Callable[[Loc, str], list[str]] | None = None) -> list[str]:
        """A human-readable report: header, timings, one line per check (failures marked FAIL). `where`
        turns a check's subject into `file:line:column`, which then leads each FAIL line; `explain(subject,
        problem)` gives lines to print under a FAIL line (the entries most likely at fault)."""

        def fail(subject: Loc, problem: str | None) -> list[str]:
            head = f"  FAIL {where(subject)}: {problem}" if where is not None and subject else f"  FAIL {problem}"
            return [head, *(explain(subject, problem) if explain is not None and problem else [])]

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
                out += fail(c.subject, c.problem)
        for e in self.expectations:
            out += [f"  ok   {e.result.message}"] if e.ok else fail(e.subject, e.problem)
        for d in self.discrimination:
            out += [f"  ok   signal {d.signal_id} discriminates: {d.reason()}"] if d.ok else fail(d.subject, d.problem)
        for w in self.worlds:
            if w.ok and w.kind == "draw":
                out.append(f"  ok   the truth on traffic draw {w.hypothesis_id} shows the page too")
            elif w.ok and w.kind == "snippets":
                out.append(f"  ok   the starter snippets leave {len(w.left_open)} distractor"
                           f"{'' if len(w.left_open) == 1 else 's'} open ({', '.join(w.left_open)}): a player "
                           "needs queries of their own")
            elif w.ok:
                out.append(f"  ok   world of {w.hypothesis_id}: every member shows the page; {w.separated_by} "
                           f"rules it out ({w.difference})")
            else:
                for subject, problem in w.parts():
                    out += fail(subject, problem)
        for m in self.mitigation:
            out += [f"  ok   {m.line()}"] if m.ok else fail(m.subject, m.problem)
        out += [f"  note {n}" for n in self.notes]
        if not self.worlds_checked and self.error is None:
            out.append("  --   hypothesis worlds not checked (claims only)")
        if self.inspected and not self.inspection:
            out.append("  ok   every signal's reference query, run as a player would, observes its signal")
        for f in self.failures():
            if f.check == "inspection":
                out += fail(f.subject, f.problem)
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
            "digests": {"faults": self.fault_digest, "ablation": self.ablation_digest},
            "inspection": list(self.inspection),
            "mitigation": [m.to_dict() for m in self.mitigation],
            "notes": list(self.notes),
            "failures": [{"check": f.check, "subject": list(f.subject), "problem": f.problem}
                         for f in self.failures()],
        }
