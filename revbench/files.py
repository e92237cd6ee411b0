"""Files: their sha256, and writes that leave a file whole or untouched.

A later run trusts what it finds on disk (a manifest, an export, a cache shard, the name of the
newest release), so a write goes to a temporary file beside its target and replaces the target
in one ``os.replace``: a reader sees the old content or the new one, never half of it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

CHUNK = 1 << 20
"""Files are hashed in 1 MiB pieces, so a large one is never held in memory whole."""

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""A write refused for want of room: a full disk, a full quota, a file-size limit (``ulimit -f``)."""
_SQLITE_FULL = 13


def no_space(exc: BaseException) -> str | None:
    """Why ``exc`` (or an error it was raised from) is a write refused for want of room, in the
    system's words (``No space left on device``); None for any other error. SQLite reports a
    full disk as SQLITE_FULL, without the errno."""
    seen: BaseException | None = exc
    for _ in range(8):  # an error's causes, never round a cycle
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in NO_SPACE:
            return seen.strerror or os.strerror(seen.errno)
        # Only a process that loaded SQLite can hold its error: this check never loads it.
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is not None and isinstance(seen, sqlite3.Error) and getattr(seen, "sqlite_errorcode", None) == _SQLITE_FULL:
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return None


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


@contextmanager
def writing_folder(out: Path) -> Iterator[Path]:
    """The folder to write ``out``'s files into. An existing ``out`` is written in place (write
    each file with :func:`write_atomic`). A missing one is written as a hidden sibling
    ``.<name>.<pid>.partial``, renamed to ``out`` when the block ends without an error, and
    removed (with the folders above it made for it) when it raises: a failure, a full disk among
    them, leaves no empty or half-written folder. A sibling a killed process left is removed by
    the next write of ``out``."""
    if out.is_dir():
        yield out
        return
    made = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    left = re.compile(rf"^\.{re.escape(out.name)}\.(\d+)\.partial$")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for p in out.parent.iterdir():
            m = left.match(p.name)
            if m and p.is_dir() and not p.is_symlink() and not _alive(int(m.group(1))):
                shutil.rmtree(p, ignore_errors=True)
        tmp.mkdir()
        yield tmp
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in made:  # deepest first; one that holds something now is someone else's
            with contextlib.suppress(OSError):
                p.rmdir()
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextmanager
def lock_held(path: Path, wait: float, busy: Callable[[str], BaseException]) -> Iterator[None]:
    """Hold the lock file ``path`` (an flock, which the system lets go of when its process dies, even
    by ``kill -9``: no stale lock), waiting up to ``wait`` seconds for its holder; then raise
    ``busy(who)``, ``who`` what the holder wrote in it (its pid and since when)."""
    import fcntl

    from revbench.errors import UsageError

    path.parent.mkdir(parents=True, exist_ok=True)
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
                    raise busy(path.read_text().strip() or "another process") from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, since {datetime.now(UTC).isoformat(timespec='seconds')}".encode())
        yield
    finally:
        os.close(fd)
