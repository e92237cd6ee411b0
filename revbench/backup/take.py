"""Taking a backup: one snapshot of the warehouse and the survey store, then the oldest pruned.

``revbench backup --to DIR`` (and the scheduled backup) writes ``DIR/revbench-backup-<UTC time>/``
holding ``warehouse.duckdb`` (the DuckDB file copied while the backup holds it, after a
checkpoint: see :mod:`revbench.warehouse.backup` for why a copy and not ``EXPORT DATABASE``),
``survey.sqlite`` (SQLite's online backup, safe while the survey server writes) and
``manifest.json`` (see :mod:`revbench.backup.manifest`).

A snapshot is written into a hidden ``DIR/.revbench-backup-<time>.<pid>.partial`` folder and renamed
once its manifest is on disk, so Ctrl-C or ``kill -9`` never leaves a folder that looks complete;
the next backup removes such leftovers. Backups into one DIR take turns (a lock file in DIR), and
``keep`` prunes the oldest snapshots, only folders this module wrote. A DIR holding anything else
is refused. :mod:`revbench.backup.restore` reads what this writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from revbench.backup.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    PARTIAL,
    PREFIX,
    SNAPSHOT,
    STORE_FILE,
    WAREHOUSE_FILE,
    backup_key,
    copy_hashed,
    is_snapshot,
    key_id,
    manifest_hmac,
    order_taken,
    snapshots,
    stamp,
)
from revbench.errors import NoSpace, RevbenchError, UsageError, WarehouseBusy
from revbench.files import lock_held, no_space, write_atomic
from revbench.settings import Settings

LOCK = ".revbench-backup.lock"


def backup_dir(settings: Settings) -> Path:
    """Where snapshots go: REVBENCH_BACKUP__DIR, else ``<data_dir>/backups``."""
    return Path(settings.backup.dir or settings.data_dir / "backups").expanduser()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _next_name(folder: Path, started: datetime) -> str:
    """A name that sorts after every snapshot of the same second, pruned ones' names never
    reused (a reused ``<time>`` would sort oldest and be pruned by its own backup)."""
    base = PREFIX + stamp(started)
    n = max((order_taken(p.name)[1] for p in folder.iterdir()
             if SNAPSHOT.match(p.name) and order_taken(p.name)[0] == stamp(started)), default=0)
    return base if n == 0 else f"{base}-{n + 1}"


def check_target(folder: Path, flag: str = "--to") -> None:
    """A folder backups may go to: missing, empty, or holding only revbench's snapshots."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {folder} is a file; give the folder the snapshots go to")
    if not folder.exists():
        return
    if (folder / MANIFEST).exists():
        raise UsageError(f"{flag} {folder} is itself a backup snapshot; give the folder that holds the snapshots "
                         f"(e.g. {flag} {folder.parent})")
    foreign = sorted(p.name for p in folder.iterdir() if not _ours_aside(p) and not is_snapshot(p))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise UsageError(f"{flag} {folder} holds files that are not revbench backups ({shown}); give an empty folder "
                         "or one that only revbench backups go to")


def _ours_aside(path: Path) -> bool:
    """The lock file, or a snapshot being written (or left by a killed backup): plain files and
    folders only, so a link named like one is never written through or removed."""
    if path.is_symlink():
        return False
    return (path.name == LOCK and path.is_file()) or (PARTIAL.match(path.name) is not None and path.is_dir())


@contextlib.contextmanager
def taking_turns(folder: Path, wait: float) -> Iterator[None]:
    """Hold ``folder``'s backup lock, waiting up to ``wait`` seconds for another backup into it to finish."""
    with lock_held(folder / LOCK, wait, lambda who: WarehouseBusy(
            f"another backup ({who}) is writing into {folder}; run again when it has finished")):
        yield


@dataclass(frozen=True)
class Snapshot:
    """A backup written: its folder, its manifest, and the older snapshots pruned after it."""

    path: Path
    manifest: dict[str, Any]
    pruned: list[Path]


