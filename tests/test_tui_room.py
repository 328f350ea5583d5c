"""The facilitator's live room in the terminal (tui/screens/room.py, `servedrill gameday room PLAN`): every key
(start, end, broadcast, a message and a hint to one player, next round) driven through Textual's Pilot, nothing
of a score or the answer on screen while the round runs, and snapshots at 80x24 and 200x60 (regenerate on
purpose with `pytest --snapshot-update`). Every check waits for a state the room reaches (its reads, the
round's state file, a player's inbox), never for a time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_room import LIMIT_S, T0, games, make_day
from test_tui_support import FIXTURE, START, run_async, until

from game import api

pytest_plugins = ("test_tui_support",)

SIZES = {"80x24": (80, 24), "200x60": (200, 60)}


def room_app(gd: Any, data: Path, clock: Any = None) -> Any:
    from tui.room_app import RoomApp

    return RoomApp(gd, [data], clock=clock or time.time, collect_every=None, refresh_every=0.2, steady=True)


def screen_text(app: Any) -> str:
    """Everything the room's widgets show, as plain text."""
    from textual.widgets import DataTable, Digits, Static

    screen = app.screen
    parts = [str(w.render()) for w in screen.query(Static)] + [w.value for w in screen.query(Digits)]
    for table in screen.query(DataTable):
        parts += [" ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]
        parts += [str(c.label) for c in table.columns.values()]
    return "\n".join(parts)


async def read_again(pilot: Any, what: str = "the room") -> None:
    """Wait for the room to show a snapshot read after this moment."""
    screen = pilot.app.screen
    seen = screen.reads
    await until(pilot, lambda: screen.reads >= seen + 2, what=what)


def test_nothing_of_a_score_or_the_answer_shows_while_the_round_runs(tmp_path: Path) -> None:
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    games(data)
    api.start_round(gd, None, T0)
    collected = gd.results / "round-01-tui-mini" / "blue--ben.json"
    collected.parent.mkdir(parents=True)
    collected.write_text(json.dumps({"gameday": {"player": "ben", "score": 82.5}}), encoding="utf-8")
    now = [START + 100]
    app = room_app(gd, data, clock=lambda: now[0])

    async def go() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            await until(pilot, lambda: getattr(app.screen, "reads", 0) > 0, what="the first read")
            text = screen_text(app)
            assert "One of two replicas is slow to start answering" in text and "Round 1 of 2" in text
            assert "investigating" in text and "handed in" in text and "not joined" in text
            assert "6:40" in text  # 600 s from T0, 200 s gone
            assert "82.5" not in text and "Score" not in text.splitlines() and "Handed in" in text
            for hypothesis in ("A GPU runs at reduced clocks", "throttle", "reduced clocks"):
                assert hypothesis not in text  # the answer is never the room's
            now[0] = START + 200
            times = api.round_times(gd)
            times[1] = (T0, START + 150)  # the facilitator ended it (elsewhere: the console)
            api.save_round_times(gd, times)
            await read_again(pilot)
            text = screen_text(app)
            assert "82.5" in text and "Score" in text.splitlines() and "Round 1 ended" in text
            assert "A GPU runs at reduced clocks" not in text

    run_async(go())


@pytest.mark.slow  # players' games opened and every key driven
def test_start_broadcast_message_hint_end_and_next_round_keys(tmp_path: Path) -> None:
    from game.session import Session

    gd = make_day(tmp_path)
    data = tmp_path / "data"
    app = room_app(gd, data)
    sessions: dict[str, Session] = {}

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            await until(pilot, lambda: screen.reads > 0, what="the first read")
            keys = str(app.screen.query_one("KeyBar").query_one("#keybar-keys").render())
            assert "s Start  e End  b Broadcast  m Message  h Hint  n Next" in keys  # every room key, at 80x24
            await pilot.press("s")
            await until(pilot, lambda: api.round_times(gd)[1][0] is not None, what="round 1 started")
            for player in ("ana", "ben"):  # players join the round
                sessions[player] = Session.create(FIXTURE, 0, player, root=data)
                sessions[player].start()
            await until(pilot, lambda: screen.state is not None and screen.state.count("investigating") == 2,
                        what="two players investigating")

            await pilot.press("b")  # broadcast
            await until(pilot, lambda: type(app.screen).__name__ == "RoomTextScreen")
            await pilot.press(*"Pin [b]it[/b]", "enter")
            await until(pilot, lambda: type(app.screen).__name__ == "RoomScreen")
            got: dict[str, list[Any]] = {"ana": [], "ben": []}

            def delivered(player: str, n: int) -> bool:
                got[player] += sessions[player].poll_gm()
                return len(got[player]) >= n

            await until(pilot, lambda: delivered("ana", 1) and delivered("ben", 1), what="the broadcast")
            assert [u.text for u in got["ana"]] == ["Pin [b]it[/b]"] == [u.text for u in got["ben"]]

            roster = app.screen.query_one("RosterTable")
            roster.move_cursor(row=1)  # ben
            assert roster.highlighted == "ben"
            await pilot.press("m")  # a message to ben only
            await until(pilot, lambda: type(app.screen).__name__ == "RoomTextScreen")
            await pilot.press(*"just you", "enter")
            await until(pilot, lambda: delivered("ben", 2), what="the message to ben")
            assert got["ben"][-1].text == "just you" and not delivered("ana", 2)

            await pilot.press("h")  # the incident's next hint, to ben, after a yes
            await until(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
            await pilot.press("y")
            await until(pilot, lambda: delivered("ben", 3), what="the hint to ben")
            assert str(got["ben"][-1].kind) == "hint" and not delivered("ana", 2)

            await pilot.press("e")  # end, after a yes
            await until(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
            await pilot.press("y")
            await until(pilot, lambda: api.round_times(gd)[1][1] is not None, what="round 1 ended")
            await until(pilot, lambda: screen.state is not None and not screen.state.running, what="ended shown")

            await pilot.press("n")  # no round running: n starts the next
            await until(pilot, lambda: api.round_times(gd)[2][0] is not None, what="round 2 started")
            await until(pilot, lambda: screen.state is not None and screen.state.round == 2, what="round 2 shown")
            await pilot.press("n")  # round 2 running, the last: ends it after a yes
            await until(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen")
            await pilot.press("y")
            await until(pilot, lambda: api.round_times(gd)[2][1] is not None, what="round 2 ended")

            await pilot.press("f1")
            await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
            assert "Live room" in app.screen.text and "A message to every player" in app.screen.text
            await pilot.press("escape")
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert {"Start", "End", "Broadcast", "Message", "Hint", "Next"} <= set(titles)

    try:
        run_async(go())
    finally:
        for session in sessions.values():
            session.close()


def test_names_are_shown_literally(tmp_path: Path) -> None:
    from textual.widgets import DataTable

    plan = tmp_path / "plan" / "gameday.yaml"
    plan.parent.mkdir()
    plan.write_text(f"event: '[b red]Day[/] $x'\nresults: results\nrounds:\n  - incident: {FIXTURE}\n"
                    "teams:\n  - name: blue\n    players: [ana]\n", encoding="utf-8")
    gd = api.load_gameday(plan)
    app = room_app(gd, tmp_path / "data")

    async def go() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.screen.reads > 0)
            assert "[b red]Day[/] $x" in str(app.screen.query_one("RoomHeader").render())
            table = app.screen.query_one("#room-roster", DataTable)
            assert str(table.get_row_at(0)[0]) == "ana"

    run_async(go())


@pytest.mark.slow
@pytest.mark.parametrize("size", [*SIZES, "80x24-ended"], ids=[*SIZES, "80x24-ended"])
def test_room_snapshots(tmp_path: Path, snap_compare: Any, size: str) -> None:
    """The round running (no scores), at both sizes; and once it ended, with the score collection recorded."""
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    games(data)
    api.start_round(gd, None, T0)
    if size.endswith("-ended"):
        collected = gd.results / "round-01-tui-mini" / "blue--ben.json"
        collected.parent.mkdir(parents=True)
        collected.write_text(json.dumps({"gameday": {"player": "ben", "score": 82.5}}), encoding="utf-8")
        api.end_round(gd, [tmp_path / "nowhere"], START + 95)
    app = room_app(gd, data, clock=lambda: START + 100)
    app.refresh_every = 60.0

    async def settle(pilot: Any) -> None:
        await until(pilot, lambda: getattr(app.screen, "reads", 0) > 0, what="the first read")
        await pilot.pause()

    assert LIMIT_S == 600.0
    assert snap_compare(app, terminal_size=SIZES[size.removesuffix("-ended")], run_before=settle)
