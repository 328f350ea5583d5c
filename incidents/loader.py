"""Load incident YAML files and report every problem with its line and column.

Whatever the input, the result is a list of `Diagnostic`s, never a traceback. The jobs are in modules of
their own: incidents.yaml_reader (hardened YAML reading with marks), incidents.pydantic_errors (model
errors located in the file), incidents.sql_checks (SQL bound against empty telemetry tables),
incidents.library (the library's files, ids and template). This module checks one text with them,
variants included, and is the public face: the names it imports from them are re-exported.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from incidents.diagnostics import Diagnostic, IncidentError, UnknownIncidentError
from incidents.library import LIBRARY_DIR, SCHEMA_COMMENT, TEMPLATE_PATH, find_incident, iter_library, render_template
from incidents.pydantic_errors import Locator
from incidents.spec import Incident, Issue, ReplayArrival, authoring_issues, cross_check, format_loc
from incidents.sql_checks import sql_issues
from incidents.traces import TraceProblem, read_trace, resolve_trace_path
from incidents.variants import VALIDATION_SEEDS, Problem, Resolution, describe, is_template, numeric_extremes, resolve
from incidents.yaml_reader import MAX_BYTES, ParsedYaml, parse_yaml, read_file

__all__ = [
    "LIBRARY_DIR",
    "MAX_BYTES",
    "SCHEMA_COMMENT",
    "TEMPLATE_PATH",
    "Diagnostic",
    "IncidentError",
    "SourceMap",
    "UnknownIncidentError",
    "check_incident_file",
    "check_incident_text",
    "find_incident",
    "has_variables",
    "iter_library",
    "load_incident",
    "load_incident_text",
    "load_variant",
    "render_template",
    "source_map",
]


@dataclass
class _Analysis:
    """What checking one text found. values: what the variables drew for the returned incident's seed."""

    incident: Incident | None
    diagnostics: list[Diagnostic]
    values: dict[str, Any] = field(default_factory=dict)
    template: bool = False


def _check_tree(parsed: ParsedYaml, data: dict[str, Any], name: str,
                authoring: bool = False) -> tuple[Incident | None, list[Diagnostic]]:
    """Model, cross-reference and SQL checks of one (resolved) tree, located through the file's marks;
    `authoring` adds the library's rules (spec.authoring_issues)."""
    locator = Locator(replace(parsed, data=data), name)
    diagnostics: list[Diagnostic] = []
    incident = None
    try:
        incident = Incident.model_validate(data, context={"skip_cross_checks": True})
    except ValidationError as exc:
        diagnostics += locator.from_validation(exc)
    else:
        diagnostics += _read_traces(incident, name, locator)
    diagnostics += [locator.from_issue(issue) for issue in cross_check(data)]
    diagnostics += [locator.from_issue(issue) for issue in sql_issues(data)]
    # a skeleton that misses most fields hears about those first, not that it claims nothing yet
    if authoring and (incident is not None or "symptoms" in data):
        diagnostics += [locator.from_issue(issue) for issue in authoring_issues(data)]
    return incident, diagnostics


def _read_traces(incident: Incident, name: str, locator: Locator) -> list[Diagnostic]:
    """Read every trace the workload replays (relative to the incident file's folder) and attach its rows
    to the app's arrival; a bad path is reported at the incident's line, a bad row at the trace's."""
    apps = incident.workload.apps
    out: list[Diagnostic] = []
    for i, app in enumerate([] if isinstance(apps, str) else apps):
        arrival = app.arrival
        if not isinstance(arrival, ReplayArrival):
            continue
        loc: tuple[str | int, ...] = ("workload", "apps", i, "arrival", "path")
        source = Path(name)
        if not source.is_file():
            out.append(locator.from_issue(Issue(loc, "a replayed trace is read beside the incident file, and "
                                                "this incident is not a file", "save the incident next to its trace")))
            continue
        try:
            path = resolve_trace_path(source.parent, arrival.path)
        except ValueError as exc:
            out.append(locator.from_issue(Issue(loc, str(exc), "put the trace in the incident's folder")))
            continue
        rows = read_trace(path)
        if isinstance(rows, TraceProblem):
            shown = str(source.parent / arrival.path)
            out.append(Diagnostic(shown, rows.line, 1 if rows.line else 0, rows.message, rows.hint))
            continue
        arrival._rows = rows
    return out


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def _problem_diagnostic(problem: Problem, parsed: ParsedYaml, text: str, starts: list[int], name: str) -> Diagnostic:
    """A variables problem at its file position: the placeholder itself when it can be found in the text."""
    message = problem.message if problem.loc[:1] == ("variables",) else f"{format_loc(problem.loc)}: {problem.message}"
    located = Locator(parsed, name).diagnostic(problem.loc, message, problem.hint, on_key=problem.on_key)
    mark = parsed.value_marks.get(problem.loc)
    if problem.placeholder is None or mark is None or mark.line >= len(starts):
        return located
    # placeholders are written verbatim in every YAML scalar style, so the k-th one after the
    # value's start is the one at fault (block scalars start on the line of their indicator)
    at = starts[mark.line] + mark.column
    for _ in range(problem.occurrence + 1):
        at = text.find(problem.placeholder, at)
        if at < 0:
            return located
        at += 1
    line = bisect.bisect_right(starts, at - 1)
    return Diagnostic(name, line, at - 1 - starts[line - 1] + 1, message, problem.hint)


