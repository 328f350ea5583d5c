"""Incident variants: variables drawn per seed and substituted into the raw YAML tree.

An incident may declare `variables:` (name -> `{choice: [...]}`, `{range: [lo, hi], step: s}`
or `{replica: true}`). Anywhere else in the file, a string that is exactly `{{name}}` becomes
the drawn value with its type (an int stays an int), and `{{name}}` inside a longer string is
interpolated as text. Filters derive text from a value: `{{name|replica}}` -> "vllm-<n>",
`{{name|ts}}` -> the SQL timestamp text of t0 + value seconds, `{{name|hhmm}}` -> "HH:MM" of
that instant, `{{name|pct}}` -> a fraction as a percentage ("40%").

This works on plain data (dicts, lists, scalars) before any model validation, so the loader
can still point every problem at its file:line, and it needs neither pydantic nor DuckDB (the
TUI's picker can resolve a briefing with it). Keys are never substituted; `id` and
`variables` themselves are never substituted.

Declarations and draws live in incidents.variable_decls (re-exported here): each variable draws
from its own generator seeded by (incident id, seed, name), so the same (incident, seed) always
gives the same variant.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from incidents.variable_decls import (
    FLOAT_DIGITS,
    NAME_RE,
    PLACEHOLDER_RE,
    Loc,
    Problem,
    Variable,
    VariableKind,
    _did_you_mean,
    _has_placeholder,
    _number,
    declared_variables,
    draw,
    draw_order,
)

__all__ = [
    "FILTERS", "FLOAT_DIGITS", "NAME_RE", "PLACEHOLDER_RE", "PROOF_CATCH_PROBABILITY", "PROOF_CATCH_SHARE",
    "PROOF_SEEDS", "VALIDATION_SEEDS", "WORLD_PROOF_SEEDS", "Loc", "Problem", "Resolution", "Variable",
    "VariableKind", "apply_filter",
    "catch_probability", "declared_variables", "describe", "draw", "draw_order", "is_template", "proof_seeds",
    "resolve", "text_of",
]

FILTERS = ("replica", "ts", "hhmm", "pct")
VALIDATION_SEEDS = (0, 1, 2)
"""Seeds `servedrill validate` resolves a template with for the static check (structure, names, SQL)."""

PROOF_CATCH_SHARE = 1 / 20
"""The seed policy's target: a claim that fails on this share of the seeds players are dealt..."""
PROOF_CATCH_PROBABILITY = 0.95
"""...is caught by `validate --deep` with at least this probability."""
PROOF_SEEDS = 59
"""How many seeds `servedrill validate --deep` proves by default: 0 .. PROOF_SEEDS-1.

Players are dealt any seed in 0..9999 (`play --random`, game.cli.game_commands.DEAL_SEEDS), and a seed picks
both the variant (each variable's draw is seeded by sha256 of incident, seed and name) and the
simulated traffic (seeded by the seed), for fixed incidents too. Proving all 10,000 is out of reach
(minutes per seed), so the proof takes a sample. Seeds are hashed into independent draws, so the
first n seeds are as good a sample as n random ones, and stay reproducible ("incident X seed 6").
A claim that fails on a share p of the dealt seeds passes n sampled seeds with probability
(1 - p)^n; n = 59 is the smallest n with 1 - (19/20)^n >= 0.95 (0.9515; 58 gives 0.9489).
"""


WORLD_PROOF_SEEDS = 5
"""Seeds 0 .. WORLD_PROOF_SEEDS-1 on which `make prove` also proves every hypothesis world (it shows what
the page states, and some reference query rules it out) and records it; CI holds the records to it. A
world costs a simulation per distractor per seed, so the whole sample is left to `validate --deep`; five
seeds catch a world that misses the page on 1 seed in 3 with probability 0.87 (seed 0 alone: 0.33).
Worlds that passed seed 0 but missed later seeds were found this way (docs/authoring.md, "Seeds")."""


def proof_seeds(count: int = PROOF_SEEDS) -> tuple[int, ...]:
    """The first `count` seeds of the proof sample: what `validate --deep --seeds COUNT` proves."""
    return tuple(range(max(0, int(count))))


def catch_probability(count: int, share: float = PROOF_CATCH_SHARE) -> float:
    """Probability that proving `count` independent seeds meets at least one seed of a claim that fails
    on `share` of all seeds."""
    return 1.0 - (1.0 - share) ** max(0, count)

