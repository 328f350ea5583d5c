"""Dependencies point one way: tui -> game -> telemetry_gen -> incidents -> engine_model. A layer may
import any layer below it, except that tui presents game only."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ["engine_model", "incidents", "telemetry_gen", "game", "tui"]
ALLOWED = {
    "engine_model": set(),
    "incidents": {"engine_model"},
    "telemetry_gen": {"engine_model", "incidents"},
    "game": {"engine_model", "incidents", "telemetry_gen"},
    "tui": {"game"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & set(ORDER)


def test_every_import_points_down_and_tui_only_presents_game() -> None:
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in sorted((ROOT / layer).rglob("*.py")):
            for target in _imports(path) - allowed - {layer}:
                wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []
