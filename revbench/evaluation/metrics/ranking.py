"""Ranking metrics over per-paper candidate lists (ranx), plus WKTD@k.

For a paper q with rated candidates and predicted scores, ranked by score:

    P@k      = |relevant in top k| / k
    Recall@k = |relevant in top k| / |relevant|
    MRR@k    = 1 / rank of the first relevant candidate within the top k (0 if none)
    NDCG@k   = DCG@k / IDCG@k with DCG@k = sum_i g_i / log2(i + 1), gains g = rating - 1 (linear, as trec_eval)
    WKTD@k   = the weighted Kendall-tau loss (see ``loss``) over pairs of candidates of q
               whose higher-rated member is ranked in the top k by the scorer

"Hard" labels count a candidate relevant when its rating is at least ``hard_threshold``
(default 4), "soft" labels at least ``soft_threshold`` (default 3). Every value is the mean
over the reference query set: all papers with at least one relevant candidate, a paper the
scorer left without scores counting as 0, as ir_measures and ranx do.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from revbench.evaluation.metrics.loss import costs

CUTOFFS = (5, 10)


def _ranx_means(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], metrics: list[str]) -> dict[str, float]:
    from ranx import Qrels, Run, evaluate

    if not qrels or not run:
        # No relevant candidate anywhere, or no score at all: the metric is undefined (never 0,
        # which would rank a scorer that said nothing).
        return {m: float("nan") for m in metrics}
    out = evaluate(Qrels(qrels), Run(run), metrics, make_comparable=True)
    return {metrics[0]: float(out)} if isinstance(out, float) else {k: float(v) for k, v in out.items()}


def ranking_metrics(
    ratings: pl.DataFrame,
    scores: pl.DataFrame,
    cutoffs: tuple[int, ...] = CUTOFFS,
    hard_threshold: float = 4,
    soft_threshold: float = 3,
) -> dict[str, tuple[float, int]]:
    """``{metric@k: (value, n_queries)}`` for papers (queries) and their rated reviewers."""
    # Sorted by id so that tied scores break by reviewer id, never by the order of the labels
    # (a constant scorer must not inherit the raters' order).
    joined = ratings.join(scores, on=["reviewer_id", "paper_id"], how="left").sort("paper_id", "reviewer_id")
    run: dict[str, dict[str, float]] = {}
    for r, p, s in joined.select("reviewer_id", "paper_id", "score").iter_rows():
        if s is not None:
            run.setdefault(p, {})[r] = float(s)
    out: dict[str, tuple[float, int]] = {}
    for label, threshold in (("hard", hard_threshold), ("soft", soft_threshold)):
        qrels: dict[str, dict[str, int]] = {}
        for r, p, rating in ratings.select("reviewer_id", "paper_id", "rating").iter_rows():
            if rating >= threshold:
                qrels.setdefault(p, {})[r] = 1
        names = [f"precision@{k}" for k in cutoffs] + [f"recall@{k}" for k in cutoffs] + [f"mrr@{k}" for k in cutoffs]
        vals = _ranx_means(qrels, run, names)
        for k in cutoffs:
            out[f"P_{label}@{k}"] = (vals[f"precision@{k}"], len(qrels))
            out[f"Recall_{label}@{k}"] = (vals[f"recall@{k}"], len(qrels))
            out[f"MRR_{label}@{k}"] = (vals[f"mrr@{k}"], len(qrels))
    graded: dict[str, dict[str, int]] = {}
    for r, p, rating in ratings.select("reviewer_id", "paper_id", "rating").iter_rows():
        if rating > 1:
            graded.setdefault(p, {})[r] = int(round(rating - 1))
    vals = _ranx_means(graded, run, [f"ndcg@{k}" for k in cutoffs])
    for k in cutoffs:
        out[f"NDCG@{k}"] = (vals[f"ndcg@{k}"], len(graded))
        out[f"WKTD@{k}"] = (wktd_at_k(joined, k), joined["paper_id"].n_unique())
    return out


def wktd_at_k(joined: pl.DataFrame, k: int) -> float:
    """Mean over papers of the weighted Kendall-tau loss restricted to pairs whose
    higher-rated candidate the scorer ranks in its top k."""
    values = []
    for _paper, group in joined.group_by("paper_id", maintain_order=True):
        g = group.filter(pl.col("score").is_not_null())
        if g.height < 2:
            continue
        score = g["score"].to_numpy()
        rating = g["rating"].to_numpy()
        order = np.argsort(-score, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        a, b = np.where(rating[:, None] > rating[None, :])
        keep = rank[a] < k
        if not keep.any():
            continue
        w = (rating[a] - rating[b])[keep]
        d = (score[a] - score[b])[keep]
        values.append(float(costs(w, d).sum() / w.sum()))
    return float(np.mean(values)) if values else float("nan")


def ranked_candidates(ratings: pl.DataFrame, scores: pl.DataFrame) -> dict[str, list[str]]:
    """Each paper's rated candidates that the scorer scored, best first (tied scores by reviewer
    id, as :func:`ranking_metrics` breaks them); a paper without any scored candidate is left out."""
    s = scores.select("reviewer_id", "paper_id", "score").unique(subset=["reviewer_id", "paper_id"], keep="first")
    joined = (ratings.select("reviewer_id", "paper_id").unique()
              .join(s, on=["reviewer_id", "paper_id"], how="inner")
              .filter(pl.col("score").is_not_null() & ~pl.col("score").is_nan())
              .sort(["paper_id", "score", "reviewer_id"], descending=[False, True, False]))
    out: dict[str, list[str]] = {}
    for r, p in joined.select("reviewer_id", "paper_id").iter_rows():
        out.setdefault(p, []).append(r)
    return out
