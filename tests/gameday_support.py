"""Shared fixtures and helpers for the game-day tests (no tests here): the `gameday` commands run in-process,
a plan written to a file, its roster, the seat the server gives a player's app, and a fresh data folder.

The game-day test files (test_gameday.py, test_gameday_trust.py, test_team_play.py) each keep their own plan
text and import the helpers from here; the fixture `data` comes with `pytest_plugins = ("gameday_support",)`
(conftest.py has pytest rewrite this module's asserts, as it does a test file's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from game.cli.gameday_commands import COMMANDS
from game.gameday.gate import RoundGate
from game.gameday.plan import load_gameday
from game.gameday.roster import Roster, make_roster
from game.session import seat as seat_module
from game.session import signing

MINI = Path(__file__).resolve().parent / "data" / "incidents" / "tui-mini.yaml"
"""The incident the game-day tests' plans deal (tui-mini: the smallest that builds telemetry and worlds)."""


def cli(*args: str) -> tuple[int, str, str]:
    """`servedrill ARGS` of the `gameday` commands, in-process: (exit code, stdout, stderr); never a traceback."""
    run = CliRunner().invoke(click.Group(commands=COMMANDS), list(args))
    assert "Traceback" not in run.output
    return run.exit_code, run.stdout, run.stderr


def write_plan(folder: Path, text: str, name: str = "gameday.yaml") -> Path:
    """`text` written as the file `folder/name` (the folder made if it is not there yet); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def roster_for(day: Path) -> Roster:
    """The roster of the plan `day` written (or brought up to date), with its journal key: what
    `servedrill gameday roster` does before the server can seat anyone."""
    return make_roster(load_gameday(day))


def seat_env(monkeypatch: pytest.MonkeyPatch, day: Path, player: str, round_no: int = 1) -> None:
    """What the server gives the app process of `player`'s tab: their seat (from their token) and the
    journal key."""
    gd = load_gameday(day)
    gate = RoundGate.load(gd, round_no)
    monkeypatch.setenv(seat_module.SEAT_ENV, gate.seat(player, gd.rounds[round_no - 1]).to_env())
    monkeypatch.setenv(signing.KEY_ENV, str(gate.roster.key_file))


@pytest.fixture
def data(in_library_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The players' data folder ($SERVEDRILL_DATA while the test runs), the worlds in the shared build cache."""
    folder = tmp_path / "servedrill-data"
    monkeypatch.setenv("SERVEDRILL_DATA", str(folder))
    yield folder
