"""Sandboxed SQL gateway: every query the player types goes through `Gateway.run` (game.query.sandbox: a
killable worker process running this module's `LocalGateway`).

Defence in depth, outermost first:

1. the incident database is attached ``READ_ONLY`` under one fixed name (`CATALOG`) to a fresh in-memory
   instance of its own, and DuckDB itself is locked down (no file or network access, no extension
   loading, bounded memory, no spilling to disk, configuration locked);
2. each input is parsed by DuckDB (``extract_statements``): exactly one statement, and only SELECT
   (which covers WITH, DESCRIBE, SHOW, SUMMARIZE, VALUES, FROM-first) or EXPLAIN of such a SELECT;
3. DuckDB's parse tree of that SELECT (``json_serialize_sql``) is walked so that only table functions
   on an allow-list run, and a few scalar functions with side effects are refused (2 and 3 are the
   statement policy, `game.query.policy`);
4. a timer interrupts the connection at the time limit, and at most ``row_cap + 1`` rows are fetched,
   in chunks, each row's size measured as it is fetched: a result over ``max_result_bytes`` is refused
   before the rest is fetched (`game.query.limits.MAX_RESULT_BYTES`);
5. `game.query.sandbox` runs all this in a child process that is killed when it outlives the time limit or
   outgrows the memory limit (some DuckDB functions check neither).

After a query ran, `game.query.plan_analysis` reads what it read (tables, columns, scan filters) from
DuckDB's plans, still under the query's time limit; scoring uses that, the sandbox does not.

Threading: one query runs at a time. `run`, `catalog` and `close` take the query lock and block while
a query runs, so call them from a worker thread (never Textual's UI thread). `cancel` only takes a
short state lock and is safe to call from any thread, e.g. the UI thread on Escape.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import pickle
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from game.query.limits import MAX_RESULT_BYTES, MEMORY_LIMIT, ROW_CAP, TIMEOUT_S
from game.query.plan_analysis import TableRead, plan_reads
from game.query.policy import Checked, Refused, check_statement, files_refused, one_line

CATALOG = "telemetry"
"""The name every incident database is attached under, whichever world's file it is."""


@dataclass
class QueryResult:
    """Outcome of one `Gateway.run` call; never raised, always returned.

    `error_kind` is one of None, "empty", "refused", "sql", "timeout", "cancelled", "memory",
    "internal". `error` is a one-line message for the player; `detail` keeps DuckDB's full text
    (with its caret line) when there is one. `rows` holds at most ``row_cap`` rows and `row_count`
    is ``len(rows)``; `truncated` says more rows existed. `duration_s` is wall time in seconds from
    taking the query lock to the result; `started_at` is the wall clock (epoch seconds) at submit.
    """

    sql: str
    ok: bool
    error: str | None = None
    error_kind: str | None = None
    detail: str | None = None
    columns: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    duration_s: float = 0.0
    started_at: float = 0.0
    reads: list[TableRead] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: temporal values as ISO strings, intervals as seconds, decimals as floats,
        blobs as hex, non-finite floats as the strings "NaN", "Infinity", "-Infinity"."""
        out = {k: v for k, v in asdict(self).items() if k not in ("rows", "reads")}
        out["rows"] = [[json_safe(v) for v in row] for row in self.rows]
        out["reads"] = [r.to_dict() for r in self.reads]
        return out


@dataclass(frozen=True)
class CatalogEntry:
    """One column of the incident database, for the schema browser."""

    table: str
    column: str
    type: str
    description: str


def json_safe(value: Any) -> Any:
    """Convert one DuckDB result value into something `json.dumps` accepts without loss of meaning."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, decimal.Decimal):
        return json_safe(float(value))
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [json_safe(v) for v in value]
    return str(value)


MAX_CELL_CHARS = 20_000
"""A text or list cell longer than this is cut (with a note): a screen or a journal cannot use more."""


