"""servedrill: engine_model, the fault-injectable simulation of an LLM serving fleet.

The modules in COMPILED_MODULES may also exist as mypyc-compiled extensions beside their sources
(built by setup.py). Python's import system prefers an extension module to a .py file of the same
name, so a compiled module would keep running after its source was edited. This package therefore
uses the compiled modules only when every one was built from exactly the source now beside it (the
digests in `_compiled.sha256`), and otherwise, or when SERVEDRILL_PURE=1, imports the .py sources.
Both give identical results; the compiled ones are faster.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import sys
from pathlib import Path

COMPILED_MODULES: tuple[str, ...] = (
    "config", "determinism", "faults", "kv_cache", "memory", "profiles", "replica", "request",
    "results", "router", "scheduler", "simulation", "sources", "step_cost", "frontend", "lora",
)
_HERE = Path(__file__).resolve().parent


def _compiled_is_current() -> bool:
    """True when a compiled build exists and was made from the sources as they are now."""
    try:
        recorded = (_HERE / "_compiled.sha256").read_text().split()
    except OSError:
        return False
    want = dict(zip(recorded[1::2], recorded[0::2], strict=False))  # file name -> sha256
    for name in COMPILED_MODULES:
        src = _HERE / f"{name}.py"
        try:
            if hashlib.sha256(src.read_bytes()).hexdigest() != want.get(src.name):
                return False
        except OSError:
            return False
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return all(any((_HERE / f"{name}{s}").exists() for s in suffixes) for name in COMPILED_MODULES)


class _SourceFirst:
    """A meta path finder: engine_model's compiled-able modules as their .py sources, never as extensions.
    (Duck-typed: importing importlib.abc would cost more than the whole digest check.)"""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        pkg, _, name = fullname.rpartition(".")
        if pkg != __name__ or name not in COMPILED_MODULES:
            return None
        import importlib.util  # only in pure mode

        return importlib.util.spec_from_file_location(fullname, _HERE / f"{name}.py")


COMPILED: bool = os.environ.get("SERVEDRILL_PURE") != "1" and _compiled_is_current()
"""Whether the simulation runs as compiled extensions (reported by `servedrill bench`)."""

if not COMPILED:
    sys.meta_path.insert(0, _SourceFirst())
