"""UniPR's ``cof`` scorer on the hand-made benchmark with a graph: exact reciprocal-rank fusion
(ties, unscored pairs), the factors alone and each left out as rows of the report, weights fit
by cross-validation that never score a paper with weights fit on its own ratings, and a
benchmark without a graph refused in one line. The semantic factor is ``bm25`` here (a
deterministic text scorer; ``embedding`` is the default and composes the same way)."""

from __future__ import annotations

import polars as pl
import pytest

from revbench.errors import InputError
from revbench.evaluation.evaluate import Evaluator, with_companions
from revbench.evaluation.model import Scores
from revbench.evaluation.report import report_tables, results_frame
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers.cof import fuse_cross_validated, paper_folds
from revbench.settings import Settings
from tests.support.evaluation import bench, graph_bench

SPEC = "cof:semantic=bm25"


def as_dict(s: Scores) -> dict[tuple[str, str], float]:
    return {(r, p): x for r, p, x in s.draws[0].iter_rows()}


def test_rrf_sums_reciprocal_ranks_within_each_papers_candidates(settings: Settings) -> None:
    got = make_scorer(SPEC, Context(settings)).score(graph_bench())
    # Ranks per paper (candidates ir, gnn), from the factors' own scores:
    # s1: bm25 ir>gnn, topic ir>gnn, citation ir>gnn; s2: bm25 gnn>ir, topic gnn>ir, citation ir>gnn.
    assert as_dict(got) == {("ir", "s1"): 3.0, ("gnn", "s1"): 1.5, ("ir", "s2"): 2.0, ("gnn", "s2"): 2.5}
    parts = {c.scorer: as_dict(c) for c in got.companions}
    # Each factor alone is the factor scorer itself, pooled like cof (mean of the top 3).
    for spec in ("bm25:pooling=topk_mean:3", "topic", "citation"):
        assert parts[make_scorer(spec, Context(settings)).label] == as_dict(make_scorer(spec, Context(settings)).score(graph_bench()))
    assert parts[f"{SPEC}[-citation]"] == {("ir", "s1"): 2.0, ("gnn", "s1"): 1.0, ("ir", "s2"): 1.0, ("gnn", "s2"): 2.0}
    assert parts[f"{SPEC}[-topic]"] == parts[f"{SPEC}[-semantic]"] == {
        ("ir", "s1"): 2.0, ("gnn", "s1"): 1.0, ("ir", "s2"): 1.5, ("gnn", "s2"): 1.5}


def test_ties_share_the_best_rank_and_unscored_pairs_add_nothing(settings: Settings) -> None:
    b = graph_bench()
    assert b.graph is not None
    # only the citation between two profile papers (a -> c) is left: citation 0 for every pair in
    # both directions (one tie, rank 1 for all), yet a graph with citations, so nothing is refused
    b.graph.citations = b.graph.citations.filter(pl.col("citing_id") == "a")
    b.graph.topics = b.graph.topics.filter(pl.col("paper_id") != "s2")  # topic leaves s2's pairs unscored
    got = as_dict(make_scorer(SPEC, Context(settings)).score(b))
    assert got == {("ir", "s1"): 1 + 1 + 1, ("gnn", "s1"): 0.5 + 0.5 + 1, ("ir", "s2"): 0.5 + 0 + 1, ("gnn", "s2"): 1 + 0 + 1}


def test_the_report_has_a_row_for_each_factor_alone_and_each_left_out(settings: Settings) -> None:
    cof = make_scorer(SPEC, Context(settings)).score(graph_bench())
    topic = make_scorer("topic", Context(settings)).score(graph_bench())
    runs = with_companions([cof, topic])
    names = [s.scorer for s in runs]
    assert names == [SPEC, "topic", "bm25:pooling=topk_mean:3", "citation",
                     f"{SPEC}[-semantic]", f"{SPEC}[-topic]", f"{SPEC}[-citation]"]  # topic asked for: not twice
    df = results_frame(Evaluator(graph_bench(), n_resamples=0).evaluate_all(runs))
    shown = {row[0] for t in report_tables(df) for row in t.rows}
    assert set(names) <= shown


def test_weights_are_never_fit_on_the_paper_they_score() -> None:
    papers = [f"p{i}" for i in range(12)]
    # Two factors that disagree on every paper: a ranks x first, b ranks y first.
    rr = pl.DataFrame([(r, p, a, b) for p in papers for r, a, b in (("x", 1.0, 0.5), ("y", 0.5, 1.0))],
                      schema=["reviewer_id", "paper_id", "a", "b"], orient="row")

    def ratings(favour_x: set[str]) -> pl.DataFrame:
        return pl.DataFrame([(r, p, 5.0 if (r == "x") == (p in favour_x) else 1.0) for p in papers for r in ("x", "y")],
                            schema=["reviewer_id", "paper_id", "rating"], orient="row")

    folds = paper_folds(papers, 3)
    assert sorted(list(folds.values()).count(f) for f in range(3)) == [4, 4, 4]
    assert paper_folds(papers[::-1], 3) == folds
    base = {p for p, g in folds.items() if g < 2}  # two folds' ratings favour factor a, one fold's b
    before = as_dict(Scores("w", [fuse_cross_validated(rr, ratings(base), 3)]))
    for f in range(3):
        mine = {p for p, g in folds.items() if g == f}
        flipped = as_dict(Scores("w", [fuse_cross_validated(rr, ratings(base ^ mine), 3)]))
        # Reversing this fold's ratings moves the weights fit for the other folds...
        assert any(flipped[k] != before[k] for k in flipped if k[1] not in mine)
        # ...and never this fold's own scores.
        assert {k: v for k, v in flipped.items() if k[1] in mine} == {k: v for k, v in before.items() if k[1] in mine}


def test_weights_fusion_scores_every_pair_on_the_hand_made_benchmark(settings: Settings) -> None:
    got = as_dict(make_scorer(SPEC + ",fusion=weights,folds=2", Context(settings)).score(graph_bench()))
    assert set(got) == {("ir", "s1"), ("gnn", "s1"), ("ir", "s2"), ("gnn", "s2")}
    assert all(0.0 <= v <= 1.0 for v in got.values())  # weights on the simplex, reciprocal ranks at most 1


def test_a_benchmark_without_a_graph_is_refused_in_one_line(settings: Settings) -> None:
    with pytest.raises(InputError) as err:
        make_scorer("cof", Context(settings)).score(bench())
    msg = str(err.value)
    assert msg.startswith("hand carries no citation graph: the cof scorer") and "\n" not in msg


@pytest.mark.parametrize(("spec", "says"), [
    ("cof:semantic=topic", "semantic='topic': topic is not a text scorer"),
    ("cof:semantic=embedding:pooling=max", "set pooling on cof"),
    ("cof:semantic=nope", "unknown scorer 'nope'"),
    ("cof:fusion=vote", "bad parameters for cof: fusion"),
])
def test_bad_factor_specs_fail_clearly(spec: str, says: str, settings: Settings) -> None:
    with pytest.raises(ValueError, match="bad parameters for cof") as err:
        make_scorer(spec, Context(settings))
    assert says in str(err.value) and "\n" not in str(err.value)


def test_cof_refuses_what_its_citation_factor_cannot_stand_on(settings: Settings) -> None:
    b = graph_bench()
    assert b.graph is not None
    b.graph.citations = b.graph.citations.clear()
    cof = make_scorer(SPEC, Context(settings))
    assert cof.missing(b) is not None
    with pytest.raises(InputError) as err:
        cof.check(b)  # asked before any scorer of a run spends its time
    assert "citation" in str(err.value) and "\n" not in str(err.value)
