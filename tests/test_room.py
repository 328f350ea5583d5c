"""The facilitator's live room through the game API (game.api.room): each player's status, queries and last
activity read from hand-made journals, the time left on a driven clock (tests pass `now`, never wait), the
standings without scores until the round ends, the round operations the console shares, and the CLI's error
for a plan that does not check. The screen's own tests are tests/test_tui_room.py."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_tui_support import FIXTURE, START, investigating_events, journal, submitted_events

from game import api
from game.gameday.plan import GameDay

pytest_plugins = ("test_tui_support",)

LIMIT_S = 600.0
T0 = START - 100.0
RANKING = investigating_events()[-1][2]["ranking"]
"""When round 1 starts: before the hand-made games' start events (START)."""

PLAN = f"""\
event: Room test day
facilitator: sam
results: results
rounds:
  - incident: {FIXTURE}
    seed: 0
    time_limit_min: 10
  - incident: {FIXTURE}
    seed: 1
    time_limit_min: 5
teams:
  - name: blue
    players: [ana, ben]
  - name: red
    players: [dara, eli]
"""


def make_day(tmp_path: Path) -> GameDay:
    plan = tmp_path / "plan" / "gameday.yaml"
    plan.parent.mkdir()
    plan.write_text(PLAN, encoding="utf-8")
    return api.load_gameday(plan)


def games(data: Path) -> None:
    """ana investigating (one query), ben handed in, eli's only game a practice run before the round."""
    sessions = data / "sessions"
    journal(sessions / "ana.jsonl", investigating_events(), session_id="ana-1", player="ana")
    journal(sessions / "ben.jsonl", submitted_events(), session_id="ben-1", player="ben")
    practice = [(T0 - 500 + t - START, kind, d) for t, kind, d in submitted_events()]
    journal(sessions / "eli.jsonl", practice, session_id="eli-0", player="eli")


def by_player(state: object) -> dict[str, tuple[str, int]]:
    return {p.player: (p.status, p.queries) for p in state.players}  # type: ignore[attr-defined]


def test_before_any_round_everyone_is_not_joined_and_round_one_is_next(tmp_path: Path) -> None:
    gd = make_day(tmp_path)
    state = api.room_state(gd, [tmp_path / "data"], START)
    assert state.round is None and not state.running and state.next_number == 1
    assert {p.status for p in state.players} == {"not joined"} and len(state.players) == 4
    assert state.standings == () and not state.scores_shown


def test_statuses_queries_last_activity_and_time_left_on_a_driven_clock(tmp_path: Path) -> None:
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    games(data)
    api.start_round(gd, None, T0)
    state = api.room_state(gd, [data], START + 100)
    assert (state.round, state.title, state.running, state.next_number) == (1, "One of two replicas is slow to "
                                                                            "start answering", True, 2)
    assert state.left_s == LIMIT_S - 200 and not state.time_up
    assert by_player(state) == {"ana": ("investigating", 1), "ben": ("handed in", 1), "dara": ("not joined", 0),
                                "eli": ("not joined", 0)}
    ana = next(p for p in state.players if p.player == "ana")
    assert ana.last_activity == START + 60 and ana.idle_s(START + 100) == 40.0
    [ben] = state.standings
    assert (ben.rank, ben.player, ben.team, ben.taken_s, ben.queries, ben.score) == (1, "ben", "blue", 90.0, 1, None)

    late = api.room_state(gd, [data], T0 + LIMIT_S + 1)  # the round's time is over: ana never handed in
    assert late.time_up and late.running and late.left_s == -1.0
    assert by_player(late)["ana"] == ("timed out", 1) and by_player(late)["ben"] == ("handed in", 1)


def test_a_hand_in_after_the_time_is_up_shows_as_timed_out(tmp_path: Path) -> None:
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    events = [*investigating_events(), (T0 + LIMIT_S + 2, "submit", {"ranking": investigating_events()[-1][2]
                                                                      ["ranking"], "discriminator": 1})]
    journal(data / "sessions" / "dara.jsonl", events, session_id="dara-1", player="dara")
    api.start_round(gd, 1, T0)
    assert by_player(api.room_state(gd, [data], START))["dara"] == ("handed in", 1)  # ahead of its time
    assert by_player(api.room_state(gd, [data], T0 + LIMIT_S + 5))["dara"] == ("timed out", 1)


