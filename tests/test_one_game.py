"""One game behind every front end: for every library incident with variants, at seed 0 and at 7 or 23, the API
(`game.api`), line mode (`servedrill play --plain`) and the terminal (Textual's Pilot) open the same
telemetry (the same database digest, and the same count of requests in it), show the same board (titles in
order), state the same truth in the debrief, and all let a failed statement go free. Browser tabs of
`servedrill serve` open every one of these incidents, each at one of the seeds 0, 7 and 23, on the same telemetry
(tests/test_serve_browser.py), and play one of them with a failed statement and a query.

Seed 0 alone would not do: it was the one seed where the terminal's seed-less load and the variant agreed
(issue 29). Each case builds one database (cached under the shared build cache) and the three front ends
read it; the debrief's truth is taken from the session each front end played, which is what its debrief
prints, without scoring (scoring builds every hypothesis's world; tests/test_plain.py and
tests/test_tui_play.py cover it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from test_tui_support import run_async, run_sql, screen_name, until

from game import api
from game.cli.game_commands import COMMANDS
from game.rules.library import library_paths
from game.session import Session
from incidents.loader import has_variables

pytestmark = pytest.mark.slow  # builds a database per incident and seed, and drives the app on each

pytest_plugins = ("test_tui_support",)

SEEDS = (0, 7, 23)
VARIANT_INCIDENTS = [p for p in library_paths() if has_variables(p)]


def _told(path: Path, seed: int) -> tuple[tuple[str, ...], api.Truth]:
    """What a player is told of a variant without its telemetry: the board's titles and the truth."""
    variant = api.load_variant(path, seed)
    return tuple(s.title for s in variant.board), api.truth(variant.incident)


