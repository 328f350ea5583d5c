"""Dependencies point one way: tui -> game -> telemetry_gen -> incidents -> engine_model. A layer may
import any layer below it, except that tui presents game only. An import under `if TYPE_CHECKING:` is
for the type checker alone (it never runs), so it may name any layer below: that is how a seam is typed
instead of `Any`.

One game behind every front end: the terminal and the browser (tui/), line mode, the scripted players and the
facilitator's console (game/frontends/) call `game.api` and nothing below it at run time (FRONT_ENDS); the CLI
modules of tui may also use the command-line assembly (`game.cli`).

The CLI (game/cli/) is two kinds of module, and each is named as one (CLI_PLAYER, CLI_TOOLS): the commands
that play or read a game are a front end like the others (the API, the CLI's own helpers and the front ends
they launch); the authoring and engineering tools (validate, calc, bench, generate, fidelity) work on
incidents, telemetry and the engine themselves, so they may import any lower layer."""

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


PRODUCT = ("engine_model", "incidents", "telemetry_gen", "game")
"""The layers below tui, whose modules a front end reaches only through game.api."""

FRONT_ENDS: dict[str, tuple[str, ...]] = {
    "tui": ("game.api",),
    "game/frontends": ("game.api", "game.frontends"),
}
"""A front end's folder -> the product modules it may import at run time (a name and what lies under it)."""

ALSO: dict[str, tuple[str, ...]] = {
    # the CLI is its own front end: these wrap its commands and use its emit/fail helpers
    "tui/cli.py": ("game.cli",),
    "tui/cli_watch.py": ("game.cli",),
    "tui/cli_room.py": ("game.cli",),
}
"""Files of a front end allowed more than its folder."""

CLI_PLAYER_MAY: tuple[str, ...] = ("game.api", "game.cli", "game.frontends")
"""What a player-facing CLI module may import at run time: the API, the CLI's helpers, the front ends it runs."""

CLI_PLAYER: dict[str, str] = {
    "game/cli/__init__.py": "the package",
    "game/cli/commands.py": "assembles every command into `servedrill`",
    "game/cli/core.py": "the CLI's one way to fail and print, the group; query, export",
    "game/cli/game_commands.py": "play, resume, score, replay, autoplay",
    "game/cli/gameday_commands.py": "gameday check, roster, run, collect, submit; leaderboard",
    "game/cli/agent_commands.py": "mcp, eval: agents playing through the API",
    "game/cli/incident_commands.py": "list (and beside it the authoring commands validate, schema, new)",
    "game/cli/fanout_options.py": "the --ray option every fanning-out command takes, and its check",
}
"""CLI modules that play or read a game: held to CLI_PLAYER_MAY (module -> its commands)."""

CLI_TOOLS: dict[str, str] = {
    "game/cli/tool_commands.py": "calc, bench, fidelity, generate: the engine and the telemetry build themselves",
    "game/cli/bench.py": "measures the engine, the build and scoring below any game",
    "game/cli/validate_commands.py": "validate: proves an incident's claims on the simulation and its worlds",
}
"""CLI modules for authors and engineers, allowed any lower layer (module -> why)."""

NOT_YET: dict[str, str] = {
    "game/cli/incident_commands.py": "`list` is a player's command in one module with the authoring commands "
                                     "(validate, schema, new), and it reads the library and the topic coverage "
                                     "through incidents/; the player-history work is rewriting `list`, so it moves "
                                     "to the API after that merges",
}
"""Files a rule here would hold that are not held to it yet, and why."""


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


def _runtime_modules(path: Path) -> set[str]:
    """The dotted names a module imports at run time (not under `if TYPE_CHECKING:`), each as far as it
    is spelled: `from game import api` is game.api, `from game.api import Game` is game.api.Game."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _below_the_api(path: Path, allowed: tuple[str, ...]) -> list[str]:
    """The product modules `path` imports at run time that `allowed` does not cover."""
    return sorted(name for name in _runtime_modules(path)
                  if name.split(".")[0] in PRODUCT and not any(name == a or name.startswith(a + ".") for a in allowed))


def test_front_ends_call_the_game_api_and_nothing_below_it() -> None:
    wrong = []
    for folder, allowed in FRONT_ENDS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in NOT_YET:
                continue
            wrong += [f"{rel} imports {name}" for name in _below_the_api(path, allowed + ALSO.get(rel, ()))]
    assert wrong == []


def test_the_exceptions_name_files_that_exist() -> None:
    assert all((ROOT / rel).is_file() for rel in [*ALSO, *NOT_YET])


def test_every_cli_module_is_named_player_facing_or_a_tool() -> None:
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "game" / "cli").rglob("*.py")}
    assert sorted(modules - CLI_PLAYER.keys() - CLI_TOOLS.keys()) == []
    assert sorted(CLI_PLAYER.keys() & CLI_TOOLS.keys()) == []
    assert sorted((CLI_PLAYER.keys() | CLI_TOOLS.keys()) - modules) == []


def test_what_is_not_held_yet_still_needs_the_excuse() -> None:
    """A file that now keeps the rule leaves NOT_YET, so that the rule holds it from then on."""
    def allowed(rel: str) -> tuple[str, ...]:
        if rel in CLI_PLAYER:
            return CLI_PLAYER_MAY
        return next(a for folder, a in FRONT_ENDS.items() if rel.startswith(folder + "/")) + ALSO.get(rel, ())

    assert [rel for rel in NOT_YET if not _below_the_api(ROOT / rel, allowed(rel))] == []


def test_player_facing_cli_commands_call_the_game_api_and_nothing_below_it() -> None:
    wrong = [f"{rel} imports {name}" for rel in sorted(CLI_PLAYER) if rel not in NOT_YET
             for name in _below_the_api(ROOT / rel, CLI_PLAYER_MAY)]
    assert wrong == []


def test_what_lies_below_the_api_is_told_from_the_api(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from game import api\n"
        "import game.api.play\n"
        "from game.api import SessionError\n"
        "from game.cli.core import emit\n"
        "import textual\n"
        "if TYPE_CHECKING:\n"
        "    from game.session import Session\n"
        "def f():\n"
        "    from game.session import find_session\n"
        "    import incidents.spec\n"
        "    from game.apiary import x\n")
    assert _below_the_api(source, ("game.api",)) == ["game.apiary.x", "game.cli.core.emit", "game.session.find_session",
                                                     "incidents.spec"]
    assert _below_the_api(source, ("game.api", "game.cli")) == ["game.apiary.x", "game.session.find_session",
                                                                "incidents.spec"]
