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
"""

from __future__ import annotations

import json
import os
import secrets
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
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,            -- epoch | epoch_created_at | epoch_origin | renewed_from
    value TEXT NOT NULL
);
"""
EPOCH_ORIGINS = ("created", "upgraded", "renewed")
"""How a store got its epoch: made with it, given on the first open of a store made before
epochs existed, or renewed after the store was found restored from an older backup."""
EVENT_FIELDS = "event_id, invitation_id, paper_id, rating, skipped, source, created_at"


def new_epoch() -> str:
    """A fresh epoch id (48 random bits: two stores of one project never share one)."""
    return secrets.token_hex(6)


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
                has_epoch = con.execute("SELECT 1 FROM meta WHERE key = 'epoch'").fetchone() is not None
            if not has_epoch:
                self._give_epoch()
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

    def _give_epoch(self) -> None:
        """Give this store its epoch (once: processes opening it together agree on the first)."""
        with self._write() as con:
            if con.execute("SELECT 1 FROM meta WHERE key = 'epoch'").fetchone() is not None:
                return
            # A store with anything in it was made before epochs: its events may already be in a
            # warehouse, which recognises them by content, not by this new epoch.
            used = any(con.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in ("events", "opt_outs", "invitations"))
            con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                ("epoch", new_epoch()), ("epoch_created_at", _now()), ("epoch_origin", "upgraded" if used else "created")])

    @staticmethod
    def _identity(con: sqlite3.Connection) -> dict[str, str | None]:
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        return {"epoch": meta["epoch"], "created_at": meta.get("epoch_created_at"),
                "origin": meta.get("epoch_origin", "created"), "renewed_from": meta.get("renewed_from")}

    def identity(self) -> dict[str, str | None]:
        """``epoch, created_at, origin`` (one of :data:`EPOCH_ORIGINS`) and ``renewed_from``."""
        with self._connect() as con:
            return self._identity(con)

    def epoch(self) -> str:
        """This store's epoch id."""
        return str(self.identity()["epoch"])

    def renew_epoch(self, expected: str) -> str:
        """Give the store a new epoch when its epoch is still ``expected`` (a restored backup:
        the ids it hands out from now on were already used for other events); returns the
        epoch the store has afterwards (another puller's renewal stands)."""
        with self._write() as con:
            current = self._identity(con)["epoch"]
            if current != expected:
                return str(current)
            epoch = new_epoch()
            con.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [
                ("epoch", epoch), ("epoch_created_at", _now()), ("epoch_origin", "renewed"), ("renewed_from", expected)])
        return epoch

    def snapshot(self, after: int = 0) -> tuple[dict[str, str | None], list[dict[str, Any]]]:
        """The store's identity and its events with an id above ``after``, read together (one
        read transaction: an epoch renewed meanwhile never labels events it does not hold)."""
        with self._connect() as con:
            con.execute("BEGIN")
            try:
                ident = self._identity(con)
                cur = con.execute(f"SELECT {EVENT_FIELDS} FROM events WHERE event_id > ? ORDER BY event_id", [after])
                cols = [c[0] for c in cur.description]
                rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
            finally:
                con.execute("COMMIT")
        return ident, rows

    def event(self, event_id: int) -> dict[str, Any] | None:
        """One event by id (None when the store does not hold it)."""
        with self._connect() as con:
            cur = con.execute(f"SELECT {EVENT_FIELDS} FROM events WHERE event_id = ?", [event_id])
            row = cur.fetchone()
            return None if row is None else dict(zip([c[0] for c in cur.description], row, strict=True))

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
        return self.snapshot(after)[1]

    def max_event_id(self) -> int:
        """The newest event's id (0 when none): the refresh compares it with the epoch's mark."""
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
