"""The survey store's SQLite file: its tables and each thread's connection to it.

Owns the store's ``invitations``, ``events``, ``opt_outs`` and ``meta`` tables (:data:`SCHEMA`);
:mod:`~revbench.warehouse.store_epochs` and :mod:`~revbench.warehouse.store_answers` hold the
queries, :class:`revbench.warehouse.survey_store.SurveyStore` puts them together.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS invitations (
    invitation_id TEXT PRIMARY KEY,
    round INTEGER NOT NULL,
    papers TEXT NOT NULL,            -- JSON [{paper_id, title, abstract}]
    published_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    event_id INTEGER PRIMARY KEY AUTOINCREMENT,
    invitation_id TEXT NOT NULL,
    paper_id TEXT NOT NULL,
    rating INTEGER,                  -- 1..5, or NULL for a skip
    skipped INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL,            -- click | form
    token_digest TEXT UNIQUE,        -- a click's token, so a replayed link records nothing
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_invitation ON events (invitation_id, paper_id, event_id);
CREATE TABLE IF NOT EXISTS opt_outs (
    invitation_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,            -- link | one-click
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,            -- epoch | epoch_created_at | epoch_origin | renewed_from
    value TEXT NOT NULL
);
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class StoreBase:
    """The store's path and this thread's connection (the server answers on many threads, and
    the flows read from other processes)."""

    path: Path
    _local: threading.local

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection to the store, opened once: the server answers on a pool of
        threads, and opening a connection (with its pragmas) cost more than the query."""
        key = (os.getpid(), str(self.path))
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "key", None) != key:
            con = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=True)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA busy_timeout=30000")
            self._local.con, self._local.key = con, key
        try:
            yield con
        except sqlite3.DatabaseError:
            self.close()  # a connection that failed is not reused
            raise

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        con = getattr(self._local, "con", None)
        if con is not None:
            self._local.con = None
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One committed transaction (BEGIN IMMEDIATE: writers queue instead of failing)."""
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
