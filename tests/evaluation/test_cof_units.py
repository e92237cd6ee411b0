"""``cof`` fuses within the unit a split compares: fusing one factor alone must score exactly
that factor's loss and accuracy on every split (paper-centric, reviewer-centric, pointwise),
while UniPR's per-paper ranks, compared across papers, must not; each row says how it was fused."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.model import (
    PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, SPLIT_PAPER_CENTRIC, SPLIT_POINTWISE, SPLIT_REVIEWER_CENTRIC,
    TUPLES_SCHEMA, UNIT_PAPER, UNIT_REVIEWER, Benchmark, Scores, Split,
)
from revbench.evaluation.pairs import pairs_unit, split_pairs
from revbench.evaluation.report import report_tables, results_frame
from revbench.evaluation.scorers.cof import GROUP_OF, factor_columns, fuse, fusion_basis, scored_columns

REVIEWERS = [f"r{i}" for i in range(8)]
PAPERS = [f"p{i}" for i in range(10)]


def rated_world(seed: int = 3) -> tuple[Benchmark, pl.DataFrame]:
    """Eight reviewers rating six of ten papers each (levels 1-5), the three splits revbench
    builds from such ratings, and one factor's scores on every rated pair (noisy in the rating,
    on a scale that differs from paper to paper, as pooled similarities do)."""
    rng = np.random.default_rng(seed)
    rows = [(r, p, float(rng.integers(1, 6))) for r in REVIEWERS for p in rng.choice(PAPERS, 6, replace=False)]
    ratings = pl.DataFrame(rows, schema=RATINGS_SCHEMA, orient="row")
    pc, rc = [], []
    for (p,), g in ratings.group_by("paper_id", maintain_order=True):
        for a, b in zip(g.rows(), g.rows()[1:], strict=False):
            if a[2] != b[2]:
                pc.append((a[0], p, b[0], p, a[2], b[2], p))
    for (r,), g in ratings.group_by("reviewer_id", maintain_order=True):
        for a, b in zip(g.rows(), g.rows()[1:], strict=False):
            if a[2] != b[2]:
                rc.append((r, a[1], r, b[1], a[2], b[2], r))
    scale = {p: float(rng.uniform(0.2, 3.0)) for p in PAPERS}
    factor = ratings.with_columns(score=pl.struct("paper_id", "rating").map_elements(
        lambda x: scale[x["paper_id"]] * (x["rating"] + float(rng.normal(0, 1.2))), return_dtype=pl.Float64)
    ).select("reviewer_id", "paper_id", "score")
    subs = pl.DataFrame([(p, f"title {p}", f"abstract {p}", 2024) for p in PAPERS], schema=PAPERS_SCHEMA, orient="row")
    profile = pl.DataFrame([(r, f"q{r}", "t", "a", 2023) for r in REVIEWERS], schema=PROFILE_SCHEMA, orient="row")
    bench = Benchmark("units", "1", subs, [profile], [
        Split(SPLIT_POINTWISE, ratings=ratings, candidate_lists=True),
        Split(SPLIT_PAPER_CENTRIC, tuples=pl.DataFrame(pc, schema=TUPLES_SCHEMA, orient="row")),
        Split(SPLIT_REVIEWER_CENTRIC, tuples=pl.DataFrame(rc, schema=TUPLES_SCHEMA, orient="row"))])
    return bench, factor


def fused_alone(bench: Benchmark, factor: pl.DataFrame, fusion: str) -> Scores:
    """The one factor fused alone as cof fuses it: per unit for rrf and score, per paper for unipr."""
    needed = bench.pairs_needed()
    units = [UNIT_PAPER] if fusion == "unipr" else [UNIT_PAPER, UNIT_REVIEWER]
    kind = "score" if fusion == "score" else "rank"
    by_unit = {u: [fuse(scored_columns(factor_columns({"f": factor}, needed, GROUP_OF[u], kind), ("f",)), {"f": 1.0})]
               for u in units}
    return Scores(f"cof-{fusion}", by_unit[UNIT_PAPER], by_unit=by_unit, basis=fusion_basis(fusion, units))


def pairwise(rows: list, scorer: str) -> dict[tuple[str, str], float]:
    return {(r.split, r.metric): r.value for r in rows if r.scorer == scorer and r.metric in ("loss", "accuracy")}


def test_the_world_has_splits_of_both_units() -> None:
    bench, _ = rated_world()
    assert [pairs_unit(split_pairs(s)) for s in bench.splits] == [UNIT_REVIEWER, UNIT_PAPER, UNIT_REVIEWER]


@pytest.mark.parametrize("fusion", ["rrf", "score"])
def test_one_factor_fused_within_units_scores_the_factors_own_loss_on_every_split(fusion: str) -> None:
    bench, factor = rated_world()
    alone = Scores("factor", [factor])
    fused = fused_alone(bench, factor, fusion)
    rows = Evaluator(bench, n_resamples=0).evaluate_all([alone, fused])
    want, got = pairwise(rows, "factor"), pairwise(rows, f"cof-{fusion}")
    assert len(want) == 8 and got == want  # loss and accuracy: three splits and their average
    ties = {r.split: r.ties for r in rows if r.scorer == f"cof-{fusion}" and r.metric == "loss"}
    assert ties == {r.split: r.ties for r in rows if r.scorer == "factor" and r.metric == "loss"}


def test_unipr_ranks_compared_across_papers_lose_what_the_factor_knows() -> None:
    bench, factor = rated_world()
    rows = Evaluator(bench, n_resamples=0).evaluate_all([Scores("factor", [factor]), fused_alone(bench, factor, "unipr")])
    want, got = pairwise(rows, "factor"), pairwise(rows, "cof-unipr")
    assert got[(SPLIT_PAPER_CENTRIC, "loss")] == want[(SPLIT_PAPER_CENTRIC, "loss")]  # within a paper: the same order
    # within a reviewer: per-paper ranks are not the factor's order (ties and inversions appear)
    assert got[(SPLIT_REVIEWER_CENTRIC, "loss")] != want[(SPLIT_REVIEWER_CENTRIC, "loss")]


def test_every_row_says_how_it_was_fused_and_the_report_says_it_once() -> None:
    bench, factor = rated_world()
    rows = Evaluator(bench, n_resamples=0).evaluate_all([Scores("factor", [factor]), fused_alone(bench, factor, "rrf")])
    basis = {(r.split, r.metric): r.basis for r in rows if r.scorer == "cof-rrf"}
    assert basis[(SPLIT_PAPER_CENTRIC, "loss")] == "fused: reciprocal ranks within each paper's candidates"
    assert basis[(SPLIT_REVIEWER_CENTRIC, "loss")] == "fused: reciprocal ranks within each reviewer's papers"
    assert basis[(SPLIT_POINTWISE, "P_hard@5")] == "fused: reciprocal ranks within each paper's candidates"
    assert all(r.basis == "" for r in rows if r.scorer == "factor")
    notes = [n for t in report_tables(results_frame(rows)) for n in t.notes]
    assert "cof-rrf: fused: reciprocal ranks within each reviewer's papers" in notes
