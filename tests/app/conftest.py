"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def data_dir(isolated_env: Path) -> Path:
    return isolated_env / "data"
