"""The survey server's own store: SQLite in WAL mode, beside the warehouse.

The survey server runs for weeks while refresh flows write the DuckDB warehouse, and DuckDB lets
one process write a file with no other process reading it. SQLite in WAL mode fits the server's
side: it ships with Python (no server to run), any number of processes read while one writes,
a writer waits (busy timeout) instead of failing, and a commit with ``synchronous=FULL`` is on
disk before the server acknowledges the response that made it. The survey flow publishes
invitations here; the server records events and opt-outs; the ratings stage pulls new events
into the warehouse by id, incrementally.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from revbench.errors import WarehouseDamaged

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
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class SurveyStore:
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
        except sqlite3.DatabaseError as exc:
            self.close()
            raise WarehouseDamaged(
                f"the survey store {self.path} cannot be read ({exc}): restore it from a backup, or move it aside "
                "to start an empty one (answers in it would be lost)") from None

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

    def publish_invitations(self, rows: list[dict[str, Any]]) -> None:
        """Invitations the server may show: ``invitation_id, round, papers``; re-publishing
        replaces the papers (texts can be corrected), never the events."""
        with self._write() as con:
            con.executemany(
                """INSERT INTO invitations (invitation_id, round, papers, published_at) VALUES (?, ?, ?, ?)
                   ON CONFLICT (invitation_id) DO UPDATE SET papers = excluded.papers""",
                [(r["invitation_id"], r["round"], json.dumps(r["papers"], ensure_ascii=False), _now()) for r in rows],
            )

    def invitation(self, invitation_id: str) -> dict[str, Any] | None:
        with self._connect() as con:
            row = con.execute("SELECT round, papers FROM invitations WHERE invitation_id = ?", [invitation_id]).fetchone()
        return None if row is None else {"invitation_id": invitation_id, "round": row[0], "papers": json.loads(row[1])}

    def current(self, invitation_id: str) -> dict[str, int | None]:
        """The latest answer per paper: a rating, or None for a skip (papers never answered are absent)."""
        with self._connect() as con:
            rows = con.execute(
                """SELECT paper_id, rating, skipped FROM events e WHERE invitation_id = ? AND event_id = (
                       SELECT max(event_id) FROM events WHERE invitation_id = e.invitation_id AND paper_id = e.paper_id)""",
                [invitation_id]).fetchall()
        return {p: (None if s else r) for p, r, s in rows}

    def record_click(self, invitation_id: str, paper_id: str, rating: int, token_digest: str) -> bool:
        """Record a one-click rating; False when this very link was used before (a replay)."""
        with self._write() as con:
            cur = con.execute(
                """INSERT INTO events (invitation_id, paper_id, rating, skipped, source, token_digest, created_at)
                   VALUES (?, ?, ?, 0, 'click', ?, ?) ON CONFLICT (token_digest) DO NOTHING""",
                [invitation_id, paper_id, rating, token_digest, _now()])
            return cur.rowcount == 1

    def record_answers(self, invitation_id: str, answers: dict[str, int | None]) -> int:
        """Record a submitted page: one event per paper whose answer changed (a rating, or None
        for a skip); returns how many were recorded."""
        with self._write() as con:
            rows = con.execute(
                """SELECT paper_id, rating, skipped FROM events e WHERE invitation_id = ? AND event_id = (
                       SELECT max(event_id) FROM events WHERE invitation_id = e.invitation_id AND paper_id = e.paper_id)""",
                [invitation_id]).fetchall()
            now = {p: (None if s else r) for p, r, s in rows}
            changed = [(p, a) for p, a in answers.items() if p not in now or now[p] != a]
            con.executemany(
                """INSERT INTO events (invitation_id, paper_id, rating, skipped, source, created_at)
                   VALUES (?, ?, ?, ?, 'form', ?)""",
                [(invitation_id, p, a, int(a is None), _now()) for p, a in changed])
        return len(changed)

    def opt_out(self, invitation_id: str, source: str) -> None:
        with self._write() as con:
            con.execute("INSERT INTO opt_outs VALUES (?, ?, ?) ON CONFLICT DO NOTHING", [invitation_id, source, _now()])

    def opted_out(self) -> dict[str, str]:
        """invitation id -> when it opted out."""
        with self._connect() as con:
            return dict(con.execute("SELECT invitation_id, created_at FROM opt_outs").fetchall())

    def events_since(self, after: int = 0) -> list[dict[str, Any]]:
        """Events with an id above ``after``, in order (the ratings stage pulls these)."""
        with self._connect() as con:
            cur = con.execute(
                "SELECT event_id, invitation_id, paper_id, rating, skipped, source, created_at FROM events "
                "WHERE event_id > ? ORDER BY event_id", [after])
            cols = [c[0] for c in cur.description]
            return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def max_event_id(self) -> int:
        """The newest event's id (0 when none): the refresh compares it with what was pulled."""
        with self._connect() as con:
            return int(con.execute("SELECT coalesce(max(event_id), 0) FROM events").fetchone()[0])

    def answered(self) -> dict[str, dict[str, int | None]]:
        """Every invitation's latest answers (for reminders and counts)."""
        with self._connect() as con:
            rows = con.execute(
                """SELECT invitation_id, paper_id, rating, skipped FROM events e WHERE event_id = (
                       SELECT max(event_id) FROM events WHERE invitation_id = e.invitation_id AND paper_id = e.paper_id)"""
            ).fetchall()
        out: dict[str, dict[str, int | None]] = {}
        for inv, p, r, s in rows:
            out.setdefault(inv, {})[p] = None if s else r
        return out
