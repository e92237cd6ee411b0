"""Diversity of the recommended reviewers (institutions, co-author clusters) on hand-made lists
with a hand-made graph, and its absence, with the reason, from a benchmark without a graph."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from revbench.evaluation.evaluate import NO_GRAPH, Evaluator, diversity_absent
from revbench.evaluation.metrics.coauthor_diversity import coauthor_clusters, coauthor_diversity
from revbench.evaluation.metrics.institution_diversity import institution_diversity
from revbench.evaluation.metrics.ranking import ranked_candidates
from revbench.evaluation.model import (
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SCORES_SCHEMA,
    Benchmark,
    BenchmarkGraph,
    Scores,
    Split,
    frame,
)
from revbench.evaluation.report import report_tables, results_frame
from tests.support.evaluation import bench, write_openreview

# q (2024): a .9, then b and c tied at .8 (b first, by id), d .7, e .5; f rated but unscored.
# z (2018): two candidates only. u (2024): two candidates, neither with an institution then.
# w: its one candidate unscored, so it has no list at all.
SCORED = {("a", "q"): 0.9, ("b", "q"): 0.8, ("c", "q"): 0.8, ("d", "q"): 0.7, ("e", "q"): 0.5,
          ("a", "z"): 0.3, ("g", "z"): 0.6, ("c", "u"): 0.2, ("d", "u"): 0.4}
RATED = [*SCORED, ("f", "q"), ("h", "w")]
YEARS = {"q": 2024, "z": 2018, "u": 2024, "w": 2024}
# a moved from mit to cmu in 2020; b left cmu in 2023 (still its latest); c has none; d starts at
# eth only in 2025; e and g are at mit (g with open years).
SPELLS = [("a", "mit", 2015, 2019), ("a", "cmu", 2020, None), ("b", "cmu", 2019, 2023), ("d", "eth", 2025, None),
          ("e", "mit", 2010, 2030), ("g", "mit", None, None)]
# {a, b, e} and {g, h} wrote together; c only with x, who is no reviewer of the benchmark; d, f with no one.
PAIRS = [("a", "b"), ("b", "e"), ("g", "h"), ("c", "x")]


def graph() -> BenchmarkGraph:
    return BenchmarkGraph(
        citations=pl.DataFrame(schema={"citing_id": pl.Utf8, "cited_id": pl.Utf8, "is_influential": pl.Boolean,
                                       "source": pl.Utf8}),
        topics=pl.DataFrame(schema={"paper_id": pl.Utf8, "scheme": pl.Utf8, "topic": pl.Utf8, "score": pl.Float64}),
        reviewer_institutions=pl.DataFrame(SPELLS, schema={"reviewer_id": pl.Utf8, "institution_key": pl.Utf8,
                                                           "first_year": pl.Int64, "last_year": pl.Int64}, orient="row"),
        coauthors=pl.DataFrame([*PAIRS, *[(b, a) for a, b in PAIRS]], schema={"reviewer_id": pl.Utf8, "other_id": pl.Utf8},
                               orient="row"),
    )


def ratings() -> pl.DataFrame:
    return frame([dict(reviewer_id=r, paper_id=p, rating=float(1 + i % 5)) for i, (r, p) in enumerate(RATED)], RATINGS_SCHEMA)


def scores() -> pl.DataFrame:
    return frame([dict(reviewer_id=r, paper_id=p, score=s) for (r, p), s in SCORED.items()], SCORES_SCHEMA)


def graph_bench(g: BenchmarkGraph | None) -> Benchmark:
    subs = frame([dict(paper_id=p, title=p, abstract=p, year=y) for p, y in YEARS.items()], PAPERS_SCHEMA)
    profile = frame([dict(reviewer_id=r, paper_id=f"{r}1", title=r, abstract=r, year=2020) for r in "abcdefgh"], PROFILE_SCHEMA)
    return Benchmark("graphed", "1", subs, [profile], [Split("pointwise", ratings=ratings(), candidate_lists=True)], graph=g)


def test_lists_are_ranked_by_score_ties_by_reviewer_and_unscored_candidates_left_out() -> None:
    assert ranked_candidates(ratings(), scores()) == {"q": ["a", "b", "c", "d", "e"], "z": ["g", "a"], "u": ["d", "c"]}


def test_institution_diversity_by_hand() -> None:
    ranked = ranked_candidates(ratings(), scores())
    got = institution_diversity(ranked, YEARS, graph().reviewer_institutions, (1, 2, 3, 5))
    # q in 2024: a cmu, b cmu (its latest spell), c unknown, d unknown (eth begins later), e mit.
    # z in 2018: g mit, a mit (cmu begins later); two candidates, so @5 divides by 2.
    # u: c and d both unknown -> no value, not 0; n counts q and z only.
    assert got["InstitutionDiversity@1"] == (1.0, 2)
    assert got["InstitutionDiversity@2"] == (pytest.approx((1 / 2 + 1 / 2) / 2), 2)
    assert got["InstitutionDiversity@3"] == (pytest.approx((1 / 2 + 1 / 2) / 2), 2)  # c unknown: out of both counts
    assert got["InstitutionDiversity@5"] == (pytest.approx((2 / 3 + 1 / 2) / 2), 2)


def test_coauthor_clusters_and_their_diversity_by_hand() -> None:
    clusters = coauthor_clusters("abcdefgh", graph().coauthors)
    assert clusters == {"a": "a", "b": "a", "e": "a", "g": "g", "h": "g", "c": "c", "d": "d", "f": "f"}
    got = coauthor_diversity(ranked_candidates(ratings(), scores()), clusters, (1, 2, 3, 5))
    # q: a a c d a; z: g a; u: d c. Short lists divide by their length.
    assert got["CoauthorDiversity@1"] == (1.0, 3)
    assert got["CoauthorDiversity@2"] == (pytest.approx((1 / 2 + 1 + 1) / 3), 3)
    assert got["CoauthorDiversity@3"] == (pytest.approx((2 / 3 + 1 + 1) / 3), 3)
    assert got["CoauthorDiversity@5"] == (pytest.approx((3 / 5 + 1 + 1) / 3), 3)


def test_the_evaluator_reports_diversity_at_the_ranking_cutoffs_and_the_report_shows_it() -> None:
    rows = Evaluator(graph_bench(graph()), n_resamples=0).evaluate(Scores("hand", [scores()]))
    got = {r.metric: (r.value, r.n) for r in rows if "Diversity" in r.metric}
    assert got == {"InstitutionDiversity@5": (pytest.approx(7 / 12), 2), "InstitutionDiversity@10": (pytest.approx(7 / 12), 2),
                   "CoauthorDiversity@5": (pytest.approx(13 / 15), 3), "CoauthorDiversity@10": (pytest.approx(13 / 15), 3)}
    assert {r.metric for r in rows} >= {"NDCG@5", "NDCG@10"}
    md = "\n".join(t.to_markdown() for t in report_tables(results_frame(rows)))
    assert "| scorer | InstitutionDiversity@5 | InstitutionDiversity@10 | CoauthorDiversity@5 | CoauthorDiversity@10 |" in md
    assert "| hand | 0.583 | 0.583 | 0.867 | 0.867 |" in md


def test_without_a_graph_diversity_is_absent_with_its_reason() -> None:
    b = bench()
    assert b.graph is None and diversity_absent(b) == NO_GRAPH
    assert diversity_absent(graph_bench(graph())) is None
    rows = Evaluator(b, n_resamples=0).evaluate(Scores("x", [frame([dict(reviewer_id="ir", paper_id="s1", score=1.0)],
                                                                   SCORES_SCHEMA)]))
    assert "NDCG@10" in {r.metric for r in rows} and not [r for r in rows if "Diversity" in r.metric]
    tables = report_tables(results_frame(rows), no_diversity={b.name: NO_GRAPH})
    assert tables[-1].to_markdown() == f"Diversity on hand: {NO_GRAPH}\n"
    assert not any("Diversity of the top k" in t.title for t in tables)


def test_the_evaluate_flow_says_why_a_benchmark_has_no_diversity(settings, tmp_path: Path) -> None:
    from revbench.flows.evaluate import evaluate_flow

    out = evaluate_flow.fn(settings, benchmarks=[f"openreview={write_openreview(tmp_path / 'or')}"], scorers=["trivial"],
                           bootstrap=0, report_dir=str(tmp_path / "report"), plot=False)
    assert f": {NO_GRAPH}" in out.markdown and "Diversity of the top k" not in out.markdown
    assert out.rows and not [r for r in out.rows if "Diversity" in r["metric"]]
    assert f": {NO_GRAPH}" in (tmp_path / "report" / "report.md").read_text()


def test_the_console_prints_the_reason_as_one_line(capsys) -> None:
    from revbench.app.commands.evaluate import print_report
    from revbench.evaluation.report import ReportTable

    print_report([ReportTable(f"Diversity on [hand]: {NO_GRAPH}", [], [])])
    out = capsys.readouterr().out
    assert " ".join(out.split()) == f"Diversity on [hand]: {NO_GRAPH}"
