"""Pickling the engine's frozen dataclasses (a paused Simulation is copied by pickling it whole).

A mypyc-compiled class is rebuilt by pickle through its constructor, and a frozen dataclass refuses the
attribute writes mypyc's own pickling support makes; so each frozen dataclass pickles as a call of its
constructor with its fields (`__reduce__` returning `frozen_reduce(self)`), which also runs its checks
again. The other classes carry `mypyc_attr(serializable=True, allow_interpreted_subclasses=True)`: mypyc
(2.4) skips a serializable class's __init__ on construction unless interpreted subclasses are allowed.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def frozen_reduce(obj: Any) -> tuple[Any, ...]:
    """pickle's reduce value of a dataclass whose __init__ takes every field: (its class, its field values)."""
    return (type(obj), tuple(getattr(obj, f.name) for f in fields(obj)))
