"""The screens see the app only through tui.app_api.GameApp, and the command groups are assembled, never
mutated at import: the seams issue 17 asked for."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_modules(path: Path) -> set[str]:
    """Every module `path` imports anywhere (top level, functions, TYPE_CHECKING blocks)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_screen_or_widget_imports_the_app_module() -> None:
    offenders = [str(p.relative_to(ROOT)) for folder in ("tui/screens", "tui/widgets")
                 for p in sorted((ROOT / folder).rglob("*.py")) if "tui.app" in _imported_modules(p)]
    assert offenders == [], "use tui.app_api.GameApp instead"
    assert "tui.app" not in _imported_modules(ROOT / "tui" / "app_api.py")


def test_the_app_provides_every_member_of_the_interface() -> None:
    from tui.app import ServedrillApp
    from tui.app_api import GameApp

    app = ServedrillApp()
    for name in GameApp.__annotations__:
        assert hasattr(app, name), f"ServedrillApp has no attribute {name}"
    methods = [n for n, v in vars(GameApp).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert "mark" in methods and "export_transcript" in methods
    for name in methods:
        want = list(inspect.signature(getattr(GameApp, name)).parameters)
        got = list(inspect.signature(getattr(ServedrillApp, name)).parameters)
        assert got == want, f"ServedrillApp.{name}{got} differs from GameApp.{name}{want}"


def test_the_tui_group_is_its_own_and_leaves_the_game_group_alone() -> None:
    from game.cli import commands
    from tui.cli import main as tui_main

    game_play = commands.GAME_COMMANDS["play"]
    assert commands.main.commands["play"] is game_play
    assert tui_main.commands["play"] is not game_play
    assert {"serve", "watch", "send", "report"} <= set(tui_main.commands)
    assert not {"serve", "watch"} & set(commands.main.commands)
    assert set(commands.GAME_COMMANDS) <= set(tui_main.commands)


def test_the_game_api_names_what_it_exports_and_loads_the_session_only_when_asked() -> None:
    """Every name of game.api's __all__ is there (the session's and the channel's errors loaded on first
    use), and importing the API before the first paint does not import the session package (half a second)."""
    import subprocess
    import sys

    from game import api

    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []
    from game.gameday.gm import GMError
    from game.session import SessionError

    assert api.SessionError is SessionError and api.GMError is GMError
    code = "import sys, game.api; print('game.session' in sys.modules, 'game.gameday.gm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.split() == ["False", "False"]


def test_the_api_offers_only_the_players_own_free_sessions(tmp_path: Path) -> None:
    """A session of another player, or one another process holds, is not offered to continue; the player's
    record counts the player's own unfinished sessions only (another player's open game is no count on this
    player's picker: issue 31, "the picker leaks other players' open sessions")."""
    from game import api

    variant = api.load_variant(api.find_incident("one-slow-replica"), 0)
    mine = api.new_session(variant, "ada", root=tmp_path)
    theirs = api.new_session(variant, "grace", root=tmp_path)
    theirs.close()
    # `mine` is still held by this process: in use, so not offered
    assert api.unfinished_sessions("ada", variant.incident.id, tmp_path) == []
    mine.close()
    offered = api.unfinished_sessions("ada", variant.incident.id, tmp_path)
    assert [s.session_id for s in offered] == [mine.session_id]
    assert api.unfinished_sessions("ada", "another-incident", tmp_path) == []
    record = api.player_record("ada", tmp_path)
    assert [s.session_id for s in record.unfinished[variant.incident.id]] == [mine.session_id]
    assert record.best == {}


def test_a_game_at_one_seed_offers_only_that_seeds_sessions(tmp_path: Path) -> None:
    """Continuing a session of another seed would play another variant than the game (a tab of `serve --seed 7`
    once offered a seed-0 session of the same incident): at a given seed only that seed's sessions are offered,
    and without one every seed's are."""
    from game import api

    path = api.find_incident("one-slow-replica")
    at = {seed: api.new_session(api.load_variant(path, seed), "ada", root=tmp_path) for seed in (0, 7)}
    for session in at.values():
        session.close()
    incident_id = at[0].incident.id
    for seed, session in at.items():
        assert [s.session_id for s in api.unfinished_sessions("ada", incident_id, tmp_path, seed=seed)] == \
            [session.session_id]
        record = api.player_record("ada", tmp_path, seed=seed)
        assert [s.seed for s in record.unfinished[incident_id]] == [seed]
    assert {s.seed for s in api.unfinished_sessions("ada", incident_id, tmp_path)} == {0, 7}
    assert api.unfinished_sessions("ada", incident_id, tmp_path, seed=23) == []
