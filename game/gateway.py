"""Sandboxed SQL gateway: every query the player types goes through `Gateway.run` (game.sandbox: a
killable worker process running this module's `LocalGateway`).

Defence in depth, outermost first:

1. the incident database is opened ``read_only`` and DuckDB itself is locked down (no file or network
   access, no extension loading, bounded memory, no spilling to disk, configuration locked);
2. each input is parsed by DuckDB (``extract_statements``): exactly one statement, and only SELECT
   (which covers WITH, DESCRIBE, SHOW, SUMMARIZE, VALUES, FROM-first) or EXPLAIN of such a SELECT;
3. DuckDB's parse tree of that SELECT (``json_serialize_sql``) is walked so that only table functions
   on an allow-list run, and a few scalar functions with side effects are refused;
4. a timer interrupts the connection at the time limit, and at most ``row_cap + 1`` rows are fetched;
5. `game.sandbox` runs all this in a child process that is killed when it outlives the time limit or
   outgrows the memory limit (some DuckDB functions check neither).

Threading: one query runs at a time. `run`, `catalog` and `close` take the query lock and block while
a query runs, so call them from a worker thread (never Textual's UI thread). `cancel` only takes a
short state lock and is safe to call from any thread, e.g. the UI thread on Escape.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

READ_KINDS = "SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN"

# Table functions that only read the attached database, DuckDB's own metadata, or generate values.
# Anything else (file readers, query(), query_table(), checkpoint(), scans over Python objects, ...)
# is refused: an allow-list keeps new DuckDB functions out until someone looks at them.
ALLOWED_TABLE_FUNCTIONS: frozenset[str] = frozenset(
    {
        "range",
        "generate_series",
        "unnest",
        "repeat",
        "repeat_row",
        "json_each",
        "json_tree",
        "histogram",
        "histogram_values",
        "test_all_types",
        "pg_timezone_names",
        "icu_calendar_names",
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_dependencies",
        "duckdb_functions",
        "duckdb_indexes",
        "duckdb_keywords",
        "duckdb_memory",
        "duckdb_optimizers",
        "duckdb_schemas",
        "duckdb_sequences",
        "duckdb_tables",
        "duckdb_types",
        "duckdb_views",
        "pragma_table_info",
        "pragma_show",
        "pragma_version",
        "pragma_platform",
        "pragma_storage_info",
        "pragma_collations",
    }
)

# Scalar functions refused wherever they appear: session variables (SET VARIABLE is refused, so these
# could only mislead), sequences and RNG state (side effects), and writes to DuckDB's log.
# Settings and catalogue functions that name files or folders on the server (the database's own path,
# the allowed paths, secret and extension folders): players see the incident, not the host.
PATH_SETTINGS: frozenset[str] = frozenset(
    {"allowed_paths", "allowed_directories", "secret_directory", "home_directory", "temp_directory",
     "extension_directory", "custom_extension_repository", "autoinstall_extension_repository",
     "log_query_path", "profiling_output", "profile_output", "custom_user_agent"}
)
SERVER_PATH_TABLE_FUNCTIONS: frozenset[str] = frozenset(
    {"duckdb_databases", "duckdb_settings", "duckdb_temporary_files", "pragma_database_size"}
)

REFUSED_SCALAR_FUNCTIONS: frozenset[str] = frozenset(
    {"getvariable", "nextval", "currval", "setval", "setseed", "write_log"}
)

_FILE_READER_PREFIXES = ("read_", "parquet_", "iceberg_", "delta_", "sniff_")
_FILE_READER_NAMES = frozenset({"glob", "arrow_scan", "pandas_scan", "parquet_scan", "sqlite_scan"})


def _files_refused(what: str) -> str:
    return (
        f"reading files or URLs is not allowed ({what}); query the incident tables (SHOW TABLES lists them)"
    )


@dataclass
class TableRead:
    """One table a query read, as DuckDB's optimised plan shows it.

    `table` is the base table behind any view (schema-qualified only outside ``main``); `columns` are
    the columns the optimised plan projects, in plan order, then any other column the query referred
    to (the bound plan, before the optimiser drops a column used only in a pushed-down filter or
    rewrites count(col) of a NOT NULL column to count(*)); `filters` are predicates applied at the
    scan: filters DuckDB pushed into the scan plus a FILTER operator sitting directly on it, split on
    top-level AND. A query that names no column of a table (``count(*)``) has no columns for it.
    `counted` is true when a count aggregate (``count(*)``, ``count(col)``, also as a window function)
    sits above the table's scan: the query counted its rows.
    """

    table: str
    columns: list[str] = field(default_factory=list)
    filters: list[str] = field(default_factory=list)
    counted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def filters_on(read: TableRead, column: str) -> list[str]:
    """Filters of `read` that mention `column` (case-insensitive), decided by DuckDB's tokenizer so that
    a column name inside a string literal does not count."""
    want = column.lower()
    return [f for f in read.filters if want in _identifiers(f)]


class _Refused(Exception):
    """Player input that must not run; the message is shown to the player as is."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class _Checked:
    text: str
    is_explain: bool


