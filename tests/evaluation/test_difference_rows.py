"""A paired difference is a row with a ``baseline``, not a scorer whose name holds " - ": a scorer
labelled ``rate:model=/models/RATE - v2`` is ranked by the markdown report, the HTML page, the
assignment's tables and the cross-benchmark average, and its difference to the baseline is shown as
a difference. ``results.json`` rows written before the field are read by the name, as then."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import polars as pl

from revbench.evaluation.assignment_report import assignment_tables, summary_lines
from revbench.evaluation.evaluate import Evaluator, cross_benchmark_average
from revbench.evaluation.html_report import results_page, sections
from revbench.evaluation.model import (
    SCORES_SCHEMA,
    SPLIT_ASSIGNMENT_CANDIDATES,
    MetricValue,
    Scores,
    baseline_of,
    frame,
    is_difference,
    is_difference_row,
)
from revbench.evaluation.report import report_tables, results_frame
from tests.support.evaluation import bench

DASHED = "rate:model=/models/RATE - v2"
"""A model-backed scorer's label, path and all: it holds " - " and is no difference."""
PAIRED = f"{DASHED} - tpms"


def _scores(name: str, right: bool) -> Scores:
    """Scores on :func:`bench`'s rated pairs: each reviewer's own field first when ``right``."""
    own = {("ir", "s1"), ("gnn", "s2")}
    rows = [dict(reviewer_id=r, paper_id=p, score=float(((r, p) in own) == right)) for r in ("ir", "gnn") for p in ("s1", "s2")]
    return Scores(name, [frame(rows, SCORES_SCHEMA)], spec=name)


def _evaluated() -> list[MetricValue]:
    dashed, tpms = _scores(DASHED, True), _scores("tpms", False)
    return Evaluator(bench(), n_resamples=20, seed=0).evaluate_all([dashed, tpms], tpms)


def test_the_evaluator_marks_a_difference_by_its_baseline_not_its_name() -> None:
    rows = _evaluated()
    own = {r.scorer for r in rows if r.baseline is None}
    assert own == {DASHED, "tpms"}
    paired = [r for r in rows if r.baseline is not None]
    assert paired and {(r.scorer, r.baseline) for r in paired} == {(PAIRED, "tpms")}
    assert all(is_difference_row(r) for r in paired) and not any(is_difference_row(r) for r in rows if r.scorer == DASHED)
    loss = next(r for r in paired if r.metric == "loss")
    assert loss.value == -1.0 and loss.spec == PAIRED


def test_the_markdown_report_ranks_the_dashed_scorer_and_shows_its_difference_as_one() -> None:
    tables = report_tables(results_frame(_evaluated()))
    main = next(t for t in tables if t.title == "### hand · pointwise")
    by = {row[0]: row for row in main.rows}
    assert set(by) == {DASHED, "tpms"}
    assert by[DASHED][1].startswith("**0.000")  # the lowest loss, in bold
    (diffs,) = [t for t in tables if t.title.startswith("Paired differences")]
    assert [(row[1], row[2]) for row in diffs.rows] == [("pointwise", PAIRED)]
    ranking = next(t for t in tables if t.title.startswith("Ranking metrics on hand"))
    assert {row[0] for row in ranking.rows} == {DASHED, "tpms"}


def test_the_cross_benchmark_average_counts_the_dashed_scorer() -> None:
    rows = _evaluated()
    rows += [replace(r, benchmark="hand2") for r in rows]
    average = {(r.scorer, r.metric): r.value for r in cross_benchmark_average(rows)}
    assert average[(DASHED, "loss")] == 0.0 and average[("tpms", "loss")] == 1.0
    assert not any(s == PAIRED for s, _ in average)


def test_the_assignment_tables_rank_the_dashed_scorer_and_keep_its_difference_apart() -> None:
    def row(scorer: str, metric: str, value: float, baseline: str | None = None) -> MetricValue:
        return MetricValue("hand", SPLIT_ASSIGNMENT_CANDIDATES, scorer, metric, value, None, None, 2, basis="k=1",
                           baseline=baseline)

    metrics = ("assigned_rating", "papers_with_expert", "worst_paper_best", "known_share")
    rows = [row(DASHED, m, 5.0 if m == "assigned_rating" else 1.0) for m in metrics]
    rows += [row("tpms", m, 1.0) for m in metrics]
    rows += [row(PAIRED, m, 4.0 if m == "assigned_rating" else 0.0, "tpms") for m in metrics]
    body, diffs = assignment_tables(results_frame(rows))
    assert [r[0] for r in body.rows] == [DASHED, "tpms"] and [r[0] for r in diffs.rows] == [PAIRED]
    assert summary_lines(results_frame(rows))[0].startswith(f"Assignment: {DASHED} assigns the best-rated")


def _page_rows() -> pl.DataFrame:
    """The evaluated rows as ``Warehouse.evaluate.evaluation_results`` returns them."""
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    df = results_frame(_evaluated()).filter(pl.col("split") == "pointwise")
    return df.with_columns(version=pl.lit("1"), run_id=pl.lit("run-1"), evaluated_at=pl.lit(when),
                           release_status=pl.lit(None, pl.Utf8))


def test_the_html_page_ranks_the_dashed_scorer_and_tables_its_difference_apart() -> None:
    (sec,) = sections(_page_rows(), {})
    assert {r["scorer"] for r in sec.rows} == {DASHED, "tpms"}
    assert {b.label for b in sec.chart.bars} == {f"{DASHED} · pointwise", "tpms · pointwise"}
    assert [r["scorer"] for r in sec.differences] == [PAIRED]
    page, _ = results_page(_page_rows(), {}, "now", "0.1.0")
    assert "2 scorers" in page and page.count('<table class="differences">') == 1
    chart = page.split('<svg class="loss-chart"')[1].split("</svg>")[0]
    assert DASHED in chart and PAIRED not in chart


def test_rows_written_before_the_field_are_read_by_the_name_as_then() -> None:
    old = [{"scorer": "bm25 - tpms"}, {"scorer": "tpms"}, {"scorer": PAIRED}]
    assert [baseline_of(r) for r in old] == ["tpms", None, "v2 - tpms"]  # after the first " - ", as the migration
    new = [{"scorer": DASHED, "baseline": None}, {"scorer": PAIRED, "baseline": "tpms"}]
    assert [baseline_of(r) for r in new] == [None, "tpms"]
    assert [is_difference_row(r) for r in old + new] == [True, False, True, False, True]
    df = pl.DataFrame(new)
    assert df.filter(is_difference())["scorer"].to_list() == [PAIRED]
