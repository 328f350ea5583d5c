"""What a query read, from DuckDB's plans of it: the tables, the columns and the filters at each scan.

Scoring (`game.rules.observe`, `game.rules.assess`) judges a query by what it read, not by its text: the gateway
calls `plan_reads` after running a player's query, and the result travels in `QueryResult.reads` (and
in the journal). Nothing here decides whether a query may run; that is the gateway's job.

Two plans are read: the optimised plan (``EXPLAIN (FORMAT json)``) gives each scan's projected columns
and its pushed-down filters, plus a FILTER operator sitting directly on a scan; the bound plan
(``json_serialize_plan``) still shows every column the query referred to and the tables the optimiser
answered from statistics, and whether a count aggregate sits above a scan."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb

from game.query.sqltokens import identifiers, split_top_level, strip_parens


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


def plan_reads(con: duckdb.DuckDBPyConnection, select_text: str) -> list[TableRead]:
    """Tables, columns and scan filters of `select_text` (one checked SELECT) from the optimised plan,
    plus tables that only the bound plan still shows (the optimiser can answer e.g. count(*) from
    statistics without a scan). Runs on `con` under the caller's time limit.

    Reads only describe a query that already ran: a plan DuckDB cannot give (an error, or planning
    stopped by the time limit or a cancel) or cannot put into JSON leaves what was read so far."""
    reads: dict[str, TableRead] = {}
    explain = "EXPLAIN (FORMAT json) " + select_text
    try:
        statements = con.extract_statements(explain)
        if len(statements) == 1 and statements[0].type == duckdb.StatementType.EXPLAIN:
            for plan_row in con.execute(explain).fetchall():
                for node in _json_list(plan_row[1]):
                    _collect_scans(node, reads, parent_filter=None)
        bound = con.execute("SELECT json_serialize_plan(?)", [select_text]).fetchone()
        if bound is not None:
            for table, columns, counted in _bound_tables(json.loads(bound[0])):
                read = reads.setdefault(table, TableRead(table))
                read.columns.extend(c for c in columns if c not in read.columns)
                read.counted = read.counted or counted
    except duckdb.Error:
        # planning failed or was interrupted (InterruptException is a duckdb.Error): the query itself
        # succeeded, and its result must not be lost for want of a description
        pass
    except ValueError:
        # DuckDB's plan JSON did not parse (json.JSONDecodeError is a ValueError): same reasoning
        pass
    return list(reads.values())


def filters_on(read: TableRead, column: str) -> list[str]:
    """Filters of `read` that mention `column` (case-insensitive), decided by DuckDB's tokenizer so that
    a column name inside a string literal does not count."""
    want = column.lower()
    return [f for f in read.filters if want in identifiers(f)]


def split_filter(text: str) -> list[str]:
    """Split one plan filter into its top-level AND parts, without DuckDB's wrapping parentheses,
    "optional:" markers, or runtime "Dynamic Filter" placeholders (those are not the player's)."""
    text = _strip_optional(strip_parens(text))
    parts = [_strip_optional(strip_parens(p)) for p in split_top_level(text, "AND")]
    return [p for p in parts if p and not p.startswith("Dynamic Filter")]


def _strip_optional(text: str) -> str:
    prefix = "optional:"
    while text.startswith(prefix):
        text = strip_parens(text[len(prefix) :])
    return text


def _json_list(text: Any) -> list[Any]:
    """The JSON array of plan nodes EXPLAIN prints in its second column ([] for anything else)."""
    nodes = json.loads(text) if isinstance(text, str) else None
    return nodes if isinstance(nodes, list) else []


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


def _collect_scans(node: Any, reads: dict[str, TableRead], parent_filter: str | None) -> None:
    """Walk an optimised plan node; every scan adds its table, projections and filters to `reads`."""
    if not isinstance(node, dict):  # a plan shape this code does not know: nothing to read from it
        return
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
    if node.get("name") == "FILTER" and isinstance(children, list) and len(children) == 1 and isinstance(info, dict):
        expressions = _as_list(info.get("Expression"))
        own_filter = " AND ".join(expressions) if expressions else None
    for child in children if isinstance(children, list) else []:
        _collect_scans(child, reads, own_filter)


_COUNT_FUNCTIONS = {"count", "count_star"}


def _counts_rows(node: dict[str, Any]) -> bool:
    """Whether a bound aggregate or window operator computes count(*) or count(col)."""
    if node.get("type") not in ("LOGICAL_AGGREGATE_AND_GROUP_BY", "LOGICAL_WINDOW"):
        return False
    expressions = node.get("expressions")
    for expression in expressions if isinstance(expressions, list) else []:
        if isinstance(expression, dict) and expression.get("expression_class") in ("BOUND_AGGREGATE",
                                                                                    "BOUND_WINDOW"):
            qname = expression.get("qname")
            path = qname.get("path") if isinstance(qname, dict) else None
            if isinstance(path, list) and path and path[-1] in _COUNT_FUNCTIONS:
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
            raw_names, raw_indexes = tree.get("names"), tree.get("column_indexes")
            names = raw_names if isinstance(raw_names, list) else []
            indexes = raw_indexes if isinstance(raw_indexes, list) else []
            columns = []
            for ref in indexes:
                index = ref.get("index") if isinstance(ref, dict) else None
                # virtual columns (rowid) have indexes beyond the table's own columns
                if isinstance(index, int) and 0 <= index < len(names):
                    columns.append(str(names[index]))
            yield (table if schema == "main" else f"{schema}.{table}"), columns, counted
    for value in tree.values():
        yield from _bound_tables(value, counted)
