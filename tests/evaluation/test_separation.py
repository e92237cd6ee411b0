"""Can the benchmark tell two scorers apart: paired differences, order shares and the tuples needed,
on hand-computed cases, against the evaluator's own rows, and in the evaluate flow's report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.model import SCORES_SCHEMA, TUPLES_SCHEMA, Benchmark, Scores, Split, frame
from revbench.evaluation.separation import (
    NOT_SEPARABLE,
    more_clusters,
    paired_difference,
    separation_rows,
    separation_table,
    split_separations,
    tuples_needed,
)
from revbench.flows.evaluate import evaluate_flow
from tests.support.evaluation import write_openreview


def test_tuples_needed_follows_the_formula() -> None:
    # n (h / |d|)^2: an interval twice the difference needs four times the tuples.
    assert tuples_needed(100, 0.05, 0.1) == pytest.approx(400)
    assert tuples_needed(100, -0.05, 0.1) == pytest.approx(400)
    assert tuples_needed(100, 0.0, 0.1) is None


def test_a_clearly_separated_pair() -> None:
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, 500)
    out = paired_difference(0.2, 0.5, 0.2 + noise, 0.5 + noise + rng.normal(0, 0.01, 500), n=80)
    assert out.diff == pytest.approx(-0.3)
    assert out.ci_high is not None and out.ci_high < 0 and out.separated
    assert out.order_holds == 1.0 and out.n_needed is None and out.more_needed is None


def test_identical_scorers_differ_by_nothing_and_get_no_size() -> None:
    reps = np.linspace(0.3, 0.5, 200)
    out = paired_difference(0.4, 0.4, reps, reps.copy(), n=30)
    assert out.diff == 0 and (out.ci_low, out.ci_high) == (0.0, 0.0)
    assert not out.separated and out.order_holds is None and out.n_needed is None and out.more_needed is None


def test_an_unseparated_pair_gets_the_formulas_size() -> None:
    # Replicate differences uniform on [-0.3, 0.1] (step 0.001): the 95% interval is [-0.29, 0.09];
    # d = -0.1, the half towards zero is 0.09 + 0.1 = 0.19, so 50 (0.19 / 0.1)^2 = 180.5 tuples.
    rd = np.linspace(-0.3, 0.1, 401)
    out = paired_difference(0.3, 0.4, rd, np.zeros_like(rd), n=50)
    assert out.ci_low == pytest.approx(-0.29) and out.ci_high == pytest.approx(0.09) and not out.separated
    assert out.n_needed == pytest.approx(180.5) and out.more_needed == 131
    assert out.order_holds == pytest.approx(300 / 401)
    # 10 clusters of 5 tuples: 180.5 tuples are 36.1 clusters, 27 more.
    assert more_clusters(out, 10) == 27


def _tuples_benchmark(n_anchors: int = 40) -> Benchmark:
    rows = []
    for i in range(n_anchors):
        for j in range(3):
            rows.append(dict(reviewer_pos=f"r{i}", paper_pos=f"p{i}_{j}", reviewer_neg=f"r{i}", paper_neg=f"q{i}_{j}",
                             rating_pos=5.0 - j, rating_neg=1.0 + j % 2, cluster=f"p{i}"))
    return Benchmark("toy", "1", frame(None, {"paper_id": str}), [frame(None, {"reviewer_id": str})],
                     [Split("tuples", tuples=frame(rows, TUPLES_SCHEMA))])


def _scores(name: str, bench: Benchmark, pos: float, neg: float, flip_every: int = 0) -> Scores:
    t = bench.splits[0].tuples
    assert t is not None
    rows = []
    for k, r in enumerate(t.iter_rows(named=True)):
        flip = flip_every and k % flip_every == 0
        rows.append(dict(reviewer_id=r["reviewer_pos"], paper_id=r["paper_pos"], score=neg if flip else pos))
        rows.append(dict(reviewer_id=r["reviewer_neg"], paper_id=r["paper_neg"], score=pos if flip else neg))
    return Scores(name, [frame(rows, SCORES_SCHEMA)])


def test_pairs_rest_on_the_tables_numbers_and_replicates() -> None:
    bench = _tuples_benchmark()
    runs = [_scores("oracle", bench, 1, 0), _scores("backwards", bench, 0, 1), _scores("mostly", bench, 1, 0, 7)]
    ev = Evaluator(bench, n_resamples=300, seed=3)
    loss = {r.scorer: r.value for r in ev.evaluate_all(runs) if r.metric == "loss" and r.split == "tuples"}
    seps = {(s.scorer_a, s.scorer_b): s for s in split_separations(ev, runs)}
    assert set(seps) == {("oracle", "backwards"), ("oracle", "mostly"), ("mostly", "backwards")}
    for (a, b), s in seps.items():
        assert s.diff == pytest.approx(loss[a] - loss[b]) and s.diff < 0 and s.n == 120
    clear = seps[("oracle", "backwards")]
    assert clear.separated and clear.order_holds == 1.0 and clear.ci_high is not None and clear.ci_high < 0
    assert split_separations(Evaluator(bench, n_resamples=0), runs) == []
    rows = separation_rows(list(seps.values()))
    assert {r["metric"] for r in rows} == {"loss_difference"} and json.dumps(rows)


def test_the_table_says_what_each_pair_needs() -> None:
    bench = _tuples_benchmark(6)
    runs = [_scores("a", bench, 1, 0, 3), _scores("b", bench, 1, 0, 4), _scores("same", bench, 1, 0, 3)]
    seps = split_separations(Evaluator(bench, n_resamples=200, seed=0), runs)
    md = separation_table(seps).to_markdown()
    assert "| scorer A | scorer B | split | diff [95% CI] | order holds | tuples | more tuples needed |" in md
    assert NOT_SEPARABLE in md  # "a" and "same" score alike
    waiting = [s for s in seps if not s.separated and s.diff != 0]
    for s in waiting:
        h = s.diff - s.ci_low if s.diff > 0 else s.ci_high - s.diff
        assert s.more_needed == max(1, math.ceil(s.n * (h / abs(s.diff)) ** 2) - s.n)


def test_the_report_shows_the_pairs(settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    out = evaluate_flow.fn(settings, benchmarks=[f"openreview={data}"], scorers=["trivial", "tpms"], bootstrap=50,
                           plot=False, report_dir=str(tmp_path / "report"))
    md = (tmp_path / "report" / "report.md").read_text()
    assert "Can the benchmark tell the scorers apart?" in md and "more tuples needed" in md
    written = json.loads((tmp_path / "report" / "separation.json").read_text())
    assert written == out.separation and written
    assert {(r["scorer_a"], r["scorer_b"]) for r in written} <= {("trivial", "tpms"), ("tpms", "trivial")}
    assert all(r["scorer"] != "trivial - tpms" for r in out.rows)
