"""The fault registry's building blocks: a parameter record, the FaultKind base class, `register`.

One FaultKind subclass per fault kind, in a module of its own in this package (engine_model/fault_kinds/
<kind>.py). It owns everything about the kind: its description, its parameters with their defaults and
validation, which fields of a fault it accepts (scope, intensity between 0 and 1, a ramp), and its effect
on the simulated fleet (`apply`, or `deploy` for kinds that redeploy replicas). The incident format
(incidents/) and the simulation (engine_model.simulation) look kinds up in REGISTRY and never name one.

Intensity 0 means no effect for every kind: the simulation skips such a fault, and so do the workload-side
effects in telemetry_gen.runner.

What a kind changes outside the engines (what clients send, the gateway, the offline evaluations, what the
GPU's own gauges say) it declares in its `workload` hook to a WorkloadHost; telemetry_gen.runner applies
the declarations in one fixed order and names no kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    from engine_model.faults import Fault
    from engine_model.replica import Deploy, Replica
    from engine_model.results import EngineEvent
    from engine_model.router import Router
    from engine_model.simulation import FleetSpec

Loc = tuple[str | int, ...]
ParamType = Literal["number", "int", "str", "mapping"]
ActsOn = Literal["engine", "router", "deploy", "workload"]


@dataclass(frozen=True)
class Param:
    """One parameter of a fault kind.

    `default` None means the parameter is optional with no single default (the description says what
    happens without it). `minimum`/`maximum` bound numbers (inclusive unless `above` is set: then the
    value must be strictly above `minimum`). `choices` lists the allowed values of a str or int.
    """

    description: str
    type: ParamType = "number"
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    choices: tuple[Any, ...] = ()


@dataclass(frozen=True)
class ParamIssue:
    """A problem with one fault's fields, at `loc` relative to the fault (e.g. ("params", "share"))."""

    loc: Loc
    message: str
    hint: str | None = None
    on_key: bool = False


class FaultHost(Protocol):
    """What a kind's effect may touch: the Simulation (engine_model.simulation) satisfies it."""

    now: float
    fleet: FleetSpec
    primary: list[Replica]
    router: Router
    router_events: list[EngineEvent]

    def targets(self, fault: Fault) -> list[Replica]: ...
    def interrupt(self, rep: Replica) -> None: ...
    def crash(self, rep: Replica, xid: int, restart_s: float | None) -> None: ...
    def redeploy(self, rep: Replica, fault: Fault, start: bool, at: float) -> None: ...


class WorkloadHost(Protocol):
    """What a kind's `workload` hook declares its effects to (telemetry_gen.runner.WorkloadEffects satisfies it).

    A hook only says what changes; the runner applies every fault's changes in one fixed order (extra
    requests, then lengths, then the gateway; the evaluations and the GPU gauges apart), each from a seed of
    its own, so the base workload's draws never change. Each effect holds while the fault is on, from its
    `start_s` to its `end_s` (seconds); `app` None means every app.
    """

    def add_requests(self, fault: Fault, app: str | None, extra: float) -> None:
        """Extra open-loop traffic: `extra` times the normal arrival rate of `app`."""

    def reshape(self, fault: Fault, app: str | None, prompt_scale: float, output_scale: float) -> None:
        """Requests of `app` get their prompt (beyond the shared system prompt) and output scaled."""

    def delay(self, fault: Fault, mean_s: float, sigma: float, app: str | None = None) -> None:
        """The gateway adds a log-normal delay of mean `mean_s` seconds and log-sigma `sigma` per request (of
        `app` only; None: every app)."""

    def rescore(self, fault: Fault, deltas: Mapping[str, float]) -> None:
        """The offline eval harness changes: every version is re-scored with these score changes by task."""

    def evaluate_version(self, fault: Fault, version: str | None, deltas: Mapping[str, float]) -> None:
        """A new model version (None: the fleet's with -next) is evaluated, its scores moved by `deltas`."""

    def throttle_cause(self, fault: Fault, cause: str) -> None:
        """The scoped replicas' GPUs show this throttle cause (thermal or power) in their telemetry."""


def _type_ok(kind: ParamType, value: Any) -> bool:
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    return isinstance(value, Mapping)


