"""The docs' number generator (``docs/gen_numbers.py``, a script, not a package module) loaded
for the tests that check what it renders."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def gen_numbers() -> ModuleType:
    """``docs/gen_numbers.py`` as a module."""
    spec = importlib.util.spec_from_file_location("gen_numbers", ROOT / "docs" / "gen_numbers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
