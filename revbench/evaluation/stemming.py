"""NLTK's Porter stemmer (in its default NLTK_EXTENSIONS mode, as the gold-standard TPMS uses it),
loaded without running ``nltk/__init__.py``.

``import nltk`` imports scikit-learn and scipy.stats on the way and costs about 1.9 s; the
stemmer module itself needs three small siblings and loads in about 20 ms. Other stemmers
(Snowball's "porter", PyStemmer) implement the original algorithm and stem some words
differently, which would move TPMS scores away from the reference.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from functools import lru_cache
from typing import Any


def _load_porter_module() -> Any:
    if "nltk" in sys.modules:  # the real package is already loaded: nothing to save
        return importlib.import_module("nltk.stem.porter")
    spec = importlib.util.find_spec("nltk")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("TPMS needs nltk (pip install nltk)")
    root = list(spec.submodule_search_locations)[0]
    # Bare package objects stand in for nltk and nltk.stem while the stemmer loads, then are
    # removed, so a later ``import nltk`` runs the real package (reusing these submodules).
    stand_ins = {"nltk": root, "nltk.stem": f"{root}/stem"}
    for name, path in stand_ins.items():
        pkg = types.ModuleType(name)
        pkg.__path__ = [path]
        sys.modules[name] = pkg
    try:
        return importlib.import_module("nltk.stem.porter")
    finally:
        for name in stand_ins:
            sys.modules.pop(name, None)


@lru_cache(maxsize=1)
def porter_stemmer() -> Any:
    """One ``nltk.stem.porter.PorterStemmer()`` per process."""
    return _load_porter_module().PorterStemmer()


@lru_cache(maxsize=None)
def stem(word: str) -> str:
    """The Porter stem of ``word`` (memoised: TPMS stems the same words over and over)."""
    return porter_stemmer().stem(word)
