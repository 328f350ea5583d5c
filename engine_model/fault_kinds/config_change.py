"""config_change: the scoped replicas are redeployed, one after another, with engine knobs changed.

Also home of `check_knobs`, the check of an {engine knob: value} mapping that the incident format uses
for fleet.engine and config_change noise as well.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, ClassVar

from engine_model.config import ENGINE_KNOBS, KNOB_CHOICES, EngineConfig
from engine_model.fault_kinds.base import Loc, Param, ParamIssue, Redeploy, register

if TYPE_CHECKING:
    from engine_model.faults import Fault
    from engine_model.replica import Deploy

_OWN = ("version", "stagger_s", "restart_s")


def _type_name(annotation: object) -> str:
    """A dataclass field's type as written ("int"): the annotation string, or the class itself when
    engine_model is compiled (mypyc resolves annotations)."""
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


KNOB_TYPES: dict[str, str] = {f.name: _type_name(f.type) for f in fields(EngineConfig)}
"""Engine knob -> its type name: bool, int, float or str."""


def knob_type_ok(knob: str, value: Any) -> bool:
    expected = KNOB_TYPES[knob]
    if expected == "bool":
        return isinstance(value, bool)
    if expected == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)


def _did_you_mean(word: str, choices: list[str]) -> str | None:
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.6)
    return ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else None


def check_knobs(knobs: Mapping[str, Any], loc: Loc = (), *, extra: tuple[str, ...] = ()) -> list[ParamIssue]:
    """Unknown knobs, wrong types and, when those are fine, a configuration vLLM would refuse
    (EngineConfig.validate). Names in `extra` are skipped (a fault's own parameters)."""
    issues: list[ParamIssue] = []
    good: dict[str, Any] = {}
    for knob, value in knobs.items():
        if knob in extra:
            continue
        if knob not in ENGINE_KNOBS:
            hint = _did_you_mean(str(knob), [*ENGINE_KNOBS, *extra]) or "engine knobs are the fields of EngineConfig"
            issues.append(ParamIssue((*loc, knob), f"unknown engine knob '{knob}'", hint, on_key=True))
        elif not knob_type_ok(knob, value):
            issues.append(ParamIssue((*loc, knob), f"engine knob '{knob}' takes a {KNOB_TYPES[knob]}, got {value!r}"))
        elif knob in KNOB_CHOICES and value not in KNOB_CHOICES[knob]:
            choices = list(KNOB_CHOICES[knob])
            message = f"engine knob '{knob}' is one of {', '.join(choices)}, not {value!r}"
            issues.append(ParamIssue((*loc, knob), message, _did_you_mean(str(value), choices)))
        else:
            good[knob] = value
    if not issues:
        try:
            EngineConfig().with_changes(**good).validate()
        except ValueError as exc:
            issues.append(ParamIssue(loc, f"invalid engine configuration: {exc}"))
    return issues


@register
class ConfigChange(Redeploy):
    name = "config_change"
    description = "redeploy with engine knobs changed"
    params: ClassVar[dict[str, Param]] = {
        "<knob>": Param("new value of any EngineConfig knob", type="str"),
        "version": Param("model version label the redeployed replicas report (default: unchanged)", type="str"),
        **Redeploy.ROLLOUT_PARAMS,
    }

    def check_params(self, params: Mapping[str, Any]) -> list[ParamIssue]:
        """Engine knobs, plus version, stagger_s and restart_s; without any engine knob it changes nothing."""
        issues = check_knobs(params, ("params",), extra=_OWN)
        issues += super().check_params({k: v for k, v in params.items() if k in _OWN})
        if not issues and not any(k in ENGINE_KNOBS for k in params):
            issues.append(ParamIssue(("params",), "config_change needs params: {engine knob: new value}"))
        return issues

    def deploy(self, base: Deploy, fault: Fault) -> Deploy:
        from engine_model.replica import Deploy

        knobs = {k: v for k, v in fault.params.items() if k in ENGINE_KNOBS}
        if "max_num_batched_tokens" in knobs and "max_num_seqs" not in knobs:
            # vLLM clamps a default max_num_seqs to the token budget (EngineConfig.for_gpu): a restart that only
            # cuts the budget (below the 1024 sequences of an H100's default) starts, running fewer sequences.
            # (The base's max_num_seqs is taken as a default; one an incident set would make vLLM refuse.)
            knobs["max_num_seqs"] = min(base.config.max_num_seqs, int(knobs["max_num_batched_tokens"]))
        cfg = base.config.with_changes(**knobs)
        version = str(fault.params.get("version", base.model_version))
        return Deploy(cfg, version, base.model, base.output_scale)
