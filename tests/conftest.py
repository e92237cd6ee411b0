"""Shared fixtures: isolated env, one Prefect test server per session, synthetic worlds, replay servers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

# Prefect reads its home and server settings when first imported: isolate before any import.
_SESSION_HOME = tempfile.mkdtemp(prefix="revbench-prefect-")
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)
os.environ["PREFECT_HOME"] = _SESSION_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
os.environ["GX_ANALYTICS_ENABLED"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"
for _k in [k for k in os.environ if k.startswith("REVBENCH_")]:
    del os.environ[_k]

import pytest  # noqa: E402

from revbench.replay.server import ReplayApp, ReplayServer, client_env  # noqa: E402
from revbench.settings import ReplaySettings  # noqa: E402
from revbench.synth.world import WorldSpec, generate_world  # noqa: E402

FIXTURES = Path(__file__).parent / "clients" / "fixtures"
WORLD_SINCE = date(2026, 9, 1)
WORLD_UNTIL = date(2026, 9, 20)

FAST_HTTP = {
    "REVBENCH_HTTP__TIMEOUT_SECONDS": "0.5",
    "REVBENCH_GROBID__TIMEOUT_SECONDS": "0.5",
    "REVBENCH_HTTP__BACKOFF_INITIAL_SECONDS": "0.01",
    "REVBENCH_HTTP__BACKOFF_MAX_SECONDS": "0.05",
    "REVBENCH_HTTP__MAX_ATTEMPTS": "6",
    "REVBENCH_ARXIV__CATEGORIES": '["cs.AI","cs.CL","cs.CV","cs.IR","cs.LG"]',
}


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own data dir and cwd (so no stray .env is read)."""
    for k in [k for k in os.environ if k.startswith("REVBENCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REVBENCH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """One Prefect test server for the session (it takes ~20 s to start on two cores)."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SYNTHETIC world of 120 papers over 20 days (every bad-record kind included)."""
    out = tmp_path_factory.mktemp("world")
    generate_world(out, WorldSpec(n_papers=120, seed=3, start=WORLD_SINCE, end=WORLD_UNTIL, bad_share=0.02))
    return out


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ReplayApp]]:
    """Start replay servers on loopback and point every client at the latest one."""
    servers: list[ReplayServer] = []

    def start(world: Path | None = None, fixtures: Path | None = None, **kw: object) -> ReplayApp:
        as_of = kw.pop("as_of", None)
        kinds = kw.pop("fault_kinds", None)
        settings = ReplaySettings(**{"timeout_delay_seconds": 1.0, "retry_after_seconds": 0, **kw})
        app = ReplayApp(settings, world_dir=world, fixtures_dir=fixtures, as_of=as_of, fault_kinds=kinds)
        server = ReplayServer(app).start()
        servers.append(server)
        for k, v in {**client_env(server.base), **FAST_HTTP}.items():
            monkeypatch.setenv(k, v)
        app.base = server.base  # type: ignore[attr-defined]
        return app

    yield start
    for s in servers:
        s.stop()
