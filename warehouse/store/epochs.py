"""The survey store's epochs and event reads: what the ratings stage pulls, by (epoch, id).

A store numbers its events from 1; its epoch (a random id in ``meta``) tells the warehouse which
numbering an id belongs to, and is renewed when the store turns out restored from an older backup.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from typing import Any

from revbench.warehouse.store.base import SCHEMA, StoreBase, _now

log = logging.getLogger("revbench.survey")

EPOCH_ORIGINS = ("created", "upgraded", "renewed")
"""How a store got its epoch: made with it, given on the first open of a store made before
epochs existed, or renewed after the store was found restored from an older backup."""
EVENT_FIELDS = "event_id, invitation_id, paper_id, rating, skipped, source, created_at"


def new_epoch() -> str:
    """A fresh epoch id (48 random bits: two stores of one project never share one)."""
    return secrets.token_hex(6)


class StoreEpochs(StoreBase):
    """The store's epoch (given, read, renewed) and its events read with it."""

    def _give_epoch(self) -> None:
        """Give this store its epoch (once: processes opening it together agree on the first)."""
        with self._write() as con:
            self._epoch_into(con)

    @staticmethod
    def _epoch_into(con: sqlite3.Connection) -> None:
        """``_give_epoch`` inside the caller's write transaction on ``con``."""
        if con.execute("SELECT 1 FROM meta WHERE key = 'epoch'").fetchone() is not None:
            return
        # A store with anything in it was made before epochs: its events may already be in a
        # warehouse, which recognises them by content, not by this new epoch.
        used = any(con.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in ("events", "opt_outs", "invitations"))
        con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
            ("epoch", new_epoch()), ("epoch_created_at", _now()), ("epoch_origin", "upgraded" if used else "created")])

    def _reopened(self, con: sqlite3.Connection) -> None:
        """A file replaced the store at its path: its tables and epoch (a store put back or
        restored keeps its own; an empty file gets a new one), and one line saying so."""
        con.executescript(SCHEMA)
        con.execute("BEGIN IMMEDIATE")
        try:
            self._epoch_into(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        log.warning("the survey store %s was replaced while this process had it open: answers now go to the file at "
                    "that path (epoch %s)", self.path, self._identity(con)["epoch"])

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

    def events_since(self, after: int = 0) -> list[dict[str, Any]]:
        """Events with an id above ``after``, in order (the ratings stage pulls these)."""
        return self.snapshot(after)[1]

    def max_event_id(self) -> int:
        """The newest event's id (0 when none): the refresh compares it with the epoch's mark."""
        with self._connect() as con:
            return int(con.execute("SELECT coalesce(max(event_id), 0) FROM events").fetchone()[0])
