"""What the disambiguate flow stores of a run's decisions, and where recent years start."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from revbench.schemas.tables import LLM_DECISIONS
from revbench.tasks.decisions import decision_frame, recent_since


def test_decisions_carry_the_run_and_time() -> None:
    when = datetime(2026, 9, 1, tzinfo=UTC)
    frame = decision_frame([{"block_key": "smith|j", "valid": True}, {"block_key": "li|x", "valid": False}], "run-1", when)
    assert frame.select("block_key", "run_id").rows() == [("smith|j", "run-1"), ("li|x", "run-1")]
    assert frame["decided_at"].to_list() == [when, when]
    assert decision_frame([], "run-1", when).schema == LLM_DECISIONS.empty().schema


def test_recent_years_count_back_from_the_newest_known() -> None:
    assert recent_since(pl.Series([2019, None, 2024]), 3, 2030) == 2022
    assert recent_since(pl.Series([None], dtype=pl.Int64), 3, 2030) == 2028
