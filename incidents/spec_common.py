"""Shared pieces of the incident format's models: the strict base model, id patterns, replica references,
time fields and the JSON-schema helpers. incidents.spec (the incident), incidents.fault_spec (faults and
noise) and incidents.crosscheck build on these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import fields
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from engine_model.config import EngineConfig
from engine_model.fault_kinds.config_change import KNOB_TYPES

SLUG_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
ID_RE = r"^[a-z0-9][a-z0-9_-]*$"
REPLICA_NAME_RE = re.compile(r"^vllm-(\d+)$")

MIN_HYPOTHESES = 4
MIN_SIGNALS = 3
DEFAULT_LIKELIHOOD = 0.5
"""Likelihood a signal gets for a hypothesis it does not list: uninformative between 0 and 1."""

ReplicaRef = Annotated[
    int | str,
    Field(description='Replica index (0-based) or its name "vllm-<index>".'),
]
Seconds = Annotated[float, Field(ge=0, description="Simulated seconds from t=0.")]


def _str_enum(values: Iterable[str]) -> dict[str, Any]:
    return {"enum": list(values)}


def _knob_properties() -> dict[str, Any]:
    """JSON schema of an {engine knob: value} mapping, typed per knob for editor completion."""
    json_types = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}
    props = {f.name: {"type": json_types.get(KNOB_TYPES[f.name], "string")} for f in fields(EngineConfig)}
    return {"properties": props, "additionalProperties": False}


class _Strict(BaseModel):
    # .inf and .nan are YAML floats, but no knob means them: an infinite rate or window is refused here,
    # before anything tries to build it (telemetry_gen.cost bounds the finite ones)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _window_pair(value: tuple[float, float]) -> tuple[float, float]:
    start, end = value
    if start < 0:
        raise ValueError("a window starts at or after 0 s")
    if end <= start:
        raise ValueError(f"a window [start_s, end_s] needs end_s > start_s, got [{start:g}, {end:g}]")
    return value


WindowPair = Annotated[
    tuple[float, float],
    AfterValidator(_window_pair),
    Field(description="[start_s, end_s): simulated seconds from t=0, start inclusive, end exclusive."),
]