def check_param(name: str, spec: Param, value: Any) -> ParamIssue | None:
    """A value's problem against its Param (type, bounds, choices), or None."""
    loc: Loc = ("params", name)
    if not _type_ok(spec.type, value):
        article = "an" if spec.type in ("int",) else "a"
        return ParamIssue(loc, f"'{name}' takes {article} {spec.type}, got {value!r}")
    if spec.choices and value not in spec.choices:
        return ParamIssue(loc, f"{name} must be one of {', '.join(str(c) for c in spec.choices)}")
    if spec.type in ("number", "int"):
        if spec.minimum is not None and (value <= spec.minimum if spec.above else value < spec.minimum):
            bound = "above" if spec.above else "at least"
            return ParamIssue(loc, f"{name} must be {bound} {spec.minimum:g}, got {value!r}")
        if spec.maximum is not None and value > spec.maximum:
            return ParamIssue(loc, f"{name} must be at most {spec.maximum:g}, got {value!r}")
    return None


class FaultKind:
    """One kind of fault. Subclasses set the class attributes and override `apply` (or `deploy`).

    - `params`: every parameter the kind takes; any other name is refused.
    - `graded`: intensity between 0 and 1 scales the effect; when False only 0 (nothing) and 1 are accepted.
    - `gradual`: the intensity may ramp (`ramp_s`) or step (`steps`) over time; the kind's `apply` is then
      called again with each new intensity while the fault is on, so it must be safe to re-apply.
    - `scoped`: `scope` picks replicas; when False the kind acts on the whole fleet and refuses a scope.
    - `needs_partial_scope`: the kind means nothing for the whole fleet (router_skew), so it refuses "all".
    - `acts_on`: where the effect lives: "engine" (replica physics), "router", "deploy" (a rolling
      redeploy into a changed config), or "workload" (telemetry_gen.runner changes what clients send or
      the offline evaluations; the simulation ignores these).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[dict[str, Param]] = {}
    acts_on: ClassVar[ActsOn] = "engine"
    graded: ClassVar[bool] = True
    gradual: ClassVar[bool] = False
    scoped: ClassVar[bool] = True
    needs_partial_scope: ClassVar[bool] = False

    # ----- validation ---------------------------------------------------------------------------
    def check(self, fault: Mapping[str, Any]) -> list[ParamIssue]:
        """Problems with one fault of this kind, given as raw incident data (kind, scope, intensity,
        params, ramp_s, steps). Structure the models check (types of at_s, ...) is not repeated here."""
        params = fault.get("params")
        issues = self.check_params(params if isinstance(params, Mapping) else {})
        scope = fault.get("scope", "all")
        if not self.scoped and scope != "all":
            issues.append(ParamIssue(("scope",), f"{self.name} acts on the whole fleet and takes no scope",
                                     "remove `scope`", on_key=True))
        if self.needs_partial_scope and scope == "all":
            issues.append(ParamIssue(("scope",), f"{self.name} needs a scope: some replicas, not all of them",
                                     "write scope: {replicas: [vllm-0]}"))
        intensity = fault.get("intensity", 1.0)
        if not self.graded and isinstance(intensity, int | float) and intensity not in (0, 1):
            issues.append(ParamIssue(("intensity",), f"{self.name} happens or not: intensity is 0 (no effect) or 1",
                                     "write 1, or 0 to switch the fault off"))
        for key in ("ramp_s", "steps"):
            if fault.get(key) is not None and not self.gradual:
                issues.append(ParamIssue((key,), f"{self.name} cannot change gradually: it takes no {key}",
                                         "gradual kinds: " + ", ".join(gradual_kinds()), on_key=True))
        return issues

    def check_fleet(self, fault: Mapping[str, Any], fleet: Mapping[str, Any]) -> list[ParamIssue]:
        """Problems of this fault on this fleet (raw incident data): a kind that cannot act on it (expert
        imbalance on a dense model) would validate and change nothing."""
        return []

    def check_params(self, params: Mapping[str, Any]) -> list[ParamIssue]:
        """Unknown names (with a "did you mean"), wrong types, values out of range or not among the choices."""
        import difflib

        issues: list[ParamIssue] = []
        for name, value in params.items():
            spec = self.params.get(str(name))
            if spec is None:
                close = difflib.get_close_matches(str(name), list(self.params), n=3, cutoff=0.6)
                hint = ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else (
                    f"{self.name} takes: " + ", ".join(self.params) if self.params else f"{self.name} takes no params")
                issues.append(ParamIssue(("params", str(name)), f"{self.name} has no parameter '{name}'", hint,
                                         on_key=True))
                continue
            issue = check_param(str(name), spec, value)
            if issue is not None:
                issues.append(issue)
        return issues

    # ----- parameters at run time ---------------------------------------------------------------
    def param(self, fault: Fault, name: str) -> Any:
        """The fault's value of `name`, else the kind's default."""
        return fault.params.get(name, self.params[name].default)

    # ----- effect -------------------------------------------------------------------------------
    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        """Change the simulated fleet as the fault starts (start=True, also at each step of a gradual
        fault) or ends (start=False). Workload-side kinds do nothing here."""

    def deploy(self, base: Deploy, fault: Fault) -> Deploy:
        """What a replica restarts into when a deploy kind's rolling redeploy reaches it."""
        return base

    def restart_s(self, fault: Fault) -> float | None:
        """Seconds a replica this fault restarts takes to serve again; None: the fleet's default."""
        return None

    def workload(self, host: WorkloadHost, fault: Fault) -> None:
        """Declare to `host` what the fault changes outside the engines (see WorkloadHost); most kinds change
        nothing there. Called for every fault with an effect, in the incident's order."""

    def scaled_param(self, fault: Fault, name: str, nominal: float) -> float:
        """Parameter `name` (else its default) as a number, moved from `nominal` towards it by intensity."""
        return fault.scaled(nominal, float(self.param(fault, name)))

    def app(self, fault: Fault) -> str | None:
        """The fault's `app` parameter (None: every app)."""
        app = fault.params.get("app")
        return None if app is None else str(app)


