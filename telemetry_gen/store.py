"""Write telemetry tables to a DuckDB file with a comment on every table and column.

The database is the game board: it holds what a serving team's observability stack would
hold and nothing about the incident's answer. The comments are incidents.telemetry_schema's
descriptions (the one place tables and columns are described).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import duckdb
import pandas as pd

from incidents import telemetry_schema as schema


def table_digest(tables: dict[str, pd.DataFrame]) -> str:
    """sha256 over every table's name, schema and rows, in table-name order (rows in stored order)."""
    h = hashlib.sha256()
    for name in sorted(tables):
        df = tables[name]
        h.update(name.encode())
        h.update(repr([(c, str(t)) for c, t in df.dtypes.items()]).encode())
        h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def write_database(path: Path, tables: dict[str, pd.DataFrame]) -> None:
    """Create `path` (replacing it) holding `tables`, comments on everything, and a `catalog` view. Every
    table and column must be in incidents.telemetry_schema (KeyError otherwise): nothing goes undescribed."""
    path = Path(path)
    # a temp name of its own, so builders racing for the same path never share a half-written file
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        _write(tmp, tables)
        tmp.replace(path)
    except BaseException:
        # a failed write (a full disk, an interrupt) leaves nothing behind in the cache folder
        tmp.unlink(missing_ok=True)
        raise
    finally:
        Path(str(tmp) + ".wal").unlink(missing_ok=True)


def _write(tmp: Path, tables: dict[str, pd.DataFrame]) -> None:
    con = duckdb.connect(str(tmp))
    try:
        for name, df in tables.items():
            described = schema.table(name)
            # typed from the schema, so a table is typed alike whether or not its frame had rows
            # (the columns the frame has: a table's optional columns, schema.OPTIONAL_COLUMNS, may be absent)
            present = set(df.columns)
            columns = ", ".join(f'"{c.name}" {c.type}' for c in described.columns if c.name in present)
            con.execute(f'CREATE TABLE "{name}" ({columns})')
            con.register("_frame", df)
            con.execute(f'INSERT INTO "{name}" SELECT * FROM _frame')
            con.unregister("_frame")
            con.execute(f'COMMENT ON TABLE "{name}" IS {_sql_str(described.description)}')
            for col in df.columns:
                text = described.column(col).description
                con.execute(f'COMMENT ON COLUMN "{name}"."{col}" IS {_sql_str(text)}')
        con.execute(
            """
            CREATE VIEW catalog AS
            SELECT c.table_name AS "table", c.column_name AS "column", c.data_type AS type,
                   c.comment AS description, t.comment AS table_description
            FROM duckdb_columns() c JOIN duckdb_tables() t USING (table_name)
            WHERE c.schema_name = 'main'
            ORDER BY c.table_name, c.column_index
            """
        )
        con.execute(f"COMMENT ON VIEW catalog IS {_sql_str(schema.CATALOG.description)}")
        con.execute("CHECKPOINT")
    finally:
        con.close()