def test_no_score_until_the_round_ends_then_the_recorded_ones(tmp_path: Path) -> None:
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    games(data)
    api.start_round(gd, None, T0)
    collected = gd.results / "round-01-tui-mini" / "blue--ben.json"  # as collection records it
    collected.parent.mkdir(parents=True)
    collected.write_text(json.dumps({"gameday": {"player": "ben", "score": 82.5}}), encoding="utf-8")
    running = api.room_state(gd, [data], START + 100)
    assert not running.scores_shown and [s.score for s in running.standings] == [None]
    times = api.round_times(gd)
    times[1] = (T0, START + 200)
    api.save_round_times(gd, times)
    ended = api.room_state(gd, [data], START + 300)
    assert ended.scores_shown and not ended.running and ended.round == 1 and ended.left_s == LIMIT_S - 300
    assert [(s.player, s.score) for s in ended.standings] == [("ben", 82.5)]


def test_start_and_end_refuse_what_cannot_be_done_now(tmp_path: Path) -> None:
    gd = make_day(tmp_path)
    with pytest.raises(api.RoomError, match="no round is running"):
        api.end_round(gd, [tmp_path / "data"], START)
    with pytest.raises(api.RoomError, match=r"no round '3'; rounds are 1\.\.2"):
        api.start_round(gd, 3, START)
    rnd, replay = api.start_round(gd, None, START)
    assert (rnd.number, replay) == (1, False)
    with pytest.raises(api.RoomError, match=r"round 1 is still running; `end` it first"):
        api.start_round(gd, None, START + 1)
    ended, got = api.end_round(gd, [tmp_path / "data"], START + 10)
    assert ended.number == 1 and got.files == {}
    assert api.round_times(gd)[1] == (START, START + 10)
    assert api.start_round(gd, None, START + 20)[0].number == 2
    api.end_round(gd, [tmp_path / "data"], START + 30)
    with pytest.raises(api.RoomError, match="every round was played"):
        api.start_round(gd, None, START + 40)
    assert api.start_round(gd, 1, START + 50) == (gd.rounds[0], True)  # a replay, said so


def test_a_message_and_a_hint_reach_one_players_game_only(tmp_path: Path) -> None:
    from game.session import Session

    gd = make_day(tmp_path)
    data = tmp_path / "data"
    with pytest.raises(api.RoomError, match="no round is running"):
        api.send_to_player(gd, [data], "ana", "message", "hi")
    api.start_round(gd, None, START)
    ana = Session.create(FIXTURE, 0, "ana", root=data)
    ben = Session.create(FIXTURE, 0, "ben", root=data)
    try:
        ana.start()
        ben.start()
        api.send_to_player(gd, [data], "ana", "message", "Look at [b]both[/b] replicas")
        api.send_to_player(gd, [data], "ana", "hint")
        got = ana.poll_gm()
        assert [(str(u.kind), u.sender) for u in got][:1] == [("message", "Facilitator sam")]
        assert str(got[1].kind) == "hint" and got[1].text == "Compare the two replicas with each other."
        assert got[0].text == "Look at [b]both[/b] replicas"  # data, kept literally
        assert ben.poll_gm() == []
        with pytest.raises(api.RoomError, match="dara has no game in this round yet"):
            api.send_to_player(gd, [data], "dara", "message", "hello")
        with pytest.raises(api.RoomError, match="on no team"):
            api.send_to_player(gd, [data], "zed", "message", "hello")
    finally:
        ana.close()
        ben.close()


