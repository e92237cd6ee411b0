"""Predictions in RATE's and TREC's formats: read back by an independent implementation of RATE's
recipe and by ranx, they give revbench's own numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.evaluate import OWN_COVERAGE, Evaluator
from revbench.evaluation.exports import export_formats
from revbench.evaluation.model import (
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SCORES_SCHEMA,
    TUPLES_SCHEMA,
    Benchmark,
    MetricValue,
    Scores,
    Split,
    frame,
)

EXTERNAL = Path(__file__).resolve().parents[3] / "shared" / "external"


def _world() -> tuple[Benchmark, list[Scores]]:
    """Eight papers, each rated by six of ten reviewers; tuples of both kinds from those ratings
    (some written low side first, some with equal ratings); scorers with ties and gaps."""
    rng = np.random.default_rng(7)
    papers = [f"p{i}" for i in range(8)]
    reviewers = [f"r{i}" for i in range(10)]
    ratings = [dict(reviewer_id=r, paper_id=p, rating=float(rng.integers(1, 6)))
               for p in papers for r in rng.choice(reviewers, 6, replace=False)]
    rated = {(x["reviewer_id"], x["paper_id"]): x["rating"] for x in ratings}
    tuples_pc, tuples_rc = [], []
    for (r1, p1), x1 in rated.items():
        for (r2, p2), x2 in rated.items():
            if p1 == p2 and r1 < r2 and rng.random() < 0.5:  # written in either order, ties included
                tuples_pc.append(dict(reviewer_pos=r1, paper_pos=p1, reviewer_neg=r2, paper_neg=p1,
                                      rating_pos=x1, rating_neg=x2, cluster=p1))
            if r1 == r2 and p1 < p2 and rng.random() < 0.5:
                tuples_rc.append(dict(reviewer_pos=r1, paper_pos=p1, reviewer_neg=r1, paper_neg=p2,
                                      rating_pos=x1, rating_neg=x2, cluster=r1))
    bench = Benchmark(
        "hand:tuples", "1", frame([dict(paper_id=p, title=p) for p in papers], PAPERS_SCHEMA),
        [frame(None, PROFILE_SCHEMA)],
        [Split("pointwise", ratings=frame(ratings, RATINGS_SCHEMA), candidate_lists=True),
         Split("paper_centric", tuples=frame(tuples_pc, TUPLES_SCHEMA)),
         Split("reviewer_centric", tuples=frame(tuples_rc, TUPLES_SCHEMA))])
    pairs = list(rated.items())
    noisy = [dict(reviewer_id=r, paper_id=p, score=x + rng.normal(0, 1.5)) for (r, p), x in pairs]
    coarse = [dict(reviewer_id=r, paper_id=p, score=float(round(x / 2 + rng.normal(0, 0.6)))) for (r, p), x in pairs]
    partial = [row for row in noisy if rng.random() < 0.8]
    runs = [Scores(name, [frame(rows, SCORES_SCHEMA)]) for name, rows in
            (("noisy", noisy), ("coarse ties", coarse), ("partial", partial),
             ("trivial", [dict(reviewer_id=r, paper_id=p, score=0.0) for (r, p), _ in pairs]))]
    return bench, runs


def rate_recipe(items: list[dict]) -> tuple[float, float]:
    """Loss and accuracy as RATE's evaluation script defines them: a tuple weighs the gap of its
    gold ratings (tuples without one are skipped); an inverted prediction costs the weight, a
    predicted tie half of it; accuracy counts strictly right orders."""
    cost = weight = right = counted = 0.0
    for t in items:
        gold = float(t["positive_ref_score"]) - float(t["negative_ref_score"])
        pred = float(t["positive_score"]) - float(t["negative_score"])
        if gold == 0:
            continue
        weight += abs(gold)
        counted += 1
        if pred * gold < 0:
            cost += abs(gold)
        elif pred == 0:
            cost += abs(gold) / 2
        else:
            right += 1
    return cost / weight, right / counted


def _row(rows: list[MetricValue], split: str, scorer: str, metric: str) -> float:
    """A scorer's value on every pair it covers: the own-coverage row where the split has one."""
    got = {(r.split, r.scorer, r.metric): r.value for r in rows}
    value = got.get((split + OWN_COVERAGE, scorer, metric), got.get((split, scorer, metric)))
    assert value is not None, (split, scorer, metric)
    return value


