"""Which queries show a figure the player's own constants made (telemetry_gen.proving.thresholds): the shapes
a hostile player used to turn a size into a category or a sign, and the careful readings that must stay
readable."""

from __future__ import annotations

import pytest

from telemetry_gen.proving.thresholds import label_columns, made_columns, threshold_reason

SEEN = 0.1276  # the fleet's mean TTFT a player saw, then wrote back into the query

MADE = {
    "a window around what was seen": (
        f"SELECT CASE WHEN avg(ttft_s) BETWEEN 0.85 * {SEEN} AND 1.15 * {SEEN} THEN 'as seen' ELSE 'different' END "
        "AS verdict FROM requests"),
    "a boolean against a number": "SELECT avg(ttft_s) > 0.15 AS slow_fleet FROM requests",
    "the sign of an offset": "SELECT sign(avg(ttft_s) - 0.15) AS s FROM requests",
    "a number minus a figure": f"SELECT 1.15 * {SEEN} - avg(ttft_s) AS t_hi FROM requests",
    "a ratio to what was seen, minus one": f"SELECT avg(ttft_s) / {SEEN} - 1 AS change FROM requests",
    "membership in a list": "SELECT count(*) IN (3, 4) AS usual FROM events",
    "a clamp": "SELECT greatest(avg(ttft_s), 0.2) AS floor_at FROM requests",
    "rows of typed numbers beside the data's": (
        f"SELECT 'what I saw' AS k, {SEEN} AS v UNION ALL SELECT 'now', avg(ttft_s) FROM requests "
        f"UNION ALL SELECT 'also seen', {SEEN}"),
    "a constant CTE beside the data": (
        f"WITH c AS (SELECT {SEEN} AS v) SELECT 'seen' AS k, v FROM c "
        "UNION ALL SELECT 'now', avg(ttft_s) FROM requests"),
    "generated rows beside the data": (
        f"SELECT 'seen' AS k, {SEEN} AS v FROM range(1) UNION ALL SELECT 'now', avg(ttft_s) FROM requests"),
    "a threshold through a CTE": "WITH a AS (SELECT avg(ttft_s) AS m FROM requests) SELECT m > 0.15 AS slow FROM a",
    "an offset from a VALUES list": "SELECT avg(ttft_s) - v.k AS d FROM requests, (VALUES (0.15)) v(k)",
    "an offset from a scalar subquery of constants": (
        "WITH c AS (SELECT 0.15 AS k) SELECT avg(ttft_s) - (SELECT k FROM c) AS d FROM requests"),
    "a threshold on a scalar subquery": "SELECT (SELECT avg(ttft_s) FROM requests) > 0.15 AS slow",
    "parity of a sum": "SELECT CAST(floor(sum(e2e_s) * 1000003) AS BIGINT) % 2 AS c FROM requests",
    "the fraction of a scaled sum": "SELECT sum(e2e_s) * 1e6 - floor(sum(e2e_s) * 1e6) AS c FROM requests",
    "a sine of a mean": "SELECT sin(1e6 * avg(ttft_s)) AS c FROM requests",
    "the group nearest a number": (
        "SELECT replica FROM requests GROUP BY replica ORDER BY abs(avg(ttft_s) - 0.5) LIMIT 1"),
    "groups of a size kept by HAVING": (
        "SELECT replica FROM requests GROUP BY replica HAVING count(*) > 10 AND avg(ttft_s) BETWEEN 0.1 AND 0.15"),
    "a threshold per group": (
        "SELECT replica, CASE WHEN min(value) < 1500 THEN 'throttled' ELSE 'fine' END AS state FROM metrics "
        "WHERE name = 'DCGM_FI_DEV_SM_CLOCK' GROUP BY replica"),
    "a sample of the rows": "SELECT replica, avg(prefill_s) FROM requests TABLESAMPLE 50% GROUP BY replica",
    "a seeded sample, which another seed redraws": (
        "SELECT replica, avg(ttft_s) FROM requests TABLESAMPLE 10% (bernoulli, 42) GROUP BY replica"),
    "a sample inside a CTE": "WITH s AS (SELECT * FROM requests USING SAMPLE 50 ROWS) SELECT avg(ttft_s) FROM s",
    "a summary of every column": "SUMMARIZE requests",
    "a summary read through a query": "SELECT column_name, avg FROM (SUMMARIZE logs)",
    "a query plan": "EXPLAIN SELECT * FROM requests WHERE gateway_s > 0.02",
    "a query plan with timings": "EXPLAIN ANALYZE SELECT count(*) FROM requests",
}

