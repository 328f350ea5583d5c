"""The interviewer's screen follows a candidate's session live: a query the candidate runs (in another
thread, holding the journal's lock) appears within about a second, with the signals it observed, the
board and the running score; m sends a message that reaches the candidate's session."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from test_tui_support import FIXTURE, make_app, run_async, screen_name, until

from game.autoplay import PlannedGateway, PlannedQuery
from game.observe import Read
from game.session import Session

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

CLOCK_SQL = ("SELECT replica, min(value) AS min_clock_mhz FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' "
             "GROUP BY replica")
CLOCK = PlannedQuery(CLOCK_SQL, (Read("metrics", ("replica", "name", "value"),
                                      ("name = 'DCGM_FI_DEV_SM_CLOCK'",)),))


def _status(app: object) -> str:
    return str(app.screen.query_one("#gm-status").render())  # type: ignore[attr-defined]


def test_gm_screen_shows_a_candidates_query_live_and_sends_a_message(tui_env: Path) -> None:
    candidate = Session.create(FIXTURE, 0, "ada", root=tui_env)
    candidate.start()

    async def go() -> None:
        app = make_app(tui_env, watch_session=candidate.path)
        async with app.run_test(size=(140, 44)) as pilot:
            await until(pilot, lambda: "gm" in app.marks, what="the GM screen")
            assert screen_name(app) == "GMScreen"
            screen = app.screen
            assert "ada" in _status(app) and "queries 0 / 12" in _status(app)
            truth = str(screen.query_one("#gm-truth").render())
            assert "A GPU runs at reduced clocks" in truth
            assert "not yet" in str(screen.query_one("#gm-signals").render())

            # the candidate runs a query in another thread; it shows up live
            ran_at = time.monotonic()
            worker = threading.Thread(target=candidate.run_query, args=(PlannedGateway([CLOCK]), CLOCK_SQL))
            worker.start()
            table = screen.query_one("#gm-queries")
            await until(pilot, lambda: table.row_count == 1, timeout=5, what="the candidate's query")
            assert time.monotonic() - ran_at < 1.5
            worker.join()
            assert table.get_row_at(0)[0] == "Q1" and "clock-drop" in table.get_row_at(0)[3]
            assert "DCGM_FI_DEV_SM_CLOCK" in str(screen.query_one("#gm-detail").render())
            assert "✓ Q1" in str(screen.query_one("#gm-signals").render())
            assert "queries 1 / 12" in _status(app)

            candidate.rank([("throttle", 80.0), ("overload", 20.0)])
            await until(pilot, lambda: "80%" in str(screen.query_one("#gm-board").render()), timeout=5)
            assert "◆ truth" in str(screen.query_one("#gm-board").render())

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

            # h with no text: the incident's next hint; its cost shows in the running score
            await pilot.press("h")
            await until(pilot, lambda: screen_name(app) == "SendScreen")
            await pilot.press("enter")
            await until(pilot, lambda: screen_name(app) == "GMScreen")
            [hint] = candidate.poll_gm()
            assert (hint.kind, hint.cost) == ("hint", 5)
            await until(pilot, lambda: "hints 1 / 2" in _status(app), timeout=5)
            assert "-5.0" in str(screen.query_one("#gm-score").render())

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
