"""Build hook: compile the engine model's hot modules with mypyc when a C compiler is at hand.

The engine model stays plain, type-checked Python; mypyc turns the same source into C extension
modules that run the simulation about twice as fast (see `servedrill bench engine`). Everything
else about the project is declared in pyproject.toml.

Compilation is best-effort: without mypy or a working compiler, or with SERVEDRILL_PURE=1 in the
environment at build time, the package installs as pure Python and behaves identically, only slower.
After a successful build, `engine_model/_compiled.sha256` records the digest of every compiled
source; `engine_model/__init__.py` uses the compiled modules only while those digests still match
the sources beside them, so an edited source never hides behind a stale binary.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# engine_model.COMPILED_MODULES holds the same list; a test checks they agree
COMPILED = (
    "config", "determinism", "faults", "kv_cache", "memory", "profiles", "replica", "request",
    "results", "router", "scheduler", "simulation", "sources", "step_cost", "frontend", "lora",
)
DIGEST_FILE = "_compiled.sha256"


def _digest_lines() -> str:
    lines = []
    for name in COMPILED:
        data = (ROOT / "engine_model" / f"{name}.py").read_bytes()
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}.py\n")
    return "".join(lines)


class BuildExt(build_ext):
    """build_ext that tolerates a failed compile and, on success, records what it compiled."""

    def run(self) -> None:
        digests = _digest_lines()  # of the sources as they were when compiling began
        try:
            super().run()
        except Exception as exc:  # no compiler, missing headers: fall back to pure Python
            print(f"servedrill: engine not compiled ({exc}); using pure Python", file=sys.stderr)
            return
        outputs = [Path(self.get_ext_fullpath(ext.name)) for ext in self.extensions]
        if not all(p.exists() for p in outputs):
            print("servedrill: some engine modules did not compile; using pure Python", file=sys.stderr)
            return
        # next to the compiled modules: the source tree for an editable install, build_lib for a wheel
        pkg_dir = Path(self.get_ext_fullpath("engine_model.scheduler")).parent
        (pkg_dir / DIGEST_FILE).write_text(digests)


def _ext_modules() -> list:
    if os.environ.get("SERVEDRILL_PURE") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("servedrill: mypyc not available; the engine installs as pure Python", file=sys.stderr)
        return []
    try:
        exts = mypycify([f"engine_model/{name}.py" for name in COMPILED], opt_level="3",
                        group_name="engine_model")
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error it cannot compile past
        print(f"servedrill: mypyc refused the engine ({exc!r}); it installs as pure Python", file=sys.stderr)
        return []
    for ext in exts:
        ext.optional = True  # a failed compile is a warning, not a failed install
    return exts


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": BuildExt})
