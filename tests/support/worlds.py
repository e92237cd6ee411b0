"""The small SYNTHETIC world the graph's tests share: one week of papers, with its graph."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from revbench.synth.draw import WorldSpec
from revbench.synth.world import generate_world

START, END = date(2026, 9, 1), date(2026, 9, 8)
"""The week the world's papers were submitted in (what an ingest of it crawls)."""


def week_world(out: Path, n_papers: int = 40, seed: int = 5) -> Path:
    """Generate the world into ``out`` (papers, PDFs, S2 records and the graph) and return it."""
    generate_world(out, WorldSpec(n_papers=n_papers, seed=seed, start=START, end=END))
    return out
