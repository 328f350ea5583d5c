"""Cross-reference rules of the incident format: what spans sections of an incident.

`cross_check` checks ids, engine knobs, fault kinds and their parameters (through the fault registry,
engine_model.fault_kinds), tables and columns, times against the run length and replica references. It
works on raw YAML data as well as on dumped models, so the loader can report it even when the structure
is broken. `authoring_issues` is what `servedrill validate` adds for library incidents.

Why one module a little over 500 lines: it is the one list of rules that span sections of an incident file,
each a short function; they share the location and hint helpers.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine_model.fault_kinds import REGISTRY
from engine_model.fault_kinds.config_change import check_knobs
from incidents.spec_common import MIN_HYPOTHESES, MIN_SIGNALS, REPLICA_NAME_RE
from incidents.telemetry_columns import COLUMN_TYPES, NUMERIC_AGGREGATES, NUMERIC_TYPES, TABLE_COLUMNS, TIME_AGGREGATES


@dataclass(frozen=True)
class Issue:
    """A cross-reference problem at `loc` (keys and list indices into the incident data).

    `on_key` means the mapping key at loc is wrong (point at the key, not its value). `word` (a word as
    incidents.leaks splits text, and which occurrence of it in the value) points inside a text value.
    """

    loc: tuple[str | int, ...]
    message: str
    hint: str | None = None
    on_key: bool = False
    word: tuple[str, int] | None = None

    def __str__(self) -> str:
        where = format_loc(self.loc)
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} (hint: {self.hint})" if self.hint else text


def format_loc(loc: Iterable[str | int]) -> str:
    """('faults', 0, 'kind') -> 'faults[0].kind'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A 'did you mean ...?' hint for a misspelt name, or None when nothing is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=3, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + " or ".join(repr(c) for c in close) + "?"


def replica_index(ref: Any) -> int | None:
    """Index of a replica reference (int index or "vllm-N" name); None if it is neither."""
    if isinstance(ref, bool):
        return None
    if isinstance(ref, int):
        return ref
    if isinstance(ref, str):
        match = REPLICA_NAME_RE.match(ref)
        if match:
            return int(match.group(1))
    return None


def known_models_and_gpus() -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(model names, GPU names) from engine_model.profiles, or None while that module is absent."""
    try:
        from engine_model import profiles
    except ImportError:
        return None
    return tuple(getattr(profiles, "MODELS", ())), tuple(getattr(profiles, "GPUS", ()))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _check_knobs(knobs: dict[str, Any], loc: tuple[str | int, ...]) -> list[Issue]:
    """Engine knobs (fleet.engine, config_change noise): the registry's config_change check."""
    return [Issue((*loc, *p.loc), p.message, p.hint, p.on_key) for p in check_knobs(knobs)]


def _check_replica_ref(ref: Any, n_replicas: int | None, loc: tuple[str | int, ...]) -> list[Issue]:
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        return []  # wrong type: the models report it
    index = replica_index(ref)
    if index is None:
        return [Issue(loc, f"{ref!r} is not a replica: use an index or a name like 'vllm-0'")]
    if n_replicas is not None and not 0 <= index < n_replicas:
        last = f"vllm-{n_replicas - 1}"
        return [Issue(loc, f"replica {ref!r} does not exist: the fleet has vllm-0 .. {last}")]
    return []


def _check_time(value: Any, duration: float | None, loc: tuple[str | int, ...], what: str) -> list[Issue]:
    t = _num(value)
    if t is None or duration is None:
        return []
    if not 0 <= t <= duration:
        return [Issue(loc, f"{what} {value} s is outside the run [0, {duration:g}] s")]
    return []


def _check_window(value: Any, duration: float | None, loc: tuple[str | int, ...]) -> list[Issue]:
    pair = _list(value)
    if len(pair) != 2 or duration is None:
        return []
    end = _num(pair[1])
    if end is not None and end > duration:
        return [Issue(loc, f"window [{pair[0]}, {pair[1]}] ends after the run ({duration:g} s)")]
    return []


