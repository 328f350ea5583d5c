"""`mypy` over the product packages is part of the test suite, so a type error fails `make test` (and
test-fast), as tests/test_lint.py does for ruff. The options live in pyproject.toml's [tool.mypy].

mypy keeps its incremental cache in pytest's cache folder (.pytest_cache/d/mypy): a first run checks every
module (about 10 s on a quiet 2-core machine), later runs only what changed (well under a second)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["engine_model", "incidents", "telemetry_gen", "game", "tui"]


def _mypy() -> Path | None:
    beside = Path(sys.executable).with_name("mypy")  # the venv's, as `make lint` runs it
    return beside if beside.exists() else None


def test_mypy_checks_every_product_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["files"] == PACKAGES
    assert config.get("follow_imports", "normal") == "normal"
    assert "ignore_errors" not in config  # no blanket ignores


def test_mypy_is_clean(pytestconfig: pytest.Config) -> None:
    mypy = _mypy()
    if mypy is None:
        pytest.fail("mypy is not installed beside this Python: it is a build dependency (pyproject.toml), "
                    "run make setup")
    assert pytestconfig.cache is not None
    cache = pytestconfig.cache.mkdir("mypy")
    # no paths: pyproject.toml's [tool.mypy] names the packages (test_mypy_checks_every_product_package)
    result = subprocess.run([str(mypy), "--cache-dir", str(cache)], cwd=ROOT, capture_output=True, text=True,
                            check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout, result.stdout