def check_limits(*, row_cap: int, timeout_s: float, threads: int) -> None:
    """Raise ValueError for limits no gateway can run with (rows, seconds, threads)."""
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

    `row_cap` is in rows, `timeout_s` in seconds, `memory_limit` a DuckDB size string ("512MB").
    Construction raises for programmer errors (missing file, bad limits); `run` never raises.
    """

    def __init__(
        self,
        db_path: Path,
        *,
        memory_limit: str = "512MB",
        threads: int = 1,
        row_cap: int = 5000,
        timeout_s: float = 10.0,
    ) -> None:
        check_limits(row_cap=row_cap, timeout_s=timeout_s, threads=threads)
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
        self._con = duckdb.connect(str(self.db_path), read_only=True)
        try:
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
        # DuckDB shares one database instance between connections to the same file in a process, so a
        # second Gateway finds the first one's locked configuration: it can only check it, not set it.
        if self._setting("lock_configuration") is True:
            self._check_inherited(settings)
            return
        for name, value in settings:
            self._con.execute(f"SET {name} = {value}")

    def _setting(self, name: str) -> Any:
        row = self._con.execute("SELECT current_setting(?)", [name]).fetchone()
        return None if row is None else row[0]

    def _check_inherited(self, settings: list[tuple[str, str]]) -> None:
        # A scratch in-memory database turns our values into DuckDB's canonical spelling ("488.2 MiB").
        scratch = duckdb.connect(":memory:")
        try:
            for name, value in settings:
                scratch.execute(f"SET {name} = {value}")
                expected = scratch.execute("SELECT current_setting(?)", [name]).fetchone()
                actual = self._setting(name)
                if expected is None or actual != expected[0]:
                    raise RuntimeError(
                        f"{self.db_path} is already open in this process with {name}={actual!r} locked; "
                        f"this Gateway asked for {value}"
                    )
        finally:
            scratch.close()

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

        Returns True when a query was running and has been told to stop."""
        with self._state_lock:
            if self._active is None or self._stop_reason is not None:
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
            checked = self._check(sql)
        except _Refused as exc:
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

    def _execute(self, sql: str, checked: _Checked) -> QueryResult:
        try:
            self._con.execute(checked.text)
            description = self._con.description or []
            rows = self._con.fetchmany(self.row_cap + 1)
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
                sql, ok=False, error=_files_refused("file access"), error_kind="refused", detail=str(exc)
            )
        except duckdb.Error as exc:
            self._drop_pending()
            return _error_result(sql, "sql", exc)
        except Exception as exc:  # a gateway bug must not take the game down with it
            self._drop_pending()
            return _error_result(sql, "internal", exc)
        truncated = len(rows) > self.row_cap
        if truncated:
            rows = rows[: self.row_cap]
        self._drop_pending()
        # still under the query's timer: planning folds constants, so it can cost as much as the query
        reads = [] if checked.is_explain or self._stop_reason else self._reads(checked.text)
        rows = [tuple(_bounded(v) for v in row) for row in rows]
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

    # -- statement checks --------------------------------------------------------------------

    def _check(self, sql: str) -> _Checked:
        if not sql or not sql.strip():
            raise _Refused("empty query: type a SELECT (or DESCRIBE, SHOW, SUMMARIZE) and run it", "empty")
        statements = self._con.extract_statements(sql)
        if not statements:
            raise _Refused("empty query: only comments or semicolons, nothing to run", "empty")
        if len(statements) > 1:
            kinds = ", ".join(_keyword(s.query, s.type) for s in statements)
            raise _Refused(f"one statement at a time; found {len(statements)} ({kinds})")
        statement = statements[0]
        if statement.type == duckdb.StatementType.SELECT:
            self._check_functions(statement.query)
            return _Checked(statement.query, is_explain=False)
        if statement.type == duckdb.StatementType.EXPLAIN:
            self._check_explained(statement.query)
            return _Checked(statement.query, is_explain=True)
        keyword = _keyword(statement.query, statement.type)
        if statement.type == duckdb.StatementType.MULTI and keyword in ("PIVOT", "UNPIVOT"):
            raise _Refused(
                f"{keyword} needs an explicit value list here, "
                "e.g. PIVOT t ON col IN ('a', 'b') USING count(*)"
            )
        raise _Refused(f"only read queries are allowed ({READ_KINDS}); got {keyword}")

    def _check_explained(self, text: str) -> None:
        # EXPLAIN ANALYZE executes its statement (a TEMP table really gets created), so the explained
        # statement must pass the same checks as a plain query.
        inner = _explained_statement(text)
        statements = self._con.extract_statements(inner) if inner.strip() else []
        if len(statements) != 1:
            raise _Refused("EXPLAIN needs exactly one query after it")
        if statements[0].type != duckdb.StatementType.SELECT:
            keyword = _keyword(statements[0].query, statements[0].type)
            raise _Refused(f"EXPLAIN is allowed only for read queries ({READ_KINDS}); got {keyword}")
        self._check_functions(statements[0].query)

    def _check_functions(self, select_text: str) -> None:
        row = self._con.execute("SELECT json_serialize_sql(?)", [select_text]).fetchone()
        tree = json.loads(row[0]) if row else {"error": True}
        if tree.get("error"):
            message = tree.get("error_message", "unknown reason")
            raise _Refused(f"could not check this query before running it: {_one_line(message)}")
        problem = next(_function_problems(tree), None)
        if problem is not None:
            raise _Refused(problem)

    # -- reads -------------------------------------------------------------------------------

    def _reads(self, select_text: str) -> list[TableRead]:
        """Tables, columns and scan filters from the optimised plan, plus tables that only the bound
        plan still shows (the optimiser can answer e.g. count(*) from statistics without a scan)."""
        reads: dict[str, TableRead] = {}
        explain = "EXPLAIN (FORMAT json) " + select_text
        try:
            statements = self._con.extract_statements(explain)
            if len(statements) == 1 and statements[0].type == duckdb.StatementType.EXPLAIN:
                plan_rows = self._con.execute(explain).fetchall()
                for plan_row in plan_rows:
                    for node in json.loads(plan_row[1]):
                        _collect_scans(node, reads, parent_filter=None)
            bound = self._con.execute("SELECT json_serialize_plan(?)", [select_text]).fetchone()
            if bound is not None:
                for table, columns, counted in _bound_tables(json.loads(bound[0])):
                    read = reads.setdefault(table, TableRead(table))
                    read.columns.extend(c for c in columns if c not in read.columns)
                    read.counted = read.counted or counted
        except Exception:
            # Reads only describe the query (the timeline's spans, the validator's check); a plan we cannot
            # get or parse, or one stopped by the time limit or a cancel, must not fail the query.
            pass
        return list(reads.values())

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