READINGS = {
    "a group against its siblings": (
        "SELECT replica, min(value) AS min_sm_clock_mhz FROM metrics WHERE name = 'DCGM_FI_DEV_SM_CLOCK' "
        "GROUP BY replica"),
    "rounding as the last step, units, a per-row threshold inside the aggregate": (
        "SELECT replica, round(avg(ttft_s) * 1000, 1) AS ttft_ms, "
        "round(100.0 * sum(CASE WHEN ttft_s > 1 THEN 1 ELSE 0 END) / count(*), 1) AS pct_over_1s "
        "FROM requests GROUP BY 1"),
    "the slowest group first": "SELECT replica, avg(ttft_s) AS t FROM requests GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
    "enough rows per group": "SELECT replica, avg(ttft_s) FROM requests GROUP BY 1 HAVING 20 <= count(*)",
    "a time bucket, a WHERE and a HAVING": (
        "SELECT floor(epoch(ts) / 60) * 60 AS minute, avg(ttft_s) AS ttft FROM requests WHERE ttft_s > 0 "
        "GROUP BY 1 HAVING count(*) > 10 ORDER BY 1"),
    "the difference of two figures": (
        "SELECT avg(ttft_s) FILTER (WHERE ts > TIMESTAMP '2026-12-05 09:10') "
        "- avg(ttft_s) FILTER (WHERE ts <= TIMESTAMP '2026-12-05 09:10') AS change FROM requests"),
    "whether there is any (against zero)": (
        "SELECT CASE WHEN count(*) > 0 THEN 'yes' ELSE 'no' END AS any_oom FROM logs "
        "WHERE message LIKE '%OutOfMemory%'"),
    "seconds since a time stamp": (
        "SELECT replica, epoch(min(ts)) - epoch(TIMESTAMP '2026-12-05 09:00:00') AS first_s FROM logs GROUP BY 1"),
    "two periods side by side": (
        "SELECT 'before' AS period, avg(ttft_s) AS ttft FROM requests WHERE ts < TIMESTAMP '2026-12-05 09:10' "
        "UNION ALL SELECT 'after', avg(ttft_s) FROM requests WHERE ts >= TIMESTAMP '2026-12-05 09:10'"),
    "a change between buckets": (
        "WITH m AS (SELECT date_trunc('minute', ts) AS t, count(*) AS n FROM requests GROUP BY 1) "
        "SELECT t, n, n - lag(n) OVER (ORDER BY t) AS dn FROM m"),
    "a text compared with a text": "SELECT CASE WHEN max(app) = 'chat' THEN 'chat only' END AS apps FROM requests",
    "a whole table": "SELECT * FROM events",
    "a figure named sample": "SELECT replica, avg(ttft_s) AS sample FROM requests GROUP BY replica",
    "the columns described": "DESCRIBE requests",
}


@pytest.mark.parametrize("sql", list(MADE.values()), ids=list(MADE))
def test_a_figure_made_by_the_players_constant_is_named(sql: str) -> None:
    reason = threshold_reason(sql)
    assert reason is not None and reason.startswith("it ")


@pytest.mark.parametrize("sql", list(READINGS.values()), ids=list(READINGS))
def test_a_careful_reading_is_not_called_made(sql: str) -> None:
    assert threshold_reason(sql) is None


def test_sql_that_does_not_parse_is_left_to_the_gateway() -> None:
    assert threshold_reason("SELEC avg(ttft_s) > 0.1") is None


def test_a_query_nested_too_deeply_to_walk_is_not_read() -> None:
    """What a thousand nested calls hide is unknown, so the query reads as nothing rather than as anything."""
    from telemetry_gen.proving.thresholds import NESTED_TOO_DEEP

    deep = "SELECT " + "abs(" * 900 + "avg(ttft_s)" + ")" * 900 + " FROM requests"
    assert threshold_reason(deep) == NESTED_TOO_DEEP
    chain = "SELECT " + " + ".join(["avg(ttft_s)"] * 200) + " FROM requests"  # long, but shallow enough
    assert threshold_reason(chain) is None