def _other_seed(index: int, path: Path) -> int:
    """The seed besides 0 that incident `index` is played at: the browser test's (it serves incident i at
    SEEDS[i % 3]) where that is not 0, so both read one database, else 7 and 23 in turn; the other of the
    two where the first draws seed 0's board and truth. Each non-zero seed costs a simulation per
    incident, so one of them per incident, not both."""
    first = SEEDS[index % 3] if index % 3 else SEEDS[1 + (index // 3) % 2]
    second = 7 + 23 - first
    return first if _told(path, first) != _told(path, 0) else second


CASES = [(p, seed) for i, p in enumerate(VARIANT_INCIDENTS) for seed in (0, _other_seed(i, p))]
FAILING = "SELECT no_such_column FROM requests"
COUNT = "SELECT count(*) AS n FROM requests"


@dataclass(frozen=True)
class Seen:
    """What one front end showed of a game: the page's title, the telemetry's digest and request count,
    the board's titles in order, the truth its debrief states, and the queries its session recorded."""

    title: str
    digest: str
    requests: int
    board: tuple[str, ...]
    truth: api.Truth
    recorded: tuple[str, ...]


def _recorded(session: Session) -> tuple[str, ...]:
    return tuple(str(q.data["sql"]) for q in session.queries)


def _journal(data: Path) -> Path:
    [path] = list((data / "sessions").glob("*.jsonl"))
    return path


def _start_digest(path: Path) -> str:
    """The telemetry digest a session's start event recorded (what the transcript and replay check)."""
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        event = json.loads(line)
        if event["kind"] == "start":
            return str(event["data"]["telemetry_digest"])
    raise AssertionError(f"{path}: no start event")


@pytest.fixture(scope="module")
def cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield library_cache


@pytest.fixture
def data(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(cache))
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def through_the_api(path: Path, seed: int, data: Path) -> Seen:
    game = api.open_game(path, seed, "api", root=data / "api")
    try:
        game.start()
        failed = game.run_query(FAILING)
        assert failed.event is None and not failed.result.ok and failed.index is None
        count = game.run_query(COUNT)
        assert count.index == 1, "the failed statement took a Qn"
        return Seen(game.variant.incident.title, game.telemetry.digest, int(count.result.rows[0][0]),
                    tuple(s.title for s in game.board), api.truth(game.session.incident), _recorded(game.session))
    finally:
        game.close()


def in_line_mode(path: Path, seed: int, data: Path) -> Seen:
    result = CliRunner(env={"SERVEDRILL_DATA": str(data)}).invoke(
        click.Group(commands=COMMANDS), ["play", "--plain", str(path), "--seed", str(seed), "--player", "plain"],
        input=f"{FAILING}\n{COUNT}\nquit\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "(not counted: a statement that fails costs no query)" in out
    title = out.split("== ", 1)[1].split(" ==\n", 1)[0]
    shown = out.split("Hypotheses:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    board = tuple(line.split(None, 1)[1] for line in shown)  # "  A  title"
    requests = int(out.split("\nQ1:", 1)[0].strip().splitlines()[-1])  # the count's one row, above "Q1:"
    journal = _journal(data)
    session = api.resume_session(journal)
    try:
        return Seen(title, _start_digest(journal), requests, board, api.truth(session.incident),
                    _recorded(session))
    finally:
        session.close()


def in_the_terminal(path: Path, seed: int, data: Path) -> Seen:
    from tui.app import ServedrillApp
    from tui.screens.briefing import BriefingScreen
    from tui.widgets.board import HypothesisBoard

    app = ServedrillApp(incidents=[path], preselect=path.stem, seed=seed, player="tui", data_root=data)
    seen: list[Seen] = []

    async def go() -> None:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks, what="the picker")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen", what="the briefing")
            await until(pilot, lambda: "ready" in app.marks, what="the telemetry", timeout=120)
            assert f"seed {seed}" in str(app.screen.query_one("#briefing-limits").render())
            briefing = app.screen
            assert isinstance(briefing, BriefingScreen)
            page = briefing.entry  # the card as the player reads it, once the variant has loaded
            card_board = tuple(title for _, title in page.hypotheses)
            await pilot.press("enter")
            await until(pilot, lambda: "workspace" in app.marks, what="the workspace")
            failed = await run_sql(app, pilot, FAILING)
            assert not failed.ok and not failed.counted
            count = await run_sql(app, pilot, COUNT)
            assert count.ok and count.index == 1, "the failed statement took a Qn"
            play = app.play
            assert play is not None and play.telemetry is not None and play.session is not None
            items = app.screen.query_one("#board", HypothesisBoard).board.items
            assert tuple(i.title for i in items) == card_board  # the briefing's board is the workspace's
            seen.append(Seen(page.title, play.telemetry.digest, int(count.raw_rows[0][0]), card_board,
                             api.truth(play.session.incident), _recorded(play.session)))

    run_async(go())
    assert _start_digest(_journal(data)) == seen[0].digest  # what its transcript will record
    return seen[0]


@pytest.mark.parametrize(("path", "seed"), CASES, ids=[f"{p.stem}-{seed}" for p, seed in CASES])
def test_every_front_end_plays_the_same_game(path: Path, seed: int, data: Path, tmp_path: Path) -> None:
    reference = through_the_api(path, seed, tmp_path / "api")
    assert reference.recorded == (COUNT,)
    assert in_line_mode(path, seed, data / "plain") == reference
    assert in_the_terminal(path, seed, data / "tui") == reference


def test_the_seeds_make_different_games() -> None:
    """Guards the test above against passing vacuously: the two seeds it plays each incident at draw
    different variants of it (the board or the truth differs), and every seed is played."""
    assert len(VARIANT_INCIDENTS) >= 5
    assert {seed for _, seed in CASES} == set(SEEDS)
    for path in VARIANT_INCIDENTS:
        played = [seed for p, seed in CASES if p == path]
        told = {_told(path, seed) for seed in played}
        assert len(told) == len(played) == 2, f"{path.stem}: seeds {played} draw the same variant"


def test_a_resumed_game_is_the_same_variant_on_the_same_telemetry(cache: Path, tmp_path: Path) -> None:
    path = next(p for p in VARIANT_INCIDENTS if p.stem == "one-slow-replica")
    first = api.open_game(path, 7, "api", root=tmp_path)
    try:
        first.start()
        assert first.run_query(FAILING).event is None
        first.run_query(COUNT)
        journal, digest, board = first.session.path, first.telemetry.digest, first.board
    finally:
        first.close()
    assert journal is not None
    again = api.resume_game(journal)
    try:
        assert (again.variant.seed, again.telemetry.digest, again.board) == (7, digest, board)
        assert api.truth(again.session.incident) == api.truth(api.load_variant(path, 7).incident)
        assert _recorded(again.session) == (COUNT,)
        assert again.run_query(COUNT).index == 2
    finally:
        again.close()