def _check_table_column(
    table: Any, columns: list[Any], loc: tuple[str | int, ...], column_loc: tuple[str | int, ...] | None = None
) -> list[Issue]:
    """column_loc: loc of a single `column` field, else columns are a list at loc + ('columns', i)."""
    if not isinstance(table, str):
        return []
    if table not in TABLE_COLUMNS:
        hint = did_you_mean(table, TABLE_COLUMNS) or "tables: " + ", ".join(TABLE_COLUMNS)
        return [Issue((*loc, "table"), f"unknown table '{table}'", hint)]
    issues = []
    known = TABLE_COLUMNS[table]
    for i, column in enumerate(columns):
        if isinstance(column, str) and column not in known:
            where = column_loc if column_loc is not None else (*loc, "columns", i)
            hint = did_you_mean(column, known) or f"{table} has: " + ", ".join(known)
            issues.append(Issue(where, f"table '{table}' has no column '{column}'", hint))
    return issues


def _check_hypotheses(hyps: list[Any], present: bool) -> tuple[list[Issue], set[str], dict[str, str]]:
    issues: list[Issue] = []
    ids: set[str] = set()
    alias_of: dict[str, str] = {}
    seen: dict[str, tuple[str | int, ...]] = {}
    any_true = False
    for i, raw in enumerate(hyps):
        h = _dict(raw)
        hid = h.get("id")
        any_true = any_true or h.get("true") is True
        if isinstance(hid, str):
            if hid in seen:
                issues.append(
                    Issue(("hypotheses", i, "id"), f"hypothesis id '{hid}' is already used at {format_loc(seen[hid])}")
                )
            else:
                seen[hid] = ("hypotheses", i, "id")
            ids.add(hid)
    for i, raw in enumerate(hyps):
        h = _dict(raw)
        for j, alias in enumerate(_list(h.get("aliases"))):
            if not isinstance(alias, str):
                continue
            loc = ("hypotheses", i, "aliases", j)
            if alias in seen:
                issues.append(
                    Issue(
                        loc,
                        f"alias '{alias}' collides with {format_loc(seen[alias])}",
                        "ids and aliases must be unique across all hypotheses",
                    )
                )
            else:
                seen[alias] = loc
                if isinstance(h.get("id"), str):
                    alias_of[alias] = h["id"]
    if not present:
        return issues, ids, alias_of
    with_aliases = [i for i, raw in enumerate(hyps) if _list(_dict(raw).get("aliases"))]
    if with_aliases and len(with_aliases) < len(hyps):
        first_without = next(i for i in range(len(hyps)) if i not in with_aliases)
        issues.append(Issue(("hypotheses", first_without), "some hypotheses have aliases and this one has none",
                            "give every hypothesis aliases or none: aliases on some only point at them",
                            on_key=True))
    for i, raw in enumerate(hyps):
        h = _dict(raw)
        world = h.get("world")
        keeps = bool(_list(h.get("keeps")))  # kept restarts make an empty world a run with a restart in it
        if h.get("true") is True and world is not None:
            issues.append(Issue(("hypotheses", i, "world"), "a true hypothesis's world is the incident's own faults",
                                "remove `world` here; put the faults under the top-level `faults`", on_key=True))
        elif h.get("true") is not True and world is None and not keeps:
            issues.append(Issue(("hypotheses", i), f"hypothesis '{h.get('id')}' has no world",
                                "add `world:` with the faults that would make it true (see docs/authoring.md)",
                                on_key=True))
        elif h.get("true") is not True and isinstance(world, list) and not world and not keeps:
            issues.append(Issue(("hypotheses", i, "world"), "an empty world is the fault-free run, which must not "
                                "show the symptom", "list the faults that would make this hypothesis true"))
        members = h.get("members")
        if h.get("true") is True and members:
            issues.append(Issue(("hypotheses", i, "members"), "a true hypothesis has no members: the truth's family "
                                "is the incident itself on other traffic draws",
                                "remove `members` here (declare them on the false hypotheses)", on_key=True))
        for m, member in enumerate(_list(members)):
            if isinstance(member, list) and not member and not keeps:
                issues.append(Issue(("hypotheses", i, "members", m), "an empty member is the fault-free run, which "
                                    "must not show the symptom", "list the faults of this form of the hypothesis"))
    if len(hyps) < MIN_HYPOTHESES:
        issues.append(
            Issue(
                ("hypotheses",),
                f"{len(hyps)} hypotheses; an incident needs at least "
                f"{MIN_HYPOTHESES} (the true cause and plausible distractors)",
                on_key=True,
            )
        )
    if hyps and not any_true:
        issues.append(Issue(("hypotheses",), "no hypothesis has `true: true`; mark the real cause", on_key=True))
    return issues, ids, alias_of


