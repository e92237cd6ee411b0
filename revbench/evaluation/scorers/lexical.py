"""BM25 (bm25s): each submission queries the reviewer's papers; scores pooled per reviewer."""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import Params, Pooling, Scorer, paper_text, pooled_scores, submissions_of


class Bm25Params(Params):
    pooling: Pooling = "max"
    k1: float = Field(1.5, ge=0)
    b: float = Field(0.75, ge=0, le=1)


class Bm25(Scorer):
    name = "bm25"
    params_model = Bm25Params

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        import logging

        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        p = self.params
        profile = benchmark.draws[draw]
        subs = submissions_of(benchmark, needed)
        if profile.height == 0 or subs.height == 0:
            return pl.DataFrame(schema=SCORES_SCHEMA)  # nothing to compare: every needed pair stays unscored
        retriever = bm25s.BM25(k1=p.k1, b=p.b)  # type: ignore[attr-defined]
        retriever.index(bm25s.tokenize(paper_text(profile), stopwords="en", show_progress=False), show_progress=False)
        queries = bm25s.tokenize(paper_text(subs), stopwords="en", return_ids=False, show_progress=False)
        sim = np.column_stack([retriever.get_scores(q) for q in queries]) if queries else np.zeros((profile.height, 0))
        return pooled_scores(sim, profile, subs["paper_id"].to_list(), needed, p.pooling)  # type: ignore[attr-defined]
