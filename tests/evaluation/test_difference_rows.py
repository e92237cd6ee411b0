"""A paired difference is a row with a ``baseline``, not a scorer whose name holds " - ": a scorer
labelled ``rate:model=/models/RATE - v2`` is ranked by the markdown report, the HTML page, the
assignment's tables and the cross-benchmark average, and its difference to the baseline is shown as
a difference. ``results.json`` rows written before the field are read by the name, as then."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import RevbenchError
from revbench.evaluation.assignment_report import assignment_tables, summary_lines
from revbench.evaluation.evaluate import Evaluator, cross_benchmark_average
from revbench.evaluation.html_report import results_page, sections
from revbench.evaluation.model import (
    DIFFERENCE,
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
from revbench.schemas.tables import EVAL_RESULTS
from revbench.warehouse.db import Warehouse
from tests.support.cli import evaluate_cli, nothing_written, one_line_error
from tests.support.evaluation import bench, write_openreview

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


def test_a_scorer_labelled_as_another_ones_difference_to_the_baseline_is_refused_before_work(tmp_path: Path) -> None:
    """``eval_results``' key has no ``baseline``: a scorer labelled ``X - tpms`` beside X with
    ``--baseline tpms`` would share its key with X's difference, so the run is refused up front."""
    data = write_openreview(tmp_path / "or")
    line = one_line_error(*evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "rate:model=/models/RATE",
                                        "-s", f"rate:model=/models/RATE{DIFFERENCE}tpms", "-s", "tpms",
                                        "--baseline", "tpms", "--bootstrap", "0"), 2,
                          "--scorer 'rate:model=/models/RATE - tpms' is labelled 'rate:model=/models/RATE - tpms'",
                          "paired difference of 'rate:model=/models/RATE' to --baseline 'tpms'")
    assert "\n" not in line
    nothing_written(tmp_path / "data", tmp_path)


def _stored(scorer: str, baseline: str | None, value: float) -> pl.DataFrame:
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    return EVAL_RESULTS.conform(pl.DataFrame([dict(benchmark="hand", benchmark_version="1", split="pointwise",
                                                   scorer=scorer, metric="loss", value=value, n=4, run_id="run-1",
                                                   evaluated_at=when, baseline=baseline)]))


def test_the_warehouse_refuses_a_row_that_would_take_the_key_of_a_row_of_another_baseline(tmp_path: Path) -> None:
    own, paired = _stored(PAIRED, None, 0.25), _stored(PAIRED, "tpms", -0.5)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.evaluate.upsert(EVAL_RESULTS, own)
        wh.evaluate.upsert(EVAL_RESULTS, own)  # the same row again is no clash
        with pytest.raises(RevbenchError, match=r"is the paired difference to 'tpms', but a stored row with that key is "
                                                r"a scorer's own row: not stored") as err:
            wh.evaluate.upsert(EVAL_RESULTS, paired)
        assert f"scorer={PAIRED!r}, metric='loss'" in str(err.value)
        with pytest.raises(RevbenchError, match="but another row of this write with that key is"):
            wh.evaluate.upsert(EVAL_RESULTS, pl.concat([paired, own]).with_columns(run_id=pl.lit("run-2")))
        kept = wh._exec("SELECT run_id, scorer, baseline, value FROM eval_results")
    assert kept == [("run-1", PAIRED, None, 0.25)]