@dataclass
class Resolution:
    """One variant of an incident.

    data: the resolved tree (a new object; the input is left alone); `variables` is dropped from
    it when its declaration has problems, so the models do not report them a second time.
    values: the drawn value of each valid variable. problems: what is wrong with the variables
    or their uses. unresolved: locs of strings left with a placeholder in them (the loader
    silences other complaints about those values, which would only repeat the problem).
    """

    seed: int
    data: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    unresolved: list[Loc] = field(default_factory=list)


def is_template(raw: Any) -> bool:
    """Whether the raw incident declares variables or uses a placeholder anywhere (keys included)."""
    if not isinstance(raw, Mapping):
        return False
    return "variables" in raw or _has_placeholder(raw)


def _t0(raw: Mapping[str, Any]) -> datetime | None:
    """window.start as naive UTC, as the incident model stores it; None when it is not a literal timestamp."""
    window = raw.get("window")
    start = window.get("start") if isinstance(window, Mapping) else None
    if not isinstance(start, str) or "{{" in start:
        return None
    try:
        value = datetime.fromisoformat(start.strip())
    except ValueError:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def text_of(value: Any) -> str | None:
    """How a value reads inside a longer string; None for lists and mappings (they have no text form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return format(value, ".12g")
    if isinstance(value, int | str):
        return str(value)
    return None


def _instant(t0: datetime, seconds: float) -> datetime:
    return t0 + timedelta(seconds=float(seconds))


OFFSET_RE = re.compile(r"^([a-z_][a-z0-9_]*)\s*([+-])\s*(\d+(?:\.\d+)?)$")


def _split_offset(expression: str) -> tuple[str, float]:
    """`name` or `name + 480` / `name - 60` (seconds, or whatever unit the variable has): the variable
    and the offset to add. Ties two values together, e.g. a window that starts 8 minutes after a
    drawn fault time: `{{fault_at + 480|ts}}`."""
    found = OFFSET_RE.match(expression.strip())
    if found is None:
        return expression, 0.0
    amount = float(found.group(3))
    return found.group(1), amount if found.group(2) == "+" else -amount


def apply_filter(name: str, value: Any, t0: datetime | None) -> tuple[Any, str | None]:
    """(filtered value, None) or (None, why the filter cannot apply to this value)."""
    if name == "replica":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return f"vllm-{value}", None
        if isinstance(value, str) and re.fullmatch(r"vllm-\d+", value):
            return value, None
        return None, f"|replica needs a replica index, got {value!r}"
    if not _number(value):
        return None, f"|{name} needs a number, got {value!r}"
    if name == "pct":
        return f"{round(float(value) * 100, 1):g}%", None
    if t0 is None:
        return None, f"|{name} needs window.start to be a fixed timestamp"
    when = _instant(t0, value)
    if name == "hhmm":
        return when.strftime("%H:%M"), None
    return when.isoformat(sep=" "), None  # "ts": "2026-11-18 09:15:00" (microseconds only when present)


class _Substituter:
    def __init__(self, values: Mapping[str, Any], declared: set[str], t0: datetime | None) -> None:
        self.values = values
        self.declared = declared
        self.t0 = t0
        self.problems: list[Problem] = []
        self.unresolved: list[Loc] = []

    def walk(self, node: Any, loc: Loc) -> Any:
        if isinstance(node, str):
            return self.string(node, loc)
        if isinstance(node, Mapping):
            out = {}
            for key, value in node.items():
                if isinstance(key, str) and _has_placeholder(key):
                    self.problems.append(Problem((*loc, key), "variables are not substituted in keys",
                                                 "use the value side, or write the key out", on_key=True))
                out[key] = self.walk(value, (*loc, key))
            return out
        if isinstance(node, list):
            return [self.walk(v, (*loc, i)) for i, v in enumerate(node)]
        return node

    def one(self, match: re.Match[str], loc: Loc, seen: dict[str, int]) -> tuple[Any, bool]:
        """(value of one placeholder, ok)."""
        text = match.group(0)
        occurrence = seen.get(text, 0)
        seen[text] = occurrence + 1
        name, flt = match.group(1), match.group(2)
        name, offset = _split_offset(name)

        def fail(message: str, hint: str | None = None) -> tuple[Any, bool]:
            self.problems.append(Problem(loc, message, hint, text, occurrence))
            return None, False

        if name not in self.declared:
            if not self.declared:
                return fail(f"unknown variable '{name}' in {text}", "declare it under `variables:`")
            hint = _did_you_mean(name, sorted(self.declared)) or "variables: " + ", ".join(sorted(self.declared))
            return fail(f"unknown variable '{name}' in {text}", hint)
        if flt is not None and flt not in FILTERS:
            return fail(f"unknown filter '|{flt}' in {text}", _did_you_mean(flt, FILTERS) or
                        "filters: " + ", ".join(FILTERS))
        if name not in self.values:
            return None, False  # a broken declaration, reported where it is declared
        value = self.values[name]
        if offset:
            if not _number(value):
                return fail(f"{text}: an offset needs a number, got {value!r}")
            # an int stays an int under a whole offset (a time in seconds, a replica count)
            value = value + (int(offset) if isinstance(value, int) and offset.is_integer() else offset)
        if flt is None:
            return value, True
        result, why = apply_filter(flt, value, self.t0)
        if why is not None:
            return fail(f"{text}: {why}")
        return result, True

    def string(self, text: str, loc: Loc) -> Any:
        if "{{" not in text:
            return text
        matches = list(PLACEHOLDER_RE.finditer(text))
        if not matches:
            return text
        if loc == ("id",):
            self.problems.append(Problem(loc, "the id cannot use variables: it names the file and seeds the draw",
                                         placeholder=matches[0].group(0)))
            self.unresolved.append(loc)
            return text
        seen: dict[str, int] = {}
        whole = len(matches) == 1 and matches[0].group(0) == text.strip()
        if whole:
            value, ok = self.one(matches[0], loc, seen)
            if not ok:
                self.unresolved.append(loc)
                return text
            return value
        parts: list[str] = []
        last, ok_all = 0, True
        for match in matches:
            value, ok = self.one(match, loc, seen)
            shown = text_of(value) if ok else None
            if ok and shown is None:
                self.problems.append(Problem(loc, f"{match.group(0)} is a {type(value).__name__}; it can only stand "
                                             "alone as the whole value, not inside text", placeholder=match.group(0),
                                             occurrence=seen[match.group(0)] - 1))
            if shown is None:
                ok_all = False
                shown = match.group(0)
            parts += [text[last:match.start()], shown]
            last = match.end()
        parts.append(text[last:])
        if not ok_all:
            self.unresolved.append(loc)
            return text
        return "".join(parts)


def resolve(raw: Mapping[str, Any], seed: int, overrides: Mapping[str, Any] | None = None) -> Resolution:
    """The variant of a raw incident (the loader's plain data) for `seed`; `overrides` replace the draws of
    the variables they name (the cost check's extreme variants; a value need not be one a seed can draw).

    Never raises for a problem in the data: problems are returned with their locs. A fixed
    incident (no variables, no placeholders) resolves to an equal copy of itself.
    """
    variables, declared, problems = declared_variables(raw)
    raw_id = raw.get("id")
    incident_id = raw_id if isinstance(raw_id, str) else ""
    values = draw(variables, incident_id, seed) | {k: v for k, v in (overrides or {}).items() if k in variables}
    for name in variables:
        if name not in values:
            others = ", ".join(variables[name].other_than)
            problems.append(Problem(("variables", name, "other_than"), f"variables.{name}: no value is left once "
                                    f"those of {others} are taken", "give it more values than it must avoid"))
    sub = _Substituter(values, declared, _t0(raw))
    data: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "variables":
            if not problems:
                data[key] = copy.deepcopy(value)
            continue
        data[key] = sub.walk(value, (key,))
    return Resolution(int(seed), data, values, problems + sub.problems, sub.unresolved)


def numeric_extremes(raw: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """The smallest and largest value of each variable that draws numbers (a range, or a choice of numbers):
    replicas and texts are left out. Problems in the declarations are `resolve`'s to report."""
    variables, _, _ = declared_variables(raw)
    out: dict[str, tuple[float, float]] = {}
    for name, v in variables.items():
        if v.kind == "replica":
            continue
        values = v.values()
        if values is None:
            out[name] = (v.lo, v.hi)
        elif values and all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
            out[name] = (min(values), max(values))
    return out


def describe(values: Mapping[str, Any]) -> str:
    """`name=value, ...` for reports: what a variant drew."""
    shown = {k: text_of(v) for k, v in values.items()}
    return ", ".join(f"{k}={shown[k] if shown[k] is not None else repr(v)}" for k, v in values.items())
