"""SQL text cut by DuckDB's tokenizer (game.query.sqltokens) and the query-plan reads behind scoring
(game.query.plan_analysis): offsets right for non-ASCII text, separators inside strings, names and nested
parentheses ignored, and plan trouble from DuckDB tolerated while a bug in our code is not hidden."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from game.query.gateway import LocalGateway
from game.query.plan_analysis import TableRead, filters_on, plan_reads, split_filter
from game.query.sqltokens import identifiers, split_top_level, strip_parens, tokens


def test_tokens_are_cut_at_characters_not_bytes() -> None:
    text = "replica = 'é' AND ts > 3"
    assert [t.text for t in tokens(text)] == ["replica", "=", "'é'", "AND", "ts", ">", "3"]
    assert all(text[t.start:t.end] == t.text for t in tokens(text))


def test_a_lone_surrogate_does_not_stop_the_tokenizer() -> None:
    assert [t.text for t in tokens("\ud800 AND x")][1:] == ["AND", "x"]


@pytest.mark.parametrize(("text", "separator", "parts"), [
    ("a = 1 AND b = 2", "AND", ["a = 1", "b = 2"]),
    ("a = 'x AND y' AND b = 2", "AND", ["a = 'x AND y'", "b = 2"]),
    ('"odd AND name" = 1 AND b = 2', "AND", ['"odd AND name" = 1', "b = 2"]),
    ("(a = 1 AND b = 2) AND c = 3", "AND", ["(a = 1 AND b = 2)", "c = 3"]),
    ("replica = 'é' and ts >= 'x'", "AND", ["replica = 'é'", "ts >= 'x'"]),
    ("a = 'it''s' OR a = 'b'", "OR", ["a = 'it''s'", "a = 'b'"]),
    ("'a', 'b,c', f(1, 2)", ",", ["'a'", "'b,c'", "f(1, 2)"]),
    ("a = 1", "AND", ["a = 1"]),
])
def test_split_top_level(text: str, separator: str, parts: list[str]) -> None:
    assert split_top_level(text, separator) == parts


@pytest.mark.parametrize(("text", "bare"), [
    ("((a = 1))", "a = 1"),
    ("(a = ')')", "a = ')'"),
    ("(a) AND (b)", "(a) AND (b)"),
    ("('a)", "('a)"),
    ("  (x)  ", "x"),
])
def test_strip_parens(text: str, bare: str) -> None:
    assert strip_parens(text) == bare


def test_filters_on_sees_columns_past_non_ascii_literals() -> None:
    read = TableRead("requests", filters=["model = 'ünïcødé' AND replica = 'vllm-1'", "note = 'replica'"])
    assert split_filter(read.filters[0]) == ["model = 'ünïcødé'", "replica = 'vllm-1'"]
    assert filters_on(read, "replica") == ["model = 'ünïcødé' AND replica = 'vllm-1'"]
    assert "replica" not in identifiers("note = 'replica'")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE requests AS SELECT range AS id, 'vllm-' || (range % 2) AS replica FROM range(10)")
    con.close()
    return path


def test_explain_after_a_non_ascii_comment_runs(db: Path) -> None:
    """The statement after EXPLAIN is found at a character offset: a comment with 'é' before it used to
    shift it by a byte ('ELECT ...') and the query failed."""
    with LocalGateway(db) as gateway:
        result = gateway.run("EXPLAIN /* é */ SELECT count(*) FROM requests")
    assert result.ok, result.error


def test_plan_reads_of_a_query(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        [read] = plan_reads(con, "SELECT count(*) FROM requests WHERE replica = 'vllm-1'")
    finally:
        con.close()
    assert read.table == "requests" and read.counted and "replica" in read.columns
    assert filters_on(read, "replica")


def test_a_plan_duckdb_cannot_give_leaves_no_reads(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert plan_reads(con, "SELECT no_such_column FROM requests") == []  # a BinderException
    finally:
        con.close()


class _Broken:
    """A connection whose planning fails with something that is not DuckDB's: a bug to be seen."""

    def extract_statements(self, sql: str) -> list[object]:
        raise RuntimeError("not a DuckDB error")


def test_a_bug_while_reading_plans_is_not_swallowed() -> None:
    with pytest.raises(RuntimeError, match="not a DuckDB error"):
        plan_reads(_Broken(), "SELECT 1")  # type: ignore[arg-type]
