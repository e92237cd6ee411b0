"""The docs' generators (``docs/gen_numbers.py``, ``docs/gen_design.py``: scripts, docs/ is no
package) loaded for the tests that check what they render."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def docs_script(name: str) -> ModuleType:
    """``docs/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gen_numbers() -> ModuleType:
    """``docs/gen_numbers.py`` as a module."""
    return docs_script("gen_numbers")
