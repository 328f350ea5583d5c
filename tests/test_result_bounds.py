"""What a query's result may bring into the game's process (game.query.limits.MAX_RESULT_BYTES): the SQL worker
measures each row as it fetches and refuses a result over the bound whole, with a one-line message, before
fetching the rest; the game's side never reads an answer longer than the bound (and the SQL) allows. A
normal result arrives as before, intact. Memory is tracemalloc's peak in this (the game's) process."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from game.query.gateway import FETCH_ROWS, LocalGateway, QueryResult
from game.query.limits import MAX_RESULT_BYTES, ROW_CAP
from game.query.sandbox import Gateway

MB = 1024 * 1024
HUGE = "SELECT repeat('x', 100000) AS s FROM range(5000)"
"""The reviewer's attack: 5,000 rows of 100 KB text (each cell cut to 20,000 characters by the gateway:
still 20 MB at the row cap, five times the bound)."""


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("results") / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE requests AS SELECT range AS id, 'vllm-' || (range % 4) AS replica, "
                "CAST(range AS DOUBLE) / 1000 AS ttft_s, repeat('m', 150) AS message FROM range(3000)")
    con.close()
    return path


def _measured(fn: Callable[[], QueryResult]) -> tuple[QueryResult, float, int]:
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    try:
        result = fn()
        return result, time.perf_counter() - t0, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_result_is_refused_whole_with_a_message_and_the_game_stays_small(database: Path) -> None:
    with Gateway(database) as gw:
        pid = gw._proc.pid
        result, took, peak = _measured(lambda: gw.run(HUGE))
        assert not result.ok and result.error_kind == "refused" and result.rows == []
        assert result.error is not None and "\n" not in result.error
        assert result.error.startswith(f"the result is larger than {MAX_RESULT_BYTES // MB} MB")
        assert "select fewer or narrower columns" in result.error
        assert peak < MB, f"the game's process allocated {peak / MB:.1f} MB for a refused result"
        assert took < 10.0
        # refused by the worker (it stays), not by the game's backstop (which would kill it)
        after = gw.run("SELECT count(*) AS n FROM requests")
        assert after.ok and after.rows == [(3000,)] and gw._proc.pid == pid


def test_the_worker_stops_fetching_once_the_bound_is_passed(database: Path) -> None:
    with LocalGateway(database) as gw:
        result, _, peak = _measured(lambda: gw.run(HUGE))
    assert result.error_kind == "refused"
    # rows are fetched FETCH_ROWS at a time (100 KB each before the cell is cut): far from the
    # 500 MB the whole result would have taken
    assert peak < 3 * FETCH_ROWS * 100_000 + 2 * MAX_RESULT_BYTES, f"{peak / MB:.0f} MB in the worker"


def test_a_normal_result_arrives_intact(database: Path) -> None:
    with Gateway(database) as gw:
        result, _, peak = _measured(lambda: gw.run("SELECT * FROM requests ORDER BY id"))
    assert result.ok and result.row_count == ROW_CAP and result.truncated
    assert result.columns == ["id", "replica", "ttft_s", "message"]
    assert result.rows[7] == (7, "vllm-3", 0.007, "m" * 150)
    assert peak < 4 * MAX_RESULT_BYTES


def test_the_bound_is_where_it_is_documented(database: Path) -> None:
    """Rows of about 1 KB: 90 fit under 100,000 bytes and arrive, 110 do not and are refused."""
    with Gateway(database, max_result_bytes=100_000) as gw:
        fits = gw.run("SELECT repeat('a', 1000) AS s FROM range(90)")
        over = gw.run("SELECT repeat('a', 1000) AS s FROM range(110)")
    assert fits.ok and fits.row_count == 90 and fits.rows[0] == ("a" * 1000,)
    assert not over.ok and over.error is not None and "larger than 100000 bytes" in over.error
    with pytest.raises(ValueError, match="max_result_bytes"):
        LocalGateway(database, max_result_bytes=0)


def test_the_game_never_reads_an_answer_past_the_bound(database: Path) -> None:
    """The backstop: a worker that does not refuse (here: told a far larger bound than the game's) sends
    an answer the game does not read at all; the worker is replaced and the next query runs."""
    with Gateway(database, max_result_bytes=64 * 1024) as gw:
        gw._options["max_result_bytes"] = 1 << 40
        gw._kill()  # the next run starts a worker with the larger bound
        big = "SELECT repeat('b', 10000) AS s FROM range(1000)"  # 10 MB
        result, _, peak = _measured(lambda: gw.run(big))
        assert not result.ok and result.error_kind == "internal"
        assert result.error is not None and "sent back more than" in result.error
        assert peak < MB, f"the game's process allocated {peak / MB:.1f} MB reading an oversize answer"
        gw._options["max_result_bytes"] = 64 * 1024
        assert gw.run("SELECT 1 AS one").rows == [(1,)]


@pytest.mark.parametrize("sql", [
    "SELECT [repeat('y', 20000) FOR i IN range(300)] AS l FROM range(3)",  # wide lists: 6 MB a row
    "SELECT " + ", ".join(f"repeat('z', 20000) AS c{i}" for i in range(40)) + " FROM range(20)",  # wide rows
])
def test_wide_rows_are_refused_too(database: Path, sql: str) -> None:
    with Gateway(database) as gw:
        result: Any
        result, _, peak = _measured(lambda: gw.run(sql))
    assert result.error_kind == "refused" and "larger than" in (result.error or "")
    assert peak < MB
