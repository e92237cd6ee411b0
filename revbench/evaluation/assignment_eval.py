"""Each scorer judged by the assignment it yields (``revbench evaluate --assignment``).

Two instances per benchmark:

- ``assignment:candidates``: each paper's rated candidates, the only pairs whose expertise is
  known, so every assigned pair has a rating (:func:`rated_pairs`: the warehouse's pointwise
  ratings, the gold standard's, the pairs LR-bench's tuples rate).
- ``assignment:pool``: where the benchmark has a reviewer pool (the warehouse), every eligible
  (reviewer, paper) of it, conflicts left out; an assigned pair nobody rated is unknown, and
  ``known_share`` says how much of the assignment the other numbers rest on.

The solver is :mod:`revbench.evaluation.assignment`, the numbers
:mod:`revbench.evaluation.metrics.assignment_quality`. A benchmark with several profile draws
(the gold standard's ten) is assigned once per draw and its numbers averaged over draws.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from revbench.evaluation.assignment import Objective, solve
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.metrics.assignment_quality import METRICS, paper_totals, values
from revbench.evaluation.model import (SPLIT_ASSIGNMENT_CANDIDATES, SPLIT_ASSIGNMENT_POOL, Benchmark, MetricValue, Scores,
                                       Split, difference_name)

CANDIDATES, POOL = SPLIT_ASSIGNMENT_CANDIDATES, SPLIT_ASSIGNMENT_POOL
POOL_SPLIT = "assignment_pool"
"""The split of a benchmark's copy whose (unrated) pairs are the pool the scorers score."""


@dataclass(frozen=True)
class AssignmentSetup:
    """What a program chair sets: reviewers per paper, most papers per reviewer, the objective."""

    per_paper: int = 3
    max_load: int = 6
    objective: Objective = "sum"

    @property
    def basis(self) -> str:
        """What every row of this setup stands on (printed with it)."""
        return f"k={self.per_paper} per paper, load<={self.max_load}, objective={self.objective}"


def rated_pairs(benchmark: Benchmark) -> pl.DataFrame | None:
    """Each paper's rated candidates with their ratings (``reviewer_id, paper_id, rating``): the
    split of per-paper candidate lists where there is one (the warehouse's), else any rated split
    (the gold standard's, where a reviewer rated the papers they chose), else the pairs the tuples
    rate (LR-bench's, a pair rated in several tuples by its mean); None: nothing is rated."""
    rated = [s for s in benchmark.splits if s.ratings is not None and s.ratings.height]
    split = next((s for s in rated if s.candidate_lists), rated[0] if rated else None)
    if split is not None and split.ratings is not None:
        return split.ratings.select("reviewer_id", "paper_id", "rating").drop_nulls("rating")
    parts = [t.select(pl.col(f"reviewer_{side}").alias("reviewer_id"), pl.col(f"paper_{side}").alias("paper_id"),
                      pl.col(f"rating_{side}").alias("rating"))
             for s in benchmark.splits if s.tuples is not None for t in [s.tuples] for side in ("pos", "neg")]
    if not parts:
        return None
    return (pl.concat(parts).drop_nulls("rating").group_by("reviewer_id", "paper_id").agg(pl.col("rating").mean())
            .sort("paper_id", "reviewer_id"))


def pool_benchmark(benchmark: Benchmark) -> Benchmark | None:
    """A copy of ``benchmark`` whose only split holds its pool's pairs, unrated, for the scorers
    to score (None where the benchmark has no pool)."""
    if benchmark.pool is None or benchmark.pool.height == 0:
        return None
    pairs = benchmark.pool.select("reviewer_id", "paper_id").with_columns(rating=pl.lit(None, dtype=pl.Float64))
    return replace(benchmark, splits=[Split(POOL_SPLIT, ratings=pairs)])


def forced(pairs: pl.DataFrame, setup: AssignmentSetup) -> bool:
    """Whether every candidate pair is assigned whatever the scores: no paper has more than ``k``
    candidates and no reviewer more than the maximum load."""
    if pairs.height == 0:
        return True
    per_paper = int(pairs.group_by("paper_id").len()["len"].max() or 0)
    per_reviewer = int(pairs.group_by("reviewer_id").len()["len"].max() or 0)
    return per_paper <= setup.per_paper and per_reviewer <= setup.max_load


