"""Files: their sha256, and writes that leave a file whole or untouched.

A later run trusts what it finds on disk (a manifest, an export, a cache shard, the name of the
newest release), so a write goes to a temporary file beside its target and replaces the target
in one ``os.replace``: a reader sees the old content or the new one, never half of it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHUNK = 1 << 20
"""Files are hashed in 1 MiB pieces, so a large one is never held in memory whole."""


def file_sha256(*paths: Path) -> str:
    """The hex sha256 over the bytes of ``paths``, in the given order (one file: its own sha256)."""
    h = hashlib.sha256()
    for path in paths:
        with Path(path).open("rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
    return h.hexdigest()


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; it replaces ``path`` when the block ends
    without an error, and is removed when it raises (``path`` then keeps its old content)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path``, whole or not at all: a later run trusts what it finds."""
    with replacing(path) as tmp:
        tmp.write_text(text)
