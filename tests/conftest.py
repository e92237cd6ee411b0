"""Shared fixtures: isolated env, one Prefect test server per session, synthetic worlds, replay servers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

import httpx

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.flows.survey import survey_flow
from revbench.replay.mailsink import MailSink
from revbench.replay.server import AppServer, free_port
from revbench.survey.server import create_app
from revbench.synth.respondents import confirm, parse_email
from tests.support.common import FAST, WORLD_SINCE, WORLD_UNTIL, on_replay
from tests.support.survey import KEY, POOLS, RULES

# Prefect reads its home and server settings when first imported: isolate before any import.
_SESSION_HOME = tempfile.mkdtemp(prefix="revbench-prefect-")
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)
os.environ["PREFECT_HOME"] = _SESSION_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_SERVER_TASKS_TAG_CONCURRENCY_SLOT_WAIT_SECONDS"] = "1"  # as revbench.app.entry sets it
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

from revbench.replay.server import ReplayApp, ReplayServer  # noqa: E402
from revbench.settings import ReplaySettings, Settings  # noqa: E402
from revbench.synth.draw import WorldSpec  # noqa: E402
from revbench.synth.world import generate_world  # noqa: E402


SKIP_WHY = {
    "../shared": "the real samples (the CMU gold standard, LR-bench and recorded service answers) live in ../shared/external "
                 "beside a checkout of the project's workspace, not in the project: see tests/README.md",
    "chromium": "Debian's chromium is not installed: `make browser INSTALL_SYSTEM=yes` (root, apt-get) installs it",
    "caddy": "Debian's caddy is not installed: `make browser INSTALL_SYSTEM=yes` (root, apt-get) installs it",
}
"""Skips a fresh clone can meet, by a word of their reason, and what to do about them."""


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:  # type: ignore[name-defined]
    """One line per group of skipped tests: their reason, how many, in which folders, and what to
    do about it (a fresh clone without ../shared or without chromium skips groups, never silently)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    groups: dict[str, tuple[int, set[str]]] = {}
    for rep in skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        n, folders = groups.get(reason, (0, set()))
        groups[reason] = (n + 1, folders | {rep.nodeid.split("/")[1] if rep.nodeid.count("/") > 1 else rep.nodeid})
    terminalreporter.section("skipped, by reason")
    for reason, (n, folders) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        hint = next((why for word, why in SKIP_WHY.items() if word in reason), "")
        terminalreporter.write_line(f"{n} skipped ({', '.join(sorted(folders))}): {reason}" + (f" ({hint})" if hint else ""))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--screenshots", default=None, metavar="DIR",
                     help="where the browser test saves its screenshots (the README's come from `make screenshots`)")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own data dir and cwd (so no stray .env is read), and leaves the
    logging set-up a command-line run installs behind it."""
    for k in [k for k in os.environ if k.startswith("REVBENCH_")]:
        monkeypatch.delenv(k)
    # A command run in-process (the demo's quiet console) sets it for the process it thinks is its
    # own; undone after the test, or every later subprocess would run with Prefect's console quiet.
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", raising=False)
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


@pytest.fixture(scope="session")
def round_warehouse(tmp_path_factory: pytest.TempPathFactory, small_world: Path) -> Path:
    """A data folder holding round 1 of the small world's pools."""
    data = tmp_path_factory.mktemp("round") / "data"
    app = ReplayApp(ReplaySettings(timeout_delay_seconds=1.0, retry_after_seconds=0), world_dir=small_world)
    with ReplayServer(app) as server:
        app.base = server.base  # type: ignore[attr-defined]
        s = on_replay(Settings(data_dir=data).with_overrides(**FAST), app).with_overrides(
            pools=POOLS, disambiguate={"use_llm": False})
        ingest_flow.fn(s, date(2026, 9, 1), date(2026, 9, 20), synthetic=True)  # a SYNTHETIC world, recorded as one
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
