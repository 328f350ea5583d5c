"""Whether what a query shows is a figure the player's own constants made, read from DuckDB's parse tree.

A reader tells causes apart by what the telemetry shows: which rows are there, which group stands out,
which way a series moves. A constant the player picks and applies *after* aggregating turns a size (which
nobody knows for an alternative cause) into something that looks like one of those readings:

- a threshold: ``avg(ttft_s) > 0.15``, ``CASE WHEN avg(ttft_s) BETWEEN 0.11 AND 0.15 THEN 'as seen' ...``,
  ``greatest(avg(x), 0.2)``: the figure becomes a yes/no of the player's choosing;
- an offset: ``0.147 - avg(ttft_s)``, ``avg(x) / 0.1276 - 1``: the figure becomes a sign of the player's
  choosing;
- a remainder or a rounding inside a larger expression (``%``, ``floor(x * 1e6) - 2 * floor(...)``, sines):
  the figure becomes a coin flip per world, and a query of hundreds of them finds one that parts the
  truth from a rival by luck;
- rows of literals set beside the data (``SELECT 'seen', 0.1276 UNION ALL SELECT 'now', avg(ttft_s) ...``):
  the data's row is then compared with the player's number;
- SUMMARIZE (one row per column, so its "groups" are unlike columns) and EXPLAIN (a plan, not the data);
- a sample of the rows (``USING SAMPLE``, ``TABLESAMPLE``), even with a seed: which rows it draws is luck,
  different on every world, and a player re-running it with other seeds fishes for a draw that parts the
  truth from a rival (an unseeded one may also draw the same rows twice on a small table, so running it
  twice does not always show that it changes).

Such a query still runs and shows what it shows; nothing is read from it, neither when a player's query
is scored (`game.rules.assess`) nor when an incident's reference queries are proven (`proof`).
Constants applied per row, before aggregating (``avg(CASE WHEN ttft_s > 1 THEN 1 ELSE 0 END)``,
``count(*) FILTER (WHERE ...)``, a WHERE clause, a time bucket) measure the data the same way on every
world and are not this; neither are zero (``avg(a) - avg(b) > 0`` is the sign of a difference of two
figures), a unit factor (``avg(x) * 1000``) nor a lower bound on a group's rows (``HAVING count(*) >= 10``).
The select list, ORDER BY, HAVING and QUALIFY are examined.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

import duckdb

_ADDITIVE = frozenset({"+", "-"})
_CLAMPS = frozenset({"greatest", "least"})
_SCRAMBLING = frozenset({
    "%", "mod", "fmod", "xor", "&", "|", "<<", ">>", "~", "bit_count", "sin", "cos", "tan", "cot", "asin",
    "acos", "atan", "atan2", "gcd", "lcm", "factorial", "gamma", "lgamma"})
"""Functions whose value jumps about as their argument moves a little: applied to an aggregate, each
makes a coin flip per world."""
_ROUNDING = frozenset({"floor", "ceil", "ceiling", "trunc", "round", "round_even", "even", "//"})
"""Fine as the last step of a column (``round(avg(x), 3)``); inside a larger expression, a rounding and a
subtraction make a remainder."""
_WRAPPERS = frozenset({"CAST"})


_PARSER_LOCK = threading.Lock()
_PARSERS: dict[int, duckdb.DuckDBPyConnection] = {}


def _parser() -> duckdb.DuckDBPyConnection:
    """One in-memory connection per process that only parses (opening one costs about 0.1 s); used under
    _PARSER_LOCK. Per process: a DuckDB instance does not survive a fork (its worker threads stay behind)."""
    pid = os.getpid()
    con = _PARSERS.get(pid)
    if con is None:
        con = _PARSERS[pid] = duckdb.connect()
    return con


@cache
def _aggregate_names() -> frozenset[str]:
    with _PARSER_LOCK:
        rows = _parser().execute("SELECT DISTINCT function_name FROM duckdb_functions() "
                                 "WHERE function_type = 'aggregate'").fetchall()
    return frozenset(str(r[0]).lower() for r in rows)


def _parse_tree(sql: str) -> dict[str, Any] | None:
    """DuckDB's parse tree of `sql` (json_serialize_sql); None when it has none (not a SELECT, or it does
    not parse). Raises duckdb.Error, and RecursionError for a tree nested too deeply to load."""
    with _PARSER_LOCK:
        row = _parser().execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree: dict[str, Any] | None = json.loads(row[0]) if row else None
    return None if tree is None or tree.get("error") else tree


NESTED_TOO_DEEP = "it is nested too deeply to read what it computes"


def threshold_reason(sql: str) -> str | None:
    """Why what `sql` shows is made by the player's own constants (see the module docstring), in a
    sentence for the debrief; None when it is not, or when DuckDB cannot parse it (then it did not run).
    A query nested too deeply to walk is not read either (NESTED_TOO_DEEP): what it hides is unknown."""
    try:
        with _PARSER_LOCK:
            statements = _parser().extract_statements(sql)
            if len(statements) == 1 and statements[0].type == duckdb.StatementType.EXPLAIN:
                return EXPLAINED
        tree = _parse_tree(sql)
        return None if tree is None else _reason(tree)
    except duckdb.Error:
        return None
    except RecursionError:
        return NESTED_TOO_DEEP


SAMPLED = ("it reads a random sample of the rows, and which rows a sample draws is luck: on another world "
           "it draws others")


EXPLAINED = ("it shows how DuckDB would run the query, not the telemetry: a plan's words and estimates "
             "follow the sizes of the tables")
SUMMARIZED = ("it describes the columns, one row each, so its rows compare unlike columns with each other; "
              "ask for the figure you want with SELECT")


def _reason(tree: dict[str, Any]) -> str | None:
    if next(_find(tree, lambda d: d.get("sample") is not None), None) is not None:
        return SAMPLED
    if next(_find(tree, lambda d: d.get("type") == "SHOW_REF" and d.get("show_type") == "SUMMARY"), None):
        return SUMMARIZED
    # every query node anywhere in the tree: CTEs, subqueries, set-operation branches
    nodes = list(_find(tree, lambda d: d.get("type") in ("SELECT_NODE", "SET_OPERATION_NODE")))
    aggregated, constant = _aliases(nodes)
    constant_tables = _constant_tables(tree)
    for node in nodes:
        if node.get("type") == "SET_OPERATION_NODE":
            children = [c for c in node.get("children") or [node.get("left"), node.get("right")] if c]
            reads = [_reads_data(c, constant_tables) for c in children]
            if any(reads) and not all(reads):
                return ("it sets rows of numbers you typed beside the data's, so it compares the data with your "
                        "own figures")
        for item in _examined(node):
            if not _post_aggregate(item, aggregated):
                continue
            found = next(_made(item, constant, top=True), None)
            if found is not None:
                return found
    return None


def made_columns(sql: str, columns: Sequence[str]) -> frozenset[str]:
    """The result `columns` (as the result names them) whose values the query computed rather than read
    from a table: anything but a plain column reference (through the names CTEs and subqueries give plain
    references). No text's presence or absence is read from them (`evidence.ruling`, `made`), except a
    number's own shape (a NaN where a division had nothing to divide): which texts such a column shows is
    the player's making, e.g. the first text in sort order (``min(level)``: 'ERROR' sorts before 'INFO', so
    one extra error line makes 'INFO' go missing), or a number spelled as letters (``chr(65 + floor(x *
    100))``, ``monthname(...)``). Groups and shares of such columns are read as any others. Empty when
    DuckDB cannot parse `sql`."""
    return _columns_where(sql, columns, lambda item, names, constant: _computed(item, names))


def label_columns(sql: str, columns: Sequence[str]) -> frozenset[str]:
    """The result `columns` whose values label a per-row comparison with a number the player typed
    (``CASE WHEN request_id > 421 THEN 'many' ELSE 'few' END``, ``ttft_s > 5 AS slow``): which labels
    show says whether any row crossed the player's number, a size, so no presence at all is read from
    them, not even of a NaN (``THEN 0/0``). Zero, texts and time stamps are not such numbers
    (``num_preemptions > 0``, ``ts >= TIMESTAMP '...'``)."""
    return _columns_where(sql, columns, lambda item, names, constant: _labels(item, constant) or (
        item.get("class") == "COLUMN_REF" and _ref_name(item) in names))


def _columns_where(sql: str, columns: Sequence[str], test: Any) -> frozenset[str]:
    """The result `columns` whose select-list item passes `test(item, names, constant)`; `names` are the
    aliases of items that passed it anywhere in the query (CTEs, subqueries), to a fixed point, so that a
    column read through a CTE inherits what the CTE made of it."""
    try:
        tree = _parse_tree(sql)
        if tree is None or not tree.get("statements"):
            return frozenset()
        nodes = list(_find(tree, lambda d: d.get("type") in ("SELECT_NODE", "SET_OPERATION_NODE")))
        _, constant = _aliases(nodes)
        names: set[str] = set()
        for _ in range(len(nodes) + 1):
            before = len(names)
            for node in nodes:
                for item in node.get("select_list") or []:
                    if isinstance(item, dict) and item.get("alias") and test(item, names, constant):
                        names.add(str(item["alias"]).lower())
            if len(names) == before:
                break
        out = {c for c in columns if str(c).lower() in names}
        for branch in _branches(tree["statements"][0].get("node") or {}):
            items = [i for i in branch.get("select_list") or [] if isinstance(i, dict)]
            if any(i.get("class") == "STAR" for i in items):
                continue  # its columns are named above, by the aliases they were given
            out |= {name for name, item in zip(columns, items, strict=False) if test(item, names, constant)}
        return frozenset(out)
    except (duckdb.Error, RecursionError):
        return frozenset()


def _computed(item: dict[str, Any], computed: set[str]) -> bool:
    if item.get("class") != "COLUMN_REF":
        return item.get("class") != "STAR"
    return _ref_name(item) in computed


def _labels(expr: Any, constant: set[str]) -> bool:
    """Whether `expr`, outside aggregates and subqueries, compares a row's value with a typed number."""
    if not isinstance(expr, dict):
        return False
    cls = expr.get("class")
    if _is_aggregate_call(expr) or cls == "SUBQUERY":
        return False
    if cls in ("COMPARISON", "BETWEEN") or (cls == "OPERATOR" and "IN" in str(expr.get("type", ""))):
        sides = [v for v in _children(expr) if isinstance(v, dict)]
        if any(_typed(s, constant) for s in sides) and not all(_is_constant(s, constant) for s in sides):
            return True
    return any(_labels(child, constant) for child in _children(expr))


