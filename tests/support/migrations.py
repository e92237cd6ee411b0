"""A warehouse left at an older schema version, as a user's file from an earlier release would be: the
migration tests build one, add the rows that release stored, and check that opening it migrates in place."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb

from revbench.warehouse.db import SCHEMA_VERSION_TABLE
from revbench.warehouse.ddl import create_table_sql
from revbench.warehouse.migrations import migrations


def warehouse_at(path: Path, version: int, applied_at: datetime | None = None) -> duckdb.DuckDBPyConnection:
    """A new DuckDB file at ``path`` with every migration up to ``version`` applied and recorded in
    ``schema_version`` (each with its own description, applied at ``applied_at``, else the time it was
    recorded); the connection is returned open for the caller's older rows, and the caller closes it."""
    con = duckdb.connect(str(path))
    con.execute(create_table_sql(SCHEMA_VERSION_TABLE))
    for m in migrations():
        if m.version > version:
            break
        for stmt in m.statements:
            con.execute(stmt)
        when = datetime.now(UTC) if applied_at is None else applied_at
        con.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [m.version, when, m.description])
    return con
