"""Debian's chromium driven by Playwright, for the browser tests (Playwright cannot download its
own browsers here)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags chromium keeps dialling out, and this machine's closed
# network refuses each attempt.
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium() -> Iterator[Any]:
    """The launched browser; the test skips without chromium, except under ``CI=true``, where a
    skipped browser test would hide a missing install, so it fails."""
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        message = f"{CHROMIUM} is missing (apt-get install -y chromium; `make test` installs it as root)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the browser test cannot be skipped under CI: {message}")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
