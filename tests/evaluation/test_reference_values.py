"""The shipped predictions of the public samples evaluate to their authors' reference values."""

from __future__ import annotations

from pathlib import Path

import pytest

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.importers import load_lr_flat, load_predictions
from revbench.evaluation.importers.goldstandard import load_goldstandard
from revbench.evaluation.importers.lrbench import load_lrbench
from revbench.evaluation.model import Benchmark, Scores

EXTERNAL = Path(__file__).resolve().parents[3] / "shared" / "external"
pytestmark = pytest.mark.skipif(not EXTERNAL.exists(), reason="../shared/external is not beside the project")

GOLD = [
    (1, "tpms", 0.279271, (29, 42), (41, 55)),
    (1, "specter", 0.180399, (36, 42), (36, 55)),
    (2, "tpms", 0.272333, (30, 42), (42, 55)),
    (2, "specter", 0.163920, (36, 42), (40, 55)),
]


@pytest.mark.parametrize(("draw", "algo", "ref_loss", "easy", "hard"), GOLD)
def test_goldstandard_sample(draw: int, algo: str, ref_loss: float, easy: tuple[int, int], hard: tuple[int, int]) -> None:
    gs = load_goldstandard(EXTERNAL / "goldstandard-sample")
    one = Benchmark(gs.name, gs.version, gs.submissions, [gs.draws[draw - 1]], gs.splits)
    scores = load_predictions(EXTERNAL / "goldstandard-sample" / f"d_20_{draw}" / f"predictions_{algo}.json", algo, one)
    rows = {r.metric: r for r in Evaluator(one, n_resamples=0).evaluate(scores)}
    assert round(rows["loss"].value, 6) == ref_loss
    assert (round(rows["easy_accuracy"].value * rows["easy_accuracy"].n), rows["easy_accuracy"].n) == easy
    assert (round(rows["hard_accuracy"].value * rows["hard_accuracy"].n), rows["hard_accuracy"].n) == hard


def test_goldstandard_mean_over_draws() -> None:
    gs = load_goldstandard(EXTERNAL / "goldstandard-sample")
    assert len(gs.draws) == 2 and gs.splits[0].ratings.height == 53
    scores = load_predictions(EXTERNAL / "goldstandard-sample", "tpms", gs)
    rows = {r.metric: r for r in Evaluator(gs, n_resamples=0).evaluate(scores)}
    assert rows["loss"].value == pytest.approx((0.279271 + 0.272333) / 2, abs=1e-6)


@pytest.mark.parametrize(("name", "ref_loss", "correct", "n"), [
    ("RATE_pc.sample.json", 0.5, 7, 16), ("RATE_rc.sample.json", 0.112676, 33, 40),
])
def test_lrbench_flat_predictions(name: str, ref_loss: float, correct: int, n: int) -> None:
    split, scores = load_lr_flat(EXTERNAL / "lrbench-sample" / name)
    bench = Benchmark("lrbench", "x", None, [None], [split])  # type: ignore[arg-type]
    rows = {r.metric: r for r in Evaluator(bench, n_resamples=0).evaluate(Scores("rate", [scores]))}
    assert round(rows["loss"].value, 6) == ref_loss
    assert (round(rows["accuracy"].value * rows["accuracy"].n), rows["accuracy"].n) == (correct, n)


def test_lrbench_import() -> None:
    lr = load_lrbench(EXTERNAL / "lrbench-sample")
    pc = lr.splits[0]
    assert pc.name == "lr_paper_centric" and pc.tuples.height == 16
    assert (pc.tuples["rating_pos"] > pc.tuples["rating_neg"]).all()
    assert len(lr.keywords) == 145 and lr.draws[0]["reviewer_id"].n_unique() > 1
