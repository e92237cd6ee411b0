"""Fixtures of the rebuild tests: the real benchmark samples beside the project (see
``tests/support/rebuild.py``), a hand-written LR-bench folder and the data folder of in-process commands."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import rebuild as helpers


@pytest.fixture(scope="session")
def external() -> Path:
    """``../shared/external``: the tests that read it skip without it, except under CI=true,
    where a rebuild check that skips would prove nothing."""
    if not helpers.EXTERNAL.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{helpers.EXTERNAL} is missing under CI=true")
        pytest.skip("../shared/external is not beside the project")
    return helpers.EXTERNAL


@pytest.fixture
def tiny_lrbench(tmp_path: Path) -> Path:
    """The hand-written LR-bench folder of :func:`tests.support.rebuild.tiny_items`."""
    return helpers.write_lrbench(tmp_path / "tiny-lrbench")


@pytest.fixture
def data_dir(isolated_env: Path) -> Path:
    """The data folder a command run in this process uses (REVBENCH_DATA_DIR, under tmp_path)."""
    return isolated_env / "data"