def test_a_forked_process_parses_with_a_connection_of_its_own() -> None:
    """A DuckDB instance does not survive a fork (its worker threads stay in the parent): a process forked
    after scoring began (a query worker, a proof job) opens its own parser."""
    import os

    from telemetry_gen.proving import thresholds

    assert threshold_reason("SELECT avg(ttft_s) > 0.1 FROM requests") is not None
    parent = thresholds._parser()
    pid = os.fork()
    if pid == 0:  # the child: its own parser, and the same answer
        ok = thresholds._parser() is not parent and threshold_reason("SELECT avg(ttft_s) > 0.1 FROM requests")
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0



MADE_COLUMNS = {
    "labels of a threshold on a counter": (
        "SELECT DISTINCT CASE WHEN request_id > 421 THEN 'many' ELSE 'few' END AS k FROM requests", ["k"], {"k"}),
    "the same, unnamed": (
        "SELECT DISTINCT CASE WHEN request_id > 421 THEN 'many' ELSE 'few' END FROM requests", ["c"], {"c"}),
    "a boolean of a threshold": ("SELECT DISTINCT ttft_s > 5 AS slow FROM requests", ["slow"], {"slow"}),
    "a row number against a number": (
        "SELECT DISTINCT row_number() OVER () > 400 AS late FROM requests", ["late"], {"late"}),
    "made in a CTE and read outside": (
        "WITH c AS (SELECT CASE WHEN ttft_s > 5 THEN 'slow' ELSE 'ok' END AS k FROM requests) "
        "SELECT DISTINCT k FROM c", ["k"], {"k"}),
    "made in a CTE and read with a star": (
        "WITH c AS (SELECT replica, lower(app) AS a FROM requests) SELECT * FROM c", ["replica", "a"], {"a"}),
    "beside a data column": (
        "SELECT DISTINCT replica, e2e_s BETWEEN 1 AND 2 AS mid FROM requests", ["replica", "mid"], {"mid"}),
    "the first and last text in sort order": (
        "SELECT min(level) AS lo, max(level) AS hi FROM logs", ["lo", "hi"], {"lo", "hi"}),
    "a number spelled as a letter": (
        "SELECT DISTINCT chr(65 + CAST(floor(gateway_s * 100) AS INT)) AS g FROM requests", ["g"], {"g"}),
    "data columns are read: a table's own texts": (
        "SELECT DISTINCT replica, status FROM requests WHERE ttft_s > 5", ["replica", "status"], set()),
    "data columns are read: a whole table": ("SELECT * FROM events", ["ts", "kind", "detail"], set()),
    "data columns are read: renamed through a CTE": (
        "WITH c AS (SELECT replica AS r FROM requests) SELECT DISTINCT r FROM c", ["r"], set()),
    "data columns are read: a group and its count": (
        "SELECT level, count(*) AS n FROM logs GROUP BY level", ["level", "n"], {"n"}),
}


@pytest.mark.parametrize(("sql", "columns", "made"), list(MADE_COLUMNS.values()), ids=list(MADE_COLUMNS))
def test_columns_the_query_computed_are_named(sql: str, columns: list[str], made: set[str]) -> None:
    assert made_columns(sql, columns) == made


def test_sql_that_does_not_parse_has_no_made_columns() -> None:
    assert made_columns("SELEC nonsense", ["a"]) == frozenset()


@pytest.mark.parametrize(("sql", "columns", "labels"), [
    ("SELECT DISTINCT CASE WHEN request_id > 421 THEN 'many' ELSE 'few' END AS k FROM requests", ["k"], {"k"}),
    ("SELECT DISTINCT CASE WHEN request_id > 421 THEN 0 / 0 ELSE 1 END AS k FROM requests", ["k"], {"k"}),
    ("WITH c AS (SELECT ttft_s > 5 AS slow FROM requests) SELECT DISTINCT slow FROM c", ["slow"], {"slow"}),
    ("SELECT replica, num_preemptions > 0 AS k FROM requests", ["replica", "k"], set()),
    ("SELECT replica, sum(hits) / sum(queries) AS k FROM metrics GROUP BY 1", ["replica", "k"], set()),
])
def test_labels_of_a_threshold_are_told_from_other_computed_columns(sql: str, columns: list[str],
                                                                    labels: set[str]) -> None:
    """A computed number may show a NaN of its own (0/0 where a rival has nothing to divide), which is read;
    a label of the player's threshold may not show anything that is read, a NaN label included."""
    assert label_columns(sql, columns) == labels
