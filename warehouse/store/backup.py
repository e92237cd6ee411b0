"""The survey store's side of backups: a consistent copy taken while the survey server writes
(SQLite's online backup API), what a store holds, and what a restore does to it.

A store only gains answers: each event is an answer a person gave and the server acknowledged.
So a restore never takes one away. The backup's invitations, answers and opt-outs that the live
store lacks are added to it (:func:`merge`) in one write transaction on the live file: the survey
server may keep running (its writes wait on SQLite's busy timeout and land after the merge, in
the same file). Added answers get ids above every id the store has handed out, so the numbering
the warehouse pulls by stays valid and the store keeps its epoch. Only a store that cannot be
read, or is missing, is replaced by the backup's copy (:func:`install`); its epoch is then
renewed, because the lost file used the ids above the backup's for other answers.

Answers are matched by content (invitation, paper, rating or skip, source, time to the
microsecond): the same content the ratings stage's digest covers, so an answer is one answer in
every store, epoch and warehouse.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from revbench.warehouse.store import SurveyStore
from revbench.warehouse.store.base import _now

FIELDS = "event_id, invitation_id, paper_id, rating, skipped, source, token_digest, created_at"
_EPOCH0 = datetime(1970, 1, 1, tzinfo=UTC)
Key = tuple[str, str, int | None, bool, str, int]


def _open(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=30, isolation_level=None)
    con.execute("PRAGMA busy_timeout=30000")
    con.execute("PRAGMA synchronous=FULL")
    return con


def _time(v: Any) -> datetime:
    dt = v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def answer_key(row: dict[str, Any]) -> Key:
    """An answer's identity across stores and warehouses (the ratings digest's content)."""
    skipped = bool(row["skipped"])
    return (str(row["invitation_id"]), str(row["paper_id"]), None if skipped else row["rating"], skipped,
            str(row["source"]), (_time(row["created_at"]) - _EPOCH0) // timedelta(microseconds=1))


def _rows(con: sqlite3.Connection, query: str) -> list[dict[str, Any]]:
    cur = con.execute(query)
    names = [c[0] for c in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


@dataclass(frozen=True)
class StoreContent:
    """A store's identity (its ``meta``), answers, invitations and opt-outs."""

    meta: dict[str, str]
    events: list[dict[str, Any]] = field(repr=False)
    invitations: list[dict[str, Any]] = field(repr=False)
    opt_outs: list[dict[str, Any]] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """The manifest's account: identity, answers (count, newest id and time), invitations, opt-outs."""
        m = self.meta
        return {"identity": {"epoch": m.get("epoch"), "created_at": m.get("epoch_created_at"),
                             "origin": m.get("epoch_origin", "created"), "renewed_from": m.get("renewed_from")},
                "events": len(self.events), "max_event_id": max((e["event_id"] for e in self.events), default=0),
                "latest_event_at": max((e["created_at"] for e in self.events), default=None),
                "invitations": len(self.invitations), "opt_outs": len(self.opt_outs)}


def read_content(con_or_path: sqlite3.Connection | Path) -> StoreContent:
    """Everything a restore compares, read in one transaction."""
    con = con_or_path if isinstance(con_or_path, sqlite3.Connection) else _open(con_or_path)
    try:
        con.execute("BEGIN")
        out = StoreContent(dict(con.execute("SELECT key, value FROM meta").fetchall()),
                           _rows(con, f"SELECT {FIELDS} FROM events ORDER BY event_id"),
                           _rows(con, "SELECT invitation_id, round, papers, published_at FROM invitations"),
                           _rows(con, "SELECT invitation_id, source, created_at FROM opt_outs"))
        con.execute("COMMIT")
        return out
    finally:
        if con is not con_or_path:
            con.close()


def snapshot(src: Path, dest: Path) -> StoreContent:
    """A consistent copy of the store at ``src`` into ``dest`` while the server writes: SQLite's
    online backup reads every page, the write-ahead log's included, in one read transaction.
    The copy is switched to a rollback journal, so reading it never leaves files beside it."""
    SurveyStore(src).close()  # a store made before epochs gets its epoch first, as any open gives it
    with closing(_open(src)) as s, closing(sqlite3.connect(dest, isolation_level=None)) as d:
        s.backup(d)
        d.execute("PRAGMA journal_mode=DELETE")
        ok = d.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise sqlite3.DatabaseError(f"the copy of {src} fails SQLite's check: {ok}")
        content = read_content(d)
    with open(dest, "rb+") as f:
        os.fsync(f.fileno())
    return content


