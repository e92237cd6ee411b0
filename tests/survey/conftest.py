"""A pools round built once per session (ingest, disambiguation, pools on the small SYNTHETIC
world); each test gets its own copy of that warehouse, a survey key and a mail sink."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import httpx
import pytest

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.replay.mailsink import MailSink
from revbench.replay.server import ReplayApp, ReplayServer, free_port
from revbench.settings import ReplaySettings, Settings
from tests.conftest import FAST, on_replay, settings_env

KEY = "test-signing-key-" + "k" * 24
POOLS = {"tau": 0.5, "min_recent_papers": 1, "candidates_per_query": 3, "max_queries_per_candidate": 3,
         "queries_per_category": 3}


@pytest.fixture(scope="session")
def round_warehouse(tmp_path_factory: pytest.TempPathFactory, small_world: Path) -> Path:
    """A data folder holding round 1 of the small world's pools."""
    data = tmp_path_factory.mktemp("round") / "data"
    app = ReplayApp(ReplaySettings(timeout_delay_seconds=1.0, retry_after_seconds=0), world_dir=small_world)
    with ReplayServer(app) as server:
        app.base = server.base  # type: ignore[attr-defined]
        s = on_replay(Settings(data_dir=data).with_overrides(**FAST), app).with_overrides(
            pools=POOLS, disambiguate={"use_llm": False})
        ingest_flow.fn(s, date(2026, 9, 1), date(2026, 9, 20))
        disambiguate_flow.fn(s)
        pools_flow.fn(s, round=1)
    return data


@pytest.fixture
def sink() -> Iterator[MailSink]:
    with MailSink() as s:
        yield s


@pytest.fixture
def survey_settings(round_warehouse: Path, tmp_path: Path, sink: MailSink) -> Settings:
    """Settings on a fresh copy of the round, sending to ``sink``, approving nothing by itself."""
    data = tmp_path / "data"
    shutil.copytree(round_warehouse, data, ignore=shutil.ignore_patterns("*.run.json", "prefect"))
    return Settings(data_dir=data).with_overrides(
        **FAST, pools=POOLS, smtp=sink.smtp_overrides(),
        survey={"signing_key": KEY, "base_url": "http://127.0.0.1:9", "messages_per_minute": 60000, "team": "Test Team",
                "lab": "Test Lab", "institution": "Test University", "sender_email": "survey@test.example"})


@contextmanager
def survey_server_process(s: Settings) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``revbench survey serve`` in its own process, as a curator runs it for weeks; yields its
    base URL once it answers, and kills it (SIGKILL) on the way out."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVBENCH_")}
    env.update(settings_env(s))
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
