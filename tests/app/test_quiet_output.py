"""A third-party warning stays out of a user's output, also once GX is imported, which hands
warnings to logging (``logging.captureWarnings``) and so replaces the entry point's hook;
``-v`` brings it back, and revbench's own warnings always show."""

from __future__ import annotations

import logging
import os
import signal
import warnings
from collections.abc import Iterator

import pytest

from revbench.app import entry

SITE = "/opt/venv/lib/python3.11/site-packages/ranx/metrics/precision.py"
OURS = "/work/revbench/flows/evaluate.py"


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What reaches the ``py.warnings`` logger once a tracked run captures warnings."""
    # The process's warning hooks as a fresh command has them, whatever earlier tests left: pytest
    # resets ``showwarning`` around each test, and GX, once imported, keeps warnings captured (so a
    # second captureWarnings(True) would do nothing). Both put back afterwards.
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(logging, "_warnings_showwarning", logging._warnings_showwarning)  # type: ignore[attr-defined]
    logging.captureWarnings(False)
    logger = logging.getLogger("py.warnings")
    monkeypatch.setattr(logger, "filters", list(logger.filters))
    monkeypatch.setattr(logger, "disabled", False)  # a logging.config call elsewhere may have disabled it
    level = logger.level
    logger.setLevel(logging.WARNING)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    monkeypatch.setattr(entry, "VERBOSE", [False])
    entry.quiet_third_party_warnings()
    logging.captureWarnings(True)  # as importing GX does
    try:
        yield seen
    finally:
        logging.captureWarnings(False)
        logger.removeHandler(handler)
        logger.setLevel(level)


def _warn(filename: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn_explicit("unsafe cast from uint64 to int64", UserWarning, filename, 24)


def test_a_third_party_warning_in_a_tracked_run_is_hidden_and_ours_shows(logged: list[str]) -> None:
    _warn(SITE)
    assert logged == []
    _warn(OURS)
    assert len(logged) == 1 and OURS in logged[0]


def test_verbose_brings_the_third_party_warning_back(logged: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entry, "VERBOSE", [True])
    _warn(SITE)
    assert len(logged) == 1 and "unsafe cast" in logged[0]


@pytest.fixture
def own_process() -> Iterator[None]:
    """prepare_process sets variables and signal handlers for the whole process: put them back."""
    env, handlers = dict(os.environ), {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(env)
        for s, h in handlers.items():
            signal.signal(s, h)


def test_the_temporary_prefect_server_keeps_its_retried_errors_to_itself_unless_verbose(
        settings, own_process: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_SERVER_LOGGING_LEVEL", raising=False)
    monkeypatch.setattr(entry, "VERBOSE", [False])
    entry.prepare_process(settings)
    assert os.environ["PREFECT_SERVER_LOGGING_LEVEL"] == "CRITICAL"
    monkeypatch.delenv("PREFECT_SERVER_LOGGING_LEVEL")
    monkeypatch.setattr(entry, "VERBOSE", [True])
    entry.prepare_process(settings)
    assert "PREFECT_SERVER_LOGGING_LEVEL" not in os.environ
    monkeypatch.setenv("PREFECT_SERVER_LOGGING_LEVEL", "INFO")  # the user's own choice wins
    monkeypatch.setattr(entry, "VERBOSE", [False])
    entry.prepare_process(settings)
    assert os.environ["PREFECT_SERVER_LOGGING_LEVEL"] == "INFO"


def test_gx_s_temporary_folder_note_is_hidden_though_gx_sets_its_logger_to_info(logged: list[str]) -> None:
    gx = logging.getLogger("great_expectations.data_context.types.base")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    gx.addHandler(handler)
    level = gx.level
    try:
        gx.setLevel(logging.INFO)  # what importing GX does
        gx.info("Created temporary directory '/tmp/x' for ephemeral docs site")
        gx.warning("a warning of GX's own")
    finally:
        gx.setLevel(level)
        gx.removeHandler(handler)
    assert seen == ["a warning of GX's own"]


def test_the_demo_leaves_prefects_run_lines_to_its_ui_unless_verbose(
        settings, own_process: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", raising=False)
    monkeypatch.setattr(entry, "VERBOSE", [False])
    entry.prepare_process(settings)
    assert "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL" not in os.environ  # every other command: as before
    entry.prepare_process(settings, run_lines=False)
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "ERROR"  # the console handler; the API's keeps all
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL")
    monkeypatch.setattr(entry, "VERBOSE", [True])
    entry.prepare_process(settings, run_lines=False)
    assert "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL" not in os.environ


def test_a_line_its_command_prints_is_not_logged_to_the_terminal_as_well(
        settings, own_process: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from revbench.flows.common import RUN_LOG_ONLY

    log = logging.getLogger("revbench")
    monkeypatch.setattr(log, "handlers", [])
    monkeypatch.setattr(log, "propagate", log.propagate)
    monkeypatch.setattr(log, "level", log.level)
    monkeypatch.setattr(entry, "VERBOSE", [False])
    entry.prepare_process(settings, prefect=False)
    logging.getLogger("revbench.ratings").info("survey store epoch e1: 0 new answers", extra=RUN_LOG_ONLY)
    logging.getLogger("revbench.ratings").info("a line for the terminal")
    err = capsys.readouterr().err
    assert "a line for the terminal" in err and "survey store epoch" not in err
