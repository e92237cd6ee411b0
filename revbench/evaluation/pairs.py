"""Pairs of (reviewer, paper) judgements with known order: what every pairwise metric reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from revbench.evaluation.model import UNIT_ALL, UNIT_PAPER, UNIT_REVIEWER, Split


def split_pairs(split: Split) -> pl.DataFrame:
    """Ordered pairs of a split: ``reviewer_a, paper_a, rating_a, reviewer_b, paper_b, rating_b,
    cluster`` with ``rating_a > rating_b`` (equal ratings carry no order and are dropped).

    Pointwise ratings pair every two papers rated by the same reviewer (the gold standard's
    construction); tuples are taken as they are, oriented so that ``a`` is the higher-rated side.
    """
    cols = ["reviewer_a", "paper_a", "rating_a", "reviewer_b", "paper_b", "rating_b", "cluster"]
    parts = []
    if split.ratings is not None and split.ratings.height:
        r = split.ratings
        j = r.join(r, on="reviewer_id", suffix="_b").filter(pl.col("rating") > pl.col("rating_b"))
        parts.append(
            j.select(
                pl.col("reviewer_id").alias("reviewer_a"), pl.col("paper_id").alias("paper_a"),
                pl.col("rating").alias("rating_a"), pl.col("reviewer_id").alias("reviewer_b"),
                pl.col("paper_id_b").alias("paper_b"), pl.col("rating_b"), pl.col("reviewer_id").alias("cluster"),
            )
        )
    if split.tuples is not None and split.tuples.height:
        t = split.tuples.filter(pl.col("rating_pos") != pl.col("rating_neg"))
        hi = pl.col("rating_pos") > pl.col("rating_neg")
        parts.append(
            t.select(
                pl.when(hi).then(pl.col("reviewer_pos")).otherwise(pl.col("reviewer_neg")).alias("reviewer_a"),
                pl.when(hi).then(pl.col("paper_pos")).otherwise(pl.col("paper_neg")).alias("paper_a"),
                pl.max_horizontal("rating_pos", "rating_neg").alias("rating_a"),
                pl.when(hi).then(pl.col("reviewer_neg")).otherwise(pl.col("reviewer_pos")).alias("reviewer_b"),
                pl.when(hi).then(pl.col("paper_neg")).otherwise(pl.col("paper_pos")).alias("paper_b"),
                pl.min_horizontal("rating_pos", "rating_neg").alias("rating_b"),
                pl.col("cluster"),
            )
        )
    if not parts:
        return pl.DataFrame(schema={c: (pl.Float64 if c.startswith("rating") else pl.Utf8) for c in cols})
    return pl.concat(parts).select(cols)


def pairs_unit(pairs: pl.DataFrame) -> str:
    """What every ordered pair of a split holds fixed (:data:`revbench.evaluation.model.UNITS`):
    ``reviewer`` when both sides share the reviewer (checked first: a pair of one reviewer on one
    paper cannot be ordered), ``paper`` when they share the paper, ``all`` otherwise (or with no
    pairs)."""
    if pairs.height == 0:
        return UNIT_ALL
    if (pairs["reviewer_a"] == pairs["reviewer_b"]).all():
        return UNIT_REVIEWER
    if (pairs["paper_a"] == pairs["paper_b"]).all():
        return UNIT_PAPER
    return UNIT_ALL


@dataclass
class PairArrays:
    """Numeric view of scored pairs: ``diff = score_a - score_b`` (positive means the scorer
    agrees with the raters), weights ``rating_a - rating_b``, and cluster codes for resampling."""

    rating_a: np.ndarray
    rating_b: np.ndarray
    diff: np.ndarray
    cluster: np.ndarray
    n_clusters: int
    missing: int = 0

    @property
    def weight(self) -> np.ndarray:
        return self.rating_a - self.rating_b

    def __len__(self) -> int:
        return int(self.diff.shape[0])


def score_pairs(pairs: pl.DataFrame, scores: pl.DataFrame) -> PairArrays:
    """Attach a scorer's ``reviewer_id, paper_id, score`` to pairs; pairs with a side the scorer
    did not score are left out and counted in ``missing``."""
    s = scores.select("reviewer_id", "paper_id", "score").unique(subset=["reviewer_id", "paper_id"], keep="first")
    j = (
        pairs.join(s, left_on=["reviewer_a", "paper_a"], right_on=["reviewer_id", "paper_id"], how="left")
        .rename({"score": "score_a"})
        .join(s, left_on=["reviewer_b", "paper_b"], right_on=["reviewer_id", "paper_id"], how="left")
        .rename({"score": "score_b"})
    )
    complete = j.filter(pl.col("score_a").is_not_null() & pl.col("score_b").is_not_null())
    codes = complete["cluster"].cast(pl.Categorical).to_physical().to_numpy() if complete.height else np.zeros(0, dtype=np.int64)
    clusters = complete["cluster"].unique().len() if complete.height else 0
    # Re-code clusters densely so bootstrap arrays stay small.
    if complete.height:
        _, codes = np.unique(codes, return_inverse=True)
    return PairArrays(
        rating_a=complete["rating_a"].to_numpy().astype(float),
        rating_b=complete["rating_b"].to_numpy().astype(float),
        diff=(complete["score_a"] - complete["score_b"]).to_numpy().astype(float),
        cluster=np.asarray(codes, dtype=np.int64),
        n_clusters=int(clusters),
        missing=j.height - complete.height,
    )
