"""`ruff check .` is part of the test suite, so a lint regression fails `make test` (and test-fast)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> str | None:
    beside = Path(sys.executable).with_name("ruff")  # the venv's, as `make lint` runs it
    return str(beside) if beside.exists() else shutil.which("ruff")


def test_ruff_check_is_clean() -> None:
    ruff = _ruff()
    if ruff is None:
        pytest.fail("ruff is not installed: it is a test dependency (pyproject.toml), run make setup")
    result = subprocess.run([ruff, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True,
                            check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
