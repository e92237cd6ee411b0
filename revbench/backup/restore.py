"""Restoring a backup written by :mod:`revbench.backup.take`, losing no answer a person gave.

``revbench restore --from DIR`` checks the snapshot (its manifest's HMAC under
REVBENCH_BACKUP__KEY, then each file's size, then the sha256 of the very copy it restores),
refuses while a run holds the warehouse or waits for a curator (exit 4), and refuses live data
newer than the snapshot unless ``--force`` (naming what the snapshot lacks). The live files it replaces go to
``<data_dir>/restore-set-aside/<UTC time>/``, never deleted, with ``restore.json`` saying what
was found and done.

What a restore does to the answers given since the backup
---------------------------------------------------------
The warehouse goes back to the snapshot: its runs, pools, ratings and tuples are the snapshot's.
Answers are not derived data, they are what people said, and an acknowledged answer exists
after the backup in at most two places: the live survey store (the server committed it before
it acknowledged it) and the live warehouse (a ratings pull copied it there; the store may have
lost it since). Restoring either file as it was would drop those answers, so:

1. The survey store is never rolled back. The snapshot's answers, invitations and opt-outs the
   live store lacks are added to it, in one SQLite write transaction on the live file (the survey
   server may keep answering meanwhile). Added answers get ids above every id it handed out, so
   its epoch (``revbench.warehouse.store.epochs``) stays valid. Only a store that is missing or
   cannot be read is replaced by the snapshot's copy, and gets a new epoch: the lost file used
   the ids above the snapshot's for other answers.
2. Answers the live warehouse pulled that neither the restored warehouse nor either store holds
   (their store was emptied or replaced since) are written back into the store, with their
   original time, as the answers they were.
3. The next ratings pull reads the store above the restored warehouse's high-water mark for the
   store's epoch (all of it after a renewal) and recognises each answer by its digest (the same
   content :func:`revbench.warehouse.store.backup.answer_key` matches): every answer acknowledged
   since the backup is pulled once, those the snapshot already held are not pulled again.

Other facts about people that a rollback must not forget are carried into the restored
warehouse from the live one (rows it lacks, by key): invitations, the messages that left for
them (so no wave mails anyone twice), curators' approvals and flag decisions, and opt-outs.
What is not carried: the results of the runs since the backup (they are in the set-aside file).
An answer that only a store now unreadable held is lost with it; the restore says so first.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from revbench.backup.manifest import (
    STORE_FILE,
    WAREHOUSE_FILE,
    backup_key,
    check_sizes,
    copy_hashed,
    read_manifest,
    stamp,
)
from revbench.errors import InputError, NoSpace, UsageError, WarehouseBusy, WarehouseDamaged
from revbench.files import no_space, write_atomic
from revbench.settings import Settings
from revbench.warehouse.backup import (
    WarehouseFacts,
    carry_rows,
    check_closed,
    copy_readable,
    holding,
    put_in_place,
    read_facts,
    set_aside_damaged,
)
from revbench.warehouse.holder import read_waiting
from revbench.warehouse.store.backup import StoreContent, answer_key, install, merge, problem, read_content, renew, set_aside

SET_ASIDE = "restore-set-aside"


@dataclass(frozen=True)
class Newer:
    """What the live data has that the snapshot lacks (for the parts the snapshot restores)."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    answers_pulled: int = 0
    messages_sent: int = 0
    store_answers: int = 0
    warehouse_problem: str | None = None
    store_problem: str | None = None

    def found(self) -> bool:
        return bool(self.runs or self.answers_pulled or self.messages_sent or self.store_answers
                    or self.warehouse_problem or self.store_problem)

    def parts(self) -> list[str]:
        """Each difference in words."""
        out = []
        if self.warehouse_problem:
            out.append(f"the live warehouse cannot be read ({self.warehouse_problem.split(';')[0]}): what it holds "
                       "beyond the backup cannot be told or carried over")
        if self.runs:
            last = max(self.runs, key=lambda r: str(r["started_at"]))
            out.append(f"the live warehouse has {len(self.runs)} runs the backup lacks (the latest: {last['flow']} run "
                       f"{last['run_id']}, started {last['started_at']}): their results are not in the backup")
        if self.answers_pulled:
            out.append(f"{self.answers_pulled} answers pulled since (carried over)")
        if self.messages_sent:
            out.append(f"{self.messages_sent} survey messages sent since (carried over)")
        if self.store_problem:
            out.append(f"the live survey store cannot be read ({self.store_problem}): answers only it holds are lost")
        if self.store_answers:
            out.append(f"the live survey store holds {self.store_answers} answers the backup lacks (kept)")
        return out


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did: the snapshot, where the live files went, and what each part became."""

    backup: Path
    created_at: str
    set_aside: Path
    warehouse: str
    survey_store: str
    carried: dict[str, int]
    newer: Newer


def _refuse_waiting(db: Path) -> None:
    """A run waiting for a curator took its hands off the warehouse, but will write into it again
    once answered: into the restored file, mixing two histories."""
    for info in read_waiting(db):
        if info.get("alive"):
            raise WarehouseBusy(f"{info.get('flow')} run {info.get('run_id')} waits for {info.get('what')} and would "
                                "write into the restored warehouse once answered: answer it or stop it "
                                f"(`{info.get('command')}`), then restore")


def _stage(folder: Path, manifest: dict[str, Any], staging: Path) -> dict[str, Path]:
    """Copy each file of the snapshot beside the live data, checking the sha256 of the very bytes
    copied: a file changed after the check cannot slip in."""
    staged = {}
    for name, entry in manifest["files"].items():
        size, sha = copy_hashed(folder / name, staging / name)
        if sha != entry.get("sha256") or size != entry.get("bytes"):
            raise InputError(f"{folder / name} does not match its manifest (sha256 {sha[:12]}..., listed "
                             f"{str(entry.get('sha256'))[:12]}...): changed or damaged since the backup; nothing was restored")
        staged[name] = staging / name
    return staged


def _keys(rows: list[dict[str, Any]]) -> set[Any]:
    return {answer_key(r) for r in rows}


def _newer(live_wh: WarehouseFacts | None, b_wh: WarehouseFacts | None, wh_problem: str | None,
           live_store: StoreContent | None, b_store: StoreContent | None, store_problem: str | None) -> Newer:
    runs, pulled, sent = [], 0, 0
    if b_wh is not None and live_wh is not None:
        known = {r["run_id"] for r in b_wh.runs}
        runs = [r for r in live_wh.runs if r["run_id"] not in known]
        pulled = len(_keys(live_wh.answers) - _keys(b_wh.answers))
        sent = len(live_wh.sent - b_wh.sent)
    in_store = len(_keys(live_store.events) - _keys(b_store.events)) if live_store and b_store else 0
    return Newer(runs, pulled, sent, in_store, wh_problem if b_wh is not None else None,
                 store_problem if b_store is not None else None)


def restore(settings: Settings, source: Path, force: bool = False) -> RestoreResult:
    """Check the snapshot at ``source`` and restore it (see the module's docstring)."""
    folder = Path(source).expanduser().absolute()
    key = backup_key(settings, f"the backup {folder} cannot be verified without it and nothing was restored: set it "
                               "to the key the backup was written with")
    manifest = read_manifest(folder, key)
    check_sizes(folder, manifest)
    _refuse_waiting(settings.warehouse_path)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    staging = settings.data_dir / f".restore-{stamp()}-{os.getpid()}"
    staging.mkdir()
    try:
        try:
            staged = _stage(folder, manifest, staging)
        except OSError as exc:
            why = no_space(exc)
            if why is None:
                raise
            raise NoSpace(f"no space left in {settings.data_dir} to copy the backup {folder.name} beside the live data "
                          f"({why}); nothing was restored: free space there and run again") from None
        b_wh = None
        if WAREHOUSE_FILE in staged:
            try:
                b_wh = copy_readable(staged[WAREHOUSE_FILE])
            except WarehouseDamaged as exc:  # named as the backup's file, without the advice for a live one
                why = str(exc).replace(str(staged[WAREHOUSE_FILE]), str(folder / WAREHOUSE_FILE))
                why = why if "newer than this revbench" in why else why.split("; ")[0]
                raise InputError(f"{why}; nothing was restored") from None
        b_store = read_content(staged[STORE_FILE]) if STORE_FILE in staged else None
        return _apply(settings, folder, manifest, staged, b_wh, b_store, force)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _aside_folder(settings: Settings) -> Path:
    base = settings.data_dir / SET_ASIDE / stamp()
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def _apply(settings: Settings, folder: Path, manifest: dict[str, Any], staged: dict[str, Path],
           b_wh: WarehouseFacts | None, b_store: StoreContent | None, force: bool) -> RestoreResult:
    live, store = settings.warehouse_path, settings.survey_store_path
    holder = {"run_id": f"restore-{stamp()}", "flow": "restore", "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "stage": f"restoring {folder.name}"}
    with ExitStack() as stack:
        held, live_wh, wh_problem = None, None, None
        if live.exists():
            try:
                held = stack.enter_context(holding(live, settings.warehouse.lock_wait_seconds, holder))
                live_wh = read_facts(held)
            except WarehouseDamaged as exc:
                wh_problem = str(exc)
        store_problem = problem(store) if store.exists() else None
        live_store = read_content(store) if store.exists() and store_problem is None else None
        newer = _newer(live_wh, b_wh, wh_problem, live_store, b_store, store_problem)
        if newer.found() and not force:
            raise UsageError(f"the live data differs from the backup {folder.name} (taken {manifest.get('created_at')}): "
                             + "; ".join(newer.parts()) + "; nothing was restored: pass --force to restore it (the live "
                             f"files are set aside in {settings.data_dir / SET_ASIDE}/)")
        aside = _aside_folder(settings)
        carried: dict[str, int] = {}
        extra: list[dict[str, Any]] = []
        if b_wh is not None:
            if held is not None and live_wh is not None:
                carried = carry_rows(staged[WAREHOUSE_FILE], held)
                known = _keys(b_wh.answers)
                extra = [a for a in live_wh.answers if answer_key(a) not in known]
            else:  # migrated to this revbench's schema all the same, before it goes live
                carried = carry_rows(staged[WAREHOUSE_FILE], None)
            check_closed(staged[WAREHOUSE_FILE])
        if store.exists() and (b_store is not None or extra):
            set_aside(store, aside / STORE_FILE, readable=store_problem is None)
        store_line, counts = _restore_store(store, staged, b_store, extra, store_problem, folder.name, aside)
        carried.update({f"answers from the {k.removeprefix('from_')}": v for k, v in counts.items() if k.startswith("from_")})
        carried.update({f"store {k}": v for k, v in counts.items() if not k.startswith("from_")})
        wh_line = _restore_warehouse(live, staged, b_wh, held is not None, wh_problem, aside)
    result = RestoreResult(folder, str(manifest.get("created_at")), aside, wh_line, store_line, carried, newer)
    write_atomic(aside / "restore.json", json.dumps({**asdict(result), "forced": force, "manifest": manifest,
                                                     "restored_at": datetime.now(UTC).isoformat(timespec="seconds")},
                                                    indent=2, default=str) + "\n")
    return result


def _logs_aside(live: Path, suffixes: tuple[str, ...], aside: Path) -> None:
    """Move the logs a missing live file left behind into ``aside``: beside the restored copy,
    SQLite would replay another database's write-ahead log into it, and DuckDB would refuse to
    open the warehouse with a log not its own."""
    for suffix in suffixes:
        left = Path(f"{live}{suffix}")
        if left.exists() and not live.exists():
            os.replace(left, Path(f"{aside / live.name}{suffix}"))


def _restore_store(store: Path, staged: dict[str, Path], b_store: StoreContent | None, extra: list[dict[str, Any]],
                   store_problem: str | None, name: str, aside: Path) -> tuple[str, dict[str, int]]:
    """Merge into the live store, or put the snapshot's copy where none can be read (see the
    module's docstring); returns the line saying which, and what was added."""
    note = {"restored_from": name}
    if b_store is None and not extra:
        return "not in the backup: left as it was", {}
    _logs_aside(store, ("-wal", "-shm", "-journal"), aside)
    if b_store is not None and not store.exists() and install(staged[STORE_FILE], store):
        epoch = str(b_store.meta.get("epoch"))
        renewed = renew(store, epoch)
        counts = merge(store, None, extra, note)
        gone = "was unreadable (set aside)" if store_problem else "was missing"
        return f"put in place from the backup (the live store {gone}); epoch {epoch} renewed as {renewed}", counts
    counts = merge(store, b_store, extra, note)
    return "merged: the live store keeps every answer it had and gains what it lacked", counts


def _restore_warehouse(live: Path, staged: dict[str, Path], b_wh: WarehouseFacts | None, held: bool,
                       wh_problem: str | None, aside: Path) -> str:
    if b_wh is None:
        return "not in the backup: left as it was"
    if held:
        put_in_place(staged[WAREHOUSE_FILE], live, aside / WAREHOUSE_FILE)
        return f"restored (schema version {b_wh.schema_version}, {len(b_wh.runs)} runs)"
    if wh_problem is not None:
        set_aside_damaged(live, aside / WAREHOUSE_FILE)
    _logs_aside(live, (".wal",), aside)
    put_in_place(staged[WAREHOUSE_FILE], live, None)
    return f"restored (schema version {b_wh.schema_version}, {len(b_wh.runs)} runs); the live one " + (
        "was unreadable (set aside)" if wh_problem else "was missing")
