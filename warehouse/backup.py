"""The warehouse's side of backups: holding the file while it is copied or replaced, what a
warehouse file holds (so a restore can tell whether the live one is newer), and the swap that
puts a restored copy in place.

A backup copies the DuckDB file itself, opened for writing (so no flow can hold it meanwhile)
after a ``CHECKPOINT`` (so the write-ahead log is folded in and the one file is the whole
warehouse), rather than ``EXPORT DATABASE``: the copy is the very file the flows open (every
type, constraint and the schema version as they were, nothing re-imported that another DuckDB
could read differently), it is checked byte for byte against its sha256, it restores by one
rename, and it costs one sequential read. EXPORT would need the same lock (DuckDB lets no reader
in beside a writer) and writes a folder of files to re-import. The price: a copy opens with a
DuckDB that reads its storage version, as the live file does.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from revbench.errors import RevbenchError, WarehouseBusy
from revbench.warehouse.holder import clear_holder, write_holder
from revbench.warehouse.lifecycle import Lifecycle


class HeldWarehouse(Lifecycle):
    """A warehouse file opened as it is (never migrated): for writing, so no other process can
    open it while a backup copies it or a restore replaces it, or read-only for a copy."""

    def __init__(self, path: Path | str, lock_wait: float = 0.0, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        self._in_tx = False
        self.con = self._connect(lock_wait)
        self._opened([], None if read_only else lambda: self._exec("CHECKPOINT"))

    def tables(self) -> set[str]:
        return {r[0] for r in self._exec("SELECT table_name FROM information_schema.tables")}

    def rows(self, table: str, columns: str = "*") -> list[dict[str, Any]]:
        """Every row of ``table`` (none when the file's schema has no such table yet)."""
        if table not in self.tables():
            return []
        cur = self.con.execute(f'SELECT {columns} FROM "{table}"')
        names = [c[0] for c in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def frame(self, table: str) -> Any:
        """Every row of ``table`` as a polars frame with the file's own columns (None without the table)."""
        return self._frame(f'SELECT * FROM "{table}"') if table in self.tables() else None


@contextmanager
def holding(path: Path, lock_wait: float, holder: dict[str, Any]) -> Iterator[HeldWarehouse]:
    """Hold the warehouse for writing (waiting up to ``lock_wait`` seconds for a run to let go,
    then :class:`WarehouseBusy`), announced in its holder file as ``holder`` says (``run_id``,
    ``flow``, ``started_at``), so a run that waits meanwhile names the backup or restore."""
    wh = HeldWarehouse(path, lock_wait)
    try:
        write_holder(path, holder)
        yield wh
    finally:
        clear_holder(path, holder["run_id"])
        wh.close()


@dataclass(frozen=True)
class WarehouseFacts:
    """What a warehouse file holds, for the manifest and for telling whether another is newer."""

    schema_version: int
    counts: dict[str, int]
    runs: list[dict[str, Any]]
    answers: list[dict[str, Any]] = field(repr=False)
    sent: set[str] = field(repr=False)

    def summary(self) -> dict[str, Any]:
        """The manifest's account: schema version, rows per table, runs and the last one."""
        last = max(self.runs, key=lambda r: str(r["started_at"]), default=None)
        return {"schema_version": self.schema_version, "runs": len(self.runs), "last_run": last,
                "answers_pulled": len(self.answers), "messages_sent": len(self.sent), "counts": self.counts}


def _iso(v: Any) -> Any:
    return v.isoformat() if isinstance(v, datetime) else v


def read_facts(wh: HeldWarehouse) -> WarehouseFacts:
    """Schema version, rows per table, every run, every answer pulled and every message sent."""
    tables = wh.tables()
    counts = {t: int(wh._exec(f'SELECT count(*) FROM "{t}"')[0][0]) for t in sorted(tables)}
    runs = [{k: _iso(v) for k, v in r.items()} for r in wh.rows("runs", "run_id, flow, status, started_at")]
    answers = wh.rows("survey_events", "invitation_id, paper_id, rating, skipped, source, created_at")
    sent = {r["message_id"] for r in wh.rows("survey_messages", "message_id, state")
            if r["state"] in ("sending", "sent", "unconfirmed")}
    version = wh._exec("SELECT max(version) FROM schema_version")[0][0] if "schema_version" in tables else None
    return WarehouseFacts(int(version or 0), counts, runs, answers, sent)


def copy_readable(path: Path) -> WarehouseFacts:
    """The facts of a copied warehouse file, opened read-only: a copy that does not open as a
    revbench warehouse is refused here, before anything relies on it."""
    wh = HeldWarehouse(path, read_only=True)
    try:
        return read_facts(wh)
    finally:
        wh.close()


def put_in_place(staged: Path, live: Path, aside: Path | None) -> None:
    """Make ``staged`` the live warehouse in one rename, the file it replaces linked (or, across
    file systems, copied) to ``aside`` first: the live path never goes missing, so a run that
    waited for the lock opens the restored file, never an empty new one. With no live file
    (``aside`` None), a warehouse some run created meanwhile is never overwritten."""
    if aside is None:
        try:
            os.link(staged, live)
        except FileExistsError:
            raise WarehouseBusy(f"a run created a new warehouse at {live} while the restore prepared its copy; "
                                "run the restore again") from None
        staged.unlink()
        return
    try:
        os.link(live, aside)
    except OSError:
        shutil.copy2(live, aside)
    os.replace(staged, live)


def set_aside_damaged(live: Path, aside: Path) -> None:
    """Move a warehouse file DuckDB cannot open (and its write-ahead log) aside."""
    for suffix in ("", ".wal"):
        src = Path(f"{live}{suffix}")
        if src.exists():
            os.replace(src, Path(f"{aside}{suffix}"))


class NotRestorable(RevbenchError):
    """A staged copy that still has a write-ahead log beside it after it was closed."""

    exit_code = 5


def check_closed(staged: Path) -> None:
    """A staged copy must be one file when it is renamed into place (its log would stay behind)."""
    wal = Path(f"{staged}.wal")
    if wal.exists() and wal.stat().st_size:
        raise NotRestorable(f"{staged} kept a write-ahead log ({wal}) after it was closed; nothing was replaced, "
                            "run the restore again")


CARRIED = ("survey_invitations", "survey_messages", "survey_approvals", "survey_opt_outs", "flag_decisions")
"""What people did, and what was sent to them, since a backup: a restored warehouse keeps these
rows of the live one (answers travel through the survey store, see ``revbench.backup.restore``)."""
LEFT = ("sending", "sent", "unconfirmed")


def carry_rows(staged: Path, live: HeldWarehouse | None) -> dict[str, int]:
    """Migrate the staged copy to this revbench's schema and add the rows of :data:`CARRIED`
    the live warehouse has and the copy lacks (by key): invitations and the messages that left
    for them (one the copy holds as not yet sent, or not confirmed sent, takes the live row, so
    no wave or resend mails anyone twice), curators' approvals and flag decisions, opt-outs.
    Returns rows added per table."""
    import polars as pl

    from revbench.schemas.tables import TABLES
    from revbench.warehouse.db import Warehouse

    out: dict[str, int] = {}
    with Warehouse.open(staged) as wh:
        for name in CARRIED:
            table, theirs = TABLES[name], live.frame(name) if live is not None else None
            if theirs is None or theirs.height == 0:
                out[name] = 0
                continue
            theirs, ours = table.conform(theirs), wh.read(table)
            key = list(table.primary_key)
            add = theirs.join(ours.select(key), on=key, how="anti")
            if name == "survey_messages":
                # The live row wins where it knows more of the message's fate: it left (ours: not
                # yet), or it was confirmed sent (ours: sending or unconfirmed, which a curator
                # would be asked to send again).
                mine = ours.select(*key, pl.col("state").alias("_ours"))
                newer = theirs.join(mine, on=key).filter(
                    (pl.col("state").is_in(LEFT) & ~pl.col("_ours").is_in(LEFT))
                    | ((pl.col("state") == "sent") & (pl.col("_ours") != "sent"))).drop("_ours")
                add = pl.concat([add, newer])
            wh.upsert(table, add)
            out[name] = add.height
    return out
