"""Variable declarations of an incident and their draws: what `variables:` may say, how each form is
checked, and the per-seed draw (incidents.variants substitutes the drawn values into the file).

Drawing is deterministic: each variable has its own numpy Generator seeded from sha256 of
(incident id, seed, variable name), so the same (incident, seed) always gives the same variant,
and adding a variable does not change what the others draw. A variable with `other_than` is drawn
after the variables it names, over its values but theirs.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # numpy is imported where a draw needs it: the picker reads PLACEHOLDER_RE from here
    import numpy as np

Loc = tuple[str | int, ...]

PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}|]*?)\s*(?:\|\s*([^{}]*?)\s*)?\}\}")
NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
FLOAT_DIGITS = 4
"""Significant digits kept by a continuous float draw (a range of floats without a step)."""
_SPEC_KEYS = ("choice", "range", "step", "replica", "other_than")

VariableKind = Literal["choice", "range", "replica"]


@dataclass(frozen=True)
class Problem:
    """A problem with the variables of an incident, at `loc` (keys and indices into the raw data).

    placeholder/occurrence: the placeholder text at fault inside the string at loc, and how many
    identical placeholders precede it there, so the loader can point at its exact column.
    """

    loc: Loc
    message: str
    hint: str | None = None
    placeholder: str | None = None
    occurrence: int = 0
    on_key: bool = False


@dataclass(frozen=True)
class Variable:
    """One declared variable. For a range, `integer` says whether draws are ints (lo, hi and step
    all ints); `step` None means any value in [lo, hi] (ints: every int). `replicas` is the fleet
    size a replica variable draws an index below."""

    name: str
    kind: VariableKind
    choices: tuple[Any, ...] = ()
    lo: float = 0.0
    hi: float = 0.0
    step: float | None = None
    integer: bool = False
    replicas: int = 0
    other_than: tuple[str, ...] = ()

    def values(self) -> list[Any] | None:
        """Every value a draw can give, in order; None for a continuous float range."""
        if self.kind == "choice":
            return [copy.deepcopy(c) for c in self.choices]
        if self.kind == "replica":
            return list(range(self.replicas))
        if self.integer:
            step = int(self.step or 1)
            return list(range(int(self.lo), int(self.hi) + 1, step))
        if self.step is None:
            return None
        return [_stepped(self.lo, self.step, k) for k in range(_steps(self.lo, self.hi, self.step) + 1)]

    def draw_other_than(self, rng: np.random.Generator, taken: list[Any]) -> tuple[Any, bool]:
        """(one value uniformly over `values()` but those in `taken`, True), or (None, False) when none is left."""
        left = [v for v in self.values() or [] if v not in taken]
        if not left:
            return None, False
        return left[int(rng.integers(len(left)))], True

    def draw(self, rng: np.random.Generator) -> Any:
        """One value, uniformly over `values()` (or over [lo, hi] for a continuous range)."""
        if self.kind == "choice":
            return copy.deepcopy(self.choices[int(rng.integers(len(self.choices)))])
        if self.kind == "replica":
            return int(rng.integers(self.replicas))
        if self.integer:
            step = int(self.step or 1)
            return int(self.lo) + step * int(rng.integers((int(self.hi) - int(self.lo)) // step + 1))
        if self.step is not None:
            return _stepped(self.lo, self.step, int(rng.integers(_steps(self.lo, self.hi, self.step) + 1)))
        value = float(f"{rng.uniform(self.lo, self.hi):.{FLOAT_DIGITS}g}")
        return min(self.hi, max(self.lo, value))


def _steps(lo: float, hi: float, step: float) -> int:
    # 1e-9 absorbs float error: [0.3, 0.5] step 0.05 has 5 values, not 4
    return math.floor((hi - lo) / step + 1e-9)


def _stepped(lo: float, step: float, k: int) -> float:
    return round(lo + k * step, 10)



def _has_placeholder(node: Any) -> bool:
    if isinstance(node, str):
        return "{{" in node and PLACEHOLDER_RE.search(node) is not None
    if isinstance(node, Mapping):
        return any(_has_placeholder(k) or _has_placeholder(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_has_placeholder(v) for v in node)
    return False


def _did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _fleet_size(raw: Mapping[str, Any]) -> int | None:
    fleet = raw.get("fleet")
    n = fleet.get("replicas") if isinstance(fleet, Mapping) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None


def declared_variables(raw: Mapping[str, Any]) -> tuple[dict[str, Variable], set[str], list[Problem]]:
    """(valid variables by name, every declared name, problems with the declarations)."""
    section = raw.get("variables")
    if section is None:
        return {}, set(), []
    if not isinstance(section, Mapping):
        return {}, set(), [Problem(("variables",), "variables must be a mapping of name -> {choice|range|replica}",
                                   on_key=True)]
    out: dict[str, Variable] = {}
    problems: list[Problem] = []
    names = {str(k) for k in section}
    for name, spec in section.items():
        name = str(name)
        loc: Loc = ("variables", name)
        if not NAME_RE.match(name):
            problems.append(Problem(loc, f"variable name '{name}' is not a name",
                                    "lowercase letters, digits and '_', starting with a letter or '_'", on_key=True))
            continue
        variable, found = _declaration(name, spec, loc, raw)
        problems += found
        if variable is not None:
            out[name] = variable
    problems += _check_other_than(out, names)
    for name in [n for n, v in out.items() if any(o not in out for o in v.other_than)]:
        del out[name]  # it depends on a broken declaration, reported where that is declared
    return out, names, problems


def _check_other_than(variables: dict[str, Variable], names: set[str]) -> list[Problem]:
    """Unknown names and cycles among `other_than` references; a variable in a cycle is dropped."""
    problems: list[Problem] = []
    for name, v in list(variables.items()):
        for other in v.other_than:
            if other not in names:
                hint = _did_you_mean(other, sorted(names)) or "variables: " + ", ".join(sorted(names))
                problems.append(Problem(("variables", name, "other_than"), f"variables.{name}.other_than: unknown "
                                        f"variable '{other}'", hint))
                variables.pop(name, None)
            elif other == name:
                problems.append(Problem(("variables", name, "other_than"), f"variables.{name} cannot differ from "
                                        "itself"))
                variables.pop(name, None)
    try:
        draw_order(variables)
    except ValueError as exc:
        problems.append(Problem(("variables",), str(exc), "other_than references must not go round in a circle",
                                on_key=True))
        for name in str(exc).split(": ", 1)[1].split(" -> "):
            variables.pop(name, None)
    return problems


def draw_order(variables: Mapping[str, Variable]) -> list[str]:
    """Declaration order, but every variable after those it must differ from; ValueError names a cycle."""
    done: list[str] = []
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in done or name not in variables:
            return
        if name in visiting:
            cycle = [*visiting[visiting.index(name):], name]
            raise ValueError("variables refer to each other in a circle: " + " -> ".join(cycle))
        visiting.append(name)
        for other in variables[name].other_than:
            visit(other)
        visiting.pop()
        done.append(name)

    for name in variables:
        visit(name)
    return done


def _declaration(name: str, spec: Any, loc: Loc, raw: Mapping[str, Any]) -> tuple[Variable | None, list[Problem]]:
    forms = "{choice: [...]}, {range: [lo, hi], step: s} or {replica: true}"
    if not isinstance(spec, Mapping):
        return None, [Problem(loc, f"variables.{name}: expected {forms}")]
    problems = []
    for key in spec:
        if key not in _SPEC_KEYS:
            hint = _did_you_mean(str(key), _SPEC_KEYS) or "a variable has one of: choice, range, replica"
            problems.append(Problem((*loc, str(key)), f"variables.{name}: unknown field '{key}'", hint, on_key=True))
    kinds = [k for k in ("choice", "range", "replica") if k in spec]
    if len(kinds) != 1:
        what = "none" if not kinds else " and ".join(kinds)
        problems.append(Problem(loc, f"variables.{name}: give exactly one of choice, range, replica (found {what})",
                                forms, on_key=True))
        return None, problems
    if "step" in spec and kinds[0] != "range":
        problems.append(Problem((*loc, "step"), f"variables.{name}: step belongs to a range", on_key=True))
    other_than = spec.get("other_than", ())
    other_than = (other_than,) if isinstance(other_than, str) else other_than
    if not isinstance(other_than, list | tuple) or not all(isinstance(o, str) for o in other_than):
        problems.append(Problem((*loc, "other_than"), f"variables.{name}.other_than: expected a variable name or a "
                                "list of names"))
    elif other_than and kinds[0] == "range" and spec["range"] is not None and spec.get("step") is None and not all(
            isinstance(b, int) for b in _as_list(spec["range"])):
        problems.append(Problem((*loc, "other_than"), f"variables.{name}.other_than: a continuous float range "
                                "cannot leave values out", "give the range a step"))
    if problems:
        return None, problems
    variable, found = _declared_kind(name, spec, loc, raw, kinds[0])
    if variable is not None and other_than:
        variable = replace(variable, other_than=tuple(other_than))
    return variable, found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _declared_kind(name: str, spec: Mapping[str, Any], loc: Loc, raw: Mapping[str, Any], kind: str
                   ) -> tuple[Variable | None, list[Problem]]:
    if kind == "choice":
        choices = spec["choice"]
        if not isinstance(choices, list) or not choices:
            return None, [Problem((*loc, "choice"), f"variables.{name}.choice: expected a non-empty list of values")]
        if any(_has_placeholder(c) for c in choices):
            return None, [Problem((*loc, "choice"), f"variables.{name}.choice: a variable cannot use other variables")]
        return Variable(name, "choice", choices=tuple(choices)), []
    if kind == "replica":
        if spec["replica"] is not True:
            return None, [Problem((*loc, "replica"), f"variables.{name}.replica: write `replica: true`")]
        n = _fleet_size(raw)
        if n is None:
            return None, [Problem((*loc, "replica"), f"variables.{name}: a replica variable needs fleet.replicas "
                                  "to be a fixed number of replicas")]
        return Variable(name, "replica", replicas=n), []
    return _range(name, spec, loc)


def _range(name: str, spec: Mapping[str, Any], loc: Loc) -> tuple[Variable | None, list[Problem]]:
    bounds, step = spec["range"], spec.get("step")
    where = f"variables.{name}.range"
    if not isinstance(bounds, list) or len(bounds) != 2 or not all(_number(b) for b in bounds):
        return None, [Problem((*loc, "range"), f"{where}: expected [lo, hi], two numbers")]
    lo, hi = bounds
    if lo > hi:
        return None, [Problem((*loc, "range"), f"{where}: [{lo}, {hi}] is empty: lo is above hi",
                              f"write [{hi}, {lo}]")]
    if step is not None and (not _number(step) or step <= 0):
        return None, [Problem((*loc, "step"), f"variables.{name}.step: expected a number above 0, got {step!r}")]
    integer = all(isinstance(v, int) for v in (lo, hi, step if step is not None else 1))
    if step is not None:
        top = lo + _steps(lo, hi, step) * step
        if not math.isclose(top, hi, rel_tol=1e-9, abs_tol=1e-9):
            hint = f"hi is never drawn; the largest value is {top:g}"
            return None, [Problem((*loc, "step"), f"{where}: {hi:g} - {lo:g} is not a multiple of step {step:g}", hint)]
    return Variable(name, "range", lo=lo, hi=hi, step=step, integer=integer), []


def _rng(incident_id: str, seed: int, name: str) -> np.random.Generator:
    import numpy as np

    digest = hashlib.sha256(f"{incident_id}\x00{seed}\x00{name}".encode()).digest()
    return np.random.default_rng(np.frombuffer(digest, dtype=np.uint32))


def draw(variables: Mapping[str, Variable], incident_id: str, seed: int) -> dict[str, Any]:
    """The value of every variable for `seed`; a pure function of (incident_id, seed, name, declaration).

    A variable with `other_than` is drawn after those it names, uniformly over its values but theirs
    ("a different replica from $x"); one with no value left is missing from the result (see `resolve`)."""
    values: dict[str, Any] = {}
    for name in draw_order(variables):
        v = variables[name]
        rng = _rng(incident_id, int(seed), name)
        if not v.other_than:
            values[name] = v.draw(rng)
            continue
        value, ok = v.draw_other_than(rng, [values[o] for o in v.other_than if o in values])
        if ok:
            values[name] = value
    return {name: values[name] for name in variables if name in values}