def test_the_room_command_reports_a_bad_plan_on_its_line_without_a_traceback(tmp_path: Path) -> None:
    from tui.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("event: x\nresults: r\nrounds:\n  - incident: no-such-incident\nteams:\n  - name: blue\n"
                   "    players: [ana]\nbogus: 1\n", encoding="utf-8")
    run = CliRunner().invoke(main, ["gameday", "room", str(bad)])
    assert run.exit_code == 1 and "Traceback" not in run.output
    lines = run.output.strip().splitlines()
    assert any(line.startswith(f"{bad}:8:1: ") and "unknown field 'bogus'" in line and "(hint:" in line
               for line in lines), run.output
    bad.write_text("event: x\nresults: r\nrounds:\n  - incident: no-such-incident\nteams:\n  - name: blue\n"
                   "    players: [ana]\n", encoding="utf-8")
    run = CliRunner().invoke(main, ["gameday", "room", str(bad)])
    assert run.exit_code == 1 and "Traceback" not in run.output
    assert run.output.startswith(f"{bad}:4:"), run.output
    run = CliRunner().invoke(main, ["gameday", "room", str(tmp_path / "missing.yaml")])
    assert run.exit_code == 1 and "Traceback" not in run.output and "missing.yaml" in run.output


def test_the_console_sees_a_round_the_room_started_and_ends_it(tmp_path: Path) -> None:
    from test_gameday import Script

    from game.frontends.gameday_console import Console

    gd = make_day(tmp_path)
    out: list[str] = []
    script = Script(["rounds", lambda: api.start_round(gd, None, START), "status", "end", "quit"])
    Console(gd, [tmp_path / "data"], read_line=script, echo=out.append, clock=lambda: START + 60).run()
    text = "\n".join(out)
    assert "not started" in text and "Round 1 (tui-mini): 9:00 left; 0/4 handed in" in text
    assert "Round 1 ended: 0/4 handed in" in text
    assert api.round_times(gd)[1] == (START, START + 60)


HANG_S = 120.0
"""A bound on a wait that ends on a state (a hand-in arriving): a guard against a hang, never a time a test expects."""


@pytest.mark.slow  # collection scores the hand-ins on the fixture's worlds (built once per run)
def test_ending_a_round_early_collects_the_boards_its_time_up_hands_in(tmp_path: Path, tui_env: Path) -> None:
    """ana is still investigating when the facilitator ends the round: the end is TIME UP in her game, which
    hands her board in; end_round waits for that (a state: its bound here only guards against a hang) and
    collects it with ben's."""
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    games(data)
    sessions = data / "sessions"
    api.start_round(gd, None, T0)

    def anas_game() -> None:  # her game at TIME UP: the board as it stands, handed in
        while api.round_times(gd)[1][1] is None:
            time.sleep(0.02)
        handed = journal(tmp_path / "ana.jsonl", [*investigating_events(),
                                                  (START + 300, "submit", {"ranking": RANKING, "discriminator": 1})],
                         session_id="ana-1", player="ana")
        os.replace(handed, sessions / "ana.jsonl")

    game = threading.Thread(target=anas_game, daemon=True)
    game.start()
    ended, got = api.end_round(gd, [data], START + 300, settle_s=HANG_S)
    game.join(timeout=HANG_S)
    assert ended.number == 1 and sorted(got.files) == ["ana", "ben"]
    state = api.room_state(gd, [data], START + 310)
    assert state.scores_shown and {s.player for s in state.standings if s.score is not None} == {"ana", "ben"}


@pytest.mark.slow  # collection scores ben's hand-in on the fixture's worlds (built once per run)
def test_ending_a_round_early_stops_waiting_for_games_that_never_hand_in(tmp_path: Path, tui_env: Path) -> None:
    """dara's game was left open in a closed tab (and ana's too: nothing plays either): neither hands in at TIME
    UP, so end_round's wait ends at its bound, ben's hand-in is collected and neither of theirs."""
    gd = make_day(tmp_path)
    data = tmp_path / "data"
    games(data)
    journal(data / "sessions" / "dara.jsonl", investigating_events(), session_id="dara-1", player="dara")
    api.start_round(gd, None, T0)
    ended, got = api.end_round(gd, [data], START + 300, settle_s=0.2)
    assert ended.number == 1 and sorted(got.files) == ["ben"]
    state = api.room_state(gd, [data], START + 310)
    # dara reads "timed out" as anyone past the end does, but nothing of hers was handed in or collected
    assert by_player(state)["dara"] == ("timed out", 1) and by_player(state)["ana"] == ("timed out", 1)