@pytest.fixture(scope="module")
def evaluated() -> tuple[Benchmark, list[Scores], list[MetricValue]]:
    """The world, its scorers and revbench's rows (ranx's first evaluation takes seconds: once)."""
    bench, runs = _world()
    return bench, runs, Evaluator(bench, n_resamples=0).evaluate_all(runs)


def test_rate_files_give_revbenchs_loss_and_accuracy(evaluated, tmp_path: Path) -> None:
    bench, runs, rows = evaluated
    written = export_formats(bench, runs, tmp_path)
    index = json.loads((tmp_path / "exports.json").read_text())
    assert len(index) == len(written)
    tuples = {"pc": bench.splits[1].tuples, "rc": bench.splits[2].tuples}
    for s in runs:
        for short, split in (("pc", "paper_centric"), ("rc", "reviewer_centric")):
            path = tmp_path / "predictions" / s.scorer.replace(" ", "_") / f"hand_tuples_{short}.json"
            items = json.loads(path.read_text())
            entry = next(e for e in index if e["path"] == path.relative_to(tmp_path).as_posix())
            assert entry["written"] == len(items) and entry["written"] + entry["left_out"] == tuples[short].height
            assert all(set(t) == {"anchor_id", "positive_id", "negative_id", "type", "positive_score", "negative_score",
                                  "positive_ref_score", "negative_ref_score"} for t in items)
            assert all(t["positive_score"] is not None and t["negative_score"] is not None for t in items)
            assert all(t["type"] == split and t["positive_ref_score"] >= t["negative_ref_score"] for t in items)
            loss, acc = rate_recipe(items)
            assert loss == pytest.approx(_row(rows, split, s.scorer, "loss"), abs=1e-6), (s.scorer, split)
            assert acc == pytest.approx(_row(rows, split, s.scorer, "accuracy"), abs=1e-6), (s.scorer, split)
    partial = [e for e in index if e["scorer"] == "partial" and e["format"] == "rate"]
    assert partial and all(e["left_out"] > 0 for e in partial)


def test_trec_files_give_revbenchs_ranking_metrics(evaluated, tmp_path: Path) -> None:
    from ranx import Qrels, Run, evaluate

    bench, runs, rows = evaluated
    export_formats(bench, runs, tmp_path)
    base = tmp_path / "trec" / "hand_tuples"
    levels = Qrels.from_file(str(base / "qrels"), kind="trec").to_dict()
    gold = {(r, p): x for r, p, x in bench.splits[0].ratings.iter_rows()}
    assert {(r, p): x for p, d in levels.items() for r, x in d.items()} == gold

    def binary(keep) -> Qrels:  # type: ignore[no-untyped-def]
        return Qrels({q: {d: g for d, x in docs.items() if (g := keep(x)) > 0} for q, docs in levels.items()
                      if any(keep(x) > 0 for x in docs.values())})

    qrels = {"hard": binary(lambda x: int(x >= 4)), "soft": binary(lambda x: int(x >= 3)),
             "graded": binary(lambda x: x - 1)}
    compared = 0
    for s in runs:
        path = base / "pointwise" / f"{s.scorer.replace(' ', '_')}.run"
        lines = [line.split() for line in path.read_text().splitlines()]
        for q in {x[0] for x in lines}:  # ranks run 1..n by score, ties by reviewer id
            mine = sorted((-float(x[4]), x[2]) for x in lines if x[0] == q)
            assert [(x[2], int(x[3])) for x in lines if x[0] == q] == [(d, i + 1) for i, (_, d) in enumerate(mine)]
        run = Run.from_file(str(path), kind="trec")
        for label, q in qrels.items():
            names = ["ndcg@5", "ndcg@10"] if label == "graded" else [f"{m}@{k}" for m in ("precision", "recall", "mrr")
                                                                      for k in (5, 10)]
            got = evaluate(q, run, names, make_comparable=True)
            for name in names:
                metric, k = name.split("@")
                ours = {"precision": f"P_{label}", "recall": f"Recall_{label}", "mrr": f"MRR_{label}",
                        "ndcg": "NDCG"}[metric] + f"@{k}"
                assert float(got[name]) == pytest.approx(_row(rows, "pointwise", s.scorer, ours), abs=1e-6), (s.scorer, ours)
                compared += 1
    assert compared == len(runs) * 14
    # The paper-centric tuples are a paper view too; the reviewer-centric ones are not.
    assert (base / "paper_centric" / "noisy.run").is_file() and not (base / "reviewer_centric").exists()


