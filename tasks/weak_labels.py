"""Weak labels from the graph (exHarmony, ECIR 2025): a submission's relevant reviewers are its own
authors (``authorship``) or the authors of the corpus papers it cites (``citations``), among the
"experts" who wrote more than N corpus papers. Pure functions over polars frames, joins only (no
loop over pairs), so a 160k-paper corpus is labelled in seconds.

The submissions are the warehouse's query papers: those are the papers the survey rates, so weak
labels and ratings meet on the same pairs, and the query papers leave every profile (as in the
warehouse benchmark), so no author is scored for a paper that sits in their own profile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

SOURCES = ("authorship", "citations")
LABELS_SCHEMA = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "label": pl.Int8}
POSITIVE_RATING, NEGATIVE_RATING = 5.0, 1.0
"""A weak label on the survey's 1-5 scale: the ranking metrics count 4 and above relevant."""


@dataclass(frozen=True)
class WeakLabels:
    """A weak benchmark: submissions, the pool's profiles (submissions held out) and candidate lists."""

    submissions: pl.DataFrame
    profiles: pl.DataFrame
    labels: pl.DataFrame
    pool: int
    """Reviewers in the expert pool with at least one profile paper."""


MIN_AGREEMENT_POSITIVES = 30
"""Weak positives below which no agreement figure is computed: with a handful of positives a
Kendall tau or an AUC swings by tenths when one label flips (at 2 positives one pair decides
half of the AUC), so a number would say more than the data do."""


@dataclass(frozen=True)
class Agreement:
    """Weak label against survey rating on the pairs both have."""

    n_pairs: int
    n_positive: int
    kendall_tau: float | None
    auc: float | None
    min_positives: int = MIN_AGREEMENT_POSITIVES

    @property
    def too_few(self) -> bool:
        """Whether the figures were withheld: fewer weak positives than ``min_positives``."""
        return 0 < self.n_pairs and self.n_positive < self.min_positives

    def line(self) -> str:
        """One line for a curator."""
        if not self.n_pairs:
            return "agreement with the survey: no (reviewer, paper) pair has both a weak label and a kept rating"
        if self.too_few:
            return (f"agreement with the survey: not measured, {self.n_positive} weak positives among {self.n_pairs} "
                    f"rated pairs (at least {self.min_positives} needed)")
        tau = "undefined" if self.kendall_tau is None else f"{self.kendall_tau:.3f}"
        auc = "undefined" if self.auc is None else f"{self.auc:.3f}"
        return (f"agreement with the survey on {self.n_pairs} pairs ({self.n_positive} weak positives): "
                f"Kendall tau {tau}, AUC against rating >= 4 {auc}")


def expert_pool(authorship: pl.DataFrame, experts: int) -> pl.DataFrame:
    """``reviewer_id, n_papers`` of the authors with more than ``experts`` corpus papers."""
    return (authorship.group_by("reviewer_id").agg(pl.col("paper_id").n_unique().alias("n_papers"))
            .filter(pl.col("n_papers") > experts).sort("reviewer_id"))


def weak_positives(source: str, queries: pl.DataFrame, authorship: pl.DataFrame, cites: pl.DataFrame) -> pl.DataFrame:
    """``reviewer_id, paper_id``: each query paper's own authors (``authorship``), or the authors of
    the corpus papers it cites less its own authors, who could not review it (``citations``)."""
    own = queries.select("paper_id").join(authorship, on="paper_id")
    if source == "authorship":
        out = own
    elif source == "citations":
        cited = (queries.select(pl.col("paper_id").alias("citing_id")).join(cites, on="citing_id")
                 .join(authorship, left_on="cited_id", right_on="paper_id")
                 .select("reviewer_id", pl.col("citing_id").alias("paper_id")))
        out = cited.join(own, on=["reviewer_id", "paper_id"], how="anti")
    else:
        raise ValueError(f"unknown weak label source {source!r}; expected one of {SOURCES}")
    return out.select("reviewer_id", "paper_id").unique().sort("paper_id", "reviewer_id")


KEYS_AT_ONCE = 1 << 24
"""Random keys held at once while drawing negatives (16M: 128 MB)."""