REGISTRY: dict[str, FaultKind] = {}
"""Every fault kind by name, filled by `register` as engine_model.fault_kinds imports its modules."""


def register(cls: type[FaultKind]) -> type[FaultKind]:
    """Class decorator: add one instance of the kind to REGISTRY (a name may be registered once)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in REGISTRY:
        raise ValueError(f"fault kind {cls.name!r} is registered twice")
    REGISTRY[cls.name] = cls()
    return cls


def gradual_kinds() -> list[str]:
    return [name for name, kind in REGISTRY.items() if kind.gradual]


class HardwareFactor(FaultKind):
    """A kind that scales one hardware factor of the scoped replicas (1.0 = nominal): `attr` is the
    Replica.set_hardware keyword, `factor` the parameter holding the value at intensity 1."""

    attr: ClassVar[str] = ""
    factor: ClassVar[str] = ""
    gradual = True

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        value = fault.scaled(1.0, float(self.param(fault, self.factor))) if start else 1.0
        for rep in host.targets(fault):
            rep.set_hardware(host.now, **{self.attr: value})
            host.interrupt(rep)


class Redeploy(FaultKind):
    """A kind that rolls the scoped replicas, one after another, into a changed deploy (and back at its end).

    `stagger_s` and `restart_s` are parameters of every such kind: the time between one replica's
    restart and the next one's, and how long each restart takes (process start, weight load, graph capture).
    """

    acts_on = "deploy"
    graded = False
    ROLLOUT_PARAMS: ClassVar[dict[str, Param]] = {
        "stagger_s": Param("seconds between the restarts of consecutive replicas (default: the fleet's, 60)",
                           minimum=0.0),
        "restart_s": Param("seconds each replica takes to serve again once drained (default: the fleet's, 45)",
                           minimum=0.0, above=True),
    }

    def apply(self, host: FaultHost, fault: Fault, start: bool) -> None:
        stagger = float(fault.params.get("stagger_s", host.fleet.deploy_stagger_s))
        for k, rep in enumerate(host.targets(fault)):
            host.redeploy(rep, fault, start, host.now + k * stagger)

    def restart_s(self, fault: Fault) -> float | None:
        value = fault.params.get("restart_s")
        return None if value is None else float(value)