def _ref_name(ref: dict[str, Any]) -> str:
    return ".".join(map(str, ref.get("column_names") or [])).split(".")[-1].lower()


def _branches(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The query nodes whose select lists make the result's columns, position by position: the node
    itself, or every branch of a set operation."""
    if node.get("type") == "SET_OPERATION_NODE":
        for child in node.get("children") or [node.get("left"), node.get("right")]:
            if isinstance(child, dict):
                yield from _branches(child)
    else:
        yield node


def _examined(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """What a query node shows and what decides which of its rows are shown: its select list, its ORDER BY
    (with a LIMIT, ``ORDER BY abs(avg(x) - 0.5)`` picks the group nearest a number of the player's), and
    its HAVING and QUALIFY filters (``HAVING avg(x) BETWEEN 0.1 AND 0.15`` keeps the groups of a size of the
    player's), except a lower bound on a count: ``HAVING count(*) >= 10`` asks for enough rows."""
    yield from (i for i in node.get("select_list") or [] if isinstance(i, dict))
    for modifier in node.get("modifiers") or []:
        for order in (modifier or {}).get("orders") or []:
            if isinstance(order.get("expression"), dict):
                yield order["expression"]
    for clause in (node.get("having"), node.get("qualify")):
        yield from (c for c in _conjuncts(clause) if not _count_floor(c))


def _conjuncts(expr: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(expr, dict):
        return
    if expr.get("type") == "CONJUNCTION_AND":
        for child in expr.get("children") or []:
            yield from _conjuncts(child)
    else:
        yield expr


def _count_floor(expr: dict[str, Any]) -> bool:
    """``count(...) > n`` or ``count(...) >= n`` (or ``n < count(...)``): a lower bound on a group's rows."""
    kind = str(expr.get("type", ""))
    left, right = expr.get("left"), expr.get("right")
    if expr.get("class") != "COMPARISON" or not isinstance(left, dict) or not isinstance(right, dict):
        return False

    def is_count(e: dict[str, Any]) -> bool:
        return e.get("class") == "FUNCTION" and str(e.get("function_name", "")).lower() in ("count", "count_star")

    if kind in ("COMPARE_GREATERTHAN", "COMPARE_GREATERTHANOREQUALTO"):
        return is_count(left) and _number(right) is not None
    if kind in ("COMPARE_LESSTHAN", "COMPARE_LESSTHANOREQUALTO"):
        return is_count(right) and _number(left) is not None
    return False


def _aliases(nodes: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    """Column names (lower case) that some query node computes from an aggregate, and names given to
    constants: a select-list alias of literals (``WITH c AS (SELECT 0.15 AS k)``) and the columns of a
    table of literals (``(VALUES (0.15)) v(k)``)."""
    aggregated: set[str] = set()
    constant: set[str] = set()
    for node in nodes:
        for item in node.get("select_list") or []:
            alias = str(item.get("alias") or "").lower()
            if not alias:
                continue
            if _has_aggregate(item):
                aggregated.add(alias)
            elif _is_constant(item, set()):
                constant.add(alias)
    for ref in _find(nodes, lambda d: d.get("type") == "SUBQUERY" and d.get("column_name_alias")):
        if not _reads_data(ref.get("subquery") or {}, set()):
            constant.update(str(n).lower() for n in ref["column_name_alias"])
    return aggregated, constant


def _constant_tables(tree: Any) -> set[str]:
    """Names of CTEs that read no table: literals under a name."""
    names: set[str] = set()
    ctes = [(str(e.get("key", "")).lower(), (e.get("value") or {}).get("query_node") or {})
            for m in _find(tree, lambda d: "map" in d and isinstance(d.get("map"), list)) for e in m["map"]
            if isinstance(e, dict)]
    changed = True
    while changed:
        changed = False
        for name, node in ctes:
            if name and name not in names and not _reads_data(node, names):
                names.add(name)
                changed = True
    return names


def _find(tree: Any, want: Any) -> Iterator[dict[str, Any]]:
    if isinstance(tree, list):
        for item in tree:
            yield from _find(item, want)
    elif isinstance(tree, dict):
        if want(tree):
            yield tree
        for value in tree.values():
            yield from _find(value, want)


def _reads_data(node: dict[str, Any], constant_tables: set[str]) -> bool:
    """Whether a query node reads a table (or the catalogue's figures of one: ``duckdb_tables()``), not only
    literals, CTEs of literals or generated rows (``FROM range(1)``)."""
    def reads(d: dict[str, Any]) -> bool:
        if d.get("type") == "BASE_TABLE":
            return str(d.get("table_name", "")).lower() not in constant_tables
        if d.get("type") == "TABLE_FUNCTION":
            name = str((d.get("function") or {}).get("function_name", "")).lower()
            return name.startswith(("duckdb_", "pragma_"))
        return False

    return any(_find(node, reads))


def _is_aggregate_call(expr: dict[str, Any]) -> bool:
    return (expr.get("class") == "WINDOW"
            or (expr.get("class") == "FUNCTION" and str(expr.get("function_name", "")).lower() in _aggregate_names()))


def _has_aggregate(expr: Any) -> bool:
    return any(_find(expr, lambda d: _is_aggregate_call(d) or d.get("class") == "SUBQUERY"))


def _post_aggregate(item: dict[str, Any], aggregated: set[str]) -> bool:
    """Whether a select-list item computes on aggregated figures (its own aggregate, a subquery's, or a
    column some other query node aggregated)."""
    if _has_aggregate(item):
        return True
    return any(".".join(map(str, ref.get("column_names") or [])).split(".")[-1].lower() in aggregated
               for ref in _find(item, lambda d: d.get("class") == "COLUMN_REF"))


def _arguments(expr: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for arg in expr.get("arguments") or expr.get("children") or []:
        out.append(arg.get("expression", arg) if isinstance(arg, dict) and "expression" in arg else arg)
    return [a for a in out if isinstance(a, dict)]


def _number(expr: dict[str, Any]) -> float | None:
    """The value of a numeric literal (through casts and a sign), else None."""
    cls = expr.get("class")
    if cls in _WRAPPERS:
        child = expr.get("child")
        return _number(child) if isinstance(child, dict) else None
    if cls == "FUNCTION" and expr.get("function_name") == "-" and len(_arguments(expr)) == 1:
        inner = _number(_arguments(expr)[0])
        return None if inner is None else -inner
    if cls == "CONSTANT":
        literal = expr.get("literal") or {}
        if literal.get("kind") in ("NUMERIC", "INTEGER", "DECIMAL", "DOUBLE", "FLOAT", "BIGINT", "HUGEINT"):
            try:
                return float(str(literal.get("text")))
            except ValueError:
                return None
        value = expr.get("value") or {}
        if isinstance(value.get("value"), (int, float)) and not isinstance(value.get("value"), bool):
            return float(value["value"])
    return None


def _is_constant(expr: Any, constant: set[str]) -> bool:
    """Whether an expression is made of literals only (and names given to literals)."""
    if not isinstance(expr, dict):
        return True
    if expr.get("class") == "COLUMN_REF":
        return str((expr.get("column_names") or [""])[-1]).lower() in constant
    if expr.get("class") == "SUBQUERY":  # (SELECT k FROM c): a scalar subquery of constants
        node = (expr.get("subquery") or {}).get("node") or {}
        items = node.get("select_list") or []
        return bool(items) and all(_is_constant(i, constant) for i in items)
    if expr.get("class") == "WINDOW" or _is_aggregate_call(expr):
        return False
    return all(_is_constant(v, constant) for v in _children(expr))


def _children(expr: dict[str, Any]) -> Iterator[Any]:
    for key, value in expr.items():
        if key in ("filter", "order_bys", "qualified_name", "literal", "value"):
            continue
        if isinstance(value, dict):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield item.get("expression", item) if "expression" in item and len(item) <= 2 else item


def _typed(expr: dict[str, Any], constant: set[str]) -> bool:
    """A number the player typed: an expression of numeric literals (``1.15 * 0.1276``) or of names given
    to them, other than zero. Texts and time stamps are not numbers here."""
    if not _is_constant(expr, constant):
        return False
    if any(_find(expr, lambda d: d.get("class") == "CONSTANT" and (d.get("literal") or {}).get("kind") == "STRING")):
        return False
    return _number(expr) != 0


def _made(expr: Any, constant: set[str], *, top: bool = False) -> Iterator[str]:
    """Why `expr` (outside aggregate arguments) applies the player's constant to a figure."""
    if not isinstance(expr, dict):
        return
    cls = expr.get("class")
    if _is_aggregate_call(expr) or cls == "SUBQUERY":
        return  # per-row arithmetic inside an aggregate measures every world alike; subqueries are nodes
    if cls in _WRAPPERS:
        yield from _made(expr.get("child"), constant, top=top)
        return
    if cls in ("COMPARISON", "BETWEEN") or (cls == "OPERATOR" and "IN" in str(expr.get("type", ""))):
        sides = [v for v in _children(expr) if isinstance(v, dict)]
        if any(_typed(s, constant) for s in sides) and not all(_is_constant(s, constant) for s in sides):
            yield "it compares an aggregated figure with a number you chose, so what it shows is your threshold"
            return
    if cls == "FUNCTION":
        name = str(expr.get("function_name", "")).lower()
        args = _arguments(expr)
        if name in _ADDITIVE and len(args) == 2 and any(_typed(a, constant) for a in args) \
                and not all(_is_constant(a, constant) for a in args):
            yield "it adds a number you chose to an aggregated figure, so its sign is yours, not the data's"
            return
        if name in _CLAMPS and any(_typed(a, constant) for a in args):
            yield "it clamps an aggregated figure at a number you chose, so what it shows is your threshold"
            return
        if name in _SCRAMBLING:
            yield (f"it applies {name} to an aggregated figure, which makes a coin flip of it: worlds differ "
                   "by luck, not by anything the telemetry shows")
            return
        if name in _ROUNDING and not top:
            yield (f"it uses {name} of an aggregated figure inside a larger expression, which can make a "
                   "remainder of it: worlds differ by luck, not by anything the telemetry shows")
            return
        top = top and name in _ROUNDING  # round(round(x)) stays the last step; round(x) + y does not
    for child in _children(expr):
        yield from _made(child, constant, top=top if cls in _WRAPPERS else False)
