"""Servers the tests start as processes of their own (a `prefect server start`, a Dask
scheduler and its workers): a clean environment, a wait that names what it waited for, and a
stop that takes the whole process group with it."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from revbench.workers import stop_group


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A child's environment: nothing of the developer's Prefect or revbench set-up, its own Prefect home."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "HF_HUB_OFFLINE": "1", "GX_ANALYTICS_ENABLED": "false", **extra}


def wait_for(what: str, check: Callable[[], Any], timeout: float, alive: subprocess.Popen[Any] | None = None,
             log: Path | None = None) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` (with the log of
    ``alive`` if that process died meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        if alive is not None and alive.poll() is not None:
            pytest.fail(f"the process exited ({alive.returncode}) while waiting for {what}:\n"
                        + (log.read_text() if log else ""))
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout:.0f} s" + (f":\n{log.read_text()}" if log else ""))
        time.sleep(0.5)


@contextmanager
def prefect_server_process(command: list[str], env: dict[str, str], home: Path, port: int,
                           what: str = "Prefect server") -> Iterator[str]:
    """Run ``command`` (a `prefect server start` on ``port``) in ``home`` until the block ends;
    yields its API root once ``/api/health`` answers (a cold start with its database migrations
    takes about 20 s on two cores)."""
    log = home / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"

    def healthy() -> bool:
        try:
            return httpx.get(f"{api}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(what, healthy, 150, alive=proc, log=log)
        yield api
    finally:
        stop_group(proc)
