"""``revbench ui``: the Prefect UI on a data folder's runs, one server on its database (the
server it starts, and how the other commands find it, are ``revbench.app.prefect_ui``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Annotated

import typer

from revbench.app.prefect_ui import (
    DEFAULT_ADDRESS,
    STARTUP_SECONDS,
    UI_MARKER,
    find_ui_server,
    healthy,
    port_taken,
    read_marker,
    server_command,
    server_env,
    stop,
)


def ui(
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port of the UI and its API")] = DEFAULT_ADDRESS[1],
    host: Annotated[str, typer.Option(help="Address it listens on (keep it on this machine: the UI has no login)")] = DEFAULT_ADDRESS[0],
) -> None:
    """Open the Prefect UI on this data folder's runs: a Prefect server on its PREFECT_HOME (data/prefect), telemetry off, until Ctrl-C; revbench commands on the folder send their runs to it."""
    from revbench.app.console import console
    from revbench.app.entry import build_settings, prefect_api_url, prefect_home, prepare_process
    from revbench.errors import UsageError

    settings = build_settings()
    home = prefect_home(settings)
    given = prefect_api_url(home)
    if given:
        raise UsageError(f"PREFECT_API_URL is set ({given}): runs go to that server, whose UI is at "
                         f"{given.removesuffix('/').removesuffix('/api')}; unset it to open this data folder's own")
    prepare_process(settings, find_ui=False)
    running = find_ui_server(home)
    if running is not None:
        console.print(f"{running.how} already serves the runs of {home}: open {running.ui_url}", markup=False,
                      highlight=False, soft_wrap=True)
        return
    if port_taken(host, port):
        raise UsageError(f"--port {port}: {host}:{port} is taken by another program (not a Prefect server on {home}); "
                         "give another --port")
    api = f"http://{host}:{port}/api"
    proc = subprocess.Popen(server_command(host, port), env=server_env(os.environ, home, host, port),
                            start_new_session=True)
    marker = home / UI_MARKER
    try:
        _serve(proc, api, marker, f"(the runs of {settings.data_dir.resolve()}, PREFECT_HOME={home}; telemetry off)")
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) is how the UI is closed: no error
        stop(proc)
        console.print("Stopped the Prefect UI; commands on this data folder start their own server again.")
    finally:
        stop(proc)
        if (read_marker(home) or {}).get("pid") == proc.pid:
            marker.unlink(missing_ok=True)


def _serve(proc: subprocess.Popen[bytes], api: str, marker: Path, what: str) -> None:
    """Wait for the server's API, mark its home, say where it is, and wait for the server to end."""
    from revbench.app.console import console
    from revbench.errors import RevbenchError, UsageError

    deadline = time.monotonic() + STARTUP_SECONDS
    while not healthy(api):
        if proc.poll() is not None:
            raise UsageError(f"the Prefect server exited ({proc.returncode}) before its API answered at {api}; "
                             "its output is above")
        if time.monotonic() > deadline:
            raise UsageError(f"the Prefect server did not answer at {api} within {STARTUP_SECONDS:.0f} s")
        time.sleep(0.5)
    marker.write_text(json.dumps({"api_url": api, "pid": proc.pid, "home": str(marker.parent)}) + "\n")
    console.print(f"Prefect UI: {api.removesuffix('/api')} {what}. revbench commands on this data folder send their runs "
                  f"here by themselves; anything else (the prefect CLI, a worker) needs PREFECT_API_URL={api}. Ctrl-C "
                  "stops it.", markup=False, highlight=False, soft_wrap=True)
    code = proc.wait()
    if code not in (0, -signal.SIGINT, -signal.SIGTERM):
        raise RevbenchError(f"the Prefect server stopped (exit {code}); its output is above")
