"""Opening and closing a warehouse: waiting out another process's lock, refusing a file that
is not a revbench warehouse (or is newer than this revbench), and migrating on open.

Owns ``schema_version``.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

import duckdb

from revbench.errors import WarehouseBusy, WarehouseDamaged
from revbench.schemas.tables import SCHEMA_VERSION_TABLE
from revbench.warehouse.core import WarehouseBase, _damaged, utcnow
from revbench.warehouse.ddl import create_table_sql
from revbench.warehouse.holder import describe, read_holder
from revbench.warehouse.migrations import LATEST_VERSION, migrations


_HELD: dict[Path, weakref.WeakSet[Lifecycle]] = {}
"""The sessions this process holds for writing, by file. DuckDB refuses a read-only connection to
a file its own process holds for writing ("a different configuration"), and no lock keeps a
reader of this process out: a reader here (a run's evaluation reading the benchmark its ratings
just built) reads through the same database instead. Weak: a session dropped without ``close``
still goes (and lets go of the file) as it did before."""
_HELD_LOCK = threading.Lock()


def _key(path: Path) -> Path:
    return path.resolve()


def held_here(path: Path | str, besides: Lifecycle | None = None) -> bool:
    """Whether this process holds the warehouse at ``path`` for writing (a run is on it), in a
    session other than ``besides``."""
    with _HELD_LOCK:
        return any(wh is not besides for wh in _HELD.get(_key(Path(path)), ()))


class _Closed:
    """What a closed warehouse answers with: one line naming the file, whatever is asked of it."""

    def __init__(self, path: Path):
        self._path = path

    def __getattr__(self, name: str) -> Callable[..., None]:
        def closed(*_args: object, **_kwargs: object) -> None:
            if name == "close":
                return None
            raise duckdb.ConnectionException(f"the warehouse {self._path} is closed")
        return closed


class Lifecycle(WarehouseBase):
    """A DuckDB file with the revbench schema, migrated on open."""

    def __init__(self, path: Path | str, read_only: bool = False, lock_wait: float = 0.0, memory_limit: str = "",
                 threads: int = 0):
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise FileNotFoundError(f"no warehouse at {self.path}; run an ingest first")
        self.read_only = read_only
        self.con = self._connect(lock_wait)
        self._in_tx = False
        # Beyond the limit DuckDB spills joins and sorts to <file>.tmp instead of failing or
        # growing without bound (the authors rebuild at full size wants ~5 GB otherwise).
        settings = ([f"SET memory_limit = '{memory_limit}'"] if memory_limit else []) + (
            [f"SET threads = {int(threads)}"] if threads else [])
        self._opened(settings, None if read_only else self.migrate)

    def _opened(self, statements: list[str], then: Callable[[], object] | None) -> None:
        """The connection's set-up: UTC, ``statements``, the identity check, then ``then``. A DuckDB
        error names the file as damaged; any failure closes the connection before it is raised."""
        try:
            self._exec("SET TimeZone = 'UTC'")
            for stmt in statements:
                self._exec(stmt)
            self._check_identity()
            if then is not None:
                then()
        except duckdb.Error as exc:
            self.close()
            raise WarehouseDamaged(_damaged(self.path, exc)) from exc
        except BaseException:
            self.close()
            raise

    def _connect(self, lock_wait: float) -> duckdb.DuckDBPyConnection:
        """Connect, waiting up to ``lock_wait`` seconds (bounded backoff) while another process
        holds the file; a file that is not a DuckDB database is named with how to recover. A
        reader in a process that holds the file for writing shares that process's database."""
        if self.read_only and held_here(self.path):
            try:  # the writer's configuration: DuckDB hands out another connection to its database
                return duckdb.connect(str(self.path))
            except duckdb.Error as exc:
                raise WarehouseDamaged(_damaged(self.path, exc)) from exc
        deadline = time.monotonic() + lock_wait
        delay = 0.05
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=self.read_only)
                if not self.read_only:
                    with _HELD_LOCK:
                        _HELD.setdefault(_key(self.path), weakref.WeakSet()).add(self)
                return con
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise WarehouseDamaged(_damaged(self.path, exc)) from exc
                if time.monotonic() >= deadline:
                    holder = read_holder(self.path)
                    pid = re.search(r"PID (\d+)", str(exc))
                    who = describe(holder) if holder and holder.get("alive") else (
                        f"another process (pid {pid.group(1)})" if pid else "another process")
                    waited = f" after waiting {lock_wait:.0f} s" if lock_wait else ""
                    raise WarehouseBusy(f"the warehouse {self.path} is in use by {who}{waited}; "
                                        "run again when it has finished (`revbench status` shows its progress)") from exc
                time.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
                delay = min(delay * 2, 1.0)
            except duckdb.Error as exc:
                raise WarehouseDamaged(_damaged(self.path, exc)) from exc

    def _check_identity(self) -> None:
        """Refuse a DuckDB file that is not a revbench warehouse, or one from a newer revbench."""
        tables = {r[0] for r in self._exec("SELECT table_name FROM information_schema.tables")}
        if tables and "schema_version" not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise WarehouseDamaged(f"{self.path} is a DuckDB database but not a revbench warehouse (tables: {shown}); "
                                   "point REVBENCH_DATA_DIR elsewhere, or move the file aside")
        if "schema_version" in tables:
            version = self._exec("SELECT max(version) FROM schema_version")[0][0] or 0
            if version > LATEST_VERSION:
                raise WarehouseDamaged(f"{self.path} has schema version {version}, newer than this revbench "
                                       f"knows ({LATEST_VERSION}); upgrade revbench to use it")

    @classmethod
    @contextmanager
    def open(cls, path: Path | str, read_only: bool = False, lock_wait: float = 0.0, memory_limit: str = "",
             threads: int = 0) -> Iterator[Self]:
        """Open, yield, and always close (DuckDB holds a file lock while open)."""
        wh = cls(path, read_only=read_only, lock_wait=lock_wait, memory_limit=memory_limit, threads=threads)
        try:
            yield wh
        finally:
            wh.close()

    def close(self) -> None:
        with _HELD_LOCK:
            held = _HELD.get(_key(self.path))
            if held is not None:
                held.discard(self)
                if not held:
                    _HELD.pop(_key(self.path), None)
        self.con.close()
        # Prefect keeps a finished task's parameters (the run, so this warehouse) in its rollback
        # hooks until the process ends; letting go of the connection object here means DuckDB's
        # module is not still referenced at interpreter exit (nanobind's "leaked instances" report).
        self.con = _Closed(self.path)

    def schema_version(self) -> int:
        if not self.read_only:
            self._exec(create_table_sql(SCHEMA_VERSION_TABLE))
        row = self._exec("SELECT max(version) FROM schema_version")[0]
        return int(row[0]) if row and row[0] is not None else 0

    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied."""
        current = self.schema_version()
        applied: list[int] = []
        for m in migrations():
            if m.version <= current:
                continue
            with self.transaction():
                for stmt in m.statements:
                    self._exec(stmt)
                # Not read back as a frame: that would load pyarrow (DuckDB's .pl()) for a row count.
                self._exec("INSERT INTO schema_version VALUES (?, ?, ?)", [m.version, utcnow(), m.description])
            applied.append(m.version)
        return applied
