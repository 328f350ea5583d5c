"""The interviewer's screen follows a candidate's session live: a query the candidate runs (in another
thread, holding the journal's lock) appears within about a second, with the board by the candidate's
labels; m sends a message that reaches the candidate's session. The answer (truth, what each query
ruled out, the running score) shows once the candidate submits, or from the start with reveal."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_tui_support import FIXTURE, investigating_events, journal, make_app, run_async, screen_name, until

from game.query.gateway import Gateway
from game.session import Session

pytestmark = pytest.mark.slow  # drives the interviewer screen against a live session

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

CLOCK_SQL = ("SELECT replica, min(value) AS min_clock_mhz FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' "
             "GROUP BY replica")


def _gateway() -> Gateway:
    """A gateway on the fixture's telemetry (the candidate's own database)."""
    from incidents.loader import load_incident
    from telemetry_gen.cache import ensure_database

    return Gateway(Path(ensure_database(load_incident(FIXTURE), 0).path))


def _status(app: object) -> str:
    return str(app.screen.query_one("#gm-status").render())  # type: ignore[attr-defined]


def _panel(app: object, name: str) -> str:
    return str(app.screen.query_one(f"#gm-{name}").render())  # type: ignore[attr-defined]


def test_gm_screen_shows_a_candidates_query_live_and_sends_a_message(tui_env: Path) -> None:
    candidate = Session.create(FIXTURE, 0, "ada", root=tui_env)
    candidate.start()
    gateway = _gateway()

    async def go() -> None:
        app = make_app(tui_env, watch_session=candidate.path)
        async with app.run_test(size=(140, 44)) as pilot:
            await until(pilot, lambda: "gm" in app.marks, what="the GM screen")
            assert screen_name(app) == "GMScreen"
            screen = app.screen
            assert "ada" in _status(app) and "queries 0 / 12" in _status(app) and "answer hidden" in _status(app)
            # the answer stays hidden until the candidate submits
            assert "Hidden until the candidate submits" in _panel(app, "truth")
            assert "reduced clocks" not in _panel(app, "truth")
            assert not screen.query_one("#gm-score").display and not screen.query_one("#gm-evidence").display

            # the candidate runs a query in another thread; it shows up live
            worker = threading.Thread(target=candidate.run_query, args=(gateway, CLOCK_SQL))
            worker.start()
            table = screen.query_one("#gm-queries")
            await until(pilot, lambda: table.row_count == 1, timeout=30, what="the candidate's query")
            worker.join()
            assert str(table.get_row_at(0)[0]) == "Q1" and str(table.get_row_at(0)[3]) == "·"  # not revealed
            assert "DCGM_FI_DEV_SM_CLOCK" in str(screen.query_one("#gm-detail").render())
            assert "queries 1 / 12" in _status(app)

            # the board by the candidate's labels (throttle is B at seed 0), no ids, no truth mark yet
            candidate.rank([("throttle", 80.0), ("overload", 20.0)])
            await until(pilot, lambda: "80%" in _panel(app, "board"), timeout=5)
            board = _panel(app, "board")
            assert "1. B A GPU runs at reduced clocks  80%" in board and "2. D More traffic" in board
            assert "◆ truth" not in board and "throttle" not in board

            # m: a message, written to the inbox, delivered to the candidate, shown as delivered
            await pilot.press("m")
            await until(pilot, lambda: screen_name(app) == "SendScreen")
            await pilot.press(*"Why the clock?")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "GMScreen")
            await until(pilot, lambda: "waiting" in str(screen.query_one("#gm-feed").render()), timeout=5)
            [update] = candidate.poll_gm()
            assert (update.kind, update.text) == ("message", "Why the clock?")
            await until(pilot, lambda: "waiting" not in str(screen.query_one("#gm-feed").render()), timeout=5)
            assert "Why the clock?" in str(screen.query_one("#gm-feed").render())

            # h with no text: the incident's next hint
            await pilot.press("h")
            await until(pilot, lambda: screen_name(app) == "SendScreen")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "GMScreen")
            [hint] = candidate.poll_gm()
            assert (hint.kind, hint.cost) == ("hint", 5)
            await until(pilot, lambda: "hints 1 / 2" in _status(app), timeout=5)

            # the candidate submits: the answer shows (scoring re-runs Q1 on every world, in a worker)
            candidate.submit()
            await until(pilot, lambda: "answer hidden" not in _status(app), timeout=120, what="the score")
            assert "score " in _status(app) and "so far" not in _status(app)
            assert "A GPU runs at reduced clocks" in _panel(app, "truth")
            assert "◆ truth" in _panel(app, "board") and "Submitted" in _panel(app, "board")
            assert "-5.0" in _panel(app, "score")  # the hint's cost
            # the clock query tells the throttled replica apart from every rival world
            assert "✓ Q1 rules out" in _panel(app, "evidence") and "· open" not in _panel(app, "evidence")
            assert str(table.get_row_at(0)[3]) == "A, C, D"

            # r: the interview report, next to the session file
            await pilot.press("r")
            report = candidate.path.with_name(candidate.path.stem + ".interview.md")
            await until(pilot, report.exists, timeout=5, what="the report")
            assert "## Interviewer's notes" in report.read_text(encoding="utf-8")
            assert report.with_suffix(".html").exists()

    try:
        run_async(go())
    finally:
        candidate.close()
        gateway.close()


def test_reveal_shows_the_answer_and_the_running_score_before_submission(tui_env: Path) -> None:
    path = journal(tui_env / "sessions" / "tui-mini-fixed.jsonl", investigating_events())

    async def go() -> None:
        app = make_app(tui_env, watch_session=path, watch_reveal=True)
        async with app.run_test(size=(140, 44)) as pilot:
            await until(pilot, lambda: "gm" in app.marks, timeout=120, what="the GM screen")
            assert "so far" in _status(app) and "A GPU runs at reduced clocks" in _panel(app, "truth")
            assert "(if submitted now)" in _panel(app, "score")
            assert app.screen.query_one("#gm-evidence").display

    run_async(go())


def test_the_palette_offers_watching_a_session(tui_env: Path) -> None:
    candidate = Session.create(FIXTURE, 0, "ada", root=tui_env)

    async def go() -> None:
        app = make_app(tui_env)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            app.action_watch_session()
            await until(pilot, lambda: screen_name(app) == "SessionChooser")
            await pilot.press("enter")
            await until(pilot, lambda: "gm" in app.marks, what="the GM screen")
            assert "briefing" in _status(app)
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PickerScreen")

    try:
        run_async(go())
    finally:
        candidate.close()
