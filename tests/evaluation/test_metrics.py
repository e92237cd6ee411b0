"""Every metric on hand-computed cases, ties and empty inputs included."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.metrics.accuracy import accuracy, mask
from revbench.evaluation.metrics.loss import loss
from revbench.evaluation.metrics.ranking import ranking_metrics, wktd_at_k
from revbench.evaluation.model import RATINGS_SCHEMA, SCORES_SCHEMA, TUPLES_SCHEMA, Benchmark, Scores, Split, frame
from revbench.evaluation.pairs import score_pairs, split_pairs


def test_loss_hand_computed() -> None:
    # Three pairs with weights 1, 2, 3: right, tied, inverted -> (0 + 1 + 3) / 6.
    w = np.array([1.0, 2.0, 3.0])
    d = np.array([0.5, 0.0, -0.1])
    assert loss(w, d) == pytest.approx(4 / 6)
    assert loss(w, np.zeros(3)) == 0.5
    assert loss(w, np.ones(3)) == 0.0 and loss(w, -np.ones(3)) == 1.0
    assert loss(np.zeros(0), np.zeros(0)) is None


def test_accuracy_counts_ties_as_wrong() -> None:
    assert accuracy(np.array([1.0, 0.0, -1.0, 2.0])) == 0.5
    assert accuracy(np.zeros(0)) is None


def test_easy_and_hard_masks() -> None:
    ra = np.array([5.0, 4.0, 5.0, 3.0, 4.5])
    rb = np.array([1.0, 2.5, 4.0, 1.0, 4.0])
    assert mask("easy_accuracy", ra, rb).tolist() == [True, False, False, False, False]
    assert mask("hard_accuracy", ra, rb).tolist() == [False, False, True, False, True]


def _ratings() -> pl.DataFrame:
    rows = [
        ("r1", "p1", 5.0), ("r1", "p2", 3.0), ("r1", "p3", 3.0), ("r1", "p4", 1.0),
        ("r2", "p1", 2.0), ("r2", "p2", 4.0),
    ]
    return frame([dict(reviewer_id=r, paper_id=p, rating=x) for r, p, x in rows], RATINGS_SCHEMA)


def test_pairs_within_reviewer_drop_equal_ratings() -> None:
    pairs = split_pairs(Split("s", ratings=_ratings()))
    # r1: 5>3, 5>3, 5>1, 3>1, 3>1 (the two 3s tie) -> 5 pairs; r2: 4>2 -> 1 pair.
    assert pairs.height == 6
    assert (pairs["rating_a"] > pairs["rating_b"]).all()
    assert set(pairs.filter(pl.col("cluster") == "r2")["paper_a"]) == {"p2"}


def test_tuples_are_oriented_and_ties_dropped() -> None:
    t = frame([
        dict(reviewer_pos="a", paper_pos="p", reviewer_neg="b", paper_neg="p", rating_pos=2.0, rating_neg=4.0, cluster="p"),
        dict(reviewer_pos="a", paper_pos="q", reviewer_neg="b", paper_neg="q", rating_pos=3.0, rating_neg=3.0, cluster="q"),
    ], TUPLES_SCHEMA)
    pairs = split_pairs(Split("t", tuples=t))
    assert pairs.rows() == [("b", "p", 4.0, "a", "p", 2.0, "p")]


def test_evaluator_end_to_end_by_hand() -> None:
    bench = Benchmark("hand", "1", frame(None, {"paper_id": pl.Utf8}), [pl.DataFrame()], [Split("s", ratings=_ratings())])
    scores = frame([
        dict(reviewer_id="r1", paper_id="p1", score=0.9), dict(reviewer_id="r1", paper_id="p2", score=0.1),
        dict(reviewer_id="r1", paper_id="p3", score=0.5), dict(reviewer_id="r1", paper_id="p4", score=0.5),
        dict(reviewer_id="r2", paper_id="p1", score=0.3), dict(reviewer_id="r2", paper_id="p2", score=0.3),
    ], SCORES_SCHEMA)
    rows = {r.metric: r for r in Evaluator(bench, n_resamples=200, seed=1).evaluate(Scores("s", [scores]))}
    # r1 pairs (w): p1>p2 (2) right, p1>p3 (2) right, p1>p4 (4) right, p2>p4 (2) inverted, p3>p4 (2) tie;
    # r2: p2>p1 (2) tie.  cost = 2 + 1 + 1 = 4 over weight 14.
    assert rows["loss"].value == pytest.approx(4 / 14)
    assert rows["accuracy"].value == pytest.approx(3 / 6) and rows["accuracy"].n == 6
    # Easy: r1 p1 (5) vs p4 (1) right; r2 p2 (4) vs p1 (2) tied -> 1 of 2.
    assert rows["easy_accuracy"].n == 2 and rows["easy_accuracy"].value == 0.5
    assert rows["hard_accuracy"].n == 0 and rows["hard_accuracy"].value is None
    assert rows["loss"].ci_low <= rows["loss"].value <= rows["loss"].ci_high


def test_missing_scores_leave_pairs_out() -> None:
    pairs = split_pairs(Split("s", ratings=_ratings()))
    arr = score_pairs(pairs, frame([dict(reviewer_id="r2", paper_id="p1", score=1.0), dict(reviewer_id="r2", paper_id="p2", score=2.0)], SCORES_SCHEMA))
    assert len(arr) == 1 and arr.missing == 5


def test_bootstrap_is_seeded_and_paired() -> None:
    nums = np.array([[1.0, 0.0, 2.0, 1.0]])
    dens = np.array([[2.0, 2.0, 2.0, 2.0]])
    c1 = bootstrap.replicate_counts(4, 500, seed=3)
    c2 = bootstrap.replicate_counts(4, 500, seed=3)
    assert np.array_equal(c1, c2) and (c1.sum(axis=1) == 4).all()
    reps = bootstrap.replicates(nums, dens, c1)
    lo, hi = bootstrap.interval(reps)
    assert lo <= 0.5 <= hi
    # Identical scorers differ by exactly zero in every replicate.
    assert bootstrap.interval(reps - bootstrap.replicates(nums, dens, c1)) == (0.0, 0.0)
    assert bootstrap.interval(np.array([np.nan])) == (None, None)


def test_ranking_metrics_by_hand() -> None:
    ratings = frame([
        dict(reviewer_id=r, paper_id="q", rating=x) for r, x in [("a", 5.0), ("b", 1.0), ("c", 4.0), ("d", 2.0)]
    ] + [dict(reviewer_id="a", paper_id="z", rating=1.0)], RATINGS_SCHEMA)
    scores = frame([dict(reviewer_id=r, paper_id="q", score=s) for r, s in [("a", 0.1), ("b", 0.9), ("c", 0.8), ("d", 0.2)]]
                   + [dict(reviewer_id="a", paper_id="z", score=0.5)], SCORES_SCHEMA)
    m = ranking_metrics(ratings, scores, cutoffs=(1, 2))
    # Ranking of q: b(1) c(4) d(2) a(5). Hard relevant {a, c}: P@1 = 0, P@2 = 1/2, MRR@2 = 1/2, R@2 = 1/2.
    assert m["P_hard@1"] == (0.0, 1)
    assert m["P_hard@2"][0] == pytest.approx(0.5) and m["MRR_hard@2"][0] == pytest.approx(0.5)
    assert m["Recall_hard@2"][0] == pytest.approx(0.5)
    # Linear gains rating-1: b 0, c 3 -> DCG@2 = 3/log2(3); ideal a 4, c 3 -> 4 + 3/log2(3).
    assert m["NDCG@2"][0] == pytest.approx((3 / np.log2(3)) / (4 + 3 / np.log2(3)), rel=1e-6)
    joined = ratings.join(scores, on=["reviewer_id", "paper_id"])
    # WKTD@1: pairs whose higher-rated member is ranked first: only b (rated 1) is first -> none.
    assert np.isnan(wktd_at_k(joined.filter(pl.col("paper_id") == "q"), 1))
    # WKTD@2: higher-rated member in the top 2 is c: c>b (w 3, inverted: 0.8 < 0.9), c>d (w 2, right) -> 3/5.
    assert wktd_at_k(joined, 2) == pytest.approx(0.6)


def test_empty_split_gives_no_values() -> None:
    bench = Benchmark("e", "1", pl.DataFrame(), [pl.DataFrame()], [Split("s", ratings=frame(None, RATINGS_SCHEMA))])
    rows = Evaluator(bench, n_resamples=10).evaluate(Scores("x", [frame(None, SCORES_SCHEMA)]))
    assert {r.metric: r.value for r in rows} == {"loss": None, "accuracy": None, "easy_accuracy": None, "hard_accuracy": None}


def test_warehouse_benchmark_says_what_is_missing(tmp_path) -> None:
    from revbench.errors import InputError
    from revbench.evaluation.importers import load_benchmark
    from revbench.warehouse import Warehouse

    with Warehouse.open(tmp_path / "w.duckdb"):
        pass
    with pytest.raises(InputError, match="no kept ratings yet.*revbench ratings"):
        load_benchmark("warehouse", tmp_path / "w.duckdb")
    with pytest.raises(InputError, match="unknown benchmark kind"):
        load_benchmark("scidocs", tmp_path)


def test_average_across_benchmarks() -> None:
    from revbench.evaluation.evaluate import cross_benchmark_average
    from revbench.evaluation.model import MetricValue

    rows = [MetricValue("gs", "goldstandard", "t", "loss", 0.2, None, None, 10),
            MetricValue("lr", "lr_paper_centric", "t", "loss", 0.4, None, None, 5),
            MetricValue("lr", "lr_reviewer_centric", "t", "loss", 0.3, None, None, 5),
            MetricValue("lr", "lr_paper_centric", "only-lr", "loss", 0.1, None, None, 5)]
    avg = cross_benchmark_average(rows)
    assert [(r.benchmark, r.split, r.scorer, r.metric, r.n) for r in avg] == [("all", "average", "t", "loss", 3)]
    assert avg[0].value == pytest.approx(0.3)
