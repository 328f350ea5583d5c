"""Team play on the terminal's (and so the browser's) screen: ben's workspace on his team's shared game redraws
what ana records from her own tab (her query in the Queries log, her pin on the board, her saved ranking, a line
on the notice strip naming her), and when ana hands the team's board in, ben's screen goes to the held debrief
by itself. The test waits for what the screen shows, never for wall time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_rounds import write_round_state
from test_tui_support import FIXTURE, START, investigating_events, make_app, run_async, until

from game import api
from game.session import Session
from game.session import seat as seat_module

pytestmark = pytest.mark.slow  # drives the app

pytest_plugins = ("test_tui_support",)


def team_journal(path: Path) -> Path:
    """Team blue's shared game (ana and ben), investigating: ana's start, query, pin and ranking."""
    from game.session import FORMAT_VERSION, SESSION_FORMAT, file_digest

    header = {"format": SESSION_FORMAT, "format_version": FORMAT_VERSION, "session_id": "tui-mini-team",
              "incident_id": "tui-mini", "incident_digest": file_digest(FIXTURE), "incident_path": str(FIXTURE),
              "seed": 0, "player": "blue", "created": "2023-11-14T22:13:20Z", "members": ["ana", "ben"]}
    lines = [json.dumps(header)]
    lines += [json.dumps({"seq": i, "time": t, "kind": kind, "data": {**data, "by": "ana"}})
              for i, (t, kind, data) in enumerate(investigating_events(), start=1)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class TeamRound:
    """Round 1 of a game day, running since START with its debrief held, and team blue's shared game in it
    (`team_journal`); `seat` and `join` give this process a member's seat, as the server gives that member's app."""

    def __init__(self, tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        results = tmp_path / "results"
        results.mkdir()
        self.state = results / "gameday.json"
        write_round_state(self.state, START, None)
        self.path = team_journal(tui_env / "sessions" / "tui-mini-team.jsonl")
        self.registry = tmp_path / "registry"
        self.monkeypatch = monkeypatch

    def seat(self, player: str) -> None:
        """From here on, this process is `player`'s app: their seat on team blue is in the environment."""
        seat = seat_module.Seat(player, 1, "tui-mini", 0, str(self.registry), str(self.state), "held", 600.0,
                                "blue", ("ana", "ben"))
        self.monkeypatch.setenv(seat_module.SEAT_ENV, seat.to_env())

    def join(self, player: str) -> Session:
        """`player`'s app opening the team's game (and this process left in their seat)."""
        self.seat(player)
        return api.resume_session(self.path)


def test_a_members_screen_shows_the_teams_work_and_follows_its_hand_in(
        tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = TeamRound(tui_env, tmp_path, monkeypatch)
    path = team.path
    team.seat("ben")
    now = [START + 120.0]

    async def go() -> None:
        app = make_app(tui_env, resume_session=path, steady=True, clock=lambda: now[0])
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: "workspace" in app.marks)
            screen = app.screen
            log = screen.query_one("#query-log")
            board = screen.query_one("#board")
            assert app.play.session.member == "ben" and log.option_count == 1

            # ana, in her own tab (her own seat): a query, a pin against a rival, a new ranking
            ana = team.join("ana")
            team.seat("ben")  # back in ben's process
            telemetry = api.open_telemetry(api.variant_of(ana))
            try:
                ran = api.run_query(ana, telemetry, "SELECT count(*) AS n FROM requests")
                assert ran.index == 2
                api.pin(ana, 2, "overload", "refutes")
                api.rank(ana, [("overload", 40.0), ("throttle", 30.0), ("bad-deploy", 20.0), ("kv-pressure", 10.0)])

                strip = screen.query_one("#notices")
                await until(pilot, lambda: log.option_count == 2, what="ana's query in ben's Queries log")
                await until(pilot, lambda: 2 in board.evidence.get("overload", _none()).refutes,
                            what="ana's pin on ben's board")
                await until(pilot, lambda: strip.has("team"), what="the team's news on the strip")
                assert strip.current.text.startswith("ana saved the ranking: ")
                # ben had no unsaved changes of his own: his board follows the team's saved ranking
                assert [(i.id, i.confidence) for i in board.board.items][:2] == [("overload", 40), ("throttle", 30)]

                # ana hands the team's board in: ben's screen goes to the held debrief, and his hand-in is refused
                api.submit(ana)
                await until(pilot, lambda: "debrief-held" in app.marks, what="ben follows the team's hand-in")
                with pytest.raises(api.SessionError, match="ana already handed in team blue's board"):
                    api.submit(app.play.session)
            finally:
                telemetry.close()
                ana.close()

    run_async(go())


def _none() -> Any:
    from tui.board import Evidence

    return Evidence()


class _Scripted:
    """Line mode's input: before each line is read, what another member does meanwhile (a callable)."""

    def __init__(self, steps: list[tuple[Any, str]]) -> None:
        self.steps = list(steps)

    def readline(self) -> str:
        if not self.steps:
            return ""
        meanwhile, line = self.steps.pop(0)
        meanwhile()
        return line + "\n"


def test_line_mode_prints_the_teams_work_at_the_next_prompt_and_follows_its_hand_in(
        tui_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from test_rounds import _Echo

    from game.frontends.line_mode import PlainGame

    team = TeamRound(tui_env, tmp_path, monkeypatch)
    path = team.path
    ana = team.join("ana")
    ben = team.join("ben")
    out = io.StringIO()
    steps = [(lambda: api.pin(ana, 1, "overload", "refutes"), "hypotheses"),
             (lambda: api.submit(ana), "SELECT 1"),
             (lambda: None, "quit")]
    game = PlainGame(ben, _Echo(), _Scripted(steps), out, clock=lambda: START + 100.0)  # type: ignore[arg-type]
    try:
        assert game.run() == "submitted"
    finally:
        ana.close()
        ben.close()
    text = out.getvalue()
    # each at ben's next command, before it runs: the pin before his listing, the hand-in instead of his query
    pinned = text.index("[team] ana pinned Q1 as refutes ")
    assert pinned < text.index("servedrill>", text.index("servedrill>") + 1)
    assert "[team] ana handed in the team's board" in text and "cannot run a query" not in text
    assert "Handed in. The debrief opens when the round ends" in text and "ana handed in team blue's board." in text
    assert "Traceback" not in text
    # ben's query after the hand-in was refused and recorded nothing: the journal's last event is ana's submit
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["kind"] == "submit" and last["data"]["by"] == "ana"
