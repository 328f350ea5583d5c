"""Rooms by kind inside game/ and telemetry_gen/ (docs/architecture.md, 'Rooms'): imports between rooms point
one way, in the order below, and the drawing of the import graph in docs/architecture.md is the code's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import import_graph  # noqa: E402

ORDER = [
    "engine_model", "incidents",
    "telemetry_gen", "telemetry_gen.proving", "telemetry_gen.fidelity",
    "game.text", "game.query", "game.session", "game.rules", "game.gameday", "game.reports", "game.authoring",
    "game.api", "game.frontends", "game.cli",
    "tui",
]
"""Bottom to top: a room may import only rooms before it."""


def test_every_room_is_in_the_order() -> None:
    assert sorted(import_graph.edges()) == sorted(ORDER)


def test_imports_between_rooms_point_down() -> None:
    wrong = [f"{room} imports {target}" for room, targets in import_graph.edges().items()
             for target in targets if ORDER.index(target) > ORDER.index(room)]
    assert wrong == []


def test_the_room_of_a_module() -> None:
    assert import_graph.room_of_module("game.rules.scoring") == "game.rules"
    assert import_graph.room_of_module("game.api") == "game.api"
    assert import_graph.room_of_module("game.session") == "game.session"
    assert import_graph.room_of_module("telemetry_gen.runner") == "telemetry_gen"
    assert import_graph.room_of_module("telemetry_gen.proving.worlds") == "telemetry_gen.proving"
    assert import_graph.room_of_module("numpy") is None


def test_the_drawing_in_the_docs_is_the_code() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "import_graph.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
