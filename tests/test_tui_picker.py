"""The picker a player comes back to in their second week: sorted by difficulty then title (the tutorial
first), `/` goes to the filter without typing a slash, a random incident and the incident of the day (a key
each and the palette)."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import FIXTURE, make_app, run_async, screen_name, until

from game import api
from game.rules.library import DEFAULT_INCIDENT, TUTORIAL_INCIDENT

pytestmark = pytest.mark.slow  # drives the app

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

LIBRARY_IDS = ("oom-at-peak", "fleet-stalls-after-error-burst", DEFAULT_INCIDENT, TUTORIAL_INCIDENT,
               "ttft-tripled-after-deploy", "intermittent-error-bursts")


def _files() -> list[Path]:
    return [api.find_incident(i) for i in LIBRARY_IDS]


def _rows(app: Any) -> list[str]:
    table = app.screen.query_one("#picker-table")
    return [Path(str(row.key.value)).stem for row in table.ordered_rows]


def test_the_library_reads_easiest_first_then_by_title() -> None:
    entries = api.by_difficulty(api.library(_files()))
    keys = [(e.difficulty, e.title.casefold()) for e in entries]
    assert keys == sorted(keys)
    assert entries[0].id == TUTORIAL_INCIDENT
    unknown = api.LibraryEntry(Path("x.yaml"), "x", "A broken one", problem="unreadable")
    assert api.by_difficulty([unknown, *entries])[-1] is unknown  # unknown difficulty goes last


def test_the_incident_of_the_day_is_fixed_by_the_date_and_never_the_tutorial() -> None:
    entries = api.library(_files())
    day = datetime.date(2025, 3, 14)
    chosen = api.incident_of_the_day(entries, day)
    assert chosen is not None and chosen.id != TUTORIAL_INCIDENT
    # the same whatever the list's order (the picker sorts; line mode need not)
    assert api.incident_of_the_day(list(reversed(entries)), day) == chosen
    days = {api.incident_of_the_day(entries, day + datetime.timedelta(days=n)).id for n in range(30)}  # type: ignore[union-attr]
    assert len(days) > 1  # it changes from day to day
    assert TUTORIAL_INCIDENT not in days
    drawn = {api.random_incident(entries, random.Random(n)).id for n in range(40)}  # type: ignore[union-attr]
    assert len(drawn) > 1 and TUTORIAL_INCIDENT not in drawn
    assert api.random_incident([e for e in entries if e.id == TUTORIAL_INCIDENT]) is None


def test_the_picker_is_sorted_and_the_newcomer_still_lands_on_the_tutorial(tui_env: Path) -> None:
    async def go() -> None:
        app = make_app(tui_env, incidents=_files(), preselect=None)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.screen.scanned, timeout=30)
            await pilot.pause()
            rows = _rows(app)
            assert rows[0] == TUTORIAL_INCIDENT
            difficulty = {e.id: e.difficulty for e in api.library(_files())}
            assert [difficulty[r] for r in rows] == sorted(difficulty[r] for r in rows)
            table = app.screen.query_one("#picker-table")
            assert rows[table.cursor_row] == TUTORIAL_INCIDENT

    run_async(go())


def test_slash_goes_to_the_filter_and_is_never_typed(tui_env: Path) -> None:
    async def go() -> None:
        app = make_app(tui_env, incidents=_files(), preselect=None)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            field = app.screen.query_one("#picker-filter")
            await pilot.press("o", "o", "m")
            assert field.value == "oom"
            await pilot.press("down")
            app.screen.query_one("#picker-table").focus()
            await pilot.pause()
            await pilot.press("slash")
            await until(pilot, lambda: app.focused is field)
            assert field.value == "oom"  # no slash typed
            await pilot.press("s", "l", "o", "w")  # replaces the selected filter
            assert field.value == "slow"
            await pilot.press("slash")
            assert field.value == "slow"
            assert DEFAULT_INCIDENT in _rows(app) and "oom-at-peak" not in _rows(app)

    run_async(go())


def test_f2_opens_a_random_incident_and_f3_the_incident_of_the_day(tui_env: Path) -> None:
    async def go() -> None:
        app = make_app(tui_env, incidents=[FIXTURE])
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            await pilot.press("f2")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen", what="the random briefing")
            assert app.play is not None and app.play.entry.id == "tui-mini"
            await pilot.press("escape")
            await until(pilot, lambda: screen_name(app) == "PickerScreen")
            await pilot.press("f3")
            await until(pilot, lambda: screen_name(app) == "BriefingScreen", what="the briefing of the day")
            assert app.play.entry.id == api.incident_of_the_day(api.library([FIXTURE])).id  # type: ignore[union-attr]

    run_async(go())


def test_random_and_today_are_in_the_palette_and_the_help(tui_env: Path) -> None:
    from tui.actions import help_text

    async def go() -> None:
        app = make_app(tui_env, incidents=[FIXTURE])
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: "picker" in app.marks)
            titles = {c.title for c in app.get_system_commands(app.screen)}
            assert {"Random", "Today", "Filter"} <= titles

    run_async(go())
    text = help_text(["picker"])
    assert "F2" in text and "F3" in text and "random" in text and "incident of the day" in text
