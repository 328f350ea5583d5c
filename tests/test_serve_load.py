"""The `servedrill serve` load test (tools/loadtest_serve.py) as a test, on demand only: it starts 20
app processes and takes minutes on a small machine. Run it with

    SERVEDRILL_LOADTEST=1 .venv/bin/python -m pytest -q tests/test_serve_load.py

SERVEDRILL_LOADTEST_SESSIONS and SERVEDRILL_LOADTEST_QUERIES change the size (default 20 x 10).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(os.environ.get("SERVEDRILL_LOADTEST") != "1",
                                reason="load test: set SERVEDRILL_LOADTEST=1 to run it")


def test_twenty_browser_sessions_each_see_only_their_own_queries() -> None:
    spec = importlib.util.spec_from_file_location("loadtest_serve", ROOT / "tools" / "loadtest_serve.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool  # its dataclasses look their module up there
    spec.loader.exec_module(tool)
    sessions = int(os.environ.get("SERVEDRILL_LOADTEST_SESSIONS", "20"))
    queries = int(os.environ.get("SERVEDRILL_LOADTEST_QUERIES", "10"))
    report = tool.run(sessions=sessions, queries=queries, max_seconds=600)
    print(json.dumps(report, indent=2))
    assert report["failures"] == 0, report["failure_details"]
    assert report["queries"] == sessions * queries
    assert report["distinct_session_ids"] == report["session_files"] == sessions