def _check_signals(
    signals: list[Any],
    present: bool,
    hyp_ids: set[str],
    alias_of: dict[str, str],
    n_replicas: int | None,
    duration: float | None,
) -> list[Issue]:
    issues: list[Issue] = []
    if present and len(signals) < MIN_SIGNALS:
        issues.append(
            Issue(("signals",), f"{len(signals)} signals; an incident needs at least {MIN_SIGNALS}", on_key=True)
        )
    seen: dict[str, int] = {}
    for i, raw in enumerate(signals):
        s = _dict(raw)
        sid = s.get("id")
        if isinstance(sid, str):
            if sid in seen:
                issues.append(Issue(("signals", i, "id"), f"signal id '{sid}' is already used by signals[{seen[sid]}]"))
            seen.setdefault(sid, i)
        for key in _dict(s.get("likelihoods")):
            if key in hyp_ids:
                continue
            loc: tuple[str | int, ...] = ("signals", i, "likelihoods", key)
            if key in alias_of:
                issues.append(
                    Issue(
                        loc,
                        f"'{key}' is an alias; likelihoods are keyed by hypothesis id",
                        f"use '{alias_of[key]}'",
                        on_key=True,
                    )
                )
            else:
                issues.append(
                    Issue(loc, f"likelihood for unknown hypothesis '{key}'", did_you_mean(key, hyp_ids), on_key=True)
                )
        for j, raw_reveal in enumerate(_list(s.get("reveals"))):
            reveal = _dict(raw_reveal)
            loc = ("signals", i, "reveals", j)
            issues += _check_table_column(reveal.get("table"), _list(reveal.get("columns")), loc)
            issues += _check_replica_ref(reveal.get("replica"), n_replicas, (*loc, "replica"))
            issues += _check_window(reveal.get("window"), duration, (*loc, "window"))
    return issues


def _check_symptoms(symptoms: list[Any], duration: float | None) -> list[Issue]:
    issues: list[Issue] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(symptoms):
        s = _dict(raw)
        sid = s.get("id")
        if isinstance(sid, str):
            if sid in seen:
                issues.append(
                    Issue(("symptoms", i, "id"), f"symptom id '{sid}' is already used by symptoms[{seen[sid]}]")
                )
            seen.setdefault(sid, i)
        metric = _dict(s.get("metric"))
        issues += _check_table_column(
            metric.get("table"),
            [metric.get("column")],
            ("symptoms", i, "metric"),
            column_loc=("symptoms", i, "metric", "column"),
        )
        issues += _check_aggregate_column(s.get("aggregate"), metric, ("symptoms", i, "metric", "column"))
        for side in ("a", "b"):
            window = _dict(s.get(side)).get("window")
            issues += _check_window(window, duration, ("symptoms", i, side, "window"))
    return issues


def _check_mitigation(mit: dict[str, Any], n_replicas: int | None, duration: float | None) -> list[Issue]:
    """Recovery claims read the continuation (after the window, within the horizon) against the window; the
    action lists fit the fleet and use only the actions the incident offers."""
    from incidents.mitigation import ActionError, check_against, parse_action

    if not mit:
        return []
    issues: list[Issue] = []
    horizon = _num(mit.get("horizon_s"))
    end = None if duration is None else duration + (1200.0 if horizon is None else horizon)
    for i, raw in enumerate(_list(mit.get("recovery"))):
        claim = _dict(raw)
        metric = _dict(claim.get("metric"))
        loc: tuple[str | int, ...] = ("mitigation", "recovery", i)
        issues += _check_table_column(metric.get("table"), [metric.get("column")], (*loc, "metric"),
                                      column_loc=(*loc, "metric", "column"))
        issues += _check_aggregate_column(claim.get("aggregate"), metric, (*loc, "metric", "column"))
        pair = _list(_dict(claim.get("a")).get("window"))
        start, stop = (_num(pair[0]), _num(pair[1])) if len(pair) == 2 else (None, None)
        if duration is not None and end is not None and start is not None and stop is not None and \
                not (duration <= start and stop <= end):
            issues.append(Issue((*loc, "a", "window"), "a recovery claim reads the fleet after the decision: side a's "
                                f"window must lie within [{duration:g}, {end:g}] s (the window's end to the horizon)",
                                f"window: [{duration + 600:g}, {end:g}]"))
        issues += _check_window(_dict(claim.get("b")).get("window"), duration, (*loc, "b", "window"))
    allowed = mit.get("actions")
    for side in ("right", "wrong"):
        for i, actions in enumerate(_list(mit.get(side))):
            for j, text in enumerate(_list(actions)):
                if not isinstance(text, str):
                    continue
                try:
                    check_against(parse_action(text), replicas=n_replicas or 10**6,
                                  allowed=allowed if isinstance(allowed, list) else None)
                except ActionError as exc:
                    issues.append(Issue(("mitigation", side, i, j), exc.message, exc.hint))
    return issues


