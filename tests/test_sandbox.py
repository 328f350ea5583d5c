"""The player's queries run in a killable worker process (game.query.sandbox): query shapes that DuckDB's own
interrupt and memory limit do not stop are stopped from outside, within twice their limits."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from game.query.gateway import Gateway, LocalGateway
from game.query.sandbox import MEMORY_HEADROOM, _resident, memory_bytes
from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

DATA = Path(__file__).parent / "data" / "incidents"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(tmp_path_factory.mktemp("cache")))
        return Path(ensure_database(load_incident(DATA / "tui-mini.yaml"), 0).path)


@pytest.fixture(scope="module")
def gw(db: Path):
    with Gateway(db, timeout_s=2.0) as gateway:
        yield gateway


@pytest.mark.parametrize("sql", [
    "SELECT length(range(30000000))",
    "SELECT count(*) FROM (SELECT unnest(range(1000000000)))",
    "SELECT length(repeat('ab', 400000000))",
])
@pytest.mark.slow
def test_unbounded_builders_stop_within_twice_the_limits(gw: Gateway, sql: str) -> None:
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            proc = gw._proc
            if proc is not None:
                peak[0] = max(peak[0], _resident(proc.pid) or 0)
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result = gw.run(sql)
    done.set()
    watcher.join()
    assert not result.ok and result.error_kind in ("memory", "timeout")
    assert result.duration_s < 2 * gw.timeout_s
    assert peak[0] < gw._idle_rss + 2 * memory_bytes(gw.memory_limit)
    # the gateway comes back for the next query
    assert gw.run("SELECT 42 AS x").rows == [(42,)]


def test_an_interruptible_query_stops_at_its_time_limit(gw: Gateway) -> None:
    result = gw.run("SELECT sum(i) FROM range(100000000000) t(i)")
    assert result.error_kind == "timeout"
    assert gw.timeout_s <= result.duration_s < 2 * gw.timeout_s


def test_cancel_reaches_the_worker(db: Path) -> None:
    # a long time limit of its own: on a loaded machine the worker may take seconds to start the query,
    # and a 2 s limit would then race the cancel; without a working cancel this query runs into the limit
    with Gateway(db, timeout_s=60.0) as gw:
        out = {}
        sql = "SELECT sum(i) FROM range(100000000000) t(i)"
        runner = threading.Thread(target=lambda: out.setdefault("r", gw.run(sql)))
        runner.start()
        while not gw.busy:
            time.sleep(0.005)
        assert gw.cancel()
        runner.join()
        assert out["r"].error_kind == "cancelled"
        assert out["r"].duration_s < gw.timeout_s


def test_results_match_the_in_process_gateway(db: Path, gw: Gateway) -> None:
    sql = "SELECT replica, count(*) AS n, avg(prefill_s) AS p FROM requests GROUP BY replica ORDER BY replica"
    with LocalGateway(db) as local:
        expected = local.run(sql)
    got = gw.run(sql)
    assert got.ok and got.rows == expected.rows and got.columns == expected.columns
    assert [r.table for r in got.reads] == ["requests"]
    assert gw.run("SELECT * FROM read_csv('/etc/passwd')").error_kind == "refused"
    assert {e.table for e in gw.catalog()} >= {"requests", "metrics"}


def test_a_dead_worker_is_replaced(gw: Gateway) -> None:
    os.kill(gw._proc.pid, 9)
    gw._proc.wait(5)
    assert gw.run("SELECT 1 AS one").rows == [(1,)]


def test_limits_parse() -> None:
    assert memory_bytes("512MB") == 512_000_000
    assert memory_bytes("1GiB") == 1024**3
    assert MEMORY_HEADROOM < 2
    with pytest.raises(ValueError):
        memory_bytes("lots")


def test_a_cancel_that_lands_before_the_query_starts_is_repeated(db: Path) -> None:
    """The first interrupt reaches the connection before the statement runs (and is lost); a repeated
    cancel must still stop the query as cancelled, not leave it to the time limit."""
    gw = LocalGateway(db, timeout_s=30.0)
    armed, go = threading.Event(), threading.Event()
    execute = gw._execute

    def late_execute(sql: str, checked: object) -> object:
        armed.set()
        go.wait()
        return execute(sql, checked)  # type: ignore[arg-type]

    gw._execute = late_execute  # type: ignore[method-assign]
    out = {}
    runner = threading.Thread(target=lambda: out.setdefault("r", gw.run("SELECT sum(i) FROM range(100000000000) t(i)")))
    runner.start()
    armed.wait()
    assert gw.cancel()  # before execution: this interrupt is lost
    go.set()
    while runner.is_alive():
        gw.cancel()
        runner.join(0.05)
    gw.close()
    assert out["r"].error_kind == "cancelled"
    assert out["r"].duration_s < gw.timeout_s
