"""The declaration language for tables: one ``Table`` per warehouse table, columns typed with polars dtypes.

Everything else is derived from these declarations: DuckDB DDL (``warehouse.ddl``), polars
schemas for frames handed to the warehouse, great-expectations suites (``schemas.quality``) and
the release schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

ARXIV_ID_PATTERN = r"^(?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})$"
"""An arXiv id without version, new style (2401.01234) or old (cs/0112017); every module that
declares tables reads it from here, so ``tables`` and ``graph`` need not import each other."""


@dataclass(frozen=True)
class Column:
    """One column and the checks every row must pass."""

    name: str
    dtype: pl.DataType
    nullable: bool = True
    doc: str = ""
    pattern: str | None = None
    allowed: tuple[str, ...] | None = None
    min_value: float | None = None
    max_value: float | None = None
    min_length: int | None = None
    since: int = 1
    backfill: str | None = None
    """SQL for the value of rows that existed before the column did (when a migration rebuilds the table:
    ``REBUILD`` in ``warehouse.migrations``); a nullable column's only in the migration that adds it."""


@dataclass(frozen=True)
class Table:
    """A warehouse table: its columns, natural key and the migration that created it."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    doc: str = ""
    since: int = 1
    validate: bool = False
    indexes: tuple[tuple[str, ...], ...] = field(default_factory=tuple)
    key_unindexed_since: int | None = None
    """The schema version from which DuckDB holds no index of the key (None: it always does): its
    writers keep the key, replacing rows by it (``Warehouse.upsert``), and refuse a repeated one
    (``Warehouse.insert``). For a table of millions of rows that every run rewrites a share of, where
    the index costs more than it guards (``citations``)."""

    def key_indexed(self, version: int | None = None) -> bool:
        """Whether DuckDB holds an index of the key at ``version`` (the current one when None)."""
        return self.key_unindexed_since is None or (version is not None and version < self.key_unindexed_since)

    def repeated_key(self, df: pl.DataFrame) -> str | None:
        """The first key ``df`` holds more than once, as ``(column=value, ...)``; None where none is."""
        key = list(self.primary_key)
        twice = df.select(key).filter(pl.struct(key).is_duplicated())
        return "(" + ", ".join(f"{c}={v!r}" for c, v in twice.row(0, named=True).items()) + ")" if twice.height else None

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(f"{self.name} has no column {name!r}")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def polars_schema(self) -> pl.Schema:
        return pl.Schema({c.name: c.dtype for c in self.columns})

    def empty(self) -> pl.DataFrame:
        """An empty frame with this table's schema."""
        return pl.DataFrame(schema=self.polars_schema)

    def conform(self, df: pl.DataFrame) -> pl.DataFrame:
        """Select and cast ``df`` to this table's columns; missing nullable columns become null."""
        missing = [c.name for c in self.columns if c.name not in df.columns and not c.nullable]
        if missing:
            raise ValueError(f"{self.name}: frame lacks required columns {missing}")
        exprs = [
            (pl.col(c.name) if c.name in df.columns else pl.lit(None)).cast(c.dtype).alias(c.name)
            for c in self.columns
        ]
        return df.select(exprs)
