"""The survey server's unix socket: on a host where a proxy (Caddy) runs beside it, the server
listens on a file instead of a port, and needs no network at all (systemd's PrivateNetwork=)."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from revbench.errors import UsageError


@contextmanager
def unix_listener(path: Path) -> Iterator[socket.socket]:
    """A unix socket bound at ``path``, mode 0660 (its owner and its group, the proxy's, may
    connect), removed again when done. A socket left by a killed server is replaced; a socket a
    server still answers on, or a file that is no socket, is refused in one line."""
    path = Path(path)
    if path.is_symlink() or path.exists():
        if path.is_symlink() or not stat.S_ISSOCK(path.lstat().st_mode):
            raise UsageError(f"--socket {path}: something that is not a socket is there; remove it or choose another path")
        _replace_stale(path)
    if not path.parent.is_dir():
        raise UsageError(f"--socket {path}: the folder {path.parent} does not exist")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        inode = path.stat().st_ino
        # Created with the umask's mode first (at most this open): never wider than 0660.
        os.chmod(path, 0o660)
    except OSError as exc:
        sock.close()
        raise UsageError(f"--socket {path}: cannot listen there ({exc.strerror or exc})") from None
    try:
        yield sock
    finally:
        sock.close()
        try:
            if path.stat().st_ino == inode:  # not a socket another server bound there since
                path.unlink()
        except OSError:
            pass


def _replace_stale(path: Path) -> None:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        path.unlink()  # nobody listens: a server that was killed left it
        return
    except OSError as exc:
        raise UsageError(f"--socket {path}: cannot tell whether a server listens there ({exc.strerror or exc})") from None
    finally:
        probe.close()
    raise UsageError(f"--socket {path}: a server already answers there; is another survey server running?")
