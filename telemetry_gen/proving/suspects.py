"""Which YAML entry a failed deep check most likely comes from: a claim names what broke, this names what
to edit.

- A claim, expectation or discrimination that fails on the truth's run, and the truth on another traffic
  draw that does not show the page: the fault entries (`faults[i]`), those active in the claim's window
  when there are several. The fault is too weak, too late or on the wrong replicas.
- A claim that is wrong without the faults (an evidence claim the fault-free run also shows): the noise
  entries active in its window, else the claim's threshold (`value`). A context claim the fault-free run
  does not show: the claim's `context` flag.
- A distractor's member that does not show the page: that member's entry, `world` for the world on either
  draw, `members[k]` for a declared member. A distractor nothing rules out: its `world` (it reads like the
  truth on every signal).

Subjects are telemetry_gen.proving.report Locs (list items named by id or index); proof_pool.located places
them in the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from incidents.spec import Incident
from telemetry_gen.proving.report import Failure, Loc, is_ceiling
from telemetry_gen.proving.worlds import RIVAL_MEMBERS, split_member


@dataclass(frozen=True)
class Suspect:
    """An entry of the incident file that likely causes a failure, and why."""

    subject: Loc
    why: str


def _span(start: float, end: float | None) -> tuple[float, float]:
    return start, end if end is not None else float("inf")


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _claim_window(incident: Incident, symptom_id: str) -> tuple[float, float] | None:
    sym = next((s for s in incident.symptoms if s.id == symptom_id), None)
    if sym is None or sym.a.window is None:
        return None
    return float(sym.a.window[0]), float(sym.a.window[1])


def _fault_suspects(incident: Incident, window: tuple[float, float] | None, why: str) -> list[Suspect]:
    entries = list(enumerate(incident.faults))
    if window is not None and len(entries) > 1:
        active = [(i, f) for i, f in entries if _overlaps(_span(f.at_s, f.until_s), window)]
        entries = active or entries
    return [Suspect(("faults", i), f"faults[{i}] ({f.kind} at {f.at_s:g} s) {why}") for i, f in entries]


def _noise_span(noise: object) -> tuple[float, float]:
    at = float(getattr(noise, "at_s", 0.0))
    duration = getattr(noise, "duration_s", None)
    return (at, at + float(duration)) if duration is not None else (at, at + 1.0)


def _without_suspects(incident: Incident, failure: Failure, symptom_id: str) -> list[Suspect]:
    sym = next((s for s in incident.symptoms if s.id == symptom_id), None)
    if sym is not None and sym.context:
        return [Suspect(("symptoms", symptom_id, "context"), "the fault-free run does not show it, so it is an "
                        "effect of the fault: claim it as evidence (drop `context: true`)")]
    window = _claim_window(incident, symptom_id) or (0.0, float(incident.window.duration_s))
    noisy = [Suspect(("noise", i), f"noise[{i}] ({n.kind} at {n.at_s:g} s) is on in the claim's window and may "
                     "produce it without the fault") for i, n in enumerate(incident.noise)
             if _overlaps(_noise_span(n), window)]
    return noisy or [Suspect(("symptoms", symptom_id, "value"), "the fault-free run passes this threshold too: "
                             "tighten it, or compare with a window before the fault (b)")]


def _member_suspects(hypothesis_id: str, worlds: tuple[str, ...]) -> list[Suspect]:
    out: dict[Loc, Suspect] = {}
    for name in worlds:
        _, member = split_member(name)
        if member < RIVAL_MEMBERS:
            loc: Loc = ("hypotheses", hypothesis_id, "world")
            why = f"the world ({name}) does not reproduce the page: make it stronger, or move it in time or replica"
        else:
            k = member - RIVAL_MEMBERS
            loc = ("hypotheses", hypothesis_id, "members", k)
            why = f"members[{k}] ({name}) does not reproduce the page: this form is outside what the page allows"
        out.setdefault(loc, Suspect(loc, why))
    return list(out.values())


def suspects(failure: Failure, incident: Incident) -> list[Suspect]:
    """The entries most likely at fault for `failure`, most likely first; [] when nothing better than the
    failure's own subject can be named (an error, an inspection, a signal's likelihoods)."""
    subject = failure.subject
    if failure.check == "claim" and len(subject) > 1:
        sid = str(subject[1])
        if failure.side == "without":
            return _without_suspects(incident, failure, sid)
        return _fault_suspects(incident, _claim_window(incident, sid),
                               "is what should make it true: too weak, too late or on the wrong replicas?")
    if failure.check == "expectation":
        return _fault_suspects(incident, None, "is what this signal should see: too weak or too short?")
    if failure.check == "discrimination" and "same result with and without" in failure.problem:
        return _fault_suspects(incident, None, "changes nothing this query reads")
    if failure.check == "world" and subject[:1] == ("faults",):
        fix = "make it gentler where it pushes the measure over the claim's ceiling" \
            if is_ceiling(failure.problem) else "make it stronger"
        return _fault_suspects(incident, None, f"shows the page on this seed's traffic only: {fix}")
    if failure.check == "world" and len(subject) > 1 and subject[0] == "hypotheses":
        hid = str(subject[1])
        if subject[-1:] == ("world",):
            return _member_suspects(hid, failure.worlds)
        return [Suspect(("hypotheses", hid, "world"), "reads like the truth on every signal and settling query: "
                        "give it a difference a reader can see, or add a signal that shows it")]
    return []