def _analyse_text(text: str, name: str, seed: int | None = None, authoring: bool = False) -> _Analysis:
    parsed, diagnostics = parse_yaml(text, name)
    if parsed is None:
        return _Analysis(None, diagnostics)
    own = list(parsed.diagnostics)
    if not is_template(parsed.data):
        incident, found = _check_tree(parsed, parsed.data, name, authoring)
        unique = sorted(set(own + found), key=lambda d: (d.line, d.column, d.message))
        return _Analysis(incident if not unique else None, unique)
    seeds = VALIDATION_SEEDS if seed is None else (seed,)
    starts = _line_starts(text)
    runs: list[tuple[Resolution, Incident | None, set[Diagnostic]]] = []
    variable_problems: set[Diagnostic] = set()
    for s in seeds:
        resolution = resolve(parsed.data, s)
        problems = {_problem_diagnostic(p, parsed, text, starts, name) for p in resolution.problems}
        variable_problems |= problems
        # a value left with a broken placeholder fails its type and SQL checks too: say it once
        silenced = {(m.line + 1, m.column + 1) for loc in resolution.unresolved if (m := parsed.value_marks.get(loc))}
        incident, checked = _check_tree(parsed, resolution.data, name, authoring)
        runs.append((resolution, incident, problems | {d for d in checked if (d.line, d.column) not in silenced}))
    # with one seed, any problem past the variables may belong to this draw alone
    common = set.intersection(*(found for _, _, found in runs)) if len(runs) > 1 else variable_problems
    reported = set(own) | common
    for resolution, _, drawn in runs:
        # a problem only some draws have: say which variant shows it
        suffix = f" [variant seed {resolution.seed}: {describe(resolution.values)}]"
        reported |= {replace(d, message=d.message + suffix) for d in drawn - common}
    unique = sorted(reported, key=lambda d: (d.line, d.column, d.message))
    first, incident, _ = runs[0]
    return _Analysis(incident if not unique else None, unique, first.values, template=True)


def _analyse(path: Path, seed: int | None = None, authoring: bool = False) -> _Analysis:
    try:
        text, diagnostics = read_file(Path(path))
        if text is None:
            return _Analysis(None, diagnostics)
        return _analyse_text(text, str(path), seed, authoring)
    except Exception as exc:
        return _Analysis(None, [
            Diagnostic(
                str(path), 1, 1, f"internal error while checking the file: {exc!r}", "please report this with the file"
            )
        ])


def check_incident_file(path: Path | str, seed: int | None = None) -> list[Diagnostic]:
    """Every problem in the incident file at `path`, sorted by position; [] when it is valid.

    An incident with variables is checked as the variants of `seed`, or of every seed in
    VALIDATION_SEEDS when seed is None; a problem only some of them have names its seed. Besides what
    load_incident refuses, it applies the library's authoring rules (spec.authoring_issues: at least
    one symptom, one of them evidence).
    """
    return _analyse(Path(path), seed, authoring=True).diagnostics


def check_incident_text(text: str, name: str = "<text>", seed: int | None = None) -> list[Diagnostic]:
    """Like check_incident_file for YAML text; `name` stands in for the path in diagnostics."""
    try:
        return _analyse_text(text, name, seed, authoring=True).diagnostics
    except Exception as exc:
        return [Diagnostic(name, 1, 1, f"internal error while checking the text: {exc!r}")]


