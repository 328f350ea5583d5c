"""The fault registry: every fault kind, one module each in this package.

Each module beside this one (but base.py and names starting with "_") defines one FaultKind subclass and
registers it with `@register`; importing this package imports them all, in name order, so adding a fault
kind is adding one file here (plus its tests). `REGISTRY` maps a kind's name to its FaultKind; `get_kind`
looks one up.
"""

from __future__ import annotations

import importlib
import pkgutil

from engine_model.fault_kinds.base import REGISTRY, FaultHost, FaultKind, Param, ParamIssue, gradual_kinds, register

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base" and not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")


def get_kind(name: str) -> FaultKind:
    """The registered kind called `name`; KeyError names the known kinds."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown fault kind {name!r}; known: {', '.join(REGISTRY)}") from None


__all__ = ["REGISTRY", "FaultHost", "FaultKind", "Param", "ParamIssue", "get_kind", "gradual_kinds", "register"]