def _check_aggregate_column(aggregate: Any, metric: dict[str, Any], loc: tuple[str | int, ...]) -> list[Issue]:
    """An aggregate that cannot be computed on the column: it would only fail under `--deep`."""
    table, column = metric.get("table"), metric.get("column")
    if not isinstance(table, str) or table not in TABLE_COLUMNS or column not in TABLE_COLUMNS[table]:
        return []  # the table/column check reports it
    if aggregate in TIME_AGGREGATES and column != "ts":
        return [Issue(loc, f"aggregate '{aggregate}' is the time of the {aggregate} row, read off ts; "
                      f"'{column}' is not a time", "write `column: ts` and select the rows with `where`")]
    kind = COLUMN_TYPES.get(str(column))
    if aggregate in NUMERIC_AGGREGATES and kind not in NUMERIC_TYPES:
        return [Issue(loc, f"aggregate '{aggregate}' needs a numeric column; {table}.{column} is {kind}",
                      "count rows with `count`, different values with `distinct`, times with `first`/`last`")]
    return []


def authoring_issues(data: Mapping[str, Any]) -> list[Issue]:
    """What makes an incident unfit for the library though it loads and plays: checked by `servedrill
    validate` (incidents.loader.check_incident_file), not by load_incident, so a drill fixture with no
    claims still plays.

    An incident must state at least one symptom, and at least one that is evidence (not `context`):
    `--deep` proves only what the symptoms claim, so without one the fault is never shown to matter.
    """
    symptoms = data.get("symptoms")
    if not isinstance(symptoms, list) or not symptoms:
        return [Issue(("symptoms",), "none given; --deep proves only what the symptoms claim, so nothing would "
                      "show that the fault produces what the page says",
                      "add the page's headline as a claim (servedrill new ID --family F writes examples)",
                      on_key="symptoms" in data)]
    if all(_dict(s).get("context") is True for s in symptoms):
        return [Issue(("symptoms",), "every symptom is `context: true`: none is shown to depend on the faults",
                      "state at least one effect of the fault as an evidence claim (without `context`)",
                      on_key=True)]
    return []


def _check_models(fleet: dict[str, Any], faults: list[Any]) -> list[Issue]:
    known = known_models_and_gpus()
    if known is None:
        return []
    models, gpus = known
    issues: list[Issue] = []
    places: list[tuple[Any, Any, tuple[str | int, ...]]] = [(fleet.get("model"), fleet.get("gpu"), ("fleet",))]
    fallback = _dict(_dict(fleet.get("router")).get("fallback"))
    if fallback:
        places.append((fallback.get("model"), fallback.get("gpu"), ("fleet", "router", "fallback")))
    for model, gpu, loc in places:
        if models and isinstance(model, str) and model not in models:
            hint = did_you_mean(model, models) or "models: " + ", ".join(models)
            issues.append(Issue((*loc, "model"), f"unknown model '{model}'", hint))
        if gpus and isinstance(gpu, str) and gpu not in gpus:
            hint = did_you_mean(gpu, gpus) or "GPUs: " + ", ".join(gpus)
            issues.append(Issue((*loc, "gpu"), f"unknown GPU '{gpu}'", hint))
    return issues