def problem(path: Path) -> str | None:
    """Why the store at ``path`` cannot be read (None when it reads and passes SQLite's check)."""
    try:
        with closing(_open(path)) as con:
            ok = con.execute("PRAGMA quick_check").fetchone()[0]
            con.execute("SELECT count(*) FROM events").fetchone()
    except sqlite3.Error as exc:
        return str(exc)
    return None if ok == "ok" else f"SQLite's check says: {ok}"


def _text(v: Any) -> str:
    return _time(v).astimezone(UTC).isoformat(timespec="microseconds") if isinstance(v, datetime) else str(v)


def merge(live: Path, backup: StoreContent | None, extra: list[dict[str, Any]], note: dict[str, str]) -> dict[str, int]:
    """Add to the live store, in one write transaction, what it lacks of ``backup`` (answers,
    invitations, opt-outs) and the answers ``extra`` (pulled into the warehouse being replaced,
    held by no store any more), answers in time order; ``note`` goes to ``meta``. Returns counts."""
    SurveyStore(live).close()  # schema and epoch, as the server's open makes them
    b = backup or StoreContent({}, [], [], [])
    with closing(_open(live)) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            have = {answer_key(e) for e in _rows(con, f"SELECT {FIELDS} FROM events")}
            tokens = {r[0] for r in con.execute("SELECT token_digest FROM events WHERE token_digest IS NOT NULL")}
            added: dict[Key, tuple[dict[str, Any], str]] = {}
            for origin, rows in (("backup", b.events), ("warehouse", extra)):
                for e in rows:
                    k = answer_key(e)
                    if k not in have and k not in added:
                        added[k] = (e, origin)
            ordered = sorted(added.items(), key=lambda kv: (kv[0][5], kv[1][0].get("event_id") or 0))
            con.executemany(
                "INSERT INTO events (invitation_id, paper_id, rating, skipped, source, token_digest, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                # A link's token stays with the answer that used it first; a copy of it would be refused.
                [(e["invitation_id"], e["paper_id"], None if e["skipped"] else e["rating"], int(bool(e["skipped"])),
                  e["source"], e.get("token_digest") if e.get("token_digest") not in tokens else None,
                  _text(e["created_at"])) for _k, (e, _o) in ordered])
            invs = con.executemany("INSERT INTO invitations (invitation_id, round, papers, published_at) VALUES "
                                   "(?, ?, ?, ?) ON CONFLICT DO NOTHING",
                                   [(i["invitation_id"], i["round"], i["papers"], i["published_at"]) for i in b.invitations])
            n_inv = invs.rowcount
            opts = con.executemany("INSERT INTO opt_outs (invitation_id, source, created_at) VALUES (?, ?, ?) "
                                   "ON CONFLICT DO NOTHING",
                                   [(o["invitation_id"], o["source"], o["created_at"]) for o in b.opt_outs])
            n_opt = opts.rowcount
            con.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [*note.items(), ("restored_at", _now())])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    origins = [o for _e, o in added.values()]
    return {"from_backup": origins.count("backup"), "from_warehouse": origins.count("warehouse"),
            "invitations": max(n_inv, 0), "opt_outs": max(n_opt, 0)}


def install(staged: Path, live: Path) -> bool:
    """Put the staged copy where no store is (one link: a store the server created meanwhile is
    never overwritten); False when one is there by now (then merge into it instead)."""
    try:
        os.link(staged, live)
    except FileExistsError:
        return False
    return True


def set_aside(live: Path, aside: Path, readable: bool) -> None:
    """Keep the live store as it is before a restore touches it: a consistent copy of a readable
    one (the server may be writing it: it stays where it is), or the unreadable file itself
    moved, with its write-ahead log and index."""
    if readable:
        snapshot(live, aside)
        return
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{live}{suffix}")
        if src.exists():
            os.replace(src, Path(f"{aside}{suffix}"))


def renew(live: Path, expected: str) -> str:
    """A new epoch for a store put back from a backup (see the module's docstring)."""
    with SurveyStore(live) as store:
        return store.renew_epoch(expected)
