"""Survey helpers: the test key and pool settings, the survey server in its own process, a run
paused for a person."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx

from revbench.replay.server import free_port
from revbench.settings import Settings
from tests.support.common import run_cli, settings_env

KEY = "test-signing-key-" + "k" * 24


POOLS = {"tau": 0.5, "min_recent_papers": 1, "candidates_per_query": 3, "max_queries_per_candidate": 3,
         "queries_per_category": 3}


@contextmanager
def survey_server_process(s: Settings) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``revbench survey serve`` in its own process, as a curator runs it for weeks; yields its
    base URL once it answers, and kills it (SIGKILL) on the way out. Like a deployment, it gets
    none of the secrets ``s`` holds for the flows (it refuses to start with one)."""
    from revbench.survey.privilege import OWN_SECRETS, PREFECT_SECRETS, secret_settings, variable

    foreign = {variable(d) for d in secret_settings() if d not in OWN_SECRETS} | set(PREFECT_SECRETS)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVBENCH_") and k not in foreign}
    env.update({k: v for k, v in settings_env(s).items() if k not in foreign})
    proc = subprocess.Popen([sys.executable, "-m", "revbench", "survey", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None, "the survey server did not start"
                time.sleep(0.1)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)


RULES = {"straight_line_min_papers": 2, "variance_min_ratings": 99, "content_min_items": 99, "burst_min_papers": 99,
         "evaluate_after": False, "evaluate_scorers": ["trivial", "tpms"], "bootstrap": 50}


def paused_run_id(runner: threading.Thread, result: dict[str, object], timeout: float = 120,
                  besides: tuple[object, ...] = ()) -> object:
    """The id of the flow run paused for a person's input, once it is paused (``runner`` runs the
    flow in a thread and stores its outcome in ``result``; runs in ``besides`` paused before)."""
    from prefect.client.orchestration import get_client

    # Only runs made since the call (less a margin for the runner's head start): a run an earlier
    # test left paused on the session's server (it failed before answering) is not this one.
    since = datetime.now(UTC) - timedelta(seconds=5)
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline and runner.is_alive(), result
        with get_client(sync_client=True) as client:
            paused = [r for r in client.read_flow_runs() if r.state and r.state.is_paused() and r.id not in besides
                      and (r.created is None or r.created >= since)]
        if paused:
            return paused[0].id
        time.sleep(0.5)


def run_cli_env(s: Settings, *args: str) -> tuple[int, str, str]:
    import os

    saved = dict(os.environ)
    os.environ.update(settings_env(s))
    try:
        return run_cli(*args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