def _check_fault(i: int, f: dict[str, Any], n_replicas: int | None, duration: float | None,
                 where: tuple[str | int, ...] = ("faults",), fleet: dict[str, Any] | None = None) -> list[Issue]:
    fleet = fleet or {}
    loc: tuple[str | int, ...] = (*where, i)
    issues: list[Issue] = []
    kind = f.get("kind")
    if isinstance(kind, str) and kind not in REGISTRY:
        hint = did_you_mean(kind, REGISTRY) or "kinds: " + ", ".join(REGISTRY)
        issues.append(Issue((*loc, "kind"), f"unknown fault kind '{kind}'", hint))
    elif isinstance(kind, str):
        for p in [*REGISTRY[kind].check(f), *REGISTRY[kind].check_fleet(f, fleet)]:
            issues.append(Issue((*loc, *p.loc), p.message, p.hint, p.on_key))
    issues += _check_steps(f, duration, loc)
    issues += _check_time(f.get("at_s"), duration, (*loc, "at_s"), "at_s")
    until = _num(f.get("until_s"))
    at = _num(f.get("at_s"))
    if until is not None:
        if at is not None and until <= at:
            issues.append(Issue((*loc, "until_s"), f"until_s {f['until_s']} s is not after at_s {f['at_s']} s"))
        else:
            issues += _check_time(f.get("until_s"), duration, (*loc, "until_s"), "until_s")
    issues += _check_scope(f.get("scope"), n_replicas, (*loc, "scope"))
    return issues


def _check_steps(f: dict[str, Any], duration: float | None, loc: tuple[str | int, ...]) -> list[Issue]:
    """A gradual fault's steps: strictly later than at_s and each other, before until_s, not with ramp_s."""
    steps = _list(f.get("steps"))
    issues: list[Issue] = []
    if steps and f.get("ramp_s") is not None:
        issues.append(Issue((*loc, "steps"), "give either ramp_s or steps, not both", on_key=True))
    at, until = _num(f.get("at_s")), _num(f.get("until_s"))
    last = at
    for j, raw in enumerate(steps):
        t = _num(_dict(raw).get("at_s"))
        if t is None:
            continue
        where = (*loc, "steps", j, "at_s")
        if last is not None and t <= last:
            issues.append(Issue(where, f"step at {t:g} s is not after {last:g} s", "steps are in time order, after "
                                "the fault's at_s"))
        elif until is not None and t >= until:
            issues.append(Issue(where, f"step at {t:g} s is not before until_s {until:g} s"))
        else:
            issues += _check_time(t, duration, where, "at_s")
        last = t
    ramp = _num(f.get("ramp_s"))
    if ramp is not None and at is not None and until is not None and at + ramp > until:
        issues.append(Issue((*loc, "ramp_s"), f"the ramp ends at {at + ramp:g} s, after until_s {until:g} s"))
    return issues


def _check_scope(scope: Any, n_replicas: int | None, loc: tuple[str | int, ...]) -> list[Issue]:
    issues: list[Issue] = []
    for j, ref in enumerate(_list(_dict(scope).get("replicas"))):
        issues += _check_replica_ref(ref, n_replicas, (*loc, "replicas", j))
    return issues


def _check_keeps(data: Mapping[str, Any]) -> list[Issue]:
    """`hypotheses[].keeps`: on a false hypothesis only, each an index of a redeploy fault, once."""
    from incidents.kept_events import keepable_kinds

    faults = _list(data.get("faults"))
    kinds = keepable_kinds()
    issues: list[Issue] = []
    for h_index, raw in enumerate(_list(data.get("hypotheses"))):
        h = _dict(raw)
        keeps = _list(h.get("keeps"))
        if keeps and h.get("true") is True:
            issues.append(Issue(("hypotheses", h_index, "keeps"), "a true hypothesis keeps the whole story already: "
                                "its world is the incident's own faults", "remove `keeps` here", on_key=True))
            continue
        seen: set[int] = set()
        for j, k in enumerate(keeps):
            loc = ("hypotheses", h_index, "keeps", j)
            if type(k) is not int or k < 0:
                continue  # the model reports the type
            if k >= len(faults):
                issues.append(Issue(loc, f"no faults[{k}]: faults has {len(faults)} entries",
                                    "keeps lists indices into `faults`, the first is 0"))
            elif k in seen:
                issues.append(Issue(loc, f"faults[{k}] is kept twice", "list each index once"))
            elif (kind := _dict(faults[k]).get("kind")) not in kinds:
                issues.append(Issue(loc, f"faults[{k}] is a {kind}, which has no rolling restart to keep",
                                    f"only a redeploy kind can be kept ({', '.join(kinds)}); to keep another "
                                    "fault, put it in this hypothesis's world"))
            seen.add(k)
    return issues


