"""Dependencies point one way: tui -> game -> telemetry_gen -> incidents -> engine_model. A layer may
import any layer below it, except that tui presents game only. An import under `if TYPE_CHECKING:` is
for the type checker alone (it never runs), so it may name any layer below: that is how a seam is typed
instead of `Any`."""

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


def _type_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside `if TYPE_CHECKING:` blocks (not their else branches)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, *, runtime_only: bool = True) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_only(tree) if runtime_only else set()
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def test_type_only_imports_still_point_down() -> None:
    wrong = []
    for i, layer in enumerate(ORDER):
        below = set(ORDER[:i])
        for path in sorted((ROOT / layer).rglob("*.py")):
            for target in _imports(path, runtime_only=False) - below - {layer}:
                wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    assert wrong == []


def test_an_import_for_the_type_checker_is_told_from_one_that_runs(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nimport game.api\nif TYPE_CHECKING:\n"
                      "    from incidents.spec import Incident\nelse:\n    import telemetry_gen\n")
    assert _imports(source) == {"game", "telemetry_gen"}
    assert _imports(source, runtime_only=False) == {"game", "incidents", "telemetry_gen"}
