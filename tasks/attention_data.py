"""What the reviewer-attention training learns from: weak labels (authorship or citations, as
``revbench labels`` makes them) on corpus papers that are not query papers, so no rated paper is
a training submission or sits in a training profile. Pure over polars frames and arrays; the
flow encodes the texts and trains."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from revbench.tasks.factor_pairs import seeded_order
from revbench.tasks.weak_labels import WeakLabels, weak_benchmark, weak_positives

if TYPE_CHECKING:  # the module itself imports torch: only the training asks for it
    from revbench.ml.attention import AttentionExamples

SKIP_SCHEMA = {"paper_id": pl.Utf8, "reason": pl.Utf8}


@dataclass(frozen=True)
class AttentionSet:
    """The training submissions with their labelled candidates, the candidates' profiles, and the
    training papers left out with a reason."""

    weak: WeakLabels
    skipped: pl.DataFrame


def attention_set(frames: dict[str, pl.DataFrame], source: str, experts: int, negatives: int, anchors: int,
                  profile_max_papers: int, seed: int) -> AttentionSet:
    """Up to ``anchors`` training submissions drawn (seeded) from the corpus papers with a weak
    positive that are not query papers; profiles hold out the training submissions and every
    query paper, and keep each reviewer's ``profile_max_papers`` most recent papers."""
    queries = frames["queries"].select("paper_id")
    corpus = frames["papers"].select("paper_id").join(queries, on="paper_id", how="anti")
    positives = weak_positives(source, corpus, frames["authorship"], frames["cites"])
    ids = pl.DataFrame({"paper_id": positives["paper_id"].unique()}, schema={"paper_id": pl.Utf8})
    drawn = seeded_order(ids, seed, "paper_id").head(anchors)["paper_id"].to_list()
    weak = weak_benchmark(source, {**frames, "queries": pl.DataFrame({"paper_id": drawn}, schema={"paper_id": pl.Utf8})},
                          experts, negatives, seed)
    profiles = (weak.profiles.join(queries, on="paper_id", how="anti")
                .sort(["reviewer_id", "year", "paper_id"], descending=[False, True, False], nulls_last=True)
                .group_by("reviewer_id", maintain_order=True).head(profile_max_papers))
    labels = weak.labels.filter(pl.col("reviewer_id").is_in(profiles["reviewer_id"].unique().implode()))
    per = labels.group_by("paper_id").agg(pl.col("label").sum().alias("pos"), pl.len().alias("n"))
    usable = per.filter((pl.col("pos") > 0) & (pl.col("pos") < pl.col("n")))["paper_id"]
    skipped = pl.DataFrame({"paper_id": sorted(set(drawn) - set(usable.to_list()))}, schema={"paper_id": pl.Utf8})
    reason = pl.when(pl.col("paper_id").is_in(per.filter(pl.col("pos") == 0)["paper_id"].implode())).then(
        pl.lit("no positive with a profile")).otherwise(pl.lit("no candidate but positives"))
    subs = weak.submissions.filter(pl.col("paper_id").is_in(usable.implode()))
    return AttentionSet(WeakLabels(subs, profiles, labels.filter(pl.col("paper_id").is_in(usable.implode())), weak.pool),
                        skipped.with_columns(reason.alias("reason")).cast(SKIP_SCHEMA))  # type: ignore[arg-type]


def examples(weak: WeakLabels, paper_vecs: np.ndarray, profile_vecs: np.ndarray) -> AttentionExamples:
    """The training arrays: ``paper_vecs`` in the order of ``weak.submissions``, ``profile_vecs``
    in the order of ``weak.profiles``'s rows."""
    from revbench.ml.attention import AttentionExamples, pad_profiles

    reviewers = weak.profiles["reviewer_id"].unique(maintain_order=True).to_list()
    rix = {r: i for i, r in enumerate(reviewers)}
    rows = weak.profiles.with_row_index("row").group_by("reviewer_id", maintain_order=True).agg("row")
    by_reviewer = {r: profile_vecs[np.asarray(idx, dtype=np.int64)] for r, idx in rows.iter_rows()}
    dim = paper_vecs.shape[1] if paper_vecs.size else profile_vecs.shape[1]
    padded, mask = pad_profiles([by_reviewer[r] for r in reviewers], dim)
    sub_ix = {p: i for i, p in enumerate(weak.submissions["paper_id"].to_list())}
    cands: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(sub_ix)
    labs: list[np.ndarray] = [np.zeros(0, dtype=np.int8)] * len(sub_ix)
    for (paper,), g in weak.labels.group_by("paper_id"):
        cands[sub_ix[paper]] = np.asarray([rix[r] for r in g["reviewer_id"].to_list()], dtype=np.int64)
        labs[sub_ix[paper]] = g["label"].to_numpy().astype(np.int8)
    return AttentionExamples(paper_vecs.astype(np.float32), padded, mask, cands, labs)