def _leak_issues(data: Mapping[str, Any]) -> list[Issue]:
    """Every word of the true cause in player-visible text, one issue each, at the word itself."""
    from incidents.leaks import leaks

    out = []
    for leak in leaks(data):
        shared = f" (it shares the stem '{leak.stem}' with the true hypothesis's id, title or fault kinds)" \
            if leak.stem != leak.word else ""
        out.append(Issue(leak.loc, f"'{leak.word}' names the true cause in text the player sees before the "
                         f"debrief{shared}",
                         "describe the symptom here, not the cause; words a distractor or a briefed symptom's "
                         "claim shares are not flagged, and a synonym passes the check but can still give the "
                         "cause away", word=(leak.word, leak.occurrence)))
    return out


def _check_noise(noise: list[Any], n_replicas: int | None, duration: float | None) -> list[Issue]:
    issues: list[Issue] = []
    for i, raw in enumerate(noise):
        event = _dict(raw)
        loc: tuple[str | int, ...] = ("noise", i)
        issues += _check_time(event.get("at_s"), duration, (*loc, "at_s"), "at_s")
        kind = event.get("kind")
        if kind == "config_change":
            issues += _check_knobs(_dict(event.get("params")), (*loc, "params"))
            issues += _check_scope(event.get("scope"), n_replicas, (*loc, "scope"))
        elif kind in ("replica_restart", "deploy_event"):
            issues += _check_replica_ref(event.get("replica"), n_replicas, (*loc, "replica"))
    return issues


def _check_workload_times(workload: dict[str, Any], duration: float | None) -> list[Issue]:
    issues: list[Issue] = []
    for i, raw in enumerate(_list(workload.get("apps"))):
        # the engine model serves one completion per request: n > 1 would validate and change nothing
        n = _dict(raw).get("n", 1)
        if n != 1:
            issues.append(Issue(("workload", "apps", i, "n"), f"n: {n} is not simulated: every request gets one "
                                "completion", "remove n (or write n: 1)"))
    for section in ("bursts", "ramps", "rate_changes"):
        for i, raw in enumerate(_list(workload.get(section))):
            issues += _check_time(_dict(raw).get("start_s"), duration, ("workload", section, i, "start_s"), "start_s")
    for i, raw in enumerate(_list(workload.get("apps"))):
        arrival = _dict(_dict(raw).get("arrival"))
        key = "at_s" if arrival.get("kind") == "burst" else "start_s"
        if key in arrival:
            issues += _check_time(arrival.get(key), duration, ("workload", "apps", i, "arrival", key), key)
    return issues


# the standard app mix's apps and tenants (telemetry_gen.workload.standard_apps; a test keeps them equal)
STANDARD_APP_TENANTS: dict[str, tuple[str, ...]] = {
    "chat": ("acme", "globex", "initech", "umbrella", "hooli", "stark"),
    "rag": ("acme", "globex", "initech", "wayne"),
    "code": ("acme", "initech", "hooli"),
    "summarize": ("globex", "wayne"),
    "reasoning": ("acme", "stark"),
}


def _workload_apps(workload: dict[str, Any]) -> tuple[dict[str, tuple[str, ...]], set[str]]:
    """(tenants of every app the workload names, the apps with a closed-loop, burst or replay arrival)."""
    apps = workload.get("apps", "standard")
    if apps == "standard":
        tenants_of: dict[str, tuple[str, ...]] = dict(STANDARD_APP_TENANTS)
        closed: set[str] = set()
    else:
        tenants_of, closed = {}, set()
        for raw in _list(apps):
            entry = _dict(raw)
            name, n = entry.get("name"), entry.get("tenants", 1)
            if not isinstance(name, str):
                continue
            tenants_of[name] = tuple(f"{name}-t{i}" for i in range(n if isinstance(n, int) and n > 0 else 1))
            if entry.get("arrival") is not None:
                closed.add(name)
    return tenants_of, closed


