"""A release folder checked against its ``manifest.json``: every file it lists, by size and
sha256, and nothing it does not list. Every reader of a release (publishing, ``-b release=``,
``report --releases``, the reuse checks, ``revbench release verify``) goes through
``verify_release``, so a file changed after the build is refused by name before anything is
read from it. This module sits below the evaluation importers and the release tasks alike.

A release its curator rejected keeps its folder (what was rejected stays readable for the
record) with a ``REJECTED`` file beside the manifest, outside its file list: the manifest and
every file stay as built and checked, and whoever finds the folder (a researcher taking the
highest ``vN``) reads that it was never published. Every reader gets it as
``VerifiedRelease.rejected``; those that would use the release as a benchmark refuse it
(:func:`refuse_rejected`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from revbench.errors import InputError, ReleaseTampered
from revbench.files import file_sha256, write_atomic

MANIFEST = "manifest.json"
REJECTED = "REJECTED"
"""The marker of a rejected release, in its folder: who, when, why (JSON)."""


@dataclass(frozen=True)
class Rejection:
    """A curator's rejection of a release: who, when (ISO 8601, UTC) and why."""

    decided_by: str
    decided_at: str
    reason: str

    def line(self, version: str) -> str:
        """``v2: REJECTED by ada on 2026-10-31: reason``."""
        return (f"{version}: REJECTED by {self.decided_by or 'an unnamed curator'} on {self.decided_at[:10] or 'an unknown day'}: "
                f"{self.reason or 'no reason given'}")


class ReleaseRejected(InputError):
    """A release its curator rejected, where a published one is needed: never published, not a
    benchmark to report or compare (exit 8, apart from a damaged release's 2)."""

    exit_code = 8


def read_rejection(release_dir: Path) -> Rejection | None:
    """The ``REJECTED`` marker of ``release_dir``, or None. A marker that cannot be read still
    says rejected: a release is never taken for published on a damaged marker."""
    path = release_dir / REJECTED
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text())
        return Rejection(str(data.get("decided_by") or ""), str(data.get("decided_at") or ""), str(data.get("reason") or ""))
    except (OSError, ValueError, AttributeError):
        return Rejection("", "", f"its {REJECTED} file cannot be read")


def write_rejection(release_dir: Path, version: str, decided_by: str, decided_at: datetime, reason: str) -> Path:
    """Mark ``release_dir`` rejected (atomically: a reader sees the whole marker or none)."""
    path = release_dir / REJECTED
    text = json.dumps({"status": "rejected", "version": version, "decided_by": decided_by,
                       "decided_at": decided_at.isoformat(), "reason": reason,
                       "note": "Its curator rejected this release: it was never published. The release named in "
                               "LATEST beside the release folders is the newest published one."}, indent=1)
    write_atomic(path, text + "\n")
    return path


def refuse_rejected(release: VerifiedRelease, lead: str, way_out: str = "") -> None:
    """Raise ``ReleaseRejected`` (one line: who, when, why) when ``release`` was rejected; ``lead``
    says what held ("its files match its manifest, but"), ``way_out`` a flag that reads it anyway."""
    if release.rejected is None:
        return
    tail = f", or {way_out}" if way_out else ""
    said = f"{lead} it was never published" if lead else "it was never published"
    raise ReleaseRejected(f"{release.rejected.line(release.version)} ({release.path}); {said}: use a published "
                          f"release (LATEST beside it names the newest){tail}")


@dataclass(frozen=True)
class VerifiedRelease:
    """A release whose files all match its manifest."""

    path: Path
    version: str
    manifest: dict[str, Any]
    digest: str
    """sha256 of ``manifest.json``: with it, the sha256 of every file of the release is fixed."""
    recorded: bool = False
    """Whether the manifest was also checked against a sha256 recorded at the build."""
    rejected: Rejection | None = None
    """Its curator's rejection (its ``REJECTED`` marker, or the warehouse's record), if rejected."""


def _refuse(path: Path, problem: str, what: str = "release") -> ReleaseTampered:
    return ReleaseTampered(f"{path}: {problem}; the {what} is not as it was built (nothing was read from it "
                           "or written)")


def _listed(release_dir: Path, manifest: Any, what: str = "release") -> dict[str, dict[str, Any]]:
    """The manifest's files by path, each entry checked for shape and for a path inside the folder."""
    where = release_dir / MANIFEST
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not files:
        raise _refuse(where, "no list of files", what)
    out: dict[str, dict[str, Any]] = {}
    for i, f in enumerate(files):
        path = f.get("path") if isinstance(f, dict) else None
        if not isinstance(path, str) or not isinstance(f.get("sha256"), str) or not isinstance(f.get("bytes"), int):
            raise _refuse(where, f"files[{i}] lacks a path, bytes or sha256", what)
        pure = PurePosixPath(path)
        # A manifest names files inside its folder only: never one elsewhere on the disk.
        if pure.is_absolute() or ".." in pure.parts or "\\" in path or path in ("", MANIFEST) or path in out:
            raise _refuse(where, f"files[{i}] names {path!r}, not a file of the {what}", what)
        out[path] = f
    return out


def verify_release(release_dir: Path, manifest_sha256: str | None = None, what: str = "release") -> VerifiedRelease:
    """Check ``release_dir`` against its ``manifest.json`` and return the release: the manifest
    itself against ``manifest_sha256`` when one was recorded (the warehouse keeps it from the
    build), then every file it lists (size, then sha256), then that no other file is there (a
    planted file is loaded by anyone who reads ``data/*.parquet``). Raises ``ReleaseTampered``
    naming the first file that differs: missing manifest, unreadable JSON, missing file, size or
    hash mismatch, unlisted file. ``what`` names the folder's kind in the error (a weak benchmark is
    checked the same way)."""
    where = release_dir / MANIFEST
    if not release_dir.is_dir():
        raise ReleaseTampered(f"{release_dir}: no {what} folder there")
    if not where.is_file():
        raise _refuse(where, "missing, so nothing in the folder can be checked", what)
    digest = file_sha256(where)
    if manifest_sha256 is not None and digest != manifest_sha256:
        raise _refuse(where, f"sha256 {digest[:12]}... differs from {manifest_sha256[:12]}... recorded in the warehouse "
                             "when it was built", what)
    try:
        manifest = json.loads(where.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise _refuse(where, f"not valid JSON ({str(exc).splitlines()[0]})", what) from None
    listed = _listed(release_dir, manifest, what)
    for rel, f in sorted(listed.items()):
        path = release_dir / rel
        if not path.is_file():
            raise _refuse(path, "missing (manifest.json lists it)", what)
        size = path.stat().st_size
        if size != f["bytes"]:
            raise _refuse(path, f"{size} bytes where manifest.json lists {f['bytes']}", what)
        got = file_sha256(path)
        if got != f["sha256"]:
            raise _refuse(path, f"sha256 {got[:12]}... differs from {f['sha256'][:12]}... in manifest.json", what)
    for path in sorted(release_dir.rglob("*")):
        rel = path.relative_to(release_dir).as_posix()
        if not path.is_dir() and rel not in (MANIFEST, REJECTED) and rel not in listed:
            raise _refuse(path, "not listed in manifest.json", what)
    return VerifiedRelease(release_dir, str(manifest.get("version", release_dir.name)), manifest, digest,
                           recorded=manifest_sha256 is not None, rejected=read_rejection(release_dir))
