"""A snapshot as its readers see it: its folder's name, its files with their sizes and sha256,
and its manifest, authenticated with the backup key.

The manifest (``manifest.json``) holds each file's size and sha256, the revbench version, the
warehouse's schema version, runs and counts, the survey store's identity and answers, and when it
was taken. It is authenticated with HMAC-SHA256 under REVBENCH_BACKUP__KEY, a key the backup does
not hold: a plain digest anyone could recompute, so a backup whose store was edited and whose
sha256s were recomputed would restore. No backup is written without the key, and
:func:`verify_manifest` (the one check every reader goes through) refuses a manifest that does
not verify with it, one written with another key, and one without an HMAC (format 1, or one
whose HMAC was removed). There is no switch that restores an unauthenticated manifest: a forger
would strip the HMAC and use it; a format-1 backup restores with the revbench that wrote it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from revbench.errors import InputError, UsageError
from revbench.files import CHUNK
from revbench.settings import Settings

FORMAT, FORMAT_VERSION = "revbench-backup", 2
"""Version 2: the manifest carries ``key_id`` and ``manifest_hmac`` (version 1: a plain ``manifest_sha256``)."""
KEY_SETTING = "REVBENCH_BACKUP__KEY"
MIN_KEY_CHARS = 16
MANIFEST = "manifest.json"
WAREHOUSE_FILE, STORE_FILE = "warehouse.duckdb", "survey.sqlite"
PREFIX = "revbench-backup-"
SNAPSHOT = re.compile(r"^revbench-backup-\d{8}T\d{6}Z(-\d+)?$")
PARTIAL = re.compile(r"^\.revbench-backup-\d{8}T\d{6}Z(-\d+)?\.\d+\.partial$")
"""A snapshot being written, by the process whose id it names (a hidden name no one takes for a backup)."""


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


def order_taken(name: str) -> tuple[str, int]:
    """``revbench-backup-<time>[-n]`` -> (time, n): the order snapshots were taken in."""
    base, _, n = name.removeprefix(PREFIX).partition("-")
    return base, int(n or 1)


def snapshots(folder: Path) -> list[Path]:
    """The complete snapshots in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if is_snapshot(p)), key=lambda p: order_taken(p.name))


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
