"""DuckDB DDL derived from the declarations in ``schemas``."""

from __future__ import annotations

import polars as pl

from revbench.schemas.model import Column, Table


def duckdb_type(dtype: pl.DataType) -> str:
    """The DuckDB type that round-trips a polars dtype through Arrow."""
    if isinstance(dtype, pl.List):
        return f"{duckdb_type(dtype.inner)}[]"
    if isinstance(dtype, pl.Struct):
        inner = ", ".join(f'"{f.name}" {duckdb_type(f.dtype)}' for f in dtype.fields)
        return f"STRUCT({inner})"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ" if dtype.time_zone else "TIMESTAMP"
    simple = {
        pl.Utf8: "VARCHAR",
        pl.Int64: "BIGINT",
        pl.Int32: "INTEGER",
        pl.Float64: "DOUBLE",
        pl.Float32: "FLOAT",
        pl.Boolean: "BOOLEAN",
        pl.Date: "DATE",
        pl.Binary: "BLOB",
    }
    for pl_type, sql in simple.items():
        if dtype == pl_type:
            return sql
    raise TypeError(f"no DuckDB type for {dtype!r}")


def column_sql(col: Column) -> str:
    null = "" if col.nullable else " NOT NULL"
    return f'"{col.name}" {duckdb_type(col.dtype)}{null}'


def create_table_sql(table: Table, version: int | None = None, name: str | None = None) -> str:
    """CREATE TABLE for the columns that existed at ``version`` (all when None); the key is
    the declared one, less columns that did not exist yet (a later migration rebuilds it), and
    none where the table's key is not indexed at ``version`` (``Table.key_unindexed_since``)."""
    cols = [c for c in table.columns if version is None or c.since <= version]
    body = ",\n  ".join(column_sql(c) for c in cols)
    present = {c.name for c in cols}
    pk = ", ".join(f'"{k}"' for k in table.primary_key if k in present)
    key = f",\n  PRIMARY KEY ({pk})" if table.key_indexed(version) else ""
    return f'CREATE TABLE IF NOT EXISTS "{name or table.name}" (\n  {body}{key}\n)'


def rebuild_table_sql(table: Table, version: int | None = None) -> list[str]:
    """Statements that rebuild ``table`` to its declaration at ``version`` (the current one when
    None: a new key, new NOT NULL columns), copying every row and filling new columns from their
    ``backfill``; columns of later versions are left to their own migrations."""
    tmp = f"{table.name}__rebuild"
    present = [c for c in table.columns if version is None or c.since <= version]
    cols = ", ".join(f'"{c.name}"' for c in present)
    select = ", ".join(f'coalesce("{c.name}", {c.backfill})' if _fills(c, version) else f'"{c.name}"' for c in present)
    return [
        f'DROP TABLE IF EXISTS "{tmp}"',
        create_table_sql(table, version=version, name=tmp),
        f'INSERT INTO "{tmp}" ({cols}) SELECT {select} FROM "{table.name}"',
        f'DROP TABLE "{table.name}"',
        f'ALTER TABLE "{tmp}" RENAME TO "{table.name}"',
    ]


def _fills(col: Column, version: int | None) -> bool:
    """Whether a rebuild at ``version`` fills ``col``'s nulls from its backfill. A nullable column's
    null is a value written since (an own row's null ``baseline``), so only the migration that adds
    the column fills it; a later rebuild would take a new row's null for an old row's."""
    return col.backfill is not None and (not col.nullable or col.since == version)


def add_column_sql(table: Table, col: Column) -> str:
    # DuckDB cannot add a NOT NULL column to a filled table; the suites enforce it instead.
    return f'ALTER TABLE "{table.name}" ADD COLUMN IF NOT EXISTS "{col.name}" {duckdb_type(col.dtype)}'
