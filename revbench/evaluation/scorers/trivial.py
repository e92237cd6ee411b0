"""The constant scorer: every pair tied, the reference point of every metric (loss 0.5)."""

from __future__ import annotations

import polars as pl

from revbench.evaluation.model import Benchmark
from revbench.evaluation.scorers.base import Params, Scorer


class TrivialParams(Params):
    value: float = 0.0


class Trivial(Scorer):
    name = "trivial"
    params_model = TrivialParams

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        return needed.with_columns(pl.lit(self.params.value, dtype=pl.Float64).alias("score"))  # type: ignore[attr-defined]
