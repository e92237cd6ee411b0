"""The survey server's own store: SQLite in WAL mode, beside the warehouse.

The survey server runs for weeks while refresh flows write the DuckDB warehouse, and DuckDB lets
one process write a file with no other process reading it. SQLite in WAL mode fits the server's
side: it ships with Python (no server to run), any number of processes read while one writes,
a writer waits (busy timeout) instead of failing, and a commit with ``synchronous=FULL`` is on
disk before the server acknowledges the response that made it. The survey flow publishes
invitations here; the server records events and opt-outs; the ratings stage pulls new events
into the warehouse by (epoch, id), incrementally.

A store numbers its events from 1, so an id alone does not name an event once the store is
emptied, moved aside or restored from an older backup: each store carries an epoch, a random id
made with it (and given on first open to a store made before epochs existed: an upgrade), and the
warehouse keeps a high-water mark per epoch. A restored backup keeps its epoch but forgets events
the warehouse already pulled; the ratings stage detects that and renews the epoch
(:meth:`SurveyStore.renew_epoch`), so ids the store hands out again never collide with pulled ones.

Its modules, each holding its own SQL (SQLite's, where the rest of ``warehouse/`` holds DuckDB's):
``base`` the tables and each thread's connection, ``answers`` what the server publishes and
records, ``epochs`` the epochs and the events the ratings stage pulls, ``backup`` the store's side
of backups and restores (:mod:`revbench.backup` holds the rest); :class:`SurveyStore`, here, puts
the first three together.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from revbench.errors import WarehouseDamaged
from revbench.warehouse.store.answers import StoreAnswers
from revbench.warehouse.store.base import SCHEMA
from revbench.warehouse.store.epochs import StoreEpochs


class SurveyStore(StoreEpochs, StoreAnswers):
    """One SQLite file; every method opens its own connection (the server answers on many
    threads, and the flows read from other processes)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            with self._connect() as con:
                con.executescript(SCHEMA)
                con.execute("SELECT count(*) FROM invitations").fetchone()
                has_epoch = con.execute("SELECT 1 FROM meta WHERE key = 'epoch'").fetchone() is not None
            if not has_epoch:
                self._give_epoch()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise WarehouseDamaged(
                f"the survey store {self.path} cannot be read ({exc}): restore it from a backup, or move it aside "
                "to start an empty one (answers in it would be lost)") from None
