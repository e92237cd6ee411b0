"""The plumbing every stage's queries stand on: the connection's statements (an interrupt
becomes a cancellation, a damaged file a message saying how to recover), transactions, and the
generic table operations (upsert by natural key, delete, read, count, replace, digest).

Owns no table. The :class:`~revbench.warehouse.db.Warehouse` session is a :class:`WarehouseBase`;
each stage's slice (:mod:`~revbench.warehouse.slice`) works through that one session, keeps its
own SQL beside the tables it owns, and writes only those (:mod:`~revbench.warehouse.owners`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from revbench.errors import WarehouseDamaged
from revbench.schemas.model import Table
from revbench.schemas.tables import TABLES


def _q(name: str) -> str:
    return f'"{name}"'


_DAMAGE = re.compile(r"could not read enough bytes|corrupt database|not a valid duckdb database|checksum|"
                     r"failed to deserialize|serialization error", re.IGNORECASE)
"""What DuckDB says when a query reaches a block a truncated or damaged file no longer holds
(opening such a file can succeed: only the blocks a query reads are checked)."""


@contextmanager
def _interruptible(path: Path | None = None) -> Iterator[None]:
    """DuckDB answers Ctrl-C during a query by cancelling it and raising its own error; it is
    an interrupt, and the run must end as cancelled, not failed. A query that finds the file
    damaged ends with the damaged-warehouse message naming ``path``."""
    try:
        yield
    except (RuntimeError, duckdb.Error) as exc:
        # A KeyboardInterrupt raised while DuckDB scanned a registered frame comes back wrapped
        # ("... failed: KeyboardInterrupt: signal 15").
        if (isinstance(exc, duckdb.InterruptException) or "interrupted" in str(exc).lower()
                or "KeyboardInterrupt" in str(exc)):
            raise KeyboardInterrupt("interrupted during a warehouse query") from exc
        if path is not None and isinstance(exc, duckdb.Error) and _DAMAGE.search(str(exc)):
            raise WarehouseDamaged(_damaged(path, exc)) from exc
        raise


def _damaged(path: Path, exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (f"the warehouse {path} cannot be read ({first}); restore it from a backup, or move it aside "
            f"(mv {path} {path}.broken) and the next run starts a new one")


_WRITERS: dict[Path, threading.RLock] = {}
_WRITERS_LOCK = threading.Lock()


def _writer_lock(path: Path) -> threading.RLock:
    """The lock every writing statement and transaction on ``path`` in this process takes.

    DuckDB's file lock keeps other processes out, but the sessions of one process (two runs on
    threads, each resumed after a curator's decision) share one database, and DuckDB resolves
    their overlapping transactions optimistically: the later one fails with "Conflict on tuple
    deletion". Serialising writes here makes the second wait its turn instead. Reentrant, so a
    transaction opened inside another (on any session of the same thread) joins it."""
    key = path.resolve()
    with _WRITERS_LOCK:
        return _WRITERS.setdefault(key, threading.RLock())


class _Stream:
    """A frame as DuckDB scans it through the Arrow C stream interface, a fresh stream for each
    scan. Registered as a polars frame, DuckDB converts it with ``to_arrow()``, which loads pyarrow:
    about 20 ms of a one-off command that writes a few rows and reads none back as frames
    (``revbench evaluate`` of prediction files)."""

    __slots__ = ("frame",)

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.frame.__arrow_c_stream__(requested_schema)


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the warehouse stamps rows with."""
    return datetime.now(UTC)


