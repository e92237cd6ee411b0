"""Reference vocabularies shipped as data (read with ``revbench.reference.lines``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def lines(name: str) -> tuple[str, ...]:
    """The non-comment, non-empty lines of a reference file in this folder."""
    return tuple(s for line in (ROOT / name).read_text().splitlines() if (s := line.strip()) and not s.startswith("#"))


def arxiv_categories() -> frozenset[str]:
    """Every arXiv category identifier (``cs.CL``, ``hep-th``, ...)."""
    return frozenset(lines("arxiv_categories.txt"))
