"""Shared fixtures and helpers for the TUI tests (no tests here).

The TUI tests play `tests/data/incidents/tui-mini.yaml`: a 300 s, two-replica incident whose database
builds in about a second. The database is built once per test session into a cache directory under
pytest's temporary base directory; every test gets its own data directory (sessions, transcripts).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

FIXTURE = Path(__file__).resolve().parent / "data" / "incidents" / "tui-mini.yaml"
START = 1_700_000_000.0
"""Epoch seconds of the hand-written sessions' start event (snapshots need fixed times)."""


@pytest.fixture(scope="session")
def tui_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache directory holding the fixture incident's database (built on first use)."""
    from incidents.loader import load_incident
    from telemetry_gen.cache import ensure_database

    folder = tmp_path_factory.getbasetemp() / "tui-cache"
    with mock.patch.dict(os.environ, {"SERVEDRILL_CACHE": str(folder)}):
        ensure_database(load_incident(FIXTURE), 0)
    yield folder


@pytest.fixture
def tui_env(tui_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Per test: the shared cache, a fresh data directory (returned)."""
    data = tmp_path / "data"
    monkeypatch.setenv("SERVEDRILL_CACHE", str(tui_cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(data))
    return data


def make_app(data: Path, **kwargs: Any) -> Any:
    from tui.app import ServedrillApp

    kwargs.setdefault("incidents", [FIXTURE])
    kwargs.setdefault("preselect", "tui-mini")
    kwargs.setdefault("player", "tester")
    return ServedrillApp(data_root=data, **kwargs)


async def until(pilot: Any, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> None:
    """Let the app run until `predicate()` is true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            app = pilot.app
            # what the app was doing instead: enough to tell a race from a hang in a CI log
            raise AssertionError(f"timed out waiting for {what or predicate}; the screen is "
                                 f"{type(app.screen).__name__}, marks {sorted(getattr(app, 'marks', {}))}")
        await pilot.pause(0.02)


def screen_name(app: Any) -> str:
    return type(app.screen).__name__


async def open_workspace(app: Any, pilot: Any) -> None:
    """From the picker: Enter, wait for the telemetry, Enter, wait for the workspace and its schema."""
    await until(pilot, lambda: "picker" in app.marks, what="the picker")
    await pilot.press("enter")
    await until(pilot, lambda: screen_name(app) == "BriefingScreen", what="the briefing")
    await until(pilot, lambda: "ready" in app.marks, what="the telemetry")
    await pilot.press("enter")
    await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
    await until(pilot, lambda: len(app.screen.query_one("#schema").root.children) > 0, what="the schema")


async def run_sql(app: Any, pilot: Any, sql: str, timeout: float = 30.0) -> Any:
    """Put `sql` in the editor, press F5, wait for the result; returns the results panel's view."""
    app.marks.pop("rows", None)
    app.screen.query_one("#editor").load_text(sql)
    await pilot.press("f5")
    await until(pilot, lambda: "rows" in app.marks, timeout=timeout, what=f"rows of {sql!r}")
    return app.screen.query_one("#results").view


def journal(path: Path, events: list[tuple[float, str, dict[str, Any]]], *,
            session_id: str = "tui-mini-fixed", player: str = "tester") -> Path:
    """Write a session file by hand, with fixed times (the format game.session documents: a header line,
    then one event per line)."""
    from game.session import FORMAT_VERSION, SESSION_FORMAT, file_digest

    header = {"format": SESSION_FORMAT, "format_version": FORMAT_VERSION, "session_id": session_id,
              "incident_id": "tui-mini", "incident_digest": file_digest(FIXTURE),
              "incident_path": str(FIXTURE),
              "seed": 0, "player": player, "created": "2023-11-14T22:13:20Z"}
    lines = [json.dumps(header)]
    lines += [json.dumps({"seq": i, "time": t, "kind": kind, "data": data})
              for i, (t, kind, data) in enumerate(events, start=1)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


QUERY_EVENT = {
    "index": 1,
    "sql": "SELECT replica, avg(prefill_s) AS prefill FROM requests "
           "WHERE ts >= TIMESTAMP '2025-03-04 09:02:00' GROUP BY replica ORDER BY prefill DESC",
    "ok": True, "error": None, "error_kind": None, "row_count": 2, "columns": ["replica", "prefill"],
    "truncated": False, "duration_s": 0.012,
    "reads": [{"table": "requests", "columns": ["replica", "prefill_s"],
               "filters": ["ts >= '2025-03-04 09:02:00'::TIMESTAMP"]}],
    "rows": [["vllm-1", 0.0248], ["vllm-0", 0.0152]],
}


def investigating_events() -> list[tuple[float, str, dict[str, Any]]]:
    """Start, one query that sees the prefill signal, a pin and a ranking."""
    return [
        (START, "start", {"telemetry_digest": None}),
        (START + 40, "query", QUERY_EVENT),
        (START + 50, "pin", {"query": 1, "hypothesis": "throttle", "stance": "supports"}),
        (START + 60, "rank", {"ranking": [{"id": "throttle", "confidence": 70.0},
                                          {"id": "overload", "confidence": 10.0},
                                          {"id": "bad-deploy", "confidence": 10.0},
                                          {"id": "kv-pressure", "confidence": 10.0}]}),
    ]


def submitted_events() -> list[tuple[float, str, dict[str, Any]]]:
    events = investigating_events()
    ranking = events[-1][2]["ranking"]
    return [*events, (START + 90, "submit", {"ranking": ranking, "discriminator": 1})]


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)