def _negatives(positives: pl.DataFrame, pool: pl.Series, n: int, seed: int) -> pl.DataFrame:
    """Up to ``n`` pool reviewers per paper that are not its positives, drawn uniformly without
    replacement, the same for the same inputs and seed: each paper draws ``n`` plus its positives'
    count candidates (so ``n`` remain once positives are removed) by the smallest random keys."""
    papers = positives.group_by("paper_id").len().sort("paper_id")
    size = pool.len()
    if not papers.height or not size or n <= 0:
        return pl.DataFrame(schema={"reviewer_id": pl.Utf8, "paper_id": pl.Utf8})
    m = min(size, n + int(papers["len"].max()))
    rng = np.random.default_rng(seed)
    # The keys of a few papers at a time: the generator fills rows in order, so the keys (and the
    # draw) are those of one papers x pool matrix, which at 160k papers' pool would take gigabytes.
    rows_at_once = max(1, KEYS_AT_ONCE // size)
    picked_parts, key_parts = [], []
    for start in range(0, papers.height, rows_at_once):
        keys = rng.random((min(rows_at_once, papers.height - start), size))
        picked = np.argpartition(keys, m - 1, axis=1)[:, :m] if m < size else np.tile(np.arange(size), (len(keys), 1))
        picked_parts.append(picked)
        key_parts.append(np.take_along_axis(keys, picked, axis=1))
    picked, chosen = np.vstack(picked_parts), np.vstack(key_parts)
    drawn = pl.DataFrame({
        "paper_id": np.repeat(papers["paper_id"].to_numpy(), m),
        "reviewer_id": pool.gather(picked.ravel()),
        "key": chosen.ravel(),
    })
    return (drawn.join(positives, on=["reviewer_id", "paper_id"], how="anti").sort("paper_id", "key")
            .group_by("paper_id", maintain_order=True).head(n).select("reviewer_id", "paper_id"))


def weak_benchmark(source: str, frames: dict[str, pl.DataFrame], experts: int, negatives: int, seed: int) -> WeakLabels:
    """The weak benchmark over the warehouse's ``frames`` (see ``weak_label_frames``): the pool is
    the experts with a profile once the query papers are held out; each query paper with a weak
    positive in the pool is a submission, its candidates its positives (label 1) and ``negatives``
    sampled pool reviewers (label 0)."""
    queries, authorship, papers = frames["queries"], frames["authorship"], frames["papers"]
    pool = expert_pool(authorship, experts).select("reviewer_id")
    profiles = (authorship.join(pool, on="reviewer_id").join(queries, on="paper_id", how="anti")
                .join(papers, on="paper_id").select("reviewer_id", "paper_id", "title", "abstract", "year")
                .sort("reviewer_id", "paper_id"))
    ids = profiles["reviewer_id"].unique().sort()
    positives = weak_positives(source, queries, authorship, frames["cites"]).filter(pl.col("reviewer_id").is_in(ids))
    labels = pl.concat([positives.with_columns(label=pl.lit(1, pl.Int8)),
                        _negatives(positives, ids, negatives, seed).with_columns(label=pl.lit(0, pl.Int8))])
    subs = papers.join(positives.select("paper_id").unique(), on="paper_id").sort("paper_id")
    return WeakLabels(subs, profiles, labels.sort("paper_id", "reviewer_id").cast(LABELS_SCHEMA), ids.len())


def no_positive_hint(source: str, frames: dict[str, pl.DataFrame], experts: int, pool: int) -> str:
    """Why no query paper has a weak positive from ``source`` in a pool of ``pool`` reviewers with
    more than ``experts`` papers, and what to change: an empty pool names the most prolific
    author's count (a small world has nobody above exHarmony's 15), missing citations name
    ``revbench graph``."""
    if not pool:
        counts = frames["authorship"].group_by("reviewer_id").agg(pl.col("paper_id").n_unique().alias("n"))
        most = int(counts["n"].max() or 0) if counts.height else 0
        if most <= experts:
            lower = f"pass --experts {most - 1} or lower" if most > 1 else "pass --experts 0"
            return f"no author has more than {experts} corpus papers (the most prolific has {most}): {lower}"
        return (f"the authors with more than {experts} corpus papers have none left once the query papers are held "
                "out: lower --experts")
    if source == "citations" and not frames["cites"].height:
        return "the warehouse holds no citation between two of its papers: run `revbench graph` first"
    which = "wrote a query paper" if source == "authorship" else "wrote a paper a query paper cites"
    return f"none of the {pool} reviewers with more than {experts} corpus papers {which}: lower --experts"


def label_all_pairs(source: str, frames: dict[str, pl.DataFrame], experts: int) -> pl.DataFrame:
    """``reviewer_id, paper_id, label`` for every kept rating whose reviewer is in the expert pool
    and whose paper is a query paper: 1 where the pair is a weak positive, else 0."""
    pool = expert_pool(frames["authorship"], experts).select("reviewer_id")
    pos = weak_positives(source, frames["queries"], frames["authorship"], frames["cites"])
    return (frames["ratings"].join(pool, on="reviewer_id").join(frames["queries"], on="paper_id")
            .join(pos.with_columns(label=pl.lit(1, pl.Int8)), on=["reviewer_id", "paper_id"], how="left")
            .with_columns(pl.col("label").fill_null(0).cast(pl.Int8)).sort("reviewer_id", "paper_id"))


def agreement(pairs: pl.DataFrame, min_positives: int = MIN_AGREEMENT_POSITIVES) -> Agreement:
    """Kendall tau-b between ``label`` and ``rating`` over ``pairs``, and the AUC of the label
    against ``rating >= 4`` (sklearn's ``roc_auc_score``: the probability that a pair rated 4 or 5
    carries a higher weak label than one rated below, ties counting one half). Either is None where
    undefined: a constant label or rating (tau), or only one side of the threshold (AUC); both are
    None with fewer than ``min_positives`` weak positives (:data:`MIN_AGREEMENT_POSITIVES`)."""
    if not pairs.height:
        return Agreement(0, 0, None, None, min_positives)
    positives = int(pairs["label"].sum())
    if positives < min_positives:
        return Agreement(pairs.height, positives, None, None, min_positives)
    from scipy.stats import kendalltau
    from sklearn.metrics import roc_auc_score

    label, rating = pairs["label"].to_numpy().astype(float), pairs["rating"].to_numpy().astype(float)
    tau = float(kendalltau(label, rating).statistic)
    high = rating >= 4
    auc = float(roc_auc_score(high, label)) if 0 < high.sum() < len(high) else None
    return Agreement(pairs.height, positives, None if math.isnan(tau) else tau, auc, min_positives)