class WarehouseBase:
    """An open connection and the operations every stage's queries use (opened by
    :class:`revbench.warehouse.lifecycle.Lifecycle`)."""

    path: Path
    read_only: bool
    con: duckdb.DuckDBPyConnection
    _in_tx: bool

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic unit; nested use joins the outer transaction."""
        if self._in_tx:
            yield
            return
        with self._writing():
            self._in_tx = True
            try:
                self._exec("BEGIN TRANSACTION")
                yield
                self._exec("COMMIT")
            except BaseException:
                self._abandon()
                raise
            finally:
                self._in_tx = False

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """This process's turn to write ``path`` (nothing to wait for on a read-only session)."""
        if self.read_only:
            yield
            return
        with _writer_lock(self.path):
            yield

    def _abandon(self) -> None:
        """Roll back whatever is open. An interrupt can land between BEGIN and the block, after
        COMMIT, or cancel the ROLLBACK itself; a transaction left open would make the run's
        'cancelled' record fail, so try again until DuckDB says none is open."""
        for _ in range(5):
            try:
                self.con.execute("ROLLBACK")
                return
            except duckdb.TransactionException:
                return  # none was open (never begun, committed, or already rolled back)
            except (KeyboardInterrupt, duckdb.InterruptException):
                continue
            except duckdb.Error:
                return

    def _exec(self, query: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        # DuckDB 2 refuses new work while a result is unfetched, so every statement is drained.
        # A statement outside a transaction is its own transaction and may write: it waits its turn.
        if self._in_tx:
            with _interruptible(self.path):
                return self.con.execute(query, params).fetchall()
        with self._writing(), _interruptible(self.path):
            return self.con.execute(query, params).fetchall()

    def _frame(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run a query and return its rows as a polars frame."""
        with _interruptible(self.path):
            return self.con.sql(query, params=params).pl()

    def _register(self, table: Table, df: pl.DataFrame) -> str:
        name = f"_incoming_{table.name}"
        with _interruptible():
            self.con.register(name, _Stream(table.conform(df)))
        return name

    def upsert(self, table: Table, df: pl.DataFrame, only_if: str | None = None,
               sets: dict[str, str] | None = None) -> int:
        """Insert or update rows by the table's natural key; ``only_if`` guards updates (SQL on
        ``excluded`` and the table); ``sets`` replaces the default update of every other column by
        the new value with one SQL expression per column (over ``excluded`` and the table)."""
        if df.height == 0:
            return 0
        whole = {c: f"excluded.{_q(c)}" for c in table.names if c not in table.primary_key}
        # Without an index of the key there is no ON CONFLICT: the rows of these keys are replaced whole.
        if not table.key_indexed() and (only_if or sets not in (None, whole)):
            raise ValueError(f"{table.name}: its key is not indexed, so an upsert replaces rows whole (no sets, no only_if)")
        df = df.unique(subset=list(table.primary_key), keep="last", maintain_order=True)
        src = self._register(table, df)
        cols, pk = (", ".join(_q(c) for c in names) for names in (table.names, table.primary_key))
        updates = ", ".join(f"{_q(c)} = {expr}" for c, expr in (whole if sets is None else sets).items())
        action = f"DO UPDATE SET {updates}" + (f" WHERE {only_if}" if only_if else "") if updates else "DO NOTHING"
        replace = [] if table.key_indexed() else [f"DELETE FROM {_q(table.name)} WHERE ({pk}) IN (SELECT {pk} FROM {src})"]
        inserted = f"INSERT INTO {_q(table.name)} ({cols}) SELECT {cols} FROM {src}"
        with self.transaction():  # drained, not read back as a frame: that would load pyarrow for a row count
            for statement in [*replace, inserted + ("" if replace else f" ON CONFLICT ({pk}) {action}")]:
                self._exec(statement)
        self.con.unregister(src)
        return df.height

    def insert(self, table: Table, df: pl.DataFrame) -> int:
        """Insert rows that are new by construction (the caller deleted or never wrote their
        keys): no conflict handling, so a repeated key fails the statement instead of being
        merged. At millions of rows (a pools round's evidence) this costs a fraction of an upsert."""
        if df.height == 0:
            return 0
        if not table.key_indexed() and (twice := table.repeated_key(df)):  # what the index refused, kept without one
            raise duckdb.ConstraintException(f"{table.name}: the key {twice} is given more than once in one insert")
        src = self._register(table, df)
        cols = ", ".join(_q(c) for c in table.names)
        with self.transaction():
            self._exec(f"INSERT INTO {_q(table.name)} ({cols}) SELECT {cols} FROM {src}")
        self.con.unregister(src)
        return df.height

    def delete_where_in(self, table: Table, column: str, values: Sequence[Any]) -> None:
        """Delete rows whose ``column`` is one of ``values``."""
        if not values:
            return
        self.con.register("_keys", _Stream(pl.DataFrame({"k": list(values)})))
        with self.transaction():
            self._exec(f"DELETE FROM {_q(table.name)} WHERE {_q(column)} IN (SELECT k FROM _keys)")
        self.con.unregister("_keys")

    def read(self, table: Table, order_by: Sequence[str] | None = None) -> pl.DataFrame:
        """A whole table as a frame with its declared schema."""
        order = ", ".join(_q(c) for c in (order_by or table.primary_key))
        cols = ", ".join(_q(c) for c in table.names)
        df = self._frame(f"SELECT {cols} FROM {_q(table.name)} ORDER BY {order}")
        return table.conform(df) if df.height else table.empty()

    def count(self, table: Table) -> int:
        return int(self._exec(f"SELECT count(*) FROM {_q(table.name)}")[0][0])

    def table_counts(self) -> dict[str, int]:
        """Row counts of every declared table the file has (one read before its migration lacks the newer ones)."""
        present = {r[0] for r in self._exec("SELECT table_name FROM information_schema.tables")}
        return {name: self.count(t) for name, t in TABLES.items() if name != "schema_version" and name in present}

    def replace_all(self, table: Table, df: pl.DataFrame) -> int:
        """Replace every row of a derived table with ``df`` in one transaction (a crash keeps the old rows)."""
        with self.transaction():
            self._exec(f"DELETE FROM {_q(table.name)}")
            self.insert(table, df)  # joins this transaction
        return df.height

    def has_table(self, name: str) -> bool:
        return bool(self._exec("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name])[0][0])

    def digest(self, table: Table, columns: Sequence[str]) -> str:
        """Row count and an order-free hash of ``columns`` over ``table``: equal digests mean
        (with overwhelming probability) equal contents, at the cost of one scan."""
        cols = ", ".join(_q(c) for c in columns)
        n, h = self._exec(f"SELECT count(*), coalesce(bit_xor(hash({cols})), 0) FROM {_q(table.name)}")[0]
        return f"{n}:{int(h):016x}"
