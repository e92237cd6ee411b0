"""The Prefect server of a data folder's runs that ``revbench ui`` starts, and how the other commands find it.

Prefect keeps a data folder's runs in one SQLite file under ``PREFECT_HOME`` (``data/prefect``).
A tracked command without ``PREFECT_API_URL`` starts a temporary server of its own on that file;
a second server on the same file (a UI opened with ``prefect server start`` while commands run)
makes two writers, and both log "database is locked" tracebacks. So ``revbench ui`` writes
``<PREFECT_HOME>/revbench-ui.json`` (its API's URL and the server's pid) while it serves, and a
command that finds no Prefect API configured looks there, and at Prefect's default address for a
server on the same home, and sends its runs to that server instead of starting another
(:func:`running_ui`, asked by ``prepare_process``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from revbench.workers import stop_group as stop

UI_MARKER = "revbench-ui.json"
UI_NOTED = "revbench-ui.noted"
"""What the last note on a found UI server said, so the same note is not said before every command."""
DEFAULT_ADDRESS = ("127.0.0.1", 4200)
"""Where ``prefect server start`` listens unless told otherwise: a server started by hand on the
same ``PREFECT_HOME`` is found there."""
STARTUP_SECONDS = 150.0
"""A cold start with its database migrations takes about 20 s on two cores, more beside a run."""


@dataclass(frozen=True)
class UiServer:
    """A Prefect server on a data folder's ``PREFECT_HOME``: its API root, its pid when known, and
    how it was found (in words)."""

    api_url: str
    pid: int | None
    how: str

    @property
    def ui_url(self) -> str:
        """The page to open: the API root without its ``/api``."""
        return self.api_url.removesuffix("/api")


def _get(url: str, timeout: float) -> tuple[int, bytes] | None:
    """``GET url`` on this machine without a proxy (an ``http_proxy`` must not catch loopback):
    the status and body, or None when nothing answers."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/")
        answer = conn.getresponse()
        return answer.status, answer.read(1 << 20)
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def healthy(api_url: str, timeout: float = 1.0) -> bool:
    """Whether the Prefect API at ``api_url`` answers ``/health`` with Prefect's ``true``."""
    got = _get(f"{api_url.rstrip('/')}/health", timeout)
    return got is not None and got[0] == 200 and got[1].strip() == b"true"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def read_marker(home: Path) -> dict[str, object] | None:
    """What ``revbench ui`` wrote in ``home`` (``api_url``, ``pid``), or None (none, or unreadable)."""
    try:
        marker = json.loads((home / UI_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("api_url"), str) else None


def _same_home(api_url: str, home: Path, timeout: float) -> bool:
    """Whether the Prefect server at ``api_url`` keeps its runs under ``home`` (its settings say
    its home; a server of another folder must not get this folder's runs)."""
    got = _get(f"{api_url}/admin/settings", timeout)
    if got is None or got[0] != 200:
        return False
    try:
        theirs = json.loads(got[1]).get("home")
    except (ValueError, AttributeError):
        return False
    return isinstance(theirs, str) and Path(theirs).expanduser().resolve() == home.resolve()


def find_ui_server(home: Path, timeout: float = 1.0) -> UiServer | None:
    """The Prefect server serving ``home``'s database, if one runs: the one ``revbench ui`` marked
    (its process alive and its API healthy), else one at Prefect's default address whose settings
    name ``home``."""
    marker = read_marker(home)
    if marker is not None:
        pid = marker.get("pid")
        api = str(marker["api_url"])
        if isinstance(pid, int) and _alive(pid) and healthy(api, timeout):
            return UiServer(api, pid, "`revbench ui`")
    host, port = DEFAULT_ADDRESS
    api = f"http://{host}:{port}/api"
    if healthy(api, timeout / 2) and _same_home(api, home, timeout):
        return UiServer(api, None, f"a Prefect server on {host}:{port}")
    return None


def running_ui(home: Path, verbose: bool = False) -> tuple[UiServer | None, str | None]:
    """The server already serving ``home``'s database, for a process with no Prefect API
    configured to send its runs to rather than start a second server on that database, and the
    note to say about it: once per server (every time with ``verbose``), or how to resolve a
    marked server that does not answer."""
    found = find_ui_server(home)
    if found is None:
        marker = read_marker(home)
        pid = marker.get("pid") if marker else None
        if marker is None or not isinstance(pid, int) or not _alive(pid):
            return None, None
        return None, (f"note: the Prefect server `revbench ui` started on {home} (pid {pid}) does not answer at "
                      f"{marker['api_url']}; a tracked run now starts a temporary server on the same database "
                      "(\"database is locked\"): wait until the UI has started, stop it, or set PREFECT_API_URL")
    said = f"{found.api_url} {found.pid}"
    noted = home / UI_NOTED
    try:
        seen = noted.read_text()
    except OSError:
        seen = None
    if not verbose and seen == said:
        return found, None
    try:
        noted.write_text(said)
    except OSError:  # a read-only home: the note comes again next time, nothing else changes
        pass
    return found, (f"note: {found.how} serves the runs of {home} at {found.ui_url}: this command's runs go there "
                   "(PREFECT_API_URL), no second server is started on its database")


def server_command(host: str, port: int) -> list[str]:
    """The Prefect server ``revbench ui`` runs (this interpreter's prefect)."""
    return [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)]


def server_env(environ: Mapping[str, str], home: Path, host: str, port: int) -> dict[str, str]:
    """The server's environment: ``environ`` (this process's), its home the data folder's,
    telemetry off, and the UI's page pointed at this server's API (another port would leave it
    asking 4200)."""
    env = {k: v for k, v in environ.items() if k != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                "PREFECT_UI_API_URL": f"http://{host}:{port}/api"})
    return env


def port_taken(host: str, port: int) -> bool:
    """Whether something listens on ``host:port``."""
    import socket

    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


