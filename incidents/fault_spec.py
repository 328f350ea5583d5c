"""Faults and noise in file form: which replicas (scope), when, how strongly, with which parameters.

A FaultSpec is engine_model.faults.Fault as an author writes it; its kind and params are checked against
the fault registry (engine_model.fault_kinds) by incidents.crosscheck. Noise events are the benign events
an incident has anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from engine_model.faults import FAULT_KINDS, RAMP_STEPS, ramp
from incidents.spec_common import ReplicaRef, Seconds, _knob_properties, _str_enum, _Strict

NOISE_KINDS: tuple[str, ...] = ("deploy_event", "traffic_burst", "config_change", "replica_restart")


def _scope_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "scope_all"
    if isinstance(value, ReplicaScope):
        return "scope_replicas"
    if isinstance(value, FractionScope):
        return "scope_fraction"
    if isinstance(value, Mapping):
        if "replicas" in value:
            return "scope_replicas"
        if "fraction" in value:
            return "scope_fraction"
    return None


class ReplicaScope(_Strict):
    replicas: list[ReplicaRef] = Field(min_length=1, description="Replica indices or names.")


class FractionScope(_Strict):
    fraction: float = Field(gt=0, le=1, description="Fraction of replicas, the lowest indices first.")


Scope = Annotated[
    Annotated[Literal["all"], Tag("scope_all")]
    | Annotated[ReplicaScope, Tag("scope_replicas")]
    | Annotated[FractionScope, Tag("scope_fraction")],
    Discriminator(
        _scope_tag,
        custom_error_type="scope_form",
        custom_error_message='scope must be "all", {replicas: [...]} or {fraction: 0..1}',
    ),
]


class Step(_Strict):
    """A gradual fault's intensity from `at_s` on."""

    at_s: Seconds
    intensity: float = Field(ge=0, le=1, description="The fault's intensity from at_s on.")


class FaultSpec(_Strict):
    """A fault injected into the simulation: engine_model.faults.Fault in file form."""

    kind: str = Field(
        description="Fault kind (engine_model.faults.FAULT_KINDS).", json_schema_extra=_str_enum(FAULT_KINDS)
    )
    at_s: Seconds
    until_s: float | None = Field(None, description="Seconds when the fault ends; absent means never.")
    scope: Scope = Field("all", description="Which replicas the fault hits.")
    intensity: float = Field(1.0, ge=0, le=1, description="0 = no effect, 1 = the stated params.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Kind-specific parameters; for config_change, engine knobs and their new values.",
    )
    ramp_s: float | None = Field(
        None, gt=0, description=f"Gradual kinds only: the intensity rises from 0 at at_s to `intensity` at at_s + "
        f"ramp_s, in {RAMP_STEPS} equal steps (the first at at_s).")
    steps: list[Step] | None = Field(
        None, min_length=1, description="Gradual kinds only: later intensities, each from its at_s on (in time "
        "order, after the fault's at_s and before until_s); the fault starts at `intensity`.")

    def schedule(self) -> tuple[float, tuple[tuple[float, float], ...]]:
        """(intensity at at_s, later (time, intensity) steps): what engine_model.faults.Fault runs with."""
        if self.ramp_s is not None:
            return ramp(self.at_s, self.ramp_s, self.intensity)
        return self.intensity, tuple((s.at_s, s.intensity) for s in self.steps or ())


class DeployEvent(_Strict):
    """A deploy of some service that shows up in the events table and changes nothing."""

    kind: Literal["deploy_event"]
    at_s: Seconds
    service: str = Field(min_length=1, description="Service that was deployed.")
    version: str = Field(min_length=1, description="Version label deployed.")
    replica: ReplicaRef | None = None


class TrafficBurstNoise(_Strict):
    """A harmless traffic burst the fleet absorbs."""

    kind: Literal["traffic_burst"]
    at_s: Seconds
    duration_s: float = Field(gt=0, description="Seconds the burst lasts.")
    factor: float = Field(gt=0, description="Arrival-rate multiplier.")


class ConfigChangeNoise(_Strict):
    """A config change with no material effect (the knobs must be engine knobs)."""

    kind: Literal["config_change"]
    at_s: Seconds
    params: dict[str, bool | int | float | str] = Field(
        min_length=1, description="Engine knobs and their new values.", json_schema_extra=_knob_properties()
    )
    scope: Scope = Field("all", description="Which replicas change.")


class ReplicaRestart(_Strict):
    """A routine restart of one replica."""

    kind: Literal["replica_restart"]
    at_s: Seconds
    replica: ReplicaRef


NoiseEvent = Annotated[
    DeployEvent | TrafficBurstNoise | ConfigChangeNoise | ReplicaRestart, Field(discriminator="kind")
]

