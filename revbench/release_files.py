"""A release folder checked against its ``manifest.json``: every file it lists, by size and
sha256, and nothing it does not list. Every reader of a release (publishing, ``-b release=``,
``report --releases``, the reuse checks, ``revbench release verify``) goes through
``verify_release``, so a file changed after the build is refused by name before anything is
read from it. This module sits below the evaluation importers and the release tasks alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from revbench.errors import ReleaseTampered
from revbench.files import file_sha256

MANIFEST = "manifest.json"


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
        if not path.is_dir() and rel != MANIFEST and rel not in listed:
            raise _refuse(path, "not listed in manifest.json", what)
    return VerifiedRelease(release_dir, str(manifest.get("version", release_dir.name)), manifest, digest,
                           recorded=manifest_sha256 is not None)
