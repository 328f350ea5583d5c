"""incidents.telemetry_schema is the one description of the tables: the builder, the database it writes,
the incident format's column lists and the docs page must all agree with it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from incidents import spec
from incidents import telemetry_schema as schema
from incidents.loader import load_incident
from telemetry_gen import tables as T
from telemetry_gen.cache import ensure_database

DATA = Path(__file__).parent / "data" / "incidents"


def test_the_built_database_is_the_schema(in_library_cache: Path) -> None:
    """Tables in order, columns in order, their DuckDB types and comments, and the catalog view, as built."""
    info = ensure_database(load_incident(DATA / "proof-slow-replica.yaml"), 0)
    with duckdb.connect(info.path, read_only=True) as con:
        built = con.execute("SELECT table_name, comment FROM duckdb_tables() ORDER BY table_name").fetchall()
        assert built == sorted((t.name, t.description) for t in schema.TABLES)
        for t in schema.TABLES:
            cols = con.execute("SELECT column_name, data_type, comment FROM duckdb_columns() WHERE table_name = ? "
                               "ORDER BY column_index", [t.name]).fetchall()
            # the fixture's clients never retry: the table ends before its optional columns
            optional = schema.OPTIONAL_COLUMNS.get(t.name, ())
            assert cols == [(c.name, c.type, c.description) for c in t.columns if c.name not in optional], t.name
            assert con.execute(f'SELECT count(*) FROM "{t.name}"').fetchone() != (0,), f"{t.name} is empty"
        catalog = con.execute('SELECT "table", "column", type, description FROM catalog').fetchall()
        assert sorted(catalog) == sorted((t.name, c.name, c.type, c.description)
                                         for t in schema.TABLES for c in t.columns
                                         if c.name not in schema.OPTIONAL_COLUMNS.get(t.name, ()))
        cols = [d[0] for d in con.execute("SELECT * FROM catalog LIMIT 0").description]
        assert tuple(cols) == schema.CATALOG.column_names
        (view_comment,) = con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'catalog'").fetchone()
        assert view_comment == schema.CATALOG.description


def test_the_incident_format_names_the_schema_columns_and_types() -> None:
    """incidents.spec keeps its own TABLE_COLUMNS and COLUMN_TYPES (until it imports them from the schema)."""
    assert spec.TABLE_COLUMNS == schema.TABLE_COLUMNS
    assert spec.COLUMN_TYPES == schema.COLUMN_TYPES


def test_the_docs_page_is_generated_from_the_schema() -> None:
    assert schema.DOCS_PATH.read_text(encoding="utf-8") == schema.markdown(), \
        "regenerate it: python -m incidents.telemetry_schema"


def test_builders_are_the_schema_tables() -> None:
    assert tuple(T.BUILDERS) == schema.TABLE_NAMES


def test_conform_names_a_missing_column_and_a_wrong_type() -> None:
    cols = schema.table("logs").column_names
    good = pd.DataFrame({c: pd.Series(["x"], dtype="string") for c in cols})
    good["ts"] = pd.Series([pd.Timestamp("2026-01-01")]).astype("datetime64[us]")
    assert T.conform("logs", good) is good
    with pytest.raises(ValueError, match="schema says"):
        T.conform("logs", good.drop(columns=["level"]))
    with pytest.raises(ValueError, match="column message is int64"):
        T.conform("logs", good.assign(message=[1]))


def test_a_column_name_has_one_type_across_tables() -> None:
    for t in schema.TABLES:
        for c in t.columns:
            assert schema.COLUMN_TYPES[c.name] == c.type
            assert c.description, f"{t.name}.{c.name} has no description"


def test_an_empty_table_is_typed_from_the_schema(tmp_path: Path) -> None:
    """No evaluations: the frame has untyped columns (kept so, for the digest), the database's are the schema's."""
    from datetime import datetime

    from engine_model.profiles import get_gpu
    from telemetry_gen.store import write_database

    ctx = T.TelemetryContext(t0=datetime(2026, 1, 1), gpu=get_gpu("H100-SXM"))
    evals = T.conform("evals", T.evals_table(ctx))
    assert evals.empty
    write_database(tmp_path / "e.duckdb", {"evals": evals})
    with duckdb.connect(str(tmp_path / "e.duckdb"), read_only=True) as con:
        types = con.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'evals' "
                            "ORDER BY column_index").fetchall()
    assert types == [(c.name, c.type) for c in schema.table("evals").columns]