def _one_line(message: str) -> str:
    """DuckDB's message without its LINE/caret excerpt, on one line."""
    kept: list[str] = []
    for line in message.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("LINE ") or set(stripped) <= {"^"}:
            break
        kept.append(stripped)
    return " ".join(kept) or message.strip()


def _error_result(sql: str, kind: str, exc: BaseException) -> QueryResult:
    text = str(exc) or type(exc).__name__
    return QueryResult(sql, ok=False, error=_one_line(text), error_kind=kind, detail=text)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# -- helpers: tokens ---------------------------------------------------------------------------


def _tokens(text: str) -> list[tuple[str, Any]]:
    """(token text, DuckDB token type) pairs, comments dropped."""
    raw = duckdb.tokenize(text)
    out: list[tuple[str, Any]] = []
    for i, (start, kind) in enumerate(raw):
        end = raw[i + 1][0] if i + 1 < len(raw) else len(text)
        if kind == duckdb.token_type.comment:
            continue
        out.append((text[start:end].strip(), kind))
    return out


def _identifiers(text: str) -> set[str]:
    try:
        tokens = _tokens(text)
    except Exception:
        return set()
    return {
        tok.strip('"').lower()
        for tok, kind in tokens
        if kind in (duckdb.token_type.identifier, duckdb.token_type.keyword)
    }


