"""The player's queries so far (Q1..Qn), one line each: Enter (or a click) recalls one's SQL into the editor
and its kept rows into the results, and the focus stays here."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui.actions import bindings
from tui.formatting import one_line

CLAUSES = ("select", "from", "where", "group by", "having", "qualify", "order by", "limit")
_CLAUSE_RE = re.compile(r"\b(select|from|where|group\s+by|having|qualify|order\s+by|limit|union|except|intersect)\b",
                        re.IGNORECASE)


def _top_level_clauses(sql: str) -> dict[str, str]:
    """The clauses of the statement's last top-level SELECT (a CTE's body is in parentheses, so a WITH
    query gives its final SELECT), by lower-case keyword; comments dropped, whitespace folded."""
    text = re.sub(r"--[^\n]*", " ", sql)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    text = " ".join(text.split())
    depth, quote, marks = 0, "", []
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            found = _CLAUSE_RE.match(text, i)
            if found:
                marks.append((i, " ".join(found.group(1).lower().split()), found.end()))
                i = found.end()
                continue
        i += 1
    starts = [n for n, (_, kw, _) in enumerate(marks) if kw == "select"]
    if not starts:
        return {}
    clauses: dict[str, str] = {}
    chosen = marks[starts[-1]:]
    for n, (_, kw, end) in enumerate(chosen):
        stop = chosen[n + 1][0] if n + 1 < len(chosen) else len(text)
        if kw in ("union", "except", "intersect"):
            break
        clauses.setdefault(kw, text[end:stop].strip().rstrip(";").strip())
    return clauses


def query_gist(sql: str) -> str:
    """What tells one query from the next on one line: a comment the player wrote, its tables, its filter,
    what it groups by and what it selects ("requests · status = 'ok' · by replica · avg(prefill_s)"),
    rather than the "SELECT replica, …" every per-replica query starts with. The SQL as written when it has no SELECT
    (DESCRIBE, SUMMARIZE, FROM-first)."""
    # the player's own label comes first: a comment line they wrote ("-- clocks per replica")
    label = next(("-- " + c.strip(" -\t") for c in re.findall(r"--([^\n]*)", sql) if c.strip(" -\t")), "")
    clauses = _top_level_clauses(sql)
    if not clauses.get("select"):
        return " ".join(sql.split())
    gist = _clauses_gist(clauses)
    return f"{label} · {gist}" if label else gist


def _clauses_gist(clauses: dict[str, str]) -> str:
    group = clauses.get("group by", "")
    select = clauses["select"]
    if group:
        # the grouping columns are said once, after "by": drop them from the select list
        keys = {k.strip().lower() for k in group.split(",")}
        items = [c.strip() for c in _split_top(select)]
        kept = [c for c in items if c.lower() not in keys]
        select = ", ".join(kept) if kept and group.strip().lower() != "all" else select
    parts = [clauses.get("from", ""), clauses.get("where", ""),
             f"by {group}" if group else "", select,
             f"having {clauses['having']}" if clauses.get("having") else "",
             f"order {clauses['order by']}" if clauses.get("order by") else ""]
    return " · ".join(p for p in parts if p)


def _split_top(text: str) -> list[str]:
    """`text` split at its top-level commas."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return out


def entry_text(data: Mapping[str, Any], width: int = 60) -> Text:
    index = data.get("index")
    if data.get("ok"):
        status = Text(f"{int(data.get('row_count', 0)):>5} rows ", style="green")
    else:
        status = Text(" error     ", style="red")
    sql = one_line(query_gist(str(data.get("sql", ""))), width)
    text = Text.assemble(Text(f"Q{index:<3}", style="bold"), status, sql)
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


class QueryLog(OptionList):
    """Starts with `queries` (query event data, oldest first)."""

    BINDINGS = bindings("queries")

    class Recalled(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, queries: Iterable[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._initial = list(queries)

    def on_mount(self) -> None:
        self.load(self._initial)

    def load(self, queries: Iterable[Mapping[str, Any]]) -> None:
        self.clear_options()
        for data in queries:
            self.add(data)

    def add(self, data: Mapping[str, Any]) -> None:
        self.add_option(Option(entry_text(data, 200), id=f"q{data.get('index')}"))
        self.highlighted = self.option_count - 1

    def action_recall(self) -> None:
        if self.highlighted is not None:
            self.action_select()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Recalled(int(event.option.id[1:])))