def _take(settings: Settings, partial: Path, run_id: str) -> dict[str, Any]:
    """Copy the warehouse (under its lock), then the survey store, into ``partial``; returns the
    manifest's ``files``, ``warehouse`` and ``survey_store`` parts. The warehouse first: every
    answer it pulled is then in the store's copy too."""
    from revbench.warehouse.backup import copy_readable, holding, read_facts
    from revbench.warehouse.store.backup import snapshot as store_snapshot

    files: dict[str, Any] = {}
    wh_part: dict[str, Any] | None = None
    store_part: dict[str, Any] | None = None
    if settings.warehouse_path.exists():
        holder = {"run_id": run_id, "flow": "backup", "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
                  "stage": f"copying the warehouse to {partial.parent}"}
        with holding(settings.warehouse_path, settings.warehouse.lock_wait_seconds, holder) as wh:
            facts = read_facts(wh)
            size, sha = copy_hashed(settings.warehouse_path, partial / WAREHOUSE_FILE)
        copied = copy_readable(partial / WAREHOUSE_FILE)  # the copy opens as a warehouse, or the backup fails here
        if copied.counts != facts.counts:  # rows only a write-ahead log held would be missing from the copy
            changed = sorted(t for t in set(facts.counts) | set(copied.counts)
                             if facts.counts.get(t) != copied.counts.get(t))
            raise RevbenchError(f"the copy of {settings.warehouse_path} does not hold what the warehouse held (rows of "
                                f"{', '.join(changed[:5])} differ); no snapshot was written, run the backup again")
        files[WAREHOUSE_FILE] = {"bytes": size, "sha256": sha}
        wh_part = {"file": WAREHOUSE_FILE, **facts.summary()}
    if settings.survey_store_path.exists():
        content = store_snapshot(settings.survey_store_path, partial / STORE_FILE)
        with (partial / STORE_FILE).open("rb") as f:
            files[STORE_FILE] = {"bytes": os.fstat(f.fileno()).st_size, "sha256": hashlib.file_digest(f, "sha256").hexdigest()}
        store_part = {"file": STORE_FILE, **content.summary()}
    if not files:
        raise UsageError(f"nothing to back up: no warehouse at {settings.warehouse_path} and no survey store at "
                         f"{settings.survey_store_path} (check REVBENCH_DATA_DIR)")
    return {"files": files, "warehouse": wh_part, "survey_store": store_part}


def write_backup(settings: Settings, to: Path | None = None, keep: int | None = None, version: str = "") -> Snapshot:
    """Write one snapshot into ``to`` (default :func:`backup_dir`), then prune to the newest
    ``keep`` (default REVBENCH_BACKUP__KEEP; 0 keeps all)."""
    folder = Path(to or backup_dir(settings)).expanduser().absolute()
    keep = settings.backup.keep if keep is None else keep
    key = backup_key(settings, f"no backup was written into {folder}: set it to a long random key kept apart from the "
                               "backups (python3 -c \"import secrets; print(secrets.token_urlsafe(32))\")")
    check_target(folder)
    if not settings.warehouse_path.exists() and not settings.survey_store_path.exists():
        raise UsageError(f"nothing to back up: no warehouse at {settings.warehouse_path} and no survey store at "
                         f"{settings.survey_store_path} (check REVBENCH_DATA_DIR)")
    try:
        return _write(settings, folder, keep, key, version)
    except (OSError, sqlite3.Error) as exc:
        why = no_space(exc)
        if why is not None:
            raise NoSpace(f"no space left to write the backup into {folder} ({why}); the partial snapshot was removed "
                          "and no backup was written: free space there (or lower REVBENCH_BACKUP__KEEP) and run "
                          "again") from None
        raise RevbenchError(f"the backup into {folder} failed ({type(exc).__name__}: {exc}); the partial snapshot was "
                            "removed and no backup was written") from exc


def _write(settings: Settings, folder: Path, keep: int, key: bytes, version: str) -> Snapshot:
    folder.mkdir(parents=True, exist_ok=True)
    with taking_turns(folder, settings.warehouse.lock_wait_seconds):
        check_target(folder)
        for left in folder.iterdir():  # a backup killed before it finished (we hold the lock: none runs)
            if PARTIAL.match(left.name) and _ours_aside(left):
                shutil.rmtree(left, ignore_errors=True)
        started = datetime.now(UTC)
        name = _next_name(folder, started)
        partial = folder / f".{name}.{os.getpid()}.partial"
        try:
            partial.mkdir()
            parts = _take(settings, partial, f"backup-{name.removeprefix(PREFIX)}")
            manifest: dict[str, Any] = {
                "format": FORMAT, "format_version": FORMAT_VERSION, "name": name,
                "created_at": started.isoformat(timespec="seconds"),
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "revbench_version": version, "data_dir": str(settings.data_dir.absolute()), **parts,
                "key_id": key_id(key)}
            manifest["manifest_hmac"] = manifest_hmac(manifest, key)
            write_atomic(partial / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
            _fsync_dir(partial)
            os.rename(partial, folder / name)
            _fsync_dir(folder)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        pruned = prune(folder, keep, folder / name)
    return Snapshot(folder / name, manifest, pruned)


def prune(folder: Path, keep: int, written: Path | None = None) -> list[Path]:
    """Remove all but the newest ``keep`` snapshots (0: none removed); only revbench's own.
    ``written``, the snapshot just taken, counts as the newest whatever its name says: a clock
    set back, or a snapshot named in the future, never has a backup prune itself."""
    if keep <= 0:
        return []
    others = [p for p in snapshots(folder) if p != written]
    old = others[: max(len(others) - (keep - 1 if written is not None else keep), 0)]
    for p in old:
        shutil.rmtree(p)
    return old
