"""Dense scorer: cosine between a submission and each of the reviewer's papers, pooled."""

from __future__ import annotations

import polars as pl

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import Params, Pooling, Scorer, paper_text, pooled_scores, submissions_of
from revbench.ml.models import DEFAULT_MODEL


class EmbeddingParams(Params):
    model: str = DEFAULT_MODEL
    pooling: Pooling = "max"


class Embedding(Scorer):
    name = "embedding"
    params_model = EmbeddingParams

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        profile = benchmark.draws[draw]
        subs = submissions_of(benchmark, needed)
        if profile.height == 0 or subs.height == 0:
            return pl.DataFrame(schema=SCORES_SCHEMA)  # nothing to compare: every needed pair stays unscored
        cache = self.embeddings(self.params.model, benchmark)  # type: ignore[attr-defined]
        sim = cache.embed(paper_text(profile)) @ cache.embed(paper_text(subs)).T
        return pooled_scores(sim, profile, subs["paper_id"].to_list(), needed, self.params.pooling)  # type: ignore[attr-defined]