def _check_fault_apps(data: Mapping[str, Any]) -> list[Issue]:
    """A fault's `app` (a surge, a reshape, a gateway route) must name an app of the workload: a misspelt one
    would act on no request, and the world would silently lack its cause."""
    tenants_of, _ = _workload_apps(_dict(data.get("workload")))
    if not tenants_of:
        return []
    entries = [((*loc, i), raw) for loc, faults in _all_worlds(data) for i, raw in enumerate(faults)]
    entries += [(("noise", i), raw) for i, raw in enumerate(_list(data.get("noise")))]
    issues: list[Issue] = []
    for loc, raw in entries:
        app = _dict(_dict(raw).get("params")).get("app")
        if isinstance(app, str) and app not in tenants_of:
            issues.append(Issue((*loc, "params", "app"), f"no app {app!r} in the workload",
                                did_you_mean(app, tenants_of) or f"apps: {', '.join(tenants_of)}"))
    return issues


def _check_rate_changes(workload: dict[str, Any]) -> list[Issue]:
    """Each rate change names an open-loop app of the workload and, if any, one of that app's tenants."""
    tenants_of, closed = _workload_apps(workload)
    issues: list[Issue] = []
    for i, raw in enumerate(_list(workload.get("rate_changes"))):
        change, loc = _dict(raw), ("workload", "rate_changes", i)
        app, tenant = change.get("app"), change.get("tenant")
        if not isinstance(app, str):
            continue
        if app not in tenants_of:
            issues.append(Issue((*loc, "app"), f"no app {app!r} in the workload",
                                did_you_mean(app, tenants_of) or f"apps: {', '.join(tenants_of)}"))
        elif app in closed:
            issues.append(Issue((*loc, "app"), f"app {app!r} has a closed-loop, burst or replay arrival",
                                "a rate change applies to open-loop apps (no `arrival`) only"))
        elif isinstance(tenant, str) and tenant not in tenants_of[app]:
            issues.append(Issue((*loc, "tenant"), f"app {app!r} has no tenant {tenant!r}",
                                did_you_mean(tenant, tenants_of[app]) or f"its tenants: {', '.join(tenants_of[app])}"))
    return issues


LORA_KNOBS = ("max_loras", "max_cpu_loras", "max_lora_rank")


def _all_worlds(data: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], list[Any]]]:
    """(location, fault list) of the faults and of every hypothesis's world."""
    out: list[tuple[tuple[str | int, ...], list[Any]]] = [(("faults",), _list(data.get("faults")))]
    out += [(("hypotheses", j, "world"), _list(_dict(h).get("world")))
            for j, h in enumerate(_list(data.get("hypotheses")))]
    out += [(("hypotheses", j, "members", m), _list(member))
            for j, h in enumerate(_list(data.get("hypotheses")))
            for m, member in enumerate(_list(_dict(h).get("members")))]
    return out


