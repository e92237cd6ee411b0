"""Benchmark kinds: each kind's loader is registered by name, as the scorers are."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from revbench.errors import InputError
from revbench.evaluation.model import Benchmark

Loader = Callable[..., Benchmark]

LOADERS: dict[str, Loader] = {}
"""Loaders by kind, filled as their modules are imported (see :func:`benchmark_kind`)."""
KIND_MODULES: dict[str, str] = {
    "goldstandard": "revbench.evaluation.importers.goldstandard",
    "lrbench": "revbench.evaluation.importers.lrbench",
    "openreview": "revbench.evaluation.importers.openreview",
    "warehouse": "revbench.evaluation.importers.warehouse",
    "release": "revbench.evaluation.importers.release",
    "weak": "revbench.evaluation.importers.weak",
}
"""Where each kind's loader lives; a module is imported only when its kind is asked for (the
warehouse kind opens DuckDB, the release kind the release schemas)."""


def benchmark_kind(kind: str) -> Callable[[Loader], Loader]:
    """Register the decorated function as the loader of ``kind`` (a key of :data:`KIND_MODULES`)."""
    def register(loader: Loader) -> Loader:
        LOADERS[kind] = loader
        return loader
    return register


def load_benchmark(kind: str, path: Path, strict: bool = False) -> Benchmark:
    """A benchmark by kind: ``goldstandard``, ``lrbench``, ``openreview``, ``warehouse``, ``release`` or ``weak``;
    ``strict`` (for the kinds a world can be built from) adds the checks a world needs."""
    if not path.exists():
        raise InputError(f"{path} does not exist")
    if kind not in KIND_MODULES:
        raise InputError(f"unknown benchmark kind {kind!r}; expected one of {sorted(KIND_MODULES)}")
    if kind not in LOADERS:
        importlib.import_module(KIND_MODULES[kind])
    return LOADERS[kind](path, strict=True) if strict else LOADERS[kind](path)
