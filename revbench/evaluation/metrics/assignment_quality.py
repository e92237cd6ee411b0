"""How good an assignment is, read off the ratings of the pairs it assigned.

Over the papers ``P`` of the instance, with ``A_p`` the reviewers assigned to ``p`` and
``K_p ⊆ A_p`` those whose rating of ``p`` is known (rated by them)::

    assigned_rating     = sum_p sum_{r in K_p} rating_rp / sum_p |K_p|
    papers_with_expert  = |{p : some r in K_p has rating_rp >= h}| / |P|
    worst_paper_best    = min over p with K_p non-empty of max_{r in K_p} rating_rp
    known_share         = sum_p |K_p| / sum_p |A_p|

``h`` is the top two levels of the scale (4 on 1-5). Over a paper's rated candidates every
assigned pair is known (``known_share`` = 1); over a whole reviewer pool the unrated pairs are
unknown, and the first three numbers rest on the known ones only (``known_share`` says how many).
Intervals: papers resampled with replacement (:mod:`revbench.evaluation.metrics.bootstrap`),
the same draws for every scorer so differences are paired; the assignment itself is held fixed
(solving it again per replicate would measure the solver's sensitivity, not the scorer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from revbench.evaluation.metrics import bootstrap

METRICS: tuple[str, ...] = ("assigned_rating", "papers_with_expert", "worst_paper_best", "known_share")


@dataclass(frozen=True)
class PaperTotals:
    """Per paper (in the instance's paper order): known ratings' sum and count, assigned count,
    whether an expert was assigned, the best known rating (NaN: none known)."""

    rating_sum: np.ndarray
    known: np.ndarray
    assigned: np.ndarray
    expert: np.ndarray
    best: np.ndarray


def paper_totals(assigned: pl.DataFrame, ratings: pl.DataFrame, papers: list[str], expert_at: float) -> PaperTotals:
    """:class:`PaperTotals` of ``assigned`` (``reviewer_id, paper_id``) against ``ratings``
    (``reviewer_id, paper_id, rating``), one entry per paper of ``papers``."""
    rated = ratings.select("reviewer_id", "paper_id", pl.col("rating").cast(pl.Float64)).unique(["reviewer_id", "paper_id"])
    joined = assigned.select("reviewer_id", "paper_id").join(rated, on=["reviewer_id", "paper_id"], how="left")
    per = joined.group_by("paper_id").agg(
        rating_sum=pl.col("rating").sum(), known=pl.col("rating").is_not_null().sum(), assigned=pl.len(),
        expert=(pl.col("rating") >= expert_at).any(), best=pl.col("rating").max())
    order = pl.DataFrame({"paper_id": papers}, schema={"paper_id": pl.Utf8})
    full = order.join(per, on="paper_id", how="left")
    return PaperTotals(full["rating_sum"].fill_null(0.0).to_numpy().astype(float),
                       full["known"].fill_null(0).to_numpy().astype(float),
                       full["assigned"].fill_null(0).to_numpy().astype(float),
                       full["expert"].fill_null(False).to_numpy().astype(float),
                       full["best"].cast(pl.Float64).fill_null(float("nan")).to_numpy())


def values(t: PaperTotals, counts: np.ndarray) -> dict[str, tuple[float | None, np.ndarray]]:
    """Each metric's value and its replicates under ``counts`` (replicates x papers)."""
    one = np.ones((1, len(t.known)))
    out: dict[str, tuple[float | None, np.ndarray]] = {}
    for name, num, den in (("assigned_rating", t.rating_sum, t.known),
                           ("papers_with_expert", t.expert, np.ones_like(t.expert)),
                           ("known_share", t.known, t.assigned)):
        point = bootstrap.replicates(num[None, :], den[None, :], one)[0]
        reps = bootstrap.replicates(num[None, :], den[None, :], counts) if counts.size else np.zeros(0)
        out[name] = (None if np.isnan(point) else float(point), reps)
    best = np.where(np.isnan(t.best), np.inf, t.best)
    worst = float(best.min()) if np.isfinite(best).any() else None
    if counts.size:
        drawn = np.where(counts > 0, best[None, :], np.inf).min(axis=1)
        reps = np.where(np.isfinite(drawn), drawn, np.nan)
    else:
        reps = np.zeros(0)
    out["worst_paper_best"] = (worst, reps)
    return out