def test_unscored_tuples_are_left_out_and_counted_never_null(tmp_path: Path) -> None:
    bench, runs = _world()
    nothing = Scores("nothing", [frame(None, SCORES_SCHEMA)])
    written = export_formats(bench, [nothing], tmp_path)
    rate = [e for e in written if e.format == "rate"]
    assert [(e.written, e.left_out) for e in rate] == [(0, bench.splits[1].tuples.height), (0, bench.splits[2].tuples.height)]
    assert json.loads((tmp_path / "predictions" / "nothing" / "hand_tuples_pc.json").read_text()) == []
    run = next(e for e in written if e.format == "trec_run" and e.split == "pointwise")
    assert (run.written, run.left_out) == (0, bench.splits[0].ratings.height)
    # A second benchmark joins the index; the same one again replaces its entries.
    export_formats(Benchmark("other", "1", pl.DataFrame(), [pl.DataFrame()], [bench.splits[1]]), runs[:1], tmp_path)
    export_formats(bench, runs[:1], tmp_path)
    index = json.loads((tmp_path / "exports.json").read_text())
    assert {e["benchmark"] for e in index} == {"other", "hand:tuples"}
    assert {e["scorer"] for e in index if e["benchmark"] == "hand:tuples"} == {"noisy", None}


@pytest.mark.skipif(not EXTERNAL.exists(), reason="../shared/external is not beside the project")
def test_rates_own_sample_is_written_back_as_it_came(tmp_path: Path) -> None:
    from revbench.evaluation.importers import load_lr_flat

    for short in ("pc", "rc"):
        sample = EXTERNAL / "lrbench-sample" / f"RATE_{short}.sample.json"
        split, scores = load_lr_flat(sample)
        export_formats(Benchmark("lr", "1", pl.DataFrame(), [pl.DataFrame()], [split]), [Scores("RATE", [scores])], tmp_path)
        theirs = json.loads(sample.read_text())
        ours = json.loads((tmp_path / "predictions" / "RATE" / f"lr_{short}.json").read_text())
        key = lambda t: (t["anchor_id"], t["positive_id"], t["negative_id"])  # noqa: E731
        assert sorted(ours, key=key) == sorted(theirs, key=key)


def test_evaluate_with_a_report_writes_both_formats(settings, tmp_path: Path) -> None:
    from revbench.flows.evaluate import evaluate_flow
    from tests.support.evaluation import write_openreview

    lr = tmp_path / "lr"
    lr.mkdir()
    side = lambda r, x: {"author_id": r, "score": x, "papers": [{"id": f"{r}-a", "title": f"Work of {r}"}]}  # noqa: E731
    (lr / "evaluations_pc.json").write_text(json.dumps([
        {"anchor": {"paper_id": "s1", "title": "One"}, "positive": side("a", 5), "negative": side("b", 2)},
        {"anchor": {"paper_id": "s1", "title": "One"}, "positive": side("a", 5), "negative": side("c", 1)}]))
    report = tmp_path / "report"
    evaluate_flow.fn(settings, benchmarks=[f"openreview={write_openreview(tmp_path / 'or')}", f"lrbench={lr}"],
                     scorers=["trivial"], bootstrap=0, report_dir=str(report), plot=False)
    items = json.loads((report / "predictions" / "trivial" / "lrbench_pc.json").read_text())
    assert [(t["anchor_id"], t["positive_id"], t["negative_id"], t["positive_score"]) for t in items] == [
        ("s1", "a", "b", 0.0), ("s1", "a", "c", 0.0)]
    assert not (report / "predictions" / "trivial" / "lrbench_rc.json").exists()
    assert (report / "trec" / "openreview" / "pointwise" / "trivial.run").read_text().count(" Q0 ") == 4
    assert (report / "trec" / "lrbench" / "qrels").read_text() == "s1 0 a 5\ns1 0 b 2\ns1 0 c 1\n"
    assert {e["benchmark"] for e in json.loads((report / "exports.json").read_text())} == {"openreview", "lrbench"}
