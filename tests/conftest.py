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

import logging  # noqa: E402

import pytest  # noqa: E402

# A library that logs through the root logger before anything configured it (mlcroissant, absl)
# would bind a handler to the stderr of that moment, which pytest closes after the test.
logging.getLogger().addHandler(logging.NullHandler())

from revbench.replay.server import ReplayApp, ReplayServer, replay_overrides  # noqa: E402
from revbench.settings import ReplaySettings, Settings  # noqa: E402
from revbench.synth.world import WorldSpec, generate_world  # noqa: E402

FIXTURES = Path(__file__).parent / "clients" / "fixtures"
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--screenshots", default=None, metavar="DIR",
                     help="where the browser test saves its screenshots (the README's come from `make screenshots`)")


WORLD_SINCE = date(2026, 9, 1)
WORLD_UNTIL = date(2026, 9, 20)

FAST = {
    "http": {"timeout_seconds": 0.5, "backoff_initial_seconds": 0.01, "backoff_max_seconds": 0.05, "max_attempts": 6},
    "grobid": {"timeout_seconds": 0.5},
    "arxiv": {"categories": ["cs.AI", "cs.CL", "cs.CV", "cs.IR", "cs.LG"]},
}


def on_replay(settings: Settings, app: ReplayApp) -> Settings:
    """``settings`` with every client pointed at the replay server ``app`` (fast timeouts)."""
    overrides = replay_overrides(app.base)  # type: ignore[attr-defined]
    for section, values in FAST.items():
        overrides[section] = {**overrides.get(section, {}), **values}
    return settings.with_overrides(**overrides)


def run_cli(*args: str) -> tuple[int, str, str]:
    """The command line in this process: (exit code, stdout, stderr), as a user sees them."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from revbench.app.cli import run

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = run(list(args))
    return code, out.getvalue(), err.getvalue()


def settings_env(settings: Settings) -> dict[str, str]:
    """``settings`` as the REVBENCH_ variables a command-line process would read them from."""
    import json

    from pydantic import SecretStr

    out: dict[str, str] = {}
    for name, value in settings.model_dump().items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, v in items:
            key = f"REVBENCH_{name.upper()}" + (f"__{sub.upper()}" if sub else "")
            if v is None:
                continue
            if isinstance(v, SecretStr):
                v = v.get_secret_value()
            out[key] = json.dumps(v) if isinstance(v, (list, dict, bool)) else str(v)
    return out


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own data dir and cwd (so no stray .env is read), and leaves the
    logging set-up a command-line run installs behind it."""
    for k in [k for k in os.environ if k.startswith("REVBENCH_")]:
        monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REVBENCH_DATA_DIR", str(tmp_path / "data"))
    import logging

    log = logging.getLogger("revbench")
    handlers, level, propagate = list(log.handlers), log.level, log.propagate
    yield tmp_path
    log.handlers, log.level, log.propagate = handlers, level, propagate


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The settings a test hands to flows: its own data dir, fast HTTP, no environment."""
    return Settings(data_dir=tmp_path / "data").with_overrides(**FAST)


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
def replay() -> Iterator[Callable[..., ReplayApp]]:
    """Start replay servers on loopback (``on_replay`` points settings at one)."""
    servers: list[ReplayServer] = []

    def start(world: Path | None = None, fixtures: Path | None = None, **kw: object) -> ReplayApp:
        as_of = kw.pop("as_of", None)
        kinds = kw.pop("fault_kinds", None)
        settings = ReplaySettings(**{"timeout_delay_seconds": 1.0, "retry_after_seconds": 0, **kw})
        app = ReplayApp(settings, world_dir=world, fixtures_dir=fixtures, as_of=as_of, fault_kinds=kinds)
        server = ReplayServer(app).start()
        servers.append(server)
        app.base = server.base  # type: ignore[attr-defined]
        return app

    yield start
    for s in servers:
        s.stop()
