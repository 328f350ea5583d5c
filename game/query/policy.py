"""What a player's query may do, decided before it runs: the statement policy behind `game.query.gateway`.

Exactly one statement, and only SELECT (which covers WITH, DESCRIBE, SHOW, SUMMARIZE, VALUES,
FROM-first) or EXPLAIN of such a SELECT; DuckDB's parse tree of that SELECT (``json_serialize_sql``)
is walked so that only table functions on an allow-list run, and a few scalar functions with side
effects, or that name the server's files, are refused. The gateway adds the lock-down of DuckDB
itself, the limits and the worker process (defence in depth: see `game.query.gateway`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from game.query.sqltokens import KEYWORD, OPERATOR, tokens

READ_KINDS = "SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN"

# Table functions that only read the attached database, DuckDB's own metadata, or generate values.
# Anything else (file readers, query(), query_table(), checkpoint(), scans over Python objects, ...)
# is refused: an allow-list keeps new DuckDB functions out until someone looks at them. Not duckdb_memory()
# either (the buffer memory it reports depends on which queries ran before on that world's connection),
# nor pragma_storage_info() (how each world's file happens to be compressed: 'Empty Validity' on one world
# and not another is storage, not telemetry).
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

SERVER_PATH_VIEWS: frozenset[str] = frozenset(
    {"duckdb_databases", "pragma_database_list", "pg_settings", "duckdb_logs"}
)
"""System views over those functions (``FROM duckdb_databases`` without parentheses is a view)."""

REFUSED_SCALAR_FUNCTIONS: frozenset[str] = frozenset(
    {"getvariable", "nextval", "currval", "setval", "setseed", "write_log"}
)

SCRAMBLING_FUNCTIONS: frozenset[str] = frozenset(
    {"hash", "md5", "md5_number", "md5_number_lower", "md5_number_upper", "sha1", "sha256",
     "random", "uuid", "uuidv4", "uuidv7", "gen_random_uuid"}
)
"""Digests and random numbers: a digest of a figure turns any difference between two worlds into coin
flips (its sign, its parity), and a query of hundreds of them finds one that tells the truth from a rival
by luck; that is not something a reader of the telemetry reads, so they do not run (docs/scoring.md)."""

SESSION_STATE_FUNCTIONS: frozenset[str] = frozenset(
    {"now", "get_current_time", "get_current_timestamp", "current_localtime", "current_localtimestamp",
     "transaction_timestamp", "today", "current_date", "current_time", "current_transaction_id",
     "txid_current", "current_query_id", "current_connection_id"}
)
"""The server's clock and its counters of queries and transactions: not telemetry, and different on every
run and every world (each world has its own connection), so a parity of the clock or of a query counter
would tell worlds apart by when and in what order they were queried. The incident's time is its ts columns."""

SESSION_STATE_KEYWORDS: frozenset[str] = frozenset(
    {"current_timestamp", "current_date", "current_time", "localtimestamp", "localtime"}
)
"""The same clock written as SQL keywords without parentheses: they parse as a bare column name, which no
incident table has."""

_FILE_READER_PREFIXES = ("read_", "parquet_", "iceberg_", "delta_", "sniff_")
_FILE_READER_NAMES = frozenset({"glob", "arrow_scan", "pandas_scan", "parquet_scan", "sqlite_scan"})


def files_refused(what: str) -> str:
    return (
        f"reading files or URLs is not allowed ({what}); query the incident tables (SHOW TABLES lists them)"
    )


