"""Tests for the sandboxed SQL gateway's checks and lockdown (game/query/gateway.py `LocalGateway`, which the
player's queries reach inside game.query.sandbox's worker process; tests/test_sandbox.py covers that process)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import shutil
import statistics
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from game.query.gateway import CATALOG, QueryResult, TableRead, json_safe
from game.query.gateway import LocalGateway as Gateway
from game.query.plan_analysis import filters_on, split_filter

N_METRICS = 200_000
N_REQUESTS = 20_000
SECRET = "root_cause: kv-cache-thrash-SECRET-7f3a"

# Closed-form columns, so numpy can recompute what SQL should return without sharing code with it.
METRICS_SQL = f"""
    SELECT TIMESTAMP '2026-03-01 00:00:00' + to_seconds((i // 4)::DOUBLE) AS ts,
           'r' || (i % 4)::VARCHAR AS replica,
           CASE WHEN (i // 4) % 2 = 0 THEN 'kv_usage' ELSE 'queue_len' END AS name,
           ((i * 7919) % 10007) / 10007.0 AS value
    FROM range({N_METRICS}) t(i)
"""
REQUESTS_SQL = f"""
    SELECT TIMESTAMP '2026-03-01 00:00:00' + to_seconds(j::DOUBLE) AS ts,
           'r' || (((j * j + 3 * j) // 7) % 4)::VARCHAR AS replica,
           j AS request_id,
           10 + (j * 37) % 3990 AS prompt_tokens,
           ((j * 7919) % 1009) / 1009.0 AS ttft_s
    FROM range({N_REQUESTS}) t(j)
"""


def _requests_numpy() -> dict[str, np.ndarray]:
    j = np.arange(N_REQUESTS, dtype=np.int64)
    return {
        "replica": np.char.add("r", (((j * j + 3 * j) // 7) % 4).astype(str)),
        "ttft_s": ((j * 7919) % 1009) / 1009.0,
    }


def _build_db(path: Path, *, with_catalog: bool = False) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute(f"CREATE TABLE metrics AS {METRICS_SQL}")
        con.execute(f"CREATE TABLE requests AS {REQUESTS_SQL}")
        con.execute("CREATE TABLE events (ts TIMESTAMP, replica VARCHAR, kind VARCHAR)")
        con.execute("INSERT INTO events VALUES ('2026-03-01 00:10:00', 'r2', 'preempt')")
        con.execute("CREATE VIEW slow_requests AS SELECT * FROM requests WHERE ttft_s > 0.5")
        con.execute("COMMENT ON COLUMN requests.ttft_s IS 'time to first token, seconds'")
        if with_catalog:
            con.execute(
                "CREATE TABLE catalog AS SELECT * FROM (VALUES "
                "('requests', 'ttft_s', 'DOUBLE', 'from the catalog table'), "
                "('metrics', 'value', 'DOUBLE', 'gauge value')) t(\"table\", \"column\", type, description)"
            )
    finally:
        con.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="module")
def db(data_dir: Path) -> Path:
    path = data_dir / "incident.duckdb"
    _build_db(path)
    return path


@pytest.fixture(scope="module")
def gw(db: Path):
    with Gateway(db, timeout_s=1.0) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def baseline(gw: Gateway) -> tuple:
    return _state(gw)


@pytest.fixture(scope="module")
def files(data_dir: Path) -> dict[str, Path]:
    yaml_path = data_dir / "incident_07.yaml"
    yaml_path.write_text(f"id: incident_07\n{SECRET}\n")
    csv_path = data_dir / "leak.csv"
    csv_path.write_text(f"a,b\n1,{SECRET}\n")
    return {"yaml": yaml_path, "csv": csv_path}


def _state(gateway: Gateway, *, functions: bool = False) -> tuple:
    """Everything a hostile query could have changed, read past the gateway's checks. Listing
    functions (for macros) costs ~40 ms, so only the whole-battery test asks for it."""
    con = gateway._con
    digest = hashlib.sha256(gateway.db_path.read_bytes()).hexdigest()
    objects = con.execute(
        "SELECT 'table', database_name, schema_name, table_name FROM duckdb_tables() "
        "UNION ALL SELECT 'view', database_name, schema_name, view_name FROM duckdb_views() "
        "WHERE NOT internal "
        "UNION ALL SELECT 'seq', database_name, schema_name, sequence_name FROM duckdb_sequences() "
        "UNION ALL SELECT 'db', database_name, '', coalesce(path, '') FROM duckdb_databases() "
        "UNION ALL SELECT 'var', '', '', name FROM duckdb_variables() ORDER BY ALL"
    ).fetchall()
    if functions:
        objects += con.execute(
            "SELECT 'fn', database_name, schema_name, function_name FROM duckdb_functions() "
            "WHERE NOT internal ORDER BY ALL"
        ).fetchall()
    counts = con.execute(
        "SELECT (SELECT count(*) FROM requests), (SELECT sum(ttft_s) FROM requests), "
        "(SELECT count(*) FROM metrics)"
    ).fetchall()
    knobs = con.execute(
        "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'), "
        "current_setting('memory_limit'), current_setting('threads'), current_database(), current_schema()"
    ).fetchall()
    return digest, objects, counts, knobs


def _clear(result: QueryResult) -> None:
    assert result.ok is False
    assert result.error, "a refusal must say why"
    assert "\n" not in result.error
    assert len(result.error) < 200
    assert result.rows == [] and result.reads == []


# -- lockdown ---------------------------------------------------------------------------------


def _canonical(name: str, value: str) -> object:
    scratch = duckdb.connect(":memory:")
    try:
        scratch.execute(f"SET {name} = {value}")
        return scratch.execute("SELECT current_setting(?)", [name]).fetchone()[0]
    finally:
        scratch.close()


EXPECTED_SETTINGS = [
    ("enable_external_access", "false"),
    ("autoload_known_extensions", "false"),
    ("autoinstall_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("memory_limit", "'512MB'"),
    ("threads", "1"),
    ("max_temp_directory_size", "'0KB'"),
    ("lock_configuration", "true"),
]


@pytest.mark.parametrize(("name", "value"), EXPECTED_SETTINGS, ids=[n for n, _ in EXPECTED_SETTINGS])
def test_setting_in_force_and_locked(gw: Gateway, name: str, value: str) -> None:
    result = gw.run(f"SELECT current_setting('{name}')")
    assert result.ok, result.error
    assert result.rows == [(_canonical(name, value),)]
    before = result.rows
    # The player cannot even ask ...
    _clear(gw.run(f"SET {name} = DEFAULT"))
    # ... and the connection itself refuses, so a bug in the statement checks would not unlock anything.
    with pytest.raises(duckdb.Error, match="locked"):
        gw._con.execute(f"RESET {name}")
    with pytest.raises(duckdb.Error, match="locked"):
        gw._con.execute("SET enable_external_access = true")
    assert gw.run(f"SELECT current_setting('{name}')").rows == before


def test_no_temp_directory_is_reachable(gw: Gateway) -> None:
    con = gw._con
    assert con.execute("SELECT current_setting('temp_directory'), current_setting('allowed_directories')"
                       ).fetchall() == [("", [])]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM duckdb_databases()",
    "FROM duckdb_databases",
    "SELECT path FROM main.duckdb_databases",
    "SELECT * FROM pragma_database_list",
    "SELECT name, setting FROM pg_catalog.pg_settings WHERE name = 'allowed_paths'",
    "SELECT name, value FROM duckdb_settings()",
    "SELECT * FROM pragma_database_size()",
    "SELECT current_setting('allowed_paths')",
    "SELECT current_setting('SECRET_DIRECTORY')",
    "SELECT current_setting('allowed_' || 'paths')",
    "SELECT current_setting(name) FROM (SELECT 'allowed_paths' AS name)",
])
def test_server_paths_are_not_shown(gw: Gateway, sql: str) -> None:
    result = gw.run(sql)
    assert not result.ok and result.error_kind == "refused", result.rows
    assert str(gw.db_path) not in (result.error or "")


def test_database_file_is_read_only(gw: Gateway) -> None:
    with pytest.raises(duckdb.Error):
        gw._con.execute("CREATE TABLE main.x AS SELECT 1")


def test_second_gateway_on_same_file_shares_the_lockdown(db: Path, gw: Gateway) -> None:
    with Gateway(db, timeout_s=2.0, row_cap=3) as other:
        result = other.run("SELECT * FROM metrics")
        assert result.ok and result.row_count == 3 and result.truncated
        assert other.run("SELECT current_setting('enable_external_access')").rows == [(False,)]
    assert gw.run("SELECT 1").ok


def test_each_gateway_has_its_own_limits(db: Path, gw: Gateway) -> None:
    # every gateway attaches the file to an instance of its own, so another's limits never apply to it
    with Gateway(db, memory_limit="64MB") as other:
        assert other.run("SELECT current_setting('memory_limit')").rows == [(_canonical("memory_limit", "'64MB'"),)]
    assert gw.run("SELECT current_setting('memory_limit')").rows == [(_canonical("memory_limit", "'512MB'"),)]


def test_every_database_reads_as_one_name_whatever_its_file_is_called(db: Path, tmp_path: Path) -> None:
    """A world's file name is not telemetry: two copies of one database under other names answer every
    question about names the same, so no query tells worlds apart by their files."""
    names = ("SELECT current_database(), current_catalog(), "
             "(SELECT string_agg(DISTINCT table_catalog, ',') FROM information_schema.tables), "
             "(SELECT string_agg(DISTINCT database_name, ',') FROM duckdb_tables())")
    seen = []
    for stem in ("world-a-0123abcd", "truth~2"):
        copy = tmp_path / f"{stem}.duckdb"
        copy.write_bytes(db.read_bytes())
        with Gateway(copy) as gateway:
            result = gateway.run(names)
            assert result.ok, result.error
            seen.append(result.rows)
            assert stem not in repr(result.rows)
    assert seen[0] == seen[1] == [(CATALOG, CATALOG, CATALOG, CATALOG)]


def test_constructor_rejects_bad_arguments(tmp_path: Path, db: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Gateway(tmp_path / "missing.duckdb")
    with pytest.raises(ValueError):
        Gateway(db, row_cap=0)
    with pytest.raises(ValueError):
        Gateway(db, timeout_s=0)


# -- accepted queries and their results -------------------------------------------------------

ACCEPTED = [
    "SELECT 1",
    "WITH s AS (SELECT replica, ttft_s FROM requests) SELECT replica, max(ttft_s) FROM s GROUP BY ALL",
    "FROM requests SELECT replica LIMIT 3",
    "FROM metrics",
    "DESCRIBE requests",
    "SHOW TABLES",
    "SHOW ALL TABLES",
    "SUMMARIZE requests",
    "VALUES (1, 'a'), (2, 'b')",
    "EXPLAIN SELECT count(*) FROM requests",
    "EXPLAIN ANALYZE SELECT count(*) FROM requests",
    "EXPLAIN (FORMAT json) SELECT * FROM metrics WHERE replica = 'r1'",
    "PIVOT requests ON replica IN ('r0', 'r1') USING count(*)",
    "SELECT replica, ttft_s, rank() OVER (PARTITION BY replica ORDER BY ttft_s DESC) AS k FROM requests "
    "QUALIFY k <= 2",
    "SELECT r.request_id, m.value FROM requests r ASOF JOIN metrics m "
    "ON r.replica = m.replica AND r.ts >= m.ts LIMIT 5",
    "SELECT list_transform([1, 2, 3], lambda x: x * 2)",
    "SELECT COLUMNS('ttft.*') FROM requests LIMIT 2",
    "SELECT * FROM duckdb_tables()",
    "SELECT * FROM information_schema.columns",
    "SELECT * FROM range(5)",
    "SELECT * FROM histogram(requests, replica)",
    "SELECT 1; -- trailing comment",
    "-- leading comment\nSELECT 2",
]


@pytest.mark.parametrize("sql", ACCEPTED)
def test_read_queries_are_accepted(gw: Gateway, sql: str) -> None:
    result = gw.run(sql)
    assert result.ok, result.error
    assert result.error is None and result.error_kind is None
    assert result.row_count == len(result.rows) > 0
    assert len(result.columns) == len(result.types) == len(result.rows[0])


def test_group_by_matches_numpy(gw: Gateway) -> None:
    result = gw.run(
        "SELECT replica, count(*) AS n, avg(ttft_s) AS mean_ttft FROM requests "
        "GROUP BY replica ORDER BY replica"
    )
    assert result.ok, result.error
    assert result.columns == ["replica", "n", "mean_ttft"]
    assert result.types == ["VARCHAR", "BIGINT", "DOUBLE"]
    data = _requests_numpy()
    names, inverse, counts = np.unique(data["replica"], return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=data["ttft_s"]) / counts
    assert [r[0] for r in result.rows] == list(names)
    assert [r[1] for r in result.rows] == list(counts)
    assert np.allclose([r[2] for r in result.rows], means)


def test_started_at_and_duration(gw: Gateway) -> None:
    before = time.time()
    result = gw.run("SELECT 1")
    after = time.time()
    assert before <= result.started_at <= after
    assert 0 < result.duration_s <= after - before + 1e-3


# -- row cap ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "truncated"), [(99, False), (100, False), (101, True), (100_000, True)])
def test_row_cap(db: Path, gw: Gateway, limit: int, truncated: bool) -> None:
    with Gateway(db, row_cap=100) as capped:
        result = capped.run(f"SELECT request_id FROM requests ORDER BY request_id LIMIT {limit}")
    assert result.ok, result.error
    assert result.truncated is truncated
    assert result.row_count == min(limit, 100)
    assert [r[0] for r in result.rows] == list(range(min(limit, 100)))


def test_row_cap_does_not_materialise_a_huge_result(db: Path, gw: Gateway) -> None:
    # 200k x 20k = 4e9 rows: only streaming the first row_cap + 1 rows can finish this in time.
    with Gateway(db, row_cap=50, timeout_s=5.0) as capped:
        result = capped.run("SELECT * FROM metrics, requests")
    assert result.ok, result.error
    assert result.truncated and result.row_count == 50
    assert result.duration_s < 2.0


# -- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sql", ["", "   \n\t", "-- only a comment", "/* nothing */", ";", " ; ; "])
def test_empty_input(gw: Gateway, sql: str) -> None:
    result = gw.run(sql)
    _clear(result)
    assert result.error_kind == "empty"
    assert "empty query" in result.error


def test_syntax_and_catalog_errors_are_one_line(gw: Gateway) -> None:
    result = gw.run("SELEC * FROM requests")
    _clear(result)
    assert result.error_kind == "sql" and "syntax error" in result.error
    result = gw.run("SELECT nope FROM requests")
    _clear(result)
    assert result.error_kind == "sql" and "nope" in result.error
    assert result.detail is not None and "LINE 1" in result.detail


FILE_READERS = ["read_csv", "read_csv_auto", "read_text", "read_blob", "read_json", "read_parquet"]
READ_ONLY = "only read queries are allowed"
FILES = "reading files or URLs is not allowed"
NOT_ALLOWED = "is not allowed here"
ONE = "one statement at a time"


def _hostile(files: dict[str, Path], db: Path) -> list[tuple[str, str, str]]:
    """(sql, expected error_kind, fragment the message must contain)."""
    out: list[tuple[str, str, str]] = []
    for reader in FILE_READERS:
        for path in ("/etc/passwd", str(files["yaml"])):
            out.append((f"SELECT * FROM {reader}('{path}')", "refused", FILES))
    out += [
        (f"SELECT * FROM '{files['csv']}'", "refused", FILES),
        ("SELECT * FROM 'leak.csv'", "refused", FILES),
        (f"FROM '{files['yaml']}'", "refused", FILES),
        ("SELECT * FROM glob('*')", "refused", FILES),
        (f"SELECT * FROM read_duckdb('{db}', table_name='requests')", "refused", FILES),
        (f"SELECT * FROM sniff_csv('{files['csv']}')", "refused", FILES),
        (f"SUMMARIZE SELECT * FROM read_text('{files['yaml']}')", "refused", FILES),
        (f"WITH a AS (SELECT * FROM read_text('{files['yaml']}')) SELECT * FROM a", "refused", FILES),
        (
            f"SELECT * FROM requests WHERE ttft_s > (SELECT count(*) FROM read_csv('{files['csv']}'))",
            "refused",
            FILES,
        ),
        (f"EXPLAIN ANALYZE SELECT * FROM read_text('{files['yaml']}')", "refused", FILES),
        ("SELECT * FROM read_csv('https://example.com/x.csv')", "refused", FILES),
        ("SELECT * FROM read_parquet('s3://bucket/key.parquet')", "refused", FILES),
        ("FROM 'https://example.com/data.parquet'", "refused", FILES),
        ("SELECT * FROM read_json('http://169.254.169.254/latest/meta-data/')", "refused", FILES),
        (f"ATTACH '{files['csv'].parent / 'x.duckdb'}' AS x", "refused", f"{READ_ONLY} (SELECT"),
        ("ATTACH ':memory:' AS scratch", "refused", "got ATTACH"),
        ("DETACH incident", "refused", "got DETACH"),
        (f"COPY requests TO '{files['csv'].parent / 'out.csv'}'", "refused", "got COPY"),
        (
            f"COPY (SELECT 1) TO '{files['csv'].parent / 'out.parquet'}' (FORMAT parquet)",
            "refused",
            "got COPY",
        ),
        (f"EXPORT DATABASE '{files['csv'].parent / 'dump'}'", "refused", "got EXPORT"),
        ("INSTALL httpfs", "refused", "got INSTALL"),
        ("LOAD httpfs", "refused", "got LOAD"),
        ("SET threads = 8", "refused", "got SET"),
        ("SET enable_external_access = true", "refused", "got SET"),
        ("RESET memory_limit", "refused", "got RESET"),
        ("PRAGMA enable_profiling", "refused", "got PRAGMA"),
        ("PRAGMA table_info('requests')", "refused", "got PRAGMA"),
        ("CREATE TABLE x AS SELECT 1", "refused", "got CREATE"),
        ("CREATE TEMP TABLE x AS SELECT * FROM requests", "refused", "got CREATE"),
        ("CREATE VIEW v AS SELECT 1", "refused", "got CREATE"),
        ("CREATE MACRO m(x) AS x + 1", "refused", "got CREATE"),
        ("CREATE SEQUENCE s", "refused", "got CREATE"),
        ("INSERT INTO requests (request_id) VALUES (-1)", "refused", "got INSERT"),
        ("UPDATE requests SET ttft_s = 0", "refused", "got UPDATE"),
        ("DELETE FROM requests", "refused", "got DELETE"),
        ("DROP TABLE requests", "refused", "got DROP"),
        ("ALTER TABLE requests RENAME TO r", "refused", "got ALTER"),
        ("CALL pragma_version()", "refused", "got CALL"),
        ("CHECKPOINT", "refused", "got CHECKPOINT"),
        ("USE memory", "refused", "got USE"),
        ("BEGIN TRANSACTION", "refused", "got BEGIN"),
        ("VACUUM", "refused", "got VACUUM"),
        ("ANALYZE", "refused", "got ANALYZE"),
        ("PREPARE p AS SELECT 1", "refused", "got PREPARE"),
        ("SET VARIABLE leak = 1", "refused", "got SET"),
        ("SELECT getvariable('leak')", "refused", NOT_ALLOWED),
        ("SELECT nextval('s')", "refused", NOT_ALLOWED),
        ("SELECT * FROM query('SELECT 1')", "refused", NOT_ALLOWED),
        ("SELECT * FROM query_table('requests')", "refused", NOT_ALLOWED),
        ("SELECT * FROM checkpoint()", "refused", NOT_ALLOWED),
        ("SELECT * FROM duckdb_extensions()", "refused", NOT_ALLOWED),
        ("SELECT * FROM duckdb_secrets()", "refused", NOT_ALLOWED),
        ("SELECT * FROM enable_logging()", "refused", NOT_ALLOWED),
        ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", "refused", NOT_ALLOWED),
        ("select 1; drop table requests", "refused", ONE),
        ("SELECT 1 -- harmless\n; DROP TABLE requests", "refused", ONE),
        ("SELECT 1 /* just a comment */; CREATE TEMP TABLE t AS SELECT 1", "refused", ONE),
        ("/* SELECT 1; */ DROP TABLE requests", "refused", "got DROP"),
        (
            "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
            "refused",
            "EXPLAIN is allowed only for read queries",
        ),
        ("EXPLAIN (ANALYZE) INSERT INTO requests (request_id) VALUES (-1)", "refused", "got INSERT"),
        ("EXPLAIN ANALYZE SELECT getvariable('x')", "refused", NOT_ALLOWED),
        ("PIVOT requests ON replica USING count(*)", "refused", "explicit value list"),
        # digests and random numbers turn any difference between worlds into coin flips (policy.py)
        ("SELECT CAST(hash(current_database() || 'k') % 2 AS INTEGER) AS c", "refused", NOT_ALLOWED),
        ("SELECT md5(CAST(sum(ttft_s) AS VARCHAR)) FROM requests", "refused", NOT_ALLOWED),
        ("SELECT md5_number(string_agg(replica, '')) FROM requests", "refused", NOT_ALLOWED),
        ("SELECT sha256(CAST(avg(ttft_s) AS VARCHAR)) FROM requests", "refused", NOT_ALLOWED),
        ("SELECT replica FROM requests WHERE random() < 0.5", "refused", NOT_ALLOWED),
        ("SELECT uuid() AS u", "refused", NOT_ALLOWED),
        # the server's clock and query counters differ per run and per world (each world its own connection)
        ("SELECT 1 WHERE epoch_us(now()) % 2 = 0", "refused", NOT_ALLOWED),
        ("SELECT current_timestamp AS t", "refused", NOT_ALLOWED),
        ("select Current_Date", "refused", NOT_ALLOWED),
        ("SELECT replica FROM requests WHERE ts > localtimestamp - INTERVAL 1 HOUR", "refused", NOT_ALLOWED),
        ("SELECT 1 WHERE current_query_id() // 2 % 2 = 0", "refused", NOT_ALLOWED),
        ("SELECT txid_current() AS t", "refused", NOT_ALLOWED),
        ("SELECT sum(memory_usage_bytes) % 3 AS m FROM duckdb_memory()", "refused", NOT_ALLOWED),
        ("SELECT column_name, compression FROM pragma_storage_info('events')", "refused", NOT_ALLOWED),
    ]
    return out


def _hostile_ids() -> list[str]:
    fake = {"yaml": Path("/tmp/incident.yaml"), "csv": Path("/tmp/leak.csv")}
    return [sql.replace("\n", " ")[:60] for sql, _, _ in _hostile(fake, Path("/tmp/db.duckdb"))]


@pytest.mark.parametrize("index", range(len(_hostile_ids())), ids=_hostile_ids())
def test_hostile_input_is_refused(
    gw: Gateway, baseline: tuple, files: dict[str, Path], db: Path, index: int
) -> None:
    sql, kind, fragment = _hostile(files, db)[index]
    result = gw.run(sql)
    _clear(result)
    assert result.error_kind == kind, result.error
    assert fragment in result.error
    assert SECRET not in json.dumps(result.to_dict())
    assert _state(gw) == baseline
    assert gw.run("SELECT count(*) FROM requests").rows == [(N_REQUESTS,)]


def test_hostile_battery_leaves_no_macros_or_objects_behind(
    gw: Gateway, files: dict[str, Path], db: Path
) -> None:
    before = _state(gw, functions=True)
    for sql, _, _ in _hostile(files, db):
        assert not gw.run(sql).ok, sql
    assert _state(gw, functions=True) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM metrics m, requests r WHERE CAST((m.value + r.ttft_s) * 1000003 AS BIGINT) % 7 = 3",
        "SELECT * FROM metrics m, requests r ORDER BY m.value * r.ttft_s, m.name || r.replica",
    ],
)
def test_cross_join_of_largest_tables_is_stopped(gw: Gateway, baseline: tuple, db: Path, sql: str) -> None:
    with Gateway(db, timeout_s=0.5) as quick:
        result = quick.run(sql)
        _clear(result)
        assert result.error_kind in ("timeout", "memory")
        assert result.duration_s < quick.timeout_s + 2.0
        assert quick.run("SELECT 42").rows == [(42,)]
    assert _state(gw) == baseline


def test_file_contents_never_reach_the_player(gw: Gateway, files: dict[str, Path]) -> None:
    # DuckDB's own guard, behind the parse-tree check: even a name our checks do not know is blocked.
    with pytest.raises(duckdb.PermissionException):
        gw._con.execute(f"SELECT * FROM read_text('{files['yaml']}')").fetchall()


# -- limits -------------------------------------------------------------------------------------

SLOW = "SELECT count(*) FROM metrics m, requests r WHERE CAST((m.value + r.ttft_s) * 1000003 AS BIGINT) % 7 = 3"


def test_time_limit_interrupts_and_gateway_recovers(db: Path, gw: Gateway) -> None:
    with Gateway(db, timeout_s=0.3) as quick:
        result = quick.run(SLOW)
        _clear(result)
        assert result.error_kind == "timeout"
        assert result.error == "stopped after 0.3 s (time limit)"
        assert 0.25 <= result.duration_s < 2.0
        after = quick.run("SELECT count(*) FROM requests WHERE replica = 'r1'")
        assert after.ok, after.error
        assert after.rows[0][0] > 0
        # A query that finishes in time is not hit by an earlier query's timer.
        time.sleep(0.35)
        assert quick.run("SELECT 7").rows == [(7,)]


def test_cancel_from_another_thread(db: Path, gw: Gateway) -> None:
    with Gateway(db, timeout_s=30.0) as gateway:
        assert gateway.cancel() is False  # nothing running
        box: list[QueryResult] = []
        worker = threading.Thread(target=lambda: box.append(gateway.run(SLOW)))
        worker.start()
        deadline = time.monotonic() + 5.0
        cancelled = False
        while not cancelled and time.monotonic() < deadline:
            time.sleep(0.05)
            cancelled = gateway.cancel()
        worker.join(timeout=10.0)
        assert cancelled and not worker.is_alive()
        (result,) = box
        _clear(result)
        assert result.error == "cancelled" and result.error_kind == "cancelled"
        assert result.duration_s < 5.0
        assert gateway.run("SELECT 5").rows == [(5,)]


def test_memory_limit_gives_a_clear_error(db: Path, tmp_path: Path) -> None:
    own = tmp_path / "own.duckdb"  # its own file: limits are per DuckDB instance, shared per file
    shutil.copyfile(db, own)
    with Gateway(own, memory_limit="64MB", timeout_s=20.0) as small:
        result = small.run("SELECT list(m.name || r.replica) FROM metrics m, requests r")
        _clear(result)
        assert result.error_kind == "memory"
        assert result.error == "query needs more memory than the 64MB limit; aggregate or filter first"
        assert small.run("SELECT count(*) FROM metrics").rows == [(N_METRICS,)]


# -- reads --------------------------------------------------------------------------------------


def _read(result: QueryResult, table: str) -> TableRead:
    assert result.ok, result.error
    matches = [r for r in result.reads if r.table == table]
    assert len(matches) == 1, result.reads
    return matches[0]


def test_reads_record_columns_and_pushed_filters(gw: Gateway) -> None:
    result = gw.run(
        "SELECT ts, value FROM metrics WHERE replica = 'r3' AND ts >= TIMESTAMP '2026-03-01 01:00:00' "
        "ORDER BY ts LIMIT 10"
    )
    assert [r.table for r in result.reads] == ["metrics"]
    read = _read(result, "metrics")
    # replica is filtered inside the scan and never projected, but the query names it: it was read
    assert read.columns[:2] == ["ts", "value"] and set(read.columns) == {"ts", "value", "replica"}
    (on_replica,) = filters_on(read, "replica")
    assert "'r3'" in on_replica
    (on_ts,) = filters_on(read, "ts")
    assert "2026-03-01 01:00:00" in on_ts and ">=" in on_ts
    assert filters_on(read, "value") == []
    assert filters_on(read, "name") == []


def test_reads_name_columns_the_optimiser_drops(gw: Gateway) -> None:
    counted = _read(gw.run("SELECT count(ts) FROM metrics"), "metrics")
    assert counted.columns == ["ts"]
    assert _read(gw.run("SELECT count(*) FROM metrics"), "metrics").columns == []
    both = gw.run("SELECT (SELECT max(value) FROM metrics) AS top, "
                  "(SELECT min(ts) FROM metrics WHERE name LIKE 'vllm%') AS first")
    assert set(_read(both, "metrics").columns) == {"value", "ts", "name"}


def test_reads_resolve_views_to_tables(gw: Gateway) -> None:
    result = gw.run("SELECT request_id FROM slow_requests WHERE replica = 'r1'")
    assert [r.table for r in result.reads] == ["requests"]
    read = _read(result, "requests")
    assert any("0.5" in f for f in filters_on(read, "ttft_s"))  # the view's own WHERE
    assert any("'r1'" in f for f in filters_on(read, "replica"))


def test_reads_of_a_join_and_unpushed_filter(gw: Gateway) -> None:
    result = gw.run(
        "SELECT r.request_id, m.value FROM requests r JOIN metrics m "
        "ON r.ts = m.ts AND r.replica = m.replica WHERE m.name LIKE 'kv%' OR m.value > 0.99 LIMIT 5"
    )
    assert {r.table for r in result.reads} == {"requests", "metrics"}
    metrics = _read(result, "metrics")
    assert {"ts", "replica"} <= set(metrics.columns)
    assert filters_on(metrics, "name"), metrics  # an OR stays in a FILTER right above the scan
    assert filters_on(metrics, "name") == filters_on(metrics, "value")
    assert filters_on(_read(result, "requests"), "name") == []


def test_reads_include_tables_answered_from_statistics(gw: Gateway) -> None:
    # The optimiser answers count(*) without scanning; the bound plan still names the table.
    result = gw.run("SELECT count(*) FROM metrics")
    assert result.rows == [(N_METRICS,)]
    assert [r.to_dict() for r in result.reads] == [{"table": "metrics", "columns": [], "filters": [],
                                                     "counted": True}]


@pytest.mark.parametrize(
    ("sql", "counted"),
    [
        ("SELECT replica, count(*) AS n FROM metrics GROUP BY replica", True),
        ("SELECT replica, count(value) FILTER (WHERE value > 0) FROM metrics GROUP BY replica", True),
        ("SELECT replica, count(*) OVER (PARTITION BY replica) FROM metrics LIMIT 3", True),
        ("SELECT * FROM (SELECT replica, count(*) AS n FROM metrics GROUP BY 1) WHERE n > 1", True),
        ("SELECT replica, avg(value) FROM metrics GROUP BY replica", False),
        ("SELECT replica, value FROM metrics LIMIT 3", False),
    ],
)
def test_reads_say_whether_the_query_counted_rows(gw: Gateway, sql: str, counted: bool) -> None:
    assert _read(gw.run(sql), "metrics").counted is counted


@pytest.mark.parametrize(
    "sql",
    [
        "DESCRIBE requests",
        "SHOW TABLES",
        "SELECT * FROM duckdb_tables()",
        "SELECT 1",
        "EXPLAIN SELECT * FROM metrics",
    ],
)
def test_no_reads_without_a_table_scan(gw: Gateway, sql: str) -> None:
    result = gw.run(sql)
    assert result.ok, result.error
    assert result.reads == []


def test_filters_on_uses_tokens_not_substrings() -> None:
    read = TableRead("requests", ["replica"], ["name = 'replica'", "replica_id = 3", "\"replica\" != 'r1'"])
    assert filters_on(read, "replica") == ["\"replica\" != 'r1'"]
    assert filters_on(read, "NAME") == ["name = 'replica'"]


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("(replica = 'r3')", ["replica = 'r3'"]),
        (
            "((ts >= '2026-01-01 01:00:00'::TIMESTAMP) AND optional: Dynamic Filter (ts))",
            ["ts >= '2026-01-01 01:00:00'::TIMESTAMP"],
        ),
        ("((ttft_s >= 0.2) AND (ttft_s <= 0.3))", ["ttft_s >= 0.2", "ttft_s <= 0.3"]),
        ("optional: (replica IN ('r1', 'r2'))", ["replica IN ('r1', 'r2')"]),
        ("((replica = 'r1') OR (replica = 'r2'))", ["(replica = 'r1') OR (replica = 'r2')"]),
        ("(kind = 'a AND b')", ["kind = 'a AND b'"]),
        ("(a = 1) AND (b = 2) OR (c = 3)", ["a = 1", "(b = 2) OR (c = 3)"]),
    ],
)
def test_split_filter(text: str, parts: list[str]) -> None:
    assert split_filter(text) == parts


# -- serialisation ------------------------------------------------------------------------------


def test_to_dict_is_json_safe(gw: Gateway) -> None:
    result = gw.run(
        "SELECT TIMESTAMP '2026-03-01 00:00:01.5' AS t, DATE '2026-03-01' AS d, 'nan'::DOUBLE AS n, "
        "'inf'::DOUBLE AS i, 1.25::DECIMAL(6, 2) AS dec, INTERVAL 3 DAY AS iv, '\\x01\\xff'::BLOB AS b, "
        "[1.5, 'nan'::DOUBLE] AS l, {'k': TIMESTAMP '2026-03-01 00:00:00'} AS s, NULL AS z"
    )
    assert result.ok, result.error
    text = json.dumps(result.to_dict(), allow_nan=False)
    row = json.loads(text)["rows"][0]
    assert dt.datetime.fromisoformat(row[0]) == dt.datetime(2026, 3, 1, 0, 0, 1, 500_000)
    assert row[1] == "2026-03-01"
    assert row[2] == "NaN" and row[3] == "Infinity"
    assert row[4] == 1.25
    assert row[5] == 3 * 86_400
    assert row[6] == "01ff"
    assert row[7] == [1.5, "NaN"]
    assert row[8] == {"k": "2026-03-01T00:00:00"}
    assert row[9] is None


def test_to_dict_round_trips_fields(gw: Gateway) -> None:
    result = gw.run("SELECT replica, ttft_s FROM requests WHERE replica = 'r2' LIMIT 3")
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["ok"] is True and data["columns"] == ["replica", "ttft_s"]
    assert data["row_count"] == 3 and data["truncated"] is False
    assert data["reads"][0]["table"] == "requests"
    assert data["started_at"] == result.started_at


def test_json_safe_negative_infinity_and_uuid() -> None:
    import uuid

    u = uuid.UUID(int=5)
    assert json_safe(-math.inf) == "-Infinity"
    assert json_safe(u) == str(u)
    assert json_safe(dt.timedelta(milliseconds=1500)) == 1.5


# -- catalog, lifecycle ---------------------------------------------------------------------------


def test_catalog_from_column_comments(gw: Gateway) -> None:
    entries = gw.catalog()
    by_key = {(e.table, e.column): e for e in entries}
    assert by_key[("requests", "ttft_s")].description == "time to first token, seconds"
    assert by_key[("requests", "ttft_s")].type == "DOUBLE"
    assert by_key[("metrics", "ts")].type == "TIMESTAMP"
    assert {e.table for e in entries} >= {"metrics", "requests", "events", "slow_requests"}


def test_catalog_prefers_catalog_table(tmp_path: Path) -> None:
    path = tmp_path / "with_catalog.duckdb"
    _build_db(path, with_catalog=True)
    with Gateway(path) as gateway:
        entries = gateway.catalog()
    assert [(e.table, e.column, e.type, e.description) for e in entries] == [
        ("requests", "ttft_s", "DOUBLE", "from the catalog table"),
        ("metrics", "value", "DOUBLE", "gauge value"),
    ]


def test_close_and_context_manager(db: Path, gw: Gateway) -> None:
    with Gateway(db) as gateway:
        assert gateway.run("SELECT 1").ok
    assert gateway.closed
    result = gateway.run("SELECT 1")
    _clear(result)
    assert "closed" in result.error
    gateway.close()  # idempotent
    assert gw.run("SELECT 1").ok  # closing one gateway leaves the shared database usable


def test_one_query_at_a_time(db: Path, gw: Gateway) -> None:
    with Gateway(db, timeout_s=0.3) as gateway:
        results: list[QueryResult] = []
        threads = [threading.Thread(target=lambda: results.append(gateway.run(SLOW))) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10.0)
        wall = time.perf_counter() - t0
    # Serialised, and each query's clock starts when it gets the connection: both get their full limit.
    assert [r.error_kind for r in results] == ["timeout", "timeout"]
    assert all(r.duration_s >= 0.28 for r in results)
    assert wall >= 0.56


def test_trivial_query_latency(gw: Gateway) -> None:
    gw.run("SELECT * FROM metrics WHERE replica = 'r1' LIMIT 20")
    times = [gw.run("SELECT * FROM metrics WHERE replica = 'r1' LIMIT 20").duration_s for _ in range(15)]
    assert statistics.median(times) < 0.1  # the TUI budget from submit to rows shown


# -- fuzz -----------------------------------------------------------------------------------------

FRAGMENTS = [
    "SELECT", "*", "FROM", "requests", "metrics", ";", "DROP", "TABLE", "read_csv('/etc/passwd')",
    "(", ")", "ATTACH", "COPY", "TO", "'x.csv'", "--", "/*", "*/", "EXPLAIN", "ANALYZE", "CREATE", "TEMP",
    "AS", "WITH", "x", "1", "getvariable('a')", "SET", "VARIABLE", "=", "WHERE", "replica", "'r1'", "\n",
    "query_table('requests')", "INSERT", "INTO", "VALUES", "LIMIT", "PRAGMA", "UNION", "ALL", ",",
]  # fmt: skip


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=80), st.lists(st.sampled_from(FRAGMENTS), max_size=14).map(" ".join)))
def test_run_never_raises_and_never_writes(gw: Gateway, baseline: tuple, sql: str) -> None:
    result = gw.run(sql)
    assert isinstance(result, QueryResult)
    assert result.ok or (result.error and "\n" not in result.error)
    json.dumps(result.to_dict(), allow_nan=False)
    assert _state(gw) == baseline
