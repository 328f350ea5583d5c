"""One row cap (game.query.limits): every gateway's default, and line mode shows every row a query returns
(`more` pages through them), so what scoring computes evidence on is what the player could see."""

from __future__ import annotations

import inspect
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from game.frontends.line_mode import SHOWN_ROWS, PlainGame, help_text
from game.query import limits
from game.query.gateway import LocalGateway
from game.query.sandbox import Gateway, Sandbox
from game.session import Session
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

INCIDENT = Path(__file__).parent / "data" / "incidents" / "drill-slow-replica.yaml"


def _default(cls: type, name: str) -> object:
    return inspect.signature(cls.__init__).parameters[name].default


@pytest.mark.parametrize("cls", [LocalGateway, Sandbox, Gateway])
def test_the_gateways_default_to_the_player_limits(cls: type) -> None:
    assert _default(cls, "row_cap") == limits.ROW_CAP == limits.PLAYER_LIMITS.row_cap
    assert _default(cls, "timeout_s") == limits.PLAYER_LIMITS.timeout_s
    assert _default(cls, "memory_limit") == limits.PLAYER_LIMITS.memory_limit


def test_the_front_ends_default_to_the_cap() -> None:
    from tui.app import ServedrillApp
    from tui.resultview import SHOWN_ROWS as TUI_ROWS

    assert _default(ServedrillApp, "limits") is limits.PLAYER_LIMITS
    assert TUI_ROWS == limits.ROW_CAP  # the TUI's table shows every row the gateway returns
    with pytest.raises(AttributeError):
        limits.PLAYER_LIMITS.row_cap = 5  # type: ignore[misc]  # frozen


@pytest.fixture(scope="module")
def database(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield Path(ensure_database(load_incident(INCIDENT), 0).path)


@pytest.fixture(scope="module")
def gateway(database: Path) -> Iterator[Gateway]:
    with Gateway(database) as gw:
        yield gw


def _play(gateway: Gateway, lines: list[str], root: Path) -> tuple[str, Session]:
    session = Session.create(INCIDENT, 0, "ada", root=root)
    session.start()
    out = io.StringIO()
    PlainGame(session, gateway, io.StringIO("\n".join([*lines, "quit"]) + "\n"), out).run()
    return out.getvalue(), session


def _numbers(text: str) -> list[int]:
    """The values of the `i` column printed in `text` (a cell on a line of its own)."""
    return [int(line) for line in text.splitlines() if line.strip().isdigit()]


def test_more_pages_through_the_last_result(gateway: Gateway, tmp_path: Path) -> None:
    assert SHOWN_ROWS == 40
    said, session = _play(gateway, ["more", "SELECT range AS i FROM range(95)", "more", "more", "more",
                                     "SELECT * FROM no_such_table", "more"], tmp_path)
    try:
        before, first, second, third, end, failed, after = said.split("servedrill> ")[1:8]
        assert before.startswith("error: no result to page through yet: run a query first")
        assert _numbers(first) == list(range(40))
        assert "... 55 more rows: type more to see them" in first and "Q1: 95 rows in" in first
        assert _numbers(second) == list(range(40, 80))
        assert "Q1: rows 41-80 of 95; 15 more: type more to see them" in second
        assert _numbers(third) == list(range(80, 95)) and "Q1: rows 81-95 of 95\n" in third
        assert end.startswith("no more rows: Q1 has 95 rows")
        assert failed.startswith("error:")  # a statement that failed leaves the last result alone
        assert after.startswith("no more rows: Q1 has 95 rows")
        assert [q.data["index"] for q in session.queries] == [1]  # more is not a query
        assert [e.kind for e in session.events] == ["start", "query"]  # nor anything else in the journal
    finally:
        session.close()
    assert "more" in help_text() and "the next 40 rows of the last result" in help_text()


def test_a_result_over_the_cap_stops_at_the_cap_and_says_so(gateway: Gateway, tmp_path: Path) -> None:
    cap = limits.ROW_CAP
    result = gateway.run(f"SELECT range AS i FROM range({cap + 500})")
    assert result.ok and result.truncated and result.row_count == len(result.rows) == cap
    assert [row[0] for row in result.rows] == list(range(cap))
    exact = gateway.run(f"SELECT range AS i FROM range({cap})")
    assert exact.row_count == cap and not exact.truncated

    pages = (cap - 1) // SHOWN_ROWS  # `more`s until the last row is out
    said, session = _play(gateway, [f"SELECT range AS i FROM range({cap + 500})", *["more"] * (pages + 1)],
                          tmp_path)
    try:
        note = f"(truncated: the result stopped at {cap} rows, the row cap"
        assert f"Q1: {cap} rows {note}" in said
        assert _numbers(said) == list(range(cap))  # every row the gateway returned, once, in order
        assert f"no more rows: Q1 has {cap} rows {note}" in said
    finally:
        session.close()
