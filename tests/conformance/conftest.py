"""Fixtures of the conformance suite (see tests/support/conformance.py for what it is)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.conformance import serving


@pytest.fixture
def serve(tmp_path: Path) -> Callable[..., Any]:
    """``with serve(routes) as base:`` — see :func:`serving`."""
    counter = iter(range(10_000))
    return lambda routes: serving(tmp_path / f"replay-{next(counter)}", routes)
