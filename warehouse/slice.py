"""What every stage's slice of the warehouse stands on: the one session (connection,
transaction, statements) of the :class:`~revbench.warehouse.db.Warehouse` that holds it, and the
generic table operations, whose writes refuse a table the slice's stage does not own
(:mod:`~revbench.warehouse.owners`).

A slice never inherits another stage's slice: a read of another stage's queries is a call
through the warehouse (``self.wh.graph.cited_papers(...)``), visible where it is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import polars as pl

from revbench.schemas.model import Table
from revbench.warehouse.owners import check_owner


class Slice:
    """One stage's queries over the warehouse session ``wh`` (shared by every slice: one
    connection, one transaction). ``stage`` names the owner it writes as."""

    stage: ClassVar[str] = ""

    def __init__(self, wh: Any) -> None:
        # Any: the Warehouse that holds this slice (imports every slice, so no slice imports it).
        self.wh: Any = wh

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.wh.con

    @property
    def path(self) -> Path:
        return self.wh.path

    def transaction(self) -> AbstractContextManager[None]:
        """The session's transaction: nested use (from any slice) joins the outer one."""
        return self.wh.transaction()

    def _exec(self, query: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.wh._exec(query, params)

    def _frame(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        return self.wh._frame(query, params)

    def read(self, table: Table, order_by: Sequence[str] | None = None) -> pl.DataFrame:
        return self.wh.read(table, order_by)

    def count(self, table: Table) -> int:
        return self.wh.count(table)

    def has_table(self, name: str) -> bool:
        return self.wh.has_table(name)

    # The writes: only of this stage's own tables.

    def upsert(self, table: Table, df: pl.DataFrame, only_if: str | None = None,
               sets: dict[str, str] | None = None) -> int:
        check_owner(table, self.stage)
        return self.wh.upsert(table, df, only_if=only_if, sets=sets)

    def insert(self, table: Table, df: pl.DataFrame) -> int:
        check_owner(table, self.stage)
        return self.wh.insert(table, df)

    def delete_where_in(self, table: Table, column: str, values: Sequence[Any]) -> None:
        check_owner(table, self.stage)
        self.wh.delete_where_in(table, column, values)

    def replace_all(self, table: Table, df: pl.DataFrame) -> int:
        check_owner(table, self.stage)
        return self.wh.replace_all(table, df)


__all__ = ["Slice"]
