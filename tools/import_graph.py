"""Draw the project's rooms (packages and sub-packages) and the imports between them as a Mermaid graph.

    python tools/import_graph.py            # print the graph
    python tools/import_graph.py --check    # exit 1 if docs/architecture.md holds another graph

A room is a top-level layer (engine_model, incidents, ...) or, inside game/ and telemetry_gen/, a
sub-package (game/rules, game/query, ...); a module lying directly in a layer is its own room named by the
layer. Only imports that run count (not those under `if TYPE_CHECKING:`); tests and tools are not rooms.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["engine_model", "incidents", "telemetry_gen", "game", "tui"]
SPLIT = {"game", "telemetry_gen"}
"""Layers drawn by their sub-packages."""
OWN_ROOMS = {"game"}
"""Layers whose top-level modules are rooms of their own (game.api sits above every room of game, game.text
below them all)."""
DATA = {"data"}
"""Sub-packages that hold data files, not code."""
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "```mermaid\n", "```\n"


def room_of_module(module: str) -> str | None:
    """The room a dotted module name lives in, or None outside the product."""
    parts = module.split(".")
    if parts[0] not in LAYERS:
        return None
    if parts[0] in SPLIT and len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return None if parts[1] in DATA else f"{parts[0]}.{parts[1]}"
    if parts[0] in OWN_ROOMS and len(parts) >= 2 and (ROOT / parts[0] / f"{parts[1]}.py").is_file():
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def room_of_path(path: Path) -> str | None:
    rel = path.relative_to(ROOT).with_suffix("")
    return room_of_module(".".join(rel.parts).removesuffix(".__init__"))


def _type_only(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def edges() -> dict[str, set[str]]:
    """room -> the rooms its modules import at run time (itself left out)."""
    out: dict[str, set[str]] = defaultdict(set)
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            here = room_of_path(path)
            if here is None or (path.name == "__init__.py" and here == layer):
                continue
            out[here]
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _type_only(tree)
            for node in ast.walk(tree):
                if id(node) in skip:
                    continue
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    # `from game import api` imports game.api, not the package's (empty) __init__
                    names = [f"{node.module}.{a.name}" for a in node.names]
                for name in names:
                    room = room_of_module(name)
                    if room and room != here:
                        out[here].add(room)
    return out


def _node(room: str) -> str:
    return room.replace(".", "_")


def mermaid() -> str:
    graph = edges()
    lines = ["graph BT"]
    for layer in LAYERS:
        rooms = sorted(r for r in graph if r == layer or r.startswith(layer + "."))
        lines.append(f"  subgraph {layer}")
        lines += [f"    {_node(r)}[\"{r.split('.')[-1] if '.' in r else r}\"]" for r in rooms]
        lines.append("  end")
    for room in sorted(graph):
        lines += [f"  {_node(room)} --> {_node(t)}" for t in sorted(graph[room])]
    return "\n".join(lines) + "\n"


def documented() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(BEGIN) + len(BEGIN)
    return text[start:text.index(END, start)]


if __name__ == "__main__":
    drawn = mermaid()
    if "--check" in sys.argv:
        if documented() != drawn:
            print(f"{DOC.relative_to(ROOT)}: the import graph is out of date; paste `python tools/import_graph.py`")
            sys.exit(1)
    else:
        sys.stdout.write(drawn)
