"""A pools round built once per session (ingest, disambiguation, pools on the small SYNTHETIC
world); each test gets its own copy of that warehouse, a survey key and a mail sink."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
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
from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import MailSink
from revbench.replay.server import AppServer, ReplayApp, ReplayServer, free_port
from revbench.settings import ReplaySettings, Settings
from revbench.survey.server import create_app
from revbench.synth.respondents import confirm, parse_email
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


RULES = {"straight_line_min_papers": 2, "variance_min_ratings": 99, "content_min_items": 99, "burst_min_papers": 99,
         "evaluate_after": False, "evaluate_scorers": ["trivial", "tpms"], "bootstrap": 50}


@pytest.fixture
def answered(survey_settings: Settings, sink: MailSink) -> Iterator[tuple[Settings, dict[str, list[str]]]]:
    """Round 1 sent and answered over HTTP: the first person with two or more papers gives 3 to
    each (straight-lining), everyone else rates by position (5, 4, 3...) and changes their first
    answer once (a duplicate); returns the settings and each straight-liner's invitation papers."""
    port = free_port()
    s = survey_settings.with_overrides(survey={"base_url": f"http://127.0.0.1:{port}"}, ratings=RULES)
    survey_flow.fn(s, round=1, approve="all", approver="tester")
    emails = [parse_email(m) for m in sink.messages]
    liner = next(i for i, e in enumerate(emails) if len(e.papers) >= 2)
    server = AppServer(create_app(s), port=port).start()
    try:
        with httpx.Client(follow_redirects=True, timeout=30) as http:
            for i, e in enumerate(emails):
                for j, (_title, links) in enumerate(e.papers):
                    if i == liner:
                        confirm(http, links[3])
                        continue
                    if j == 0:
                        confirm(http, links[1])  # answered, then changed just below
                    confirm(http, links[max(1, 5 - j)])
        yield s, {"liner": emails[liner].to, "emails": emails}
    finally:
        server.stop()


def paused_run_id(runner: threading.Thread, result: dict[str, object], timeout: float = 120) -> object:
    """The id of the flow run paused for a person's input, once it is paused (``runner`` runs the
    flow in a thread and stores its outcome in ``result``)."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline and runner.is_alive(), result
        with get_client(sync_client=True) as client:
            paused = [r for r in client.read_flow_runs() if r.state and r.state.is_paused()]
        if paused:
            return paused[0].id
        time.sleep(0.5)
