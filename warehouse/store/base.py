"""The survey store's SQLite file: its tables and each thread's connection to it.

Owns the store's ``invitations``, ``events``, ``opt_outs`` and ``meta`` tables (:data:`SCHEMA`);
:mod:`~revbench.warehouse.store.epochs` and :mod:`~revbench.warehouse.store.answers` hold the
queries, :class:`revbench.warehouse.store.SurveyStore` puts them together.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from revbench.errors import SurveyStoreGone

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


class _Con:
    """One thread's connection, the file it opened (device, inode), and how many calls use it."""

    __slots__ = ("busy", "con", "file")

    def __init__(self, con: sqlite3.Connection, file: tuple[int, int]):
        self.con, self.file, self.busy = con, file, 0


def _retire(c: _Con) -> None:
    """Close a connection whose file left the path. SQLite neither checkpoints nor removes the
    write-ahead log when it closes a moved file, and finds that log by the path's name: what the
    connection committed is put into its file first, and the log emptied, so the answers stay
    with their file and no file put at the path is ever read with another's log."""
    with contextlib.suppress(sqlite3.Error):
        c.con.execute("PRAGMA busy_timeout=1000")  # a reader elsewhere must not hold every call up
        c.con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    c.con.close()


class _Connections:
    """A store's connections in one process (a forked child starts with none of its parent's)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.guard = threading.Lock()
        self.open: set[_Con] = set()
        self.file: tuple[int, int] | None = None
        """The file at the path when a connection was last opened (None before the first)."""


class StoreBase:
    """The store's path and this thread's connection (the server answers on many threads, and
    the flows read from other processes).

    Every call first looks at what is at the path. A store moved aside or replaced while a
    connection had it open would otherwise take every later answer into the moved file, which no
    pull reads. So connections to a file that left the path are closed (what they committed is in
    that file), and once none is left (SQLite finds a store's ``-wal`` and ``-shm`` files by name:
    the old file's must be closed before the new one opens) the file at the path is opened: a
    store put back, restored or made anew, each with its epoch (``epochs``), so the ratings
    stage tells its events apart. While nothing is at the path, every call is refused in one line
    (``SurveyStoreGone``): nothing is recorded anywhere."""

    path: Path
    _local: threading.local

    def _connections(self) -> _Connections:
        # Made on first use: the subclasses set up ``path`` and ``_local`` themselves.
        state = self.__dict__.get("_cons")
        if state is None or state.pid != os.getpid():
            state = self.__dict__["_cons"] = _Connections()
        return state

    def _at_path(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _take(self, patience: float = 5.0) -> _Con:
        """This thread's connection to the file at the path, marked busy (see the class). Waits up
        to ``patience`` seconds for calls still on a replaced file to end."""
        state = self._connections()
        deadline = time.monotonic() + patience
        while True:
            with state.guard:
                now = self._at_path()
                mine: _Con | None = getattr(self._local, "con", None)
                if mine is not None and mine not in state.open:
                    mine = None  # closed by another thread: its file left the path
                if state.file is not None and now != state.file:
                    # Every idle connection to the old file closes now, this thread's among them;
                    # one busy in another thread closes when its call ends.
                    for c in [c for c in state.open if not c.busy]:
                        state.open.discard(c)
                        _retire(c)
                    mine = None
                    if now is None:
                        raise SurveyStoreGone(
                            f"the survey store {self.path} is gone (moved aside or deleted while this process had it "
                            "open); nothing is recorded until a store is back at that path: put it back (with its "
                            "-wal and -shm files) or restore it (`revbench restore`)")
                if mine is not None:
                    mine.busy += 1
                    return mine
                if not any(c.file != now for c in state.open):
                    return self._open(state, now)
            if time.monotonic() >= deadline:
                raise SurveyStoreGone(f"the survey store {self.path} was replaced while a call still used the old "
                                      "file; nothing was recorded: try again in a moment")
            time.sleep(0.01)

    def _open(self, state: _Connections, now: tuple[int, int] | None) -> _Con:
        """A new connection to the file at the path (made there when there is none yet); the first
        to a file that replaced another gives it the store's tables and epoch."""
        con = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA busy_timeout=30000")
            opened = self._at_path() if now is None else now
            assert opened is not None
            if state.file is not None and opened != state.file:
                self._reopened(con)
        except BaseException:
            con.close()
            raise
        mine = _Con(con, opened)
        mine.busy = 1
        state.open.add(mine)
        state.file = opened
        self._local.con = mine
        return mine

    def _reopened(self, con: sqlite3.Connection) -> None:
        """Called on the first connection to a file that replaced the one opened before (the
        store gives it its tables and epoch)."""

    def _release(self, mine: _Con, failed: bool = False) -> None:
        state = self._connections()
        with state.guard:
            mine.busy -= 1
            # A connection that failed is not reused; one whose file was replaced meanwhile neither.
            if mine.busy or mine not in state.open:
                return
            if failed:
                state.open.discard(mine)
                mine.con.close()
            elif mine.file != state.file:
                state.open.discard(mine)
                _retire(mine)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection to the store, opened once: the server answers on a pool of
        threads, and opening a connection (with its pragmas) cost more than the query."""
        mine = self._take()
        failed = False
        try:
            yield mine.con
        except sqlite3.DatabaseError:
            failed = True
            raise
        finally:
            self._release(mine, failed)

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        mine: _Con | None = getattr(self._local, "con", None)
        if mine is None:
            return
        self._local.con = None
        state = self._connections()
        with state.guard:
            if mine in state.open and not mine.busy:
                state.open.discard(mine)
                mine.con.close()

    def close_all(self) -> None:
        """Close every idle connection this process holds to the store, on any thread: a flow's
        tasks may run on worker threads, and a connection left to the garbage collector keeps its
        write-ahead log; closed later, it checkpoints that log into the file at the path, so a
        store damaged meanwhile would read as the old one again."""
        self._local.con = None
        state = self._connections()
        with state.guard:
            for c in [c for c in state.open if not c.busy]:
                state.open.discard(c)
                c.con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()

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
