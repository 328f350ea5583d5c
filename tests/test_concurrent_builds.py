"""Several processes building the same incident at once: one builds, the others wait and use its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts three processes building the same incident


def test_three_cold_builds_at_once_all_succeed(tmp_path: Path, mini_incident: Path) -> None:
    env = {**os.environ, "SERVEDRILL_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-m", "tui.cli", "generate", str(mini_incident), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outs]
    docs = [json.loads(out) for out, _ in outs]
    assert len({d["digest"] for d in docs}) == 1 and len({d["path"] for d in docs}) == 1
    assert sum(not d["cached"] for d in docs) == 1  # built once; the others waited for it
    leftovers = [p.name for p in (tmp_path / "cache").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