def _keyword(text: str, statement_type: Any) -> str:
    """The statement's first keyword as the player typed it (USE, not SET), else DuckDB's type name."""
    try:
        for tok, kind in _tokens(text):
            if kind == duckdb.token_type.keyword:
                return tok.upper()
            break
    except Exception:
        pass
    return str(getattr(statement_type, "name", statement_type)).upper()


def _explained_statement(text: str) -> str:
    """The statement after EXPLAIN [ANALYZE] [(options)], located with DuckDB's tokenizer."""
    raw = duckdb.tokenize(text)
    spans = []
    for i, (start, kind) in enumerate(raw):
        end = raw[i + 1][0] if i + 1 < len(raw) else len(text)
        if kind != duckdb.token_type.comment:
            spans.append((start, text[start:end].strip(), kind))
    i = 1  # spans[0] is EXPLAIN itself
    depth = 0
    while i < len(spans):
        _, tok, kind = spans[i]
        if depth == 0 and kind == duckdb.token_type.keyword and tok.upper() in ("ANALYZE", "ANALYSE"):
            i += 1
            continue
        if kind == duckdb.token_type.operator and (depth > 0 or tok.startswith("(")):
            depth += tok.count("(") - tok.count(")")
            i += 1
            continue
        if depth > 0:
            i += 1
            continue
        return text[spans[i][0] :]
    return ""


# -- helpers: parse tree ------------------------------------------------------------------------


