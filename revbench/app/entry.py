"""What every entry point does once: build the settings, set third-party defaults, choose whether
a flow runs tracked by Prefect or in this process."""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
import tomllib
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from revbench.errors import UsageError, interrupt_noted, note_interrupt
from revbench.settings import Settings, check_environment, settings_error

DEMO_SINCE = date(2026, 9, 1)
DEMO_UNTIL = date(2026, 10, 31)
"""The window of the SYNTHETIC demo world."""
QUIET_LIBRARIES = ("httpx", "httpx2", "httpcore", "urllib3", "arxiv", "grobid_client", "bm25s", "sentence_transformers",
                   "openai", "faiss")


FLAGS = {
    "pools.tau": "--tau", "pools.queries_per_category": "--per-category", "arxiv.categories": "--categories",
    "disambiguate.use_llm": "--fallback", "refresh.stages": "--stages", "refresh.until": "--until",
    "runner.kind": "--runner",
}
"""Command-line flags that set a setting: their values pass the setting's own validation."""


def build_settings(**overrides: Any) -> Settings:
    """The one settings object of this process: environment and ``.env``, then ``overrides``.
    An unknown ``REVBENCH_`` variable or a value of the wrong type is one line naming it."""
    check_environment(os.environ, Path(".env"))
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise settings_error(exc) from None


def override(settings: Settings, changes: dict[str, Any]) -> Settings:
    """``settings`` with dotted changes (``{"pools.tau": 0.5}``) applied and validated like the
    settings themselves; an error names the command-line flag that set the value."""
    sections: dict[str, Any] = {}
    for dotted, value in changes.items():
        section, _, field = dotted.partition(".")
        if field:
            sections.setdefault(section, {})[field] = value
        else:
            sections[section] = value
    try:
        return settings.with_overrides(**sections)
    except ValidationError as exc:
        raise settings_error(exc, FLAGS) from None


def check_output_file(path: Path, flag: str) -> None:
    """A file the command will write: its folder exists and is writable, and it is not a folder."""
    parent = path.expanduser().resolve().parent
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give a file path")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path} is not writable")


def check_output_dir(path: Path, flag: str) -> None:
    """A folder the command will write into (created if missing): writable, or creatable."""
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file; give a folder")
    existing = next((p for p in [path, *path.resolve().parents] if p.exists()), None)
    if existing is None or not os.access(existing, os.W_OK):
        raise UsageError(f"{flag} {path} is not writable")


def prepare_process(settings: Settings) -> None:
    """Third-party defaults and logging, before anything imports Prefect or GX (they read their
    settings at import). A variable the user already set wins."""
    defaults = {
        "PREFECT_HOME": str((settings.data_dir / "prefect").resolve()),
        # The temporary Prefect server cold-starts in ~20 s on two cores; its default timeout is shorter.
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "GX_ANALYTICS_ENABLED": "false",
        # The default embedding model ships inside a package; other models are named by path or
        # by a hub name the user makes available (set HF_HUB_OFFLINE=0 to download).
        "HF_HUB_OFFLINE": "1",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    # Prefect creates its home but not the folders above it.
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM stops a command the way Ctrl-C does: the run is marked cancelled, committed
        # work is kept, and the next run resumes.
        signal.signal(signal.SIGTERM, _terminate)
        signal.signal(signal.SIGINT, _terminate)
    log = logging.getLogger("revbench")
    log.setLevel(settings.log_level.upper())
    if not log.handlers:
        from rich.console import Console
        from rich.logging import RichHandler

        # A stderr console looks up sys.stderr when it writes, so redirected streams are honoured.
        log.addHandler(RichHandler(console=Console(stderr=True), show_path=False, show_time=False, markup=False))
        log.propagate = False
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


def _terminate(signum: int, frame: Any) -> None:
    note_interrupt()
    raise KeyboardInterrupt(f"signal {signum}")


_previous_unraisable: list[Any] = [sys.unraisablehook]


def install_unraisable_hook() -> None:
    """For the console script's process only (a host such as pytest keeps its own hook)."""
    if sys.unraisablehook is not _unraisable:
        _previous_unraisable[0] = sys.unraisablehook
        sys.unraisablehook = _unraisable


def _unraisable(args: Any) -> None:
    """An interrupt raised while a C library was calling back into Python cannot propagate:
    Python would print 'Exception ignored' with a traceback and carry on. Deliver it again
    instead, so the command still stops with its one line."""
    if isinstance(args.exc_value, KeyboardInterrupt) and interrupt_noted():
        _thread.interrupt_main()
        return
    _previous_unraisable[0](args)


def prefect_api_configured() -> bool:
    """Whether a Prefect API is configured: ``PREFECT_API_URL`` in the environment, or in the
    active profile of ``$PREFECT_HOME/profiles.toml`` (read without importing Prefect)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect")).expanduser()
    try:
        profiles = tomllib.loads((home / "profiles.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    return bool(profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL"))


def resolve_track(track: bool | None, long_flow: bool) -> bool:
    """Tracked when asked (``--track``/``--no-track``), else when a Prefect API is configured,
    else for the long flows only (their temporary server's cost is small beside their work)."""
    if track is not None:
        return track
    return prefect_api_configured() or long_flow
