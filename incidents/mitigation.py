"""Mitigation actions: what an on-call engineer can do to the fleet once the cause is named.

An action is typed (`Action`) and has one written form, the same in an incident file (`mitigation: right:`),
in line mode (`act rollback`) and in a session's journal:

    rollback                      roll every replica back to the release the window started with
    set KNOB=VALUE [KNOB=VALUE]   a rolling redeploy with engine knobs changed (engine_model.config)
    restart vllm-N | restart all  restart one replica (or all, one after another) into the same release
    drain vllm-N                  take one replica out of the router's rotation for good
    router POLICY                 change the router's load-balancing policy
    shed TENANT                   reject a tenant's requests at the gateway from the decision on

`parse_action` turns the written form into an Action or raises ActionError with the column it stopped at
and a hint. telemetry_gen.mitigation compiles actions into the engine's own timed changes (the fault
kinds' records) at the decision time. This module knows no incident, so the loader and the game check an
action against the fleet (its replicas, its tenants) with `check_against`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine_model.config import ENGINE_KNOBS
from engine_model.fault_kinds.config_change import KNOB_TYPES, check_knobs
from engine_model.router import POLICIES

Verb = Literal["rollback", "set", "restart", "drain", "router", "shed"]
VERBS: tuple[Verb, ...] = ("rollback", "set", "restart", "drain", "router", "shed")
USAGE: dict[str, str] = {
    "rollback": "rollback",
    "set": "set KNOB=VALUE [KNOB=VALUE ...]   e.g. set max_num_seqs=128",
    "restart": "restart vllm-N   (or: restart all)",
    "drain": "drain vllm-N",
    "router": "router POLICY   (" + " | ".join(POLICIES) + ")",
    "shed": "shed TENANT",
}
_REPLICA_RE = re.compile(r"^vllm-(\d+)$")
NOT_SETTABLE: dict[str, str] = {
    "spec_acceptance_rate": "how many draft tokens the model accepts follows from the traffic and the draft model, "
                            "not from a flag: lower num_speculative_tokens (or set it to 0) instead",
    "tensor_parallel_size": "a replica's GPU count is the fleet's, not a flag on call: drain or restart instead",
    "pipeline_parallel_size": "a replica's GPU count is the fleet's, not a flag on call: drain or restart instead",
}
"""Engine-config fields the model simulates but an on-call engineer cannot set (a property of the traffic or
of the hardware): `set` refuses them, with what to do instead."""


class ActionError(ValueError):
    """A written action that cannot be parsed or does not fit the fleet: `column` (1-based) is where the
    problem starts in the text, `hint` what to write instead."""

    def __init__(self, message: str, *, column: int = 1, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.column = column
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f" (hint: {self.hint})" if self.hint else "")


@dataclass(frozen=True)
class Action:
    """One mitigation action. `replica` None with restart means every replica; `knobs` are (knob, value)
    pairs in the order written."""

    verb: Verb
    replica: int | None = None
    knobs: tuple[tuple[str, Any], ...] = ()
    policy: str = ""
    tenant: str = ""

    def text(self) -> str:
        """The written form (parse_action(a.text()) == a)."""
        if self.verb == "set":
            return "set " + " ".join(f"{k}={_value_text(v)}" for k, v in self.knobs)
        if self.verb in ("restart", "drain"):
            return f"{self.verb} " + ("all" if self.replica is None else f"vllm-{self.replica}")
        if self.verb == "router":
            return f"router {self.policy}"
        if self.verb == "shed":
            return f"shed {self.tenant}"
        return "rollback"


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_value(knob: str, raw: str, column: int) -> Any:
    kind = KNOB_TYPES[knob]
    if kind == "bool":
        low = raw.lower()
        if low in ("true", "on", "yes", "1"):
            return True
        if low in ("false", "off", "no", "0"):
            return False
        raise ActionError(f"{knob} is true or false, got {raw!r}", column=column, hint=f"set {knob}=false")
    if kind == "int":
        try:
            return int(raw)
        except ValueError:
            raise ActionError(f"{knob} takes a whole number, got {raw!r}", column=column,
                              hint=f"set {knob}=256") from None
    if kind == "float":
        try:
            return float(raw)
        except ValueError:
            raise ActionError(f"{knob} takes a number, got {raw!r}", column=column,
                              hint=f"set {knob}=0.85") from None
    return raw


def _replica(word: str, column: int, verb: str, *, allow_all: bool) -> int | None:
    if allow_all and word == "all":
        return None
    m = _REPLICA_RE.match(word)
    if m is None:
        raise ActionError(f"{verb} takes a replica name like vllm-2, got {word!r}", column=column,
                          hint=USAGE[verb])
    return int(m.group(1))


def parse_action(text: str) -> Action:
    """The Action a written form stands for (see the module's table); ActionError when it is not one."""
    words: list[tuple[int, str]] = [(m.start() + 1, m.group()) for m in re.finditer(r"\S+", text)]
    if not words:
        raise ActionError("no action given", hint="one of: " + ", ".join(VERBS))
    col, verb = words[0]
    verb = verb.lower()
    rest = words[1:]
    if verb not in VERBS:
        close = difflib.get_close_matches(verb, VERBS, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}?" if close else "one of: " + ", ".join(VERBS)
        raise ActionError(f"unknown action {words[0][1]!r}", column=col, hint=hint)
    if verb == "rollback":
        # `rollback engine` / `rollback deploy` name what is rolled back; the engine release is the one there is
        if len(rest) > 1 or (rest and rest[0][1] not in ("engine", "deploy")):
            raise ActionError("rollback takes nothing (or: rollback engine)", column=rest[0][0], hint="rollback")
        return Action("rollback")
    if not rest:
        raise ActionError(f"{verb} needs an argument", column=len(text.rstrip()) + 2, hint=USAGE[verb])
    if verb == "set":
        knobs: list[tuple[str, Any]] = []
        for c, word in rest:
            name, eq, raw = word.partition("=")
            if not eq or not raw:
                raise ActionError(f"write KNOB=VALUE, got {word!r}", column=c, hint=USAGE["set"])
            if name not in ENGINE_KNOBS:
                close = difflib.get_close_matches(name, ENGINE_KNOBS, n=2, cutoff=0.6)
                raise ActionError(f"unknown engine knob {name!r}", column=c,
                                  hint=("did you mean " + " or ".join(repr(k) for k in close) + "?") if close
                                  else "engine knobs: " + ", ".join(ENGINE_KNOBS))
            if name in NOT_SETTABLE:
                raise ActionError(f"{name} is not a setting an on-call engineer can change", column=c,
                                  hint=NOT_SETTABLE[name])
            knobs.append((name, _parse_value(name, raw, c + len(name) + 1)))
        issues = check_knobs(dict(knobs))
        if issues:
            raise ActionError(issues[0].message, column=rest[0][0], hint=issues[0].hint)
        return Action("set", knobs=tuple(knobs))
    if len(rest) > 1:
        raise ActionError(f"{verb} takes one argument", column=rest[1][0], hint=USAGE[verb])
    c, arg = rest[0]
    if verb in ("restart", "drain"):
        return Action(verb, replica=_replica(arg, c, verb, allow_all=verb == "restart"))
    if verb == "router":
        if arg not in POLICIES:
            raise ActionError(f"unknown router policy {arg!r}", column=c, hint=USAGE["router"])
        return Action("router", policy=arg)
    return Action("shed", tenant=arg)


def parse_actions(texts: list[str]) -> list[Action]:
    """Every action of a list (ActionError names the first that fails, with its position)."""
    out = []
    for i, text in enumerate(texts):
        try:
            out.append(parse_action(text))
        except ActionError as exc:
            raise ActionError(f"action {i + 1} ({text!r}): {exc.message}", column=exc.column, hint=exc.hint) from None
    return out


def check_against(action: Action, *, replicas: int, tenants: list[str] | None = None,
                  allowed: Sequence[str] | None = None) -> None:
    """ActionError when the action does not fit this fleet: a replica it does not have, a tenant that sends
    nothing, a verb the incident does not offer, or draining the last replica in rotation."""
    if allowed is not None and action.verb not in allowed:
        raise ActionError(f"this incident does not offer {action.verb!r}", hint="actions here: " + ", ".join(allowed))
    if action.replica is not None and not 0 <= action.replica < replicas:
        raise ActionError(f"there is no vllm-{action.replica}: the fleet has vllm-0 .. vllm-{replicas - 1}",
                          column=len(action.verb) + 2, hint=f"{action.verb} vllm-{replicas - 1}")
    if action.verb == "drain" and replicas < 2:
        raise ActionError("draining the only replica takes the service down", hint="restart vllm-0")
    if action.verb == "shed" and tenants is not None and action.tenant not in tenants:
        close = difflib.get_close_matches(action.tenant, tenants, n=1, cutoff=0.5)
        raise ActionError(f"no tenant {action.tenant!r} sends traffic here", column=6,
                          hint=f"did you mean {close[0]!r}?" if close else "tenants: " + ", ".join(tenants))