def _check_adapters(data: Mapping[str, Any], engine: dict[str, Any]) -> list[Issue]:
    """Apps with adapters need an engine that serves them (max_loras >= 1) with max_lora_rank >= their rank;
    LoRA knobs without any adapter in the workload would change nothing and are refused."""
    apps = _dict(data.get("workload")).get("apps")
    with_adapters = [(i, _dict(a)) for i, a in enumerate(_list(apps)) if _dict(_dict(a).get("adapters"))]
    issues: list[Issue] = []
    if not with_adapters:
        places: list[tuple[tuple[str | int, ...], str]] = [(("fleet", "engine", k), k) for k in LORA_KNOBS
                                                            if k in engine]
        for where, faults in _all_worlds(data):
            for i, f in enumerate(faults):
                params = _dict(_dict(f).get("params"))
                loc = (*where, i, "params")
                places += [((*loc, k), k) for k in LORA_KNOBS if _dict(f).get("kind") == "config_change"
                           and k in params]
        for loc, knob in places:
            issues.append(Issue(loc, f"{knob} has no effect: no app of the workload names LoRA adapters",
                                "give an app `adapters: {count: N}`, or drop the knob", on_key=True))
        return issues
    max_loras, max_rank = engine.get("max_loras", 0), engine.get("max_lora_rank", 16)
    if not isinstance(max_loras, int) or max_loras < 1:
        issues.append(Issue(("fleet", "engine"), "apps name LoRA adapters, but the engine serves none",
                            "set fleet.engine.max_loras (GPU adapter slots, vLLM --max-loras) to 1 or more"))
    ranks = [(i, _dict(app.get("adapters")).get("rank", 16)) for i, app in with_adapters]
    top = max((r for _, r in ranks if isinstance(r, int)), default=0)
    for i, rank in ranks:
        if isinstance(rank, int) and isinstance(max_rank, int) and rank > max_rank:
            issues.append(Issue(("workload", "apps", i, "adapters", "rank"),
                                f"rank {rank} exceeds the engine's max_lora_rank {max_rank} (vLLM refuses "
                                "such adapters)", "raise fleet.engine.max_lora_rank or lower the rank"))
    for where, faults in _all_worlds(data):
        for k, f in enumerate(faults):
            new_rank = _dict(_dict(f).get("params")).get("max_lora_rank")
            if _dict(f).get("kind") == "config_change" and isinstance(new_rank, int) and new_rank < top:
                issues.append(Issue((*where, k, "params", "max_lora_rank"),
                                    f"max_lora_rank {new_rank} is below the rank of the workload's adapters "
                                    f"({top}): vLLM would refuse their requests", "keep it at least the rank"))
    return issues


def cross_check(data: Mapping[str, Any]) -> list[Issue]:
    """Problems that span sections of an incident, in file order of sections.

    Works on raw YAML data (partly invalid structure is skipped, not reported: the models
    report it) and on `Incident.model_dump()` output alike.
    """
    fleet = _dict(data.get("fleet"))
    window = _dict(data.get("window"))
    duration = _num(window.get("duration_s"))
    duration = duration if duration is not None and duration > 0 else None
    n_replicas = fleet.get("replicas") if _num(fleet.get("replicas")) is not None else None
    n_replicas = n_replicas if isinstance(n_replicas, int) and n_replicas >= 1 else None

    issues: list[Issue] = []
    engine = _dict(fleet.get("engine"))
    issues += _check_knobs(engine, ("fleet", "engine"))
    for knob, field_name in (
        ("tensor_parallel_size", "tensor_parallel"),
        ("pipeline_parallel_size", "pipeline_parallel"),
    ):
        if knob in engine and engine[knob] != fleet.get(field_name, 1):
            issues.append(
                Issue(
                    ("fleet", "engine", knob),
                    f"{knob}={engine[knob]} disagrees with fleet.{field_name}={fleet.get(field_name, 1)}",
                    f"set fleet.{field_name} only",
                )
            )
    faults = _list(data.get("faults"))
    issues += _check_models(fleet, faults)
    issues += _check_workload_times(_dict(data.get("workload")), duration)
    issues += _check_rate_changes(_dict(data.get("workload")))
    issues += _check_fault_apps(data)
    issues += _check_adapters(data, engine)
    for i, raw in enumerate(faults):
        issues += _check_fault(i, _dict(raw), n_replicas, duration, fleet=fleet)
    issues += _check_noise(_list(data.get("noise")), n_replicas, duration)
    issues += _check_symptoms(_list(data.get("symptoms")), duration)
    hyps = data.get("hypotheses")
    hyp_issues, hyp_ids, alias_of = _check_hypotheses(_list(hyps), isinstance(hyps, list))
    issues += hyp_issues
    issues += _check_keeps(data)
    issues += _leak_issues(data)
    for h_index, raw in enumerate(_list(hyps)):
        for i, fault in enumerate(_list(_dict(raw).get("world"))):
            issues += _check_fault(i, _dict(fault), n_replicas, duration, ("hypotheses", h_index, "world"), fleet)
        for m, member in enumerate(_list(_dict(raw).get("members"))):
            for i, fault in enumerate(_list(member)):
                issues += _check_fault(i, _dict(fault), n_replicas, duration,
                                       ("hypotheses", h_index, "members", m), fleet)
    issues += _check_mitigation(_dict(data.get("mitigation")), n_replicas, duration)
    signals = data.get("signals")
    issues += _check_signals(_list(signals), isinstance(signals, list), hyp_ids, alias_of, n_replicas, duration)
    return issues

