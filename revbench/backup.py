"""Backups of the warehouse and the survey store, written so that they restore.

``revbench backup --to DIR`` (and the scheduled backup) writes ``DIR/revbench-backup-<UTC time>/``
holding ``warehouse.duckdb`` (the DuckDB file copied while the backup holds it, after a
checkpoint: see :mod:`revbench.warehouse.backup` for why a copy and not ``EXPORT DATABASE``),
``survey.sqlite`` (SQLite's online backup, safe while the survey server writes) and
``manifest.json`` (each file's size and sha256, the revbench version, the warehouse's schema
version, runs and counts, the survey store's identity and answers, and when it was taken).

The manifest is authenticated with HMAC-SHA256 under REVBENCH_BACKUP__KEY, a key the backup does
not hold: a plain digest anyone could recompute, so a backup whose store was edited and whose
sha256s were recomputed would restore. No backup is written without the key, and
:func:`verify_manifest` (the one check every reader goes through) refuses a manifest that does
not verify with it, one written with another key, and one without an HMAC (format 1, or one
whose HMAC was removed). There is no switch that restores an unauthenticated manifest: a forger
would strip the HMAC and use it; a format-1 backup restores with the revbench that wrote it.

A snapshot is written into a hidden ``DIR/.revbench-backup-<time>.<pid>.partial`` folder and renamed
once its manifest is on disk, so Ctrl-C or ``kill -9`` never leaves a folder that looks complete;
the next backup removes such leftovers. Backups into one DIR take turns (a lock file in DIR), and
``keep`` prunes the oldest snapshots, only folders this module wrote. A DIR holding anything else
is refused. :mod:`revbench.restore` reads what this writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from revbench.errors import InputError, NoSpace, RevbenchError, UsageError, WarehouseBusy
from revbench.files import CHUNK, no_space, write_atomic
from revbench.settings import Settings

FORMAT, FORMAT_VERSION = "revbench-backup", 2
"""Version 2: the manifest carries ``key_id`` and ``manifest_hmac`` (version 1: a plain ``manifest_sha256``)."""
KEY_SETTING = "REVBENCH_BACKUP__KEY"
MIN_KEY_CHARS = 16
MANIFEST = "manifest.json"
WAREHOUSE_FILE, STORE_FILE = "warehouse.duckdb", "survey.sqlite"
LOCK = ".revbench-backup.lock"
PREFIX = "revbench-backup-"
SNAPSHOT = re.compile(r"^revbench-backup-\d{8}T\d{6}Z(-\d+)?$")
PARTIAL = re.compile(r"^\.revbench-backup-\d{8}T\d{6}Z(-\d+)?\.\d+\.partial$")
"""A snapshot being written, by the process whose id it names (a hidden name no one takes for a backup)."""


def backup_dir(settings: Settings) -> Path:
    """Where snapshots go: REVBENCH_BACKUP__DIR, else ``<data_dir>/backups``."""
    return Path(settings.backup.dir or settings.data_dir / "backups").expanduser()


def stamp(now: datetime | None = None) -> str:
    """``20250102T023000Z``: sorts as time does, and names a snapshot."""
    return (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def copy_hashed(src: Path, dst: Path) -> tuple[int, str]:
    """Copy ``src`` to ``dst`` (synced to disk) and return the size and sha256 of the bytes copied."""
    h, size = hashlib.sha256(), 0
    with src.open("rb") as fin, dst.open("wb") as fout:
        for chunk in iter(lambda: fin.read(CHUNK), b""):
            h.update(chunk)
            fout.write(chunk)
            size += len(chunk)
        fout.flush()
        os.fsync(fout.fileno())
    return size, h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup_key(settings: Settings, then: str) -> bytes:
    """REVBENCH_BACKUP__KEY as bytes, or one line saying it is missing (or short), ending in
    ``then`` (what was not done, and what to set). No key is derived for a demo or a test folder:
    whatever it were derived from would sit beside the backups, for whoever edits one to derive."""
    secret = settings.backup.key.get_secret_value() if settings.backup.key is not None else ""
    if len(secret) < MIN_KEY_CHARS:
        said = "is not set" if not secret else f"is shorter than {MIN_KEY_CHARS} characters"
        raise UsageError(f"{KEY_SETTING} {said}: each backup's manifest is authenticated with it (HMAC-SHA256) so "
                         f"that a restore can tell an edited backup; {then}")
    return secret.encode()


def key_id(key: bytes) -> str:
    """A short name of the key that reveals nothing of it (an HMAC of a fixed text): a restore
    under another key says so, rather than calling the backup edited."""
    return hmac.new(key, b"revbench backup key id", hashlib.sha256).hexdigest()[:16]


def manifest_hmac(manifest: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of the manifest without its own HMAC (keys sorted, compact JSON)."""
    body = {k: v for k, v in manifest.items() if k != "manifest_hmac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, b"revbench-backup-manifest\n" + text.encode(), hashlib.sha256).hexdigest()


def verify_manifest(path: Path, manifest: dict[str, Any], key: bytes) -> None:
    """Refuse, in one line naming ``path`` and REVBENCH_BACKUP__KEY, a manifest that carries no
    HMAC, was written with another key, or does not verify with ``key``: the one check between
    a backup's manifest and anything that trusts it."""
    if manifest.get("format_version") == 1:
        raise InputError(f"{path} carries no HMAC (format 1, written before backups were keyed with {KEY_SETTING}, or "
                         "marked so by whoever removed it): it cannot be verified; nothing was restored: restore it "
                         f"with the revbench that wrote it ({manifest.get('revbench_version') or 'named in it'}) if "
                         "you know where it has been")
    given = manifest.get("manifest_hmac")
    if not isinstance(given, str) or not given:
        raise InputError(f"{path} carries no HMAC (removed after the backup was written): it cannot be verified with "
                         f"{KEY_SETTING}; nothing was restored")
    if manifest.get("key_id") != key_id(key):
        raise InputError(f"{path} was written with another backup key (key id {str(manifest.get('key_id'))[:16]!r}; "
                         f"{KEY_SETTING}'s is {key_id(key)!r}): set the key it was written with; nothing was restored")
    if not hmac.compare_digest(given.encode(), manifest_hmac(manifest, key).encode()):
        raise InputError(f"{path} does not verify with {KEY_SETTING} (its HMAC does not match: changed after the "
                         "backup was written); nothing was restored")


def is_snapshot(path: Path) -> bool:
    """A complete snapshot written by revbench: its name, a folder of its own (a link named like
    one is not ours to prune, whatever it points at), and a manifest of our format."""
    if not (SNAPSHOT.match(path.name) and path.is_dir()) or path.is_symlink():
        return False
    try:
        return json.loads((path / MANIFEST).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _when(name: str) -> tuple[str, int]:
    """``revbench-backup-<time>[-n]`` -> (time, n): the order snapshots were taken in."""
    base, _, n = name.removeprefix(PREFIX).partition("-")
    return base, int(n or 1)


def snapshots(folder: Path) -> list[Path]:
    """The complete snapshots in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if is_snapshot(p)), key=lambda p: _when(p.name))


def _next_name(folder: Path, started: datetime) -> str:
    """A name that sorts after every snapshot of the same second, pruned ones' names never
    reused (a reused ``<time>`` would sort oldest and be pruned by its own backup)."""
    base = PREFIX + stamp(started)
    n = max((_when(p.name)[1] for p in folder.iterdir() if SNAPSHOT.match(p.name) and _when(p.name)[0] == stamp(started)),
            default=0)
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
    """Hold ``folder``'s backup lock (an flock the system lets go of when a process dies, even by
    ``kill -9``), waiting up to ``wait`` seconds for another backup into it to finish."""
    path = folder / LOCK
    try:  # never through a link: the pid written below would overwrite whatever it points at
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UsageError(f"{path} is a link, not revbench's lock file; remove it, or give another folder") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    who = path.read_text().strip() or "another process"
                    raise WarehouseBusy(f"another backup ({who}) is writing into {folder}; run again when it has "
                                        "finished") from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, since {datetime.now(UTC).isoformat(timespec='seconds')}".encode())
        yield
    finally:
        os.close(fd)


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
    from revbench.warehouse.store_backup import snapshot as store_snapshot

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


def read_manifest(folder: Path, key: bytes, flag: str = "--from") -> dict[str, Any]:
    """The manifest of the snapshot ``folder``, verified with ``key`` (:func:`verify_manifest`)
    and its shape checked."""
    if not folder.exists():
        raise UsageError(f"{flag} {folder} does not exist")
    if not folder.is_dir():
        raise UsageError(f"{flag} {folder} is a file; give a backup folder ({PREFIX}<time>/)")
    if PARTIAL.match(folder.name):  # its manifest is written before the rename: a complete look is no proof
        raise UsageError(f"{flag} {folder} is a backup still being written, or one that never finished; use a "
                         "complete one")
    path = folder / MANIFEST
    if not path.exists():
        inside = snapshots(folder)
        if inside:
            raise UsageError(f"{flag} {folder} holds {len(inside)} backups; name one of them, e.g. the newest: "
                             f"{flag} {inside[-1]}")
        raise UsageError(f"{flag} {folder} is not a revbench backup (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read as JSON ({exc}); nothing was restored") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InputError(f"{path} is not a revbench backup manifest (format {FORMAT!r} expected); nothing was restored")
    if manifest.get("format_version") not in (1, FORMAT_VERSION):
        raise InputError(f"{path} has format version {manifest.get('format_version')!r}; this revbench reads "
                         f"{FORMAT_VERSION}: restore it with the revbench that wrote it")
    verify_manifest(path, manifest, key)
    files = manifest.get("files")
    if not isinstance(files, dict) or not files or set(files) - {WAREHOUSE_FILE, STORE_FILE}:
        raise InputError(f"{path} lists unexpected files {sorted(files) if isinstance(files, dict) else files!r}; "
                         "nothing was restored")
    for name, entry in files.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("bytes"), int) and isinstance(entry.get("sha256"), str)
                and re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])):
            raise InputError(f"{path} lists {name} without its size and sha256 ({entry!r}); nothing was restored")
    return manifest


def check_sizes(folder: Path, manifest: dict[str, Any]) -> None:
    """Every listed file present with its listed size (the cheap half of the check; the sha256
    is checked on the copy that is restored)."""
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise InputError(f"{path} is missing from the backup (its manifest lists it); nothing was restored")
        if path.stat().st_size != entry.get("bytes"):
            raise InputError(f"{path} has {path.stat().st_size} bytes, its manifest says {entry.get('bytes')} "
                             "(truncated or changed); nothing was restored")
