"""The mypyc-compiled engine is the pure-Python engine, only faster.

setup.py compiles engine_model's hot modules; engine_model/__init__.py uses them only while they
match their sources. These tests check that guard, that a build happened where one could, and that
compiled and pure engines give byte-identical telemetry on incidents spanning every kind of fault.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import engine_model
from incidents.loader import load_incident
from telemetry_gen.runner import build_telemetry

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # builds and compares the compiled and the pure-Python engines

# together: crashes and restarts, OOM, throttling, link loss, config and model rollouts, chunked
# prefill off, fp8 KV, preemption storms, fallback routing, MoE skew, speculative decoding, determinism,
# client timeouts, LoRA adapter slots
INCIDENTS = [
    "fleet-stalls-after-error-burst", "streams-freeze-mid-sentence", "answers-worse-some-of-the-time",
    "long-document-answers-miss-clauses", "minutes-to-first-token", "document-questions-wait-longer",
    "nondeterministic-outputs",
    "oom-at-peak", "research-requests-crawl", "math-answers-got-worse", "streaming-slower-after-speedup",
    "one-70b-replica-slow", "tuned-assistant-starts-slowly",
]
_DIGESTS = """
import json, sys
import engine_model
from incidents.loader import load_incident
from telemetry_gen.runner import build_telemetry
paths = sys.argv[1:]
print(json.dumps({"compiled": engine_model.COMPILED,
                  "digests": {p: build_telemetry(load_incident(p), 0).digest for p in paths}}))
"""


def _setup_modules() -> tuple[str, ...]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPILED" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no COMPILED list")


def test_setup_compiles_the_modules_the_guard_checks() -> None:
    assert _setup_modules() == engine_model.COMPILED_MODULES
    for name in engine_model.COMPILED_MODULES:
        assert (ROOT / "engine_model" / f"{name}.py").exists()


def test_compiled_where_a_build_could_happen() -> None:
    """With a C compiler, `make test` builds the engine; a silent fall-back to pure Python (a failed
    compile, or a stale build after an edit) would make the benchmark figures untrue."""
    if os.environ.get("SERVEDRILL_PURE") == "1":
        pytest.skip("SERVEDRILL_PURE=1 asks for the pure-Python engine")
    built = (ROOT / "engine_model" / "_compiled.sha256").exists()
    if not built and shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler here: the engine installs as pure Python")
    assert engine_model.COMPILED, (
        "engine_model runs as pure Python although it could be compiled; the build failed or is stale "
        "(sources edited since): `make test` rebuilds it"
    )


def test_pure_mode_imports_sources() -> None:
    code = "import engine_model, engine_model.scheduler as s; print(engine_model.COMPILED, s.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, cwd=ROOT, env={**os.environ, "SERVEDRILL_PURE": "1"},
    ).stdout.split()
    assert out == ["False", str(ROOT / "engine_model" / "scheduler.py")]


def test_edited_source_is_not_shadowed_by_a_stale_build(tmp_path: Path) -> None:
    """Copy the package, edit one source: the copy must import the edited .py, not the old binary."""
    if not engine_model.COMPILED:
        pytest.skip("no compiled build to go stale")
    pkg = tmp_path / "engine_model"
    shutil.copytree(ROOT / "engine_model", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for lib in ROOT.glob("engine_model__mypyc*"):
        shutil.copy(lib, tmp_path)
    code = "import engine_model, engine_model.request as r; print(engine_model.COMPILED, r.__file__)"
    run = [sys.executable, "-c", code]
    env = {k: v for k, v in os.environ.items() if k != "SERVEDRILL_PURE"}
    fresh = subprocess.run(run, capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout.split()
    assert fresh[0] == "True" and fresh[1].endswith(".so")
    with (pkg / "request.py").open("a") as f:
        f.write("\n# edited\n")
    stale = subprocess.run(run, capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout.split()
    assert stale == ["False", str(pkg / "request.py")]


def test_compiled_and_pure_engines_give_identical_telemetry() -> None:
    if not engine_model.COMPILED:
        pytest.skip("the engine is not compiled here; there is only one engine to compare")
    paths = [str(ROOT / "incidents" / f"{name}.yaml") for name in INCIDENTS]
    # the pure engine builds in a child while this process builds with the compiled one: two cores, half the wait
    with subprocess.Popen(
        [sys.executable, "-c", _DIGESTS, *paths], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, "SERVEDRILL_PURE": "1"},
    ) as proc:
        compiled = {p: build_telemetry(load_incident(p), 0).digest for p in paths}
        out, err = proc.communicate()
    assert proc.returncode == 0, err
    pure = json.loads(out)
    assert pure["compiled"] is False
    assert compiled == pure["digests"]
