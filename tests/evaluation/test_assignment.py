"""The assignment solver against brute force, its objectives, and the quality read off ratings."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.assignment import rescaled, solve
from revbench.evaluation.assignment_eval import AssignmentSetup, assignment_rows
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.metrics.assignment_quality import paper_totals, values
from revbench.evaluation.model import Benchmark, Scores, Split


def _frame(rows: list[tuple[str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["reviewer_id", "paper_id", "affinity"], orient="row")


def _objective_key(df: pl.DataFrame, chosen: list[tuple[str, str]], k: int, objective: str) -> tuple[float, ...]:
    a = dict(zip(zip(df["reviewer_id"], df["paper_id"], strict=True), rescaled(df["affinity"].to_numpy()), strict=True))
    papers = sorted(set(df["paper_id"]))
    demand = {p: min(k, df.filter(pl.col("paper_id") == p).height) for p in papers}
    total = sum(a[c] for c in chosen)
    if objective == "sum":
        return (len(chosen), round(total, 9))
    fair = min(sum(a[(r, p)] for r, p in chosen if p == q) / demand[q] for q in papers)
    return (len(chosen), round(fair, 9), round(total, 9))


def _brute(df: pl.DataFrame, k: int, load: int, objective: str) -> tuple[float, ...]:
    pairs = list(zip(df["reviewer_id"], df["paper_id"], strict=True))
    papers, reviewers = set(df["paper_id"]), set(df["reviewer_id"])
    best: tuple[float, ...] | None = None
    for mask in itertools.product([0, 1], repeat=len(pairs)):
        chosen = [pr for m, pr in zip(mask, pairs, strict=True) if m]
        if any(sum(1 for _, p in chosen if p == q) > min(k, sum(1 for _, p in pairs if p == q)) for q in papers):
            continue
        if any(sum(1 for r, _ in chosen if r == rr) > load for rr in reviewers):
            continue
        key = _objective_key(df, chosen, k, objective)
        best = key if best is None or key > best else best
    assert best is not None
    return best


@pytest.mark.parametrize("objective", ["sum", "fair"])
def test_solver_matches_brute_force_on_small_instances(objective: str) -> None:
    rng = np.random.default_rng(7)
    checked = 0
    while checked < 12:
        n_rev, n_pap = int(rng.integers(2, 5)), int(rng.integers(2, 4))
        rows = [(f"r{r}", f"p{p}", float(rng.random())) for r in range(n_rev) for p in range(n_pap) if rng.random() < 0.8]
        if not rows or len(rows) > 11:
            continue
        df = _frame(rows)
        k, load = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        got = solve(df, k, load, objective)  # type: ignore[arg-type]
        chosen = list(zip(got["reviewer_id"], got["paper_id"], strict=True))
        assert _objective_key(df, chosen, k, objective) == pytest.approx(_brute(df, k, load, objective), abs=1e-6)
        checked += 1


def test_fair_objective_lifts_the_worst_off_paper() -> None:
    # One strong reviewer both papers want; load 1. sum gives r1 to p1 (0.9 + 0.1 = 1.0 against
    # 0.5 + 0.45 = 0.95); fair gives p2 r1 and p1 r2 (worst paper 0.45 against 0.1).
    df = _frame([("r1", "p1", 0.9), ("r1", "p2", 0.5), ("r2", "p1", 0.45), ("r2", "p2", 0.1)])
    by_sum = set(solve(df, 1, 1, "sum").select("reviewer_id", "paper_id").iter_rows())
    by_fair = set(solve(df, 1, 1, "fair").select("reviewer_id", "paper_id").iter_rows())
    assert by_sum == {("r1", "p1"), ("r2", "p2")}
    assert by_fair == {("r1", "p2"), ("r2", "p1")}


def test_loads_hold_and_every_paper_gets_what_it_can() -> None:
    rows = [(f"r{r}", f"p{p}", float((r * 7 + p * 3) % 10)) for r in range(4) for p in range(6)]
    got = solve(_frame(rows), 2, 3, "sum")
    assert got.group_by("reviewer_id").len()["len"].max() <= 3
    assert got.group_by("paper_id").len()["len"].to_list() == [2] * 6


@pytest.mark.parametrize(("k", "load", "objective"), [(0, 3, "sum"), (2, 0, "sum"), (2, 3, "best")])
def test_bad_setups_are_refused(k: int, load: int, objective: str) -> None:
    with pytest.raises(ValueError, match="at least 1|objective"):
        solve(_frame([("r", "p", 1.0)]), k, load, objective)  # type: ignore[arg-type]


def test_quality_numbers_by_hand() -> None:
    assigned = pl.DataFrame({"reviewer_id": ["a", "b", "c", "a"], "paper_id": ["p1", "p1", "p2", "p3"]})
    ratings = pl.DataFrame({"reviewer_id": ["a", "b", "c"], "paper_id": ["p1", "p1", "p2"], "rating": [5.0, 2.0, 3.0]})
    t = paper_totals(assigned, ratings, ["p1", "p2", "p3"], 4.0)
    got = {m: v for m, (v, _) in values(t, np.zeros((0, 3))).items()}
    assert got["assigned_rating"] == pytest.approx(10 / 3)
    assert got["papers_with_expert"] == pytest.approx(1 / 3)  # p1 only; p3's pair is unknown
    assert got["worst_paper_best"] == 3.0  # p2's best; p3 has no known rating
    assert got["known_share"] == pytest.approx(3 / 4)


def test_assignment_rows_rank_an_oracle_above_its_inverse_with_paired_intervals() -> None:
    rng = np.random.default_rng(3)
    rows = [(f"r{r}", f"p{p}", float(rng.integers(1, 6))) for p in range(12) for r in rng.choice(10, 5, replace=False)]
    ratings = pl.DataFrame(rows, schema=["reviewer_id", "paper_id", "rating"], orient="row")
    subs = pl.DataFrame({"paper_id": [f"p{p}" for p in range(12)], "title": "t", "abstract": "a", "year": 2024})
    bench = Benchmark("toy", "1", subs, [pl.DataFrame(schema={"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "title": pl.Utf8,
                                                               "abstract": pl.Utf8, "year": pl.Int64})],
                      [Split("pointwise", ratings=ratings, candidate_lists=True)])
    oracle = Scores("oracle", [ratings.rename({"rating": "score"})])
    inverse = Scores("inverse", [ratings.select("reviewer_id", "paper_id", score=-pl.col("rating"))])
    out = assignment_rows(bench, [oracle, inverse], AssignmentSetup(2, 3, "sum"), oracle, 200, 0)
    by = {(r.scorer, r.metric): r for r in out}
    assert by[("oracle", "assigned_rating")].value > by[("inverse", "assigned_rating")].value
    diff = by[("inverse - oracle", "assigned_rating")]
    assert diff.value < 0 and diff.ci_high is not None and diff.ci_high < 0
    assert by[("oracle", "known_share")].value == 1.0 and by[("oracle", "assigned_rating")].n == 12
    assert bootstrap.replicate_counts(12, 200, 0).shape == (200, 12)


def test_tuples_rate_pairs_and_a_forced_instance_says_so() -> None:
    from revbench.evaluation.assignment_eval import forced, rated_pairs

    tuples = pl.DataFrame({"reviewer_pos": ["a", "a"], "paper_pos": ["p", "p"], "reviewer_neg": ["b", "c"],
                           "paper_neg": ["p", "p"], "rating_pos": [5.0, 4.0], "rating_neg": [2.0, 1.0], "cluster": "p"})
    subs = pl.DataFrame({"paper_id": ["p"], "title": "t", "abstract": "a", "year": 2024})
    bench = Benchmark("lr", "1", subs, [], [Split("lr_paper_centric", tuples=tuples)])
    rated = rated_pairs(bench)
    assert rated is not None and dict(zip(rated["reviewer_id"], rated["rating"], strict=True)) == {"a": 4.5, "b": 2.0, "c": 1.0}
    assert forced(rated, AssignmentSetup(3, 6)) and not forced(rated, AssignmentSetup(2, 6))
    scores = Scores("s", [rated.rename({"rating": "score"})])
    rows = assignment_rows(bench, [scores], AssignmentSetup(3, 6), None, 0, 0)
    assert rows and all("forced: every candidate fits" in r.basis for r in rows)