def variant_maker(path: Path | str, seed: int = 0) -> tuple[dict[str, tuple[float, float]],
                                                           Callable[[Mapping[str, Any]], Incident | None]] | None:
    """For the template at `path`, read and parsed once: the smallest and largest value of each variable that
    draws numbers (variants.numeric_extremes), and a function giving the variant of `seed` with some draws
    replaced (see variants.resolve), or None where that variant does not load. None when the file itself does
    not parse (its own diagnostics say why)."""
    text, _ = read_file(Path(path))
    parsed = parse_yaml(text, str(path))[0] if text is not None else None
    if parsed is None or parsed.diagnostics:
        return None
    ready = parsed

    def make(overrides: Mapping[str, Any]) -> Incident | None:
        try:
            resolution = resolve(ready.data, seed, overrides)
            if resolution.problems:
                return None
            incident, found = _check_tree(ready, resolution.data, str(path), False)
            return incident if not found else None
        except Exception:
            return None  # a value the template's checks refuse: nothing to estimate

    return numeric_extremes(parsed.data), make


def load_incident(path: Path | str, seed: int | None = None) -> Incident:
    """Load and fully check an incident file; raise IncidentError listing every problem.

    An incident with variables comes back resolved for `seed` (the telemetry seed: one number
    picks both the variant and the simulated traffic). seed None checks the variants of
    VALIDATION_SEEDS and returns the first one (seed 0). A fixed incident ignores `seed`.
    """
    return load_variant(path, seed)[0]


def load_variant(path: Path | str, seed: int | None = None) -> tuple[Incident, dict[str, Any]]:
    """load_incident, plus what each variable drew for that seed ({} for a fixed incident)."""
    found = _analyse(Path(path), seed)
    if found.incident is None:
        raise IncidentError(found.diagnostics or [Diagnostic(str(path), 1, 1, "could not load the incident")])
    return found.incident, found.values


def load_incident_text(text: str, name: str = "<text>", seed: int | None = None) -> Incident:
    """load_incident for YAML text."""
    found = _analyse_text(text, name, seed)
    if found.incident is None:
        raise IncidentError(found.diagnostics or [Diagnostic(name, 1, 1, "could not load the incident")])
    return found.incident


def has_variables(path: Path | str) -> bool:
    """Whether the incident file declares variables (or uses placeholders); False when it does not parse."""
    try:
        text, _ = read_file(Path(path))
        parsed = parse_yaml(text, str(path))[0] if text is not None else None
    except Exception:
        return False
    return parsed is not None and is_template(parsed.data)


@dataclass(frozen=True)
class SourceMap:
    """Where the items of one incident file are, so a finding about "symptom ttft-up" (from `--deep`,
    which works on the loaded model) can name its file:line. Ids are never substituted by variables, so
    one map serves every variant."""

    path: str
    parsed: ParsedYaml | None

    def position(self, loc: tuple[str | int, ...]) -> tuple[int, int] | None:
        """(line, column), 1-based, of `loc`: keys and indices, where a list item may also be named by its
        id, e.g. ("symptoms", "ttft-up") or ("signals", "clock-drop", "expect"). The nearest enclosing
        item when a field is absent; None when the item itself is not in the file."""
        if self.parsed is None:
            return None
        path: list[str | int] = []
        cur: Any = self.parsed.data
        for part in loc:
            if isinstance(cur, list) and isinstance(part, str):
                index = next((i for i, item in enumerate(cur) if isinstance(item, dict) and item.get("id") == part),
                             None)
                if index is None:
                    return None if len(path) <= 1 else self._at(tuple(path))
                part = index
            in_dict = isinstance(cur, dict) and part in cur
            in_list = isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
            if in_dict or in_list:
                cur = cur[part]
                path.append(part)
            else:
                break
        return self._at(tuple(path)) if path else None

    def _at(self, path: tuple[str | int, ...]) -> tuple[int, int] | None:
        found = Locator(self.parsed, self.path).diagnostic(path, "") if self.parsed is not None else None
        return (found.line, found.column) if found is not None else None

    def where(self, loc: tuple[str | int, ...]) -> str:
        """`path:line:column` of loc, or the path alone when it cannot be placed."""
        pos = self.position(loc)
        return f"{self.path}:{pos[0]}:{pos[1]}" if pos else self.path


def source_map(path: Path | str) -> SourceMap:
    """The SourceMap of an incident file; one that places nothing when the file does not parse."""
    try:
        text, _ = read_file(Path(path))
        parsed = parse_yaml(text, str(path))[0] if text is not None else None
    except Exception:
        parsed = None
    return SourceMap(str(path), parsed)