class Refused(Exception):
    """Player input that must not run; the message is shown to the player as is."""

    def __init__(self, message: str, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Checked:
    """A statement that may run: its text as DuckDB split it, and whether it is an EXPLAIN."""

    text: str
    is_explain: bool


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> Checked:
    """The one read statement in `sql`, checked; Refused (shown to the player as is) when it may not
    run. DuckDB parses it: a parser error is a duckdb.Error for the caller to report."""
    if not sql or not sql.strip():
        raise Refused("empty query: type a SELECT (or DESCRIBE, SHOW, SUMMARIZE) and run it", "empty")
    statements = con.extract_statements(sql)
    if not statements:
        raise Refused("empty query: only comments or semicolons, nothing to run", "empty")
    if len(statements) > 1:
        kinds = ", ".join(_keyword(s.query, s.type) for s in statements)
        raise Refused(f"one statement at a time; found {len(statements)} ({kinds})")
    statement = statements[0]
    if statement.type == duckdb.StatementType.SELECT:
        _check_functions(con, statement.query)
        return Checked(statement.query, is_explain=False)
    if statement.type == duckdb.StatementType.EXPLAIN:
        _check_explained(con, statement.query)
        return Checked(statement.query, is_explain=True)
    keyword = _keyword(statement.query, statement.type)
    if statement.type == duckdb.StatementType.MULTI and keyword in ("PIVOT", "UNPIVOT"):
        raise Refused(
            f"{keyword} needs an explicit value list here, "
            "e.g. PIVOT t ON col IN ('a', 'b') USING count(*)"
        )
    raise Refused(f"only read queries are allowed ({READ_KINDS}); got {keyword}")


def _check_explained(con: duckdb.DuckDBPyConnection, text: str) -> None:
    # EXPLAIN ANALYZE executes its statement (a TEMP table really gets created), so the explained
    # statement must pass the same checks as a plain query.
    inner = _explained_statement(text)
    statements = con.extract_statements(inner) if inner.strip() else []
    if len(statements) != 1:
        raise Refused("EXPLAIN needs exactly one query after it")
    if statements[0].type != duckdb.StatementType.SELECT:
        keyword = _keyword(statements[0].query, statements[0].type)
        raise Refused(f"EXPLAIN is allowed only for read queries ({READ_KINDS}); got {keyword}")
    _check_functions(con, statements[0].query)


def _check_functions(con: duckdb.DuckDBPyConnection, select_text: str) -> None:
    row = con.execute("SELECT json_serialize_sql(?)", [select_text]).fetchone()
    tree: dict[str, Any] = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        message = tree.get("error_message", "unknown reason")
        raise Refused(f"could not check this query before running it: {one_line(message)}")
    problem = next(_function_problems(tree), None)
    if problem is not None:
        raise Refused(problem)


# -- helpers: messages ------------------------------------------------------------------------


def one_line(message: str) -> str:
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


# -- helpers: tokens ---------------------------------------------------------------------------


def _keyword(text: str, statement_type: Any) -> str:
    """The statement's first keyword as the player typed it (USE, not SET), else DuckDB's type name."""
    found = tokens(text)
    if found and found[0].kind == KEYWORD:
        return found[0].text.upper()
    return str(getattr(statement_type, "name", statement_type)).upper()


def _explained_statement(text: str) -> str:
    """The statement after EXPLAIN [ANALYZE] [(options)], located with DuckDB's tokenizer."""
    found = tokens(text)
    depth = 0
    for token in found[1:]:  # found[0] is EXPLAIN itself
        if depth == 0 and token.kind == KEYWORD and token.text.upper() in ("ANALYZE", "ANALYSE"):
            continue
        if token.kind == OPERATOR and (depth > 0 or token.text.startswith("(")):
            depth += token.depth_change
            continue
        if depth > 0:
            continue
        return text[token.start :]
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
                yield _shows_server_files(f"{name}()")
            elif _reads_files(name):
                yield files_refused(name)
            else:
                yield f"table function {name}() is not allowed here; query the incident tables instead"
        yield from _function_problems(function.get("arguments", []))
        for key, value in node.items():
            if key != "function":
                yield from _function_problems(value)
        return
    if node.get("type") == "BASE_TABLE":
        name = str(node.get("table_name", ""))
        if name.lower() in SERVER_PATH_VIEWS:
            yield _shows_server_files(name)
        elif not node.get("schema_name") and not node.get("catalog_name") and any(ch in name for ch in "/\\:."):
            yield files_refused(repr(name))
    if node.get("class") == "COLUMN_REF":
        names = node.get("column_names") or []
        if len(names) == 1 and str(names[0]).lower() in SESSION_STATE_KEYWORDS:
            yield _session_state_refused(str(names[0]).lower())
    if node.get("class") == "FUNCTION":
        name = str(node.get("function_name", "")).lower()
        if name in SESSION_STATE_FUNCTIONS:
            yield _session_state_refused(f"{name}()")
        elif name in REFUSED_SCALAR_FUNCTIONS:
            yield f"function {name}() is not allowed here (variables, sequences and logs are off limits)"
        elif name in SCRAMBLING_FUNCTIONS:
            yield (f"function {name}() is not allowed here: a digest or a random number tells worlds apart by "
                   "luck, not by anything the telemetry shows; compare the values themselves")
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
            yield files_refused(name)
    for value in node.values():
        yield from _function_problems(value)


def _session_state_refused(what: str) -> str:
    return (f"{what} is not allowed here: the server's clock and counters are not the incident's telemetry; "
            "its time is in the tables' ts columns (e.g. max(ts) - INTERVAL 5 MINUTE)")


def _shows_server_files(what: str) -> str:
    return f"{what} is not available here (it shows the server's files); current_setting('name') works"


def _reads_files(name: str) -> bool:
    return name.startswith(_FILE_READER_PREFIXES) or name in _FILE_READER_NAMES or name.endswith("_scan")
