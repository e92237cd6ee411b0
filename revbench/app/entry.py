"""What every entry point does once: build the settings, set third-party defaults, choose whether
a flow runs tracked by Prefect or in this process."""

from __future__ import annotations

import logging
import os
import tomllib
from datetime import date
from pathlib import Path
from typing import Any

from revbench.settings import Settings

DEMO_SINCE = date(2026, 9, 1)
DEMO_UNTIL = date(2026, 10, 31)
"""The window of the SYNTHETIC demo world."""
QUIET_LIBRARIES = ("httpx", "httpx2", "httpcore", "urllib3", "arxiv", "grobid_client", "bm25s", "sentence_transformers",
                   "openai", "faiss")


def build_settings(**overrides: Any) -> Settings:
    """The one settings object of this process: environment and ``.env``, then ``overrides``."""
    return Settings(**overrides)


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
    log = logging.getLogger("revbench")
    log.setLevel(settings.log_level.upper())
    if not log.handlers:
        from rich.logging import RichHandler

        log.addHandler(RichHandler(show_path=False, show_time=False, markup=False))
        log.propagate = False
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


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