def _affinities(pairs: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    return pairs.select("reviewer_id", "paper_id").join(
        scores.select("reviewer_id", "paper_id", pl.col("score").alias("affinity")), on=["reviewer_id", "paper_id"], how="left")


def _per_scorer(pairs: pl.DataFrame, ratings: pl.DataFrame, runs: list[Scores], setup: AssignmentSetup, expert_at: float,
                counts: np.ndarray, n_draws: int) -> dict[str, dict[str, tuple[float | None, np.ndarray]]]:
    papers = pairs["paper_id"].unique().sort().to_list()  # the solver's paper order (instance())
    out: dict[str, dict[str, tuple[float | None, np.ndarray]]] = {}
    for s in runs:
        per_draw = []
        for d in range(n_draws):
            own = s.for_unit("paper")
            assigned = solve(_affinities(pairs, own[min(d, len(own) - 1)]), setup.per_paper, setup.max_load, setup.objective)
            per_draw.append(values(paper_totals(assigned, ratings, papers, expert_at), counts))
        merged: dict[str, tuple[float | None, np.ndarray]] = {}
        for m in METRICS:
            points = [v[m][0] for v in per_draw if v[m][0] is not None]
            with warnings.catch_warnings():
                # a replicate no draw could measure (no known rating drawn) stays NaN; interval() drops it
                warnings.simplefilter("ignore", RuntimeWarning)
                reps = np.nanmean(np.vstack([v[m][1] for v in per_draw]), axis=0) if counts.size else np.zeros(0)
            merged[m] = (float(np.mean(points)) if points else None, reps)
        out[s.scorer] = merged
    return out


def assignment_rows(benchmark: Benchmark, runs: list[Scores], setup: AssignmentSetup, baseline: Scores | None,
                    n_resamples: int, seed: int, pool_runs: list[Scores] | None = None) -> list[MetricValue]:
    """Every scorer's assignment quality on ``benchmark`` (see the module), with intervals over
    papers and paired differences to ``baseline``; ``pool_runs``: the scorers' scores of
    :func:`pool_benchmark`'s pairs, for the pool instance."""
    rated = rated_pairs(benchmark)
    if rated is None or rated.height == 0:
        return []
    lo, hi = benchmark.scale
    expert_at = hi - (hi - lo) / 4  # the top two levels: 4 on 1-5
    n_draws = max(1, len(benchmark.draws))
    rows: list[MetricValue] = []
    ratings = rated
    instances = [(CANDIDATES, ratings.select("reviewer_id", "paper_id"), runs)]
    if pool_runs and benchmark.pool is not None:
        instances.append((POOL, benchmark.pool.select("reviewer_id", "paper_id"), pool_runs))
    for name, pairs, these in instances:
        n_papers = pairs["paper_id"].n_unique()
        basis = setup.basis + ("; forced: every candidate fits, so every scorer gets the same assignment"
                               if forced(pairs, setup) else "")
        counts = bootstrap.replicate_counts(n_papers, n_resamples, seed)
        got = _per_scorer(pairs, ratings, these, setup, expert_at, counts, n_draws)
        specs = {s.scorer: s.spec for s in these}
        for s in these:
            for m in METRICS:
                value, reps = got[s.scorer][m]
                lo_ci, hi_ci = bootstrap.interval(reps) if reps.size else (None, None)
                rows.append(MetricValue(benchmark.name, name, s.scorer, m, value, lo_ci, hi_ci, n_papers, s.spec,
                                        basis=basis))
        base = next((s for s in these if baseline is not None and s.scorer == baseline.scorer), None)
        if base is None:
            continue
        for s in these:
            if s.scorer == base.scorer:
                continue
            for m in METRICS:
                (v, reps), (bv, breps) = got[s.scorer][m], got[base.scorer][m]
                lo_ci, hi_ci = bootstrap.interval(reps - breps) if reps.size else (None, None)
                rows.append(MetricValue(benchmark.name, name, difference_name(s.scorer, base.scorer), m,
                                        None if v is None or bv is None else v - bv, lo_ci, hi_ci, n_papers,
                                        difference_name(specs[s.scorer], specs[base.scorer]), basis=basis,
                                        baseline=base.scorer))
    return rows