def _bounded(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + f"... [{len(value) - MAX_CELL_CHARS} more characters]"
    if isinstance(value, bytes) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS]
    if isinstance(value, list) and len(value) > MAX_CELL_CHARS // 10:
        return [*value[: MAX_CELL_CHARS // 10], f"... {len(value) - MAX_CELL_CHARS // 10} more items"]
    return value


FETCH_ROWS = 100
"""Rows fetched from DuckDB at a time: an oversize result is refused after at most this many rows more
than fit, so the worker never holds the whole of a huge result either."""


def result_bytes(value: Any) -> int:
    """The size a value (a row, a list of names) takes to cross to the game's process: its pickle, bytes."""
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def too_large(max_result_bytes: int, rows: int) -> str:
    """The one-line message of a result refused for its size, after `rows` rows fitted."""
    size = f"{max_result_bytes / (1024 * 1024):g} MB" if max_result_bytes >= 1024 * 1024 else \
        f"{max_result_bytes} bytes"
    return (f"the result is larger than {size} (the limit a result may take; {rows} rows fitted); "
            "select fewer or narrower columns, or aggregate")


def check_limits(*, row_cap: int, timeout_s: float, threads: int, max_result_bytes: int = MAX_RESULT_BYTES) -> None:
    """Raise ValueError for limits no gateway can run with (rows, seconds, threads, bytes)."""
    if max_result_bytes < 1:
        raise ValueError(f"max_result_bytes must be at least 1, got {max_result_bytes}")
    if row_cap < 1:
        raise ValueError(f"row_cap must be at least 1, got {row_cap}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")


class LocalGateway:
    """Read-only, time- and memory-limited access to one incident database file, in this process.

    The player's queries go through `Gateway` (a worker process running one of these), because some
    DuckDB functions build whole lists without checking for an interrupt or the memory limit.

    `row_cap` is in rows, `timeout_s` in seconds, `memory_limit` a DuckDB size string ("512MB"),
    `max_result_bytes` the pickled size a result's rows, names and types may reach (`result_bytes`); the
    defaults are the player's limits (game.query.limits). Construction raises for programmer errors (missing
    file, bad limits); `run` never raises.
    """

    def __init__(
        self,
        db_path: Path,
        *,
        memory_limit: str = MEMORY_LIMIT,
        threads: int = 1,
        row_cap: int = ROW_CAP,
        timeout_s: float = TIMEOUT_S,
        max_result_bytes: int = MAX_RESULT_BYTES,
    ) -> None:
        check_limits(row_cap=row_cap, timeout_s=timeout_s, threads=threads, max_result_bytes=max_result_bytes)
        self.max_result_bytes = max_result_bytes
        self.db_path = Path(db_path)
        if not self.db_path.is_file():
            raise FileNotFoundError(f"incident database not found: {self.db_path}")
        self.memory_limit = memory_limit
        self.threads = threads
        self.row_cap = row_cap
        self.timeout_s = timeout_s
        self._query_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._active: object | None = None
        self._stop_reason: str | None = None
        self._closed = False
        # Attached under one name rather than opened by its path: DuckDB names a database after its file,
        # and every world's file has its own name, so current_database(), information_schema and
        # duckdb_tables() would tell the worlds apart by something no reader of the telemetry reads.
        self._con = duckdb.connect(":memory:")
        try:
            self._con.execute(f"ATTACH {_quote(str(self.db_path))} AS {CATALOG} (READ_ONLY)")
            self._con.execute(f"USE {CATALOG}")
            self._lock_down()
        except Exception:
            self._con.close()
            raise

    # -- setup -------------------------------------------------------------------------------

    def _lock_down(self) -> None:
        settings = [
            # An empty temp directory also drops it from DuckDB's allowed_directories.
            ("temp_directory", "''"),
            ("enable_external_access", "false"),
            ("autoload_known_extensions", "false"),
            ("autoinstall_known_extensions", "false"),
            ("allow_community_extensions", "false"),
            ("memory_limit", _quote(self.memory_limit)),
            ("threads", str(int(self.threads))),
            ("max_temp_directory_size", "'0KB'"),
            ("lock_configuration", "true"),
        ]
        for name, value in settings:
            self._con.execute(f"SET {name} = {value}")

    # -- public API --------------------------------------------------------------------------

    def run(self, sql: str) -> QueryResult:
        """Run one player query. Never raises for player input; see `QueryResult` for the outcome."""
        started_at = time.time()
        with self._query_lock:
            t0 = time.perf_counter()
            result = self._run_locked(sql)
            result.started_at = started_at
            result.duration_s = time.perf_counter() - t0
            return result

    def cancel(self) -> bool:
        """Interrupt the running query, if any; it ends with error "cancelled". Safe from any thread.

        Returns True when a query was running and has been told to stop. Calling it again interrupts
        again: an interrupt that reached the connection before the query started executing is lost, and
        the sandbox repeats its cancel until the answer comes."""
        with self._state_lock:
            if self._active is None or self._stop_reason == "timeout":
                return False
            self._stop_reason = "cancelled"
            self._con.interrupt()
            return True

    def catalog(self) -> list[CatalogEntry]:
        """Tables and columns with descriptions: the database's `catalog` table or view when it has
        (table, column, type, description)-like columns, else DuckDB's column list and comments.
        Trusted SQL, not player input: raises RuntimeError once closed."""
        with self._query_lock:
            self._ensure_open()
            rows = self._catalog_from_table()
            if rows is not None:
                return rows
            fetched = self._con.execute(
                "SELECT table_name, column_name, data_type, coalesce(comment, '') FROM duckdb_columns() "
                "WHERE NOT internal AND database_name = current_database() "
                "ORDER BY schema_name, table_name, column_index"
            ).fetchall()
            return [CatalogEntry(str(t), str(c), str(ty), str(d)) for t, c, ty, d in fetched]

    def close(self) -> None:
        """Stop any running query and close the connection. Idempotent; safe from any thread."""
        self.cancel()
        with self._query_lock:
            if not self._closed:
                self._closed = True
                self._con.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> LocalGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one query ---------------------------------------------------------------------------

    def _run_locked(self, sql: str) -> QueryResult:
        if self._closed:
            return QueryResult(sql, ok=False, error="the query gateway is closed", error_kind="internal")
        try:
            checked = check_statement(self._con, sql)
        except Refused as exc:
            return QueryResult(sql, ok=False, error=str(exc), error_kind=exc.kind)
        except duckdb.Error as exc:
            return _error_result(sql, "sql", exc)
        except Exception as exc:  # e.g. text DuckDB cannot encode; a gateway bug must not crash the game
            return _error_result(sql, "internal", exc)
        token = self._arm()
        timer = threading.Timer(self.timeout_s, self._on_deadline, args=(token,))
        timer.daemon = True
        timer.start()
        try:
            return self._execute(sql, checked)
        finally:
            timer.cancel()
            with self._state_lock:
                self._active = None
                self._stop_reason = None

    def _fetch(self, description: list[Any]) -> tuple[list[tuple[Any, ...]], bool, bool]:
        """(rows, truncated, oversize): up to `row_cap` rows, each cell bounded (`_bounded`) and each row's
        size added up as it is fetched; `oversize` when names, types and rows pass `max_result_bytes`,
        and then fetching stops (the rows kept are only those that fitted)."""
        size = result_bytes([str(d[0]) for d in description]) + result_bytes([str(d[1]) for d in description])
        rows: list[tuple[Any, ...]] = []
        if size > self.max_result_bytes:
            return rows, False, True
        while len(rows) < self.row_cap:
            chunk = self._con.fetchmany(min(FETCH_ROWS, self.row_cap + 1 - len(rows)))
            for raw in chunk:
                if len(rows) == self.row_cap:  # the extra row fetched only to tell a truncated result
                    return rows, True, False
                row = tuple(_bounded(v) for v in raw)
                size += result_bytes(row)
                if size > self.max_result_bytes:
                    return rows, False, True
                rows.append(row)
            if not chunk:
                return rows, False, False
        # the cap reached exactly: one more row says whether there was more
        return rows, bool(self._con.fetchmany(1)), False

    def _execute(self, sql: str, checked: Checked) -> QueryResult:
        try:
            self._con.execute(checked.text)
            description = self._con.description or []
            rows, truncated, oversize = self._fetch(description)
        except duckdb.InterruptException as exc:
            self._drop_pending()
            if self._stop_reason == "cancelled":
                return QueryResult(sql, ok=False, error="cancelled", error_kind="cancelled")
            return QueryResult(
                sql,
                ok=False,
                error=f"stopped after {self.timeout_s:.1f} s (time limit)",
                error_kind="timeout",
                detail=str(exc),
            )
        except duckdb.OutOfMemoryException as exc:
            self._drop_pending()
            return QueryResult(
                sql,
                ok=False,
                error=f"query needs more memory than the {self.memory_limit} limit; "
                "aggregate or filter first",
                error_kind="memory",
                detail=str(exc),
            )
        except duckdb.PermissionException as exc:
            self._drop_pending()
            return QueryResult(
                sql, ok=False, error=files_refused("file access"), error_kind="refused", detail=str(exc)
            )
        except duckdb.Error as exc:
            self._drop_pending()
            return _error_result(sql, "sql", exc)
        except Exception as exc:  # a gateway bug must not take the game down with it
            self._drop_pending()
            return _error_result(sql, "internal", exc)
        self._drop_pending()
        if oversize:
            # refused whole, as any failed statement: a cut result would show the player rows that
            # scoring (which re-runs the query) could not stand behind
            return QueryResult(sql, ok=False, error=too_large(self.max_result_bytes, len(rows)),
                               error_kind="refused")
        # still under the query's timer: planning folds constants, so it can cost as much as the query
        reads = [] if checked.is_explain or self._stop_reason else plan_reads(self._con, checked.text)
        return QueryResult(
            sql,
            ok=True,
            columns=[str(d[0]) for d in description],
            types=[str(d[1]) for d in description],
            rows=rows,
            row_count=len(rows),
            truncated=truncated,
            reads=reads,
        )

    def _arm(self) -> object:
        token = object()
        with self._state_lock:
            self._active = token
            self._stop_reason = None
        return token

    def _on_deadline(self, token: object) -> None:
        # The token check stops a late timer from interrupting a later query.
        with self._state_lock:
            if self._active is token and self._stop_reason is None:
                self._stop_reason = "timeout"
                self._con.interrupt()

    def _drop_pending(self) -> None:
        # A streamed result left unread blocks the connection; dropping it also frees its memory.
        with contextlib.suppress(duckdb.Error):
            self._con.abort()

    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError("the query gateway is closed")

    def _catalog_from_table(self) -> list[CatalogEntry] | None:
        found = self._con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'catalog' AND schema_name = 'main' "
            "UNION ALL SELECT count(*) FROM duckdb_views() WHERE view_name = 'catalog' "
            "AND schema_name = 'main'"
        ).fetchall()
        if sum(int(r[0]) for r in found) == 0:
            return None
        self._con.execute("SELECT * FROM main.catalog")
        names = [str(d[0]).lower() for d in self._con.description or []]
        rows = self._con.fetchall()
        pick = {
            role: next((names.index(c) for c in candidates if c in names), None)
            for role, candidates in {
                "table": ("table", "table_name"),
                "column": ("column", "column_name"),
                "type": ("type", "data_type", "column_type"),
                "description": ("description", "comment", "doc"),
            }.items()
        }
        t_idx, c_idx = pick["table"], pick["column"]
        if t_idx is None or c_idx is None:
            return None
        ty_idx, d_idx = pick["type"], pick["description"]
        return [
            CatalogEntry(
                table=str(r[t_idx]),
                column=str(r[c_idx]),
                type="" if ty_idx is None or r[ty_idx] is None else str(r[ty_idx]),
                description="" if d_idx is None or r[d_idx] is None else str(r[d_idx]),
            )
            for r in rows
        ]


# -- helpers: errors ---------------------------------------------------------------------------


def _error_result(sql: str, kind: str, exc: BaseException) -> QueryResult:
    text = str(exc) or type(exc).__name__
    return QueryResult(sql, ok=False, error=one_line(text), error_kind=kind, detail=text)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def __getattr__(name: str) -> Any:
    # `Gateway` is the process-isolated one (game.query.sandbox), which itself runs a LocalGateway; importing it
    # lazily keeps the two modules free of an import cycle.
    if name == "Gateway":
        from game.query.sandbox import Gateway

        return Gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