def _function_problems(node: Any) -> Iterator[str]:
    """Why the parse tree (from json_serialize_sql) may not run; empty when it may."""
    if isinstance(node, list):
        for item in node:
            yield from _function_problems(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "TABLE_FUNCTION":
        function = node.get("function") or {}
        name = str(function.get("function_name", "")).lower()
        if name not in ALLOWED_TABLE_FUNCTIONS:
            if name in SERVER_PATH_TABLE_FUNCTIONS:
                yield f"{name}() is not available here (it shows the server's files); current_setting('name') works"
            elif _reads_files(name):
                yield _files_refused(name)
            else:
                yield f"table function {name}() is not allowed here; query the incident tables instead"
        yield from _function_problems(function.get("arguments", []))
        for key, value in node.items():
            if key != "function":
                yield from _function_problems(value)
        return
    if node.get("type") == "BASE_TABLE" and not node.get("schema_name") and not node.get("catalog_name"):
        name = str(node.get("table_name", ""))
        if any(ch in name for ch in "/\\:."):
            yield _files_refused(repr(name))
    if node.get("class") == "FUNCTION":
        name = str(node.get("function_name", "")).lower()
        if name in REFUSED_SCALAR_FUNCTIONS:
            yield f"function {name}() is not allowed here (variables, sequences and logs are off limits)"
        elif name == "current_setting":
            args = node.get("arguments") or node.get("children") or []
            literal = None
            if len(args) == 1:
                expr = args[0].get("expression", args[0]) if isinstance(args[0], dict) else {}
                if expr.get("class") == "CONSTANT":
                    literal = str((expr.get("literal") or {}).get("text") or expr.get("value", {}).get("value", ""))
            if literal is None:
                yield "current_setting() takes a setting name written as a literal, e.g. current_setting('threads')"
            elif literal.lower() in PATH_SETTINGS:
                yield f"setting {literal} is not available here (it names the server's files)"
        elif _reads_files(name):
            yield _files_refused(name)
    for value in node.values():
        yield from _function_problems(value)


def _reads_files(name: str) -> bool:
    return name.startswith(_FILE_READER_PREFIXES) or name in _FILE_READER_NAMES or name.endswith("_scan")


# -- helpers: plans ----------------------------------------------------------------------------


def _as_list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _table_name(qualified: str) -> str:
    parts = qualified.split(".")
    if len(parts) >= 3:
        schema, table = parts[-2], parts[-1]
        return table if schema == "main" else f"{schema}.{table}"
    return qualified


def _collect_scans(node: dict[str, Any], reads: dict[str, TableRead], parent_filter: str | None) -> None:
    info = node.get("extra_info") or {}
    children = node.get("children") or []
    if isinstance(info, dict) and "Table" in info:
        table = _table_name(str(info["Table"]))
        read = reads.setdefault(table, TableRead(table))
        for column in _as_list(info.get("Projections")):
            if column not in read.columns:
                read.columns.append(column)
        texts = _as_list(info.get("Filters")) + ([parent_filter] if parent_filter else [])
        for text in texts:
            for part in split_filter(text):
                if part not in read.filters:
                    read.filters.append(part)
    own_filter = None
    if node.get("name") == "FILTER" and len(children) == 1 and isinstance(info, dict):
        expressions = _as_list(info.get("Expression"))
        own_filter = " AND ".join(expressions) if expressions else None
    for child in children:
        if isinstance(child, dict):
            _collect_scans(child, reads, own_filter)


def split_filter(text: str) -> list[str]:
    """Split one plan filter into its top-level AND parts, without DuckDB's wrapping parentheses,
    "optional:" markers, or runtime "Dynamic Filter" placeholders (those are not the player's)."""
    text = _strip_optional(_strip_parens(text.strip()))
    parts = [_strip_optional(_strip_parens(p.strip())) for p in _split_top_level_and(text)]
    return [p for p in parts if p and not p.startswith("Dynamic Filter")]


def _strip_optional(text: str) -> str:
    prefix = "optional:"
    while text.startswith(prefix):
        text = _strip_parens(text[len(prefix) :].strip())
    return text


def _strip_parens(text: str) -> str:
    while text.startswith("(") and text.endswith(")") and _matching_close(text, 0) == len(text) - 1:
        text = text[1:-1].strip()
    return text


def _matching_close(text: str, open_at: int) -> int:
    depth = 0
    quote: str | None = None
    for i in range(open_at, len(text)):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_top_level_and(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    i = 0
    upper = text.upper()
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and upper.startswith(" AND ", i):
            parts.append(text[start:i])
            i += 5
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


_COUNT_FUNCTIONS = {"count", "count_star"}


def _counts_rows(node: dict[str, Any]) -> bool:
    """Whether a bound aggregate or window operator computes count(*) or count(col)."""
    if node.get("type") not in ("LOGICAL_AGGREGATE_AND_GROUP_BY", "LOGICAL_WINDOW"):
        return False
    for expression in node.get("expressions") or []:
        if isinstance(expression, dict) and expression.get("expression_class") in ("BOUND_AGGREGATE",
                                                                                    "BOUND_WINDOW"):
            path = (expression.get("qname") or {}).get("path") or []
            if path and path[-1] in _COUNT_FUNCTIONS:
                return True
    return False


def _bound_tables(tree: Any, counted: bool = False) -> Iterator[tuple[str, list[str], bool]]:
    """(base table, columns the query refers to, whether a count aggregate sits above the scan) per scan
    in a bound plan from json_serialize_plan (views already expanded)."""
    if isinstance(tree, list):
        for item in tree:
            yield from _bound_tables(item, counted)
        return
    if not isinstance(tree, dict):
        return
    counted = counted or _counts_rows(tree)
    if tree.get("type") == "LOGICAL_GET":
        data = tree.get("function_data")
        if isinstance(data, dict) and data.get("table"):
            schema = str(data.get("schema") or "main")
            table = str(data["table"])
            names = tree.get("names") or []
            columns = []
            for ref in tree.get("column_indexes") or []:
                index = ref.get("index") if isinstance(ref, dict) else None
                # virtual columns (rowid) have indexes beyond the table's own columns
                if isinstance(index, int) and 0 <= index < len(names):
                    columns.append(str(names[index]))
            yield (table if schema == "main" else f"{schema}.{table}"), columns, counted
    for value in tree.values():
        yield from _bound_tables(value, counted)


def __getattr__(name: str) -> Any:
    # `Gateway` is the process-isolated one (game.sandbox), which itself runs a LocalGateway; importing it
    # lazily keeps the two modules free of an import cycle.
    if name == "Gateway":
        from game.sandbox import Gateway

        return Gateway
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
