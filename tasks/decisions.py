"""What the disambiguate flow keeps of a run's block decisions, and the years its authors'
recent-paper counts start from. Pure over rows and frames; the flow writes the warehouse."""

from __future__ import annotations

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
