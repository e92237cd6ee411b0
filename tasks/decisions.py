"""What the disambiguate flow keeps of a run's block decisions, the years its authors'
recent-paper counts start from, and its block sizes as a curator reads them. Pure over rows and
frames; the flow writes the warehouse."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import polars as pl

from revbench.schemas.tables import LLM_DECISIONS


def decision_frame(decisions: list[dict[str, Any]], run_id: str, decided_at: datetime) -> pl.DataFrame:
    """The LLM decisions of a run as ``llm_decisions`` rows (an empty frame of that table when none)."""
    if not decisions:
        return LLM_DECISIONS.empty()
    return pl.DataFrame([{**r, "run_id": run_id, "decided_at": decided_at} for r in decisions], infer_schema_length=None)


def recent_since(years: pl.Series, recent_years: int, this_year: int) -> int:
    """The first year of the last ``recent_years`` before the newest of ``years`` (``this_year``
    when none is known)."""
    newest = max((y for y in years.to_list() if y is not None), default=this_year)
    return newest - recent_years + 1


def block_size_histogram(sizes: Counter[int]) -> list[dict[str, Any]]:
    """Block sizes in buckets a curator can read."""
    edges = [(1, 1), (2, 2), (3, 5), (6, 10), (11, 50), (51, 200), (201, 10**9)]
    rows = []
    for lo, hi in edges:
        n = sum(c for s, c in sizes.items() if lo <= s <= hi)
        if n:
            rows.append({"mentions_in_block": f"{lo}" if lo == hi else (f"{lo}+" if hi > 10**6 else f"{lo}-{hi}"), "blocks": n})
    return rows
