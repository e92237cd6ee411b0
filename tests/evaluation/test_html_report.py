"""The results page as text: every name escaped, loss drawn as error bars inside the plot, the
template's version written, runs linked when the Prefect UI knows them."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import polars as pl

from revbench.evaluation.html_report import (
    LABEL_W,
    PLOT_W,
    TEMPLATE,
    loss_chart,
    other_tables,
    overview,
    results_page,
    sections,
    separation_by_version,
)
from revbench.templates import version

EVIL_SCORER = '<script>alert("x")</script>'
EVIL_BENCH = 'a&b"<i>'


def rows() -> pl.DataFrame:
    """Two versions of a benchmark with a hostile name; the second lacks an interval and a hard-pair value."""
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    out = []
    for version_, run, scorers in [("v1", "run-1", {"tpms": (0.28, 0.24, 0.33), EVIL_SCORER: (0.5, 0.45, 0.55)}),
                                   ("v2", "run-2", {"tpms": (0.30, None, None)})]:
        for scorer, (loss, low, high) in scorers.items():
            for metric, value, lo, hi in [("loss", loss, low, high), ("accuracy", 1 - loss, None, None),
                                          ("hard_accuracy", None, None, None), ("NDCG@10", 0.7, None, None)]:
                out.append(dict(benchmark=EVIL_BENCH, version=version_, split="average", scorer=scorer, metric=metric,
                                value=value, ci_low=lo, ci_high=hi, n=40, coverage=0.9 if version_ == "v2" else 1.0,
                                run_id=run, evaluated_at=when, release_status="published" if version_ == "v1" else None,
                                baseline=None))
    return pl.DataFrame(out)


def test_names_are_escaped_everywhere() -> None:
    page, _ = results_page(rows(), {}, "now", "0.1.0")
    assert "<script>" not in page and "<i>" not in page
    assert "&lt;script&gt;" in page and "a&amp;b&#34;&lt;i&gt;" in page


def test_the_page_holds_its_template_version_and_nothing_from_outside() -> None:
    page, v = results_page(rows(), {}, "now", "0.1.0")
    assert v == version(TEMPLATE) and f'class="template-version">{v}<' in page
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched: no CDN, no remote font
    assert "<script" not in page


def test_every_version_and_scorer_has_a_row_and_an_error_bar() -> None:
    page, _ = results_page(rows(), {}, "now", "0.1.0")
    assert page.count('<section id="b') == 2
    assert page.count('class="whisker error-bar"') == 2  # v2's tpms has no interval: a dot only
    assert page.count('class="dot"') == 3
    assert 'class="num partial">90.0%<' in page and '<span class="status">published</span>' in page


def test_runs_link_to_the_prefect_ui_only_when_tracked() -> None:
    url = "http://127.0.0.1:4200/runs/flow-run/run-1"
    page, _ = results_page(rows(), {"run-1": url}, "now", "0.1.0")
    assert f'<a href="{url}">run <code>run-1</code> in the Prefect UI</a>' in page
    assert "run <code>run-2</code>: tpms" in page and 'flow-run/run-2"' not in page


def test_error_bars_stay_inside_the_plot() -> None:
    chart = loss_chart([
        {"scorer": "a", "split": "average", "loss": 0.3, "loss_low": 0.25, "loss_high": 0.62},
        {"scorer": "b", "split": "average", "loss": None, "loss_low": None, "loss_high": None},
    ])
    a, b = chart.bars
    assert LABEL_W <= chart.plot_x <= a.x_low < a.x < a.x_high <= chart.plot_x + PLOT_W  # type: ignore[operator]
    assert chart.ticks[-1][1] == "1" and b.x is None and b.x_low is None
    assert chart.height > chart.axis_y > b.y > a.y


def test_the_overview_puts_versions_side_by_side_on_one_axis() -> None:
    secs = sections(rows(), {})
    (bench,) = overview(secs)
    assert [s.version for s in bench["versions"]] == ["v1", "v2"]
    by_scorer = {r["scorer"]: r["cells"] for r in bench["rows"]}
    assert by_scorer[EVIL_SCORER] == [("0.500", "[0.450, 0.550]"), None]  # not evaluated on v2
    assert by_scorer["tpms"] == [("0.280", "[0.240, 0.330]"), ("0.300", "")]
    assert [t for _, t in secs[0].chart.ticks] == [t for _, t in secs[1].chart.ticks]  # one axis for every chart


def test_scorer_pairs_join_the_version_their_results_name() -> None:
    pairs = [dict(benchmark=EVIL_BENCH, split="average", scorer_a="tpms", scorer_b=EVIL_SCORER, value=-0.22, ci_low=-0.3,
                  ci_high=-0.1, order_holds=1.0, n=40, separated=True, more_needed=None),
             dict(benchmark=EVIL_BENCH, split="pointwise", scorer_a="tpms", scorer_b=EVIL_SCORER, value=-0.02,
                  ci_low=-0.1, ci_high=0.05, order_holds=0.7, n=40, separated=False, more_needed=1),
             dict(benchmark="elsewhere", split="average", scorer_a="a", scorer_b="b", value=0.0, n=1)]
    results = [dict(benchmark=EVIL_BENCH, benchmark_version="v1", run_id="run-1")]
    sep = separation_by_version(pairs, results, {"run-1": "http://ui/runs/flow-run/run-1"})
    assert list(sep) == [(EVIL_BENCH, "v1")]  # a benchmark the results do not name is left out
    assert [r["verdict"] for r in sep[(EVIL_BENCH, "v1")]["rows"]] == ["separated", "1 more tuple"]
    page, _ = results_page(rows(), {}, "now", "0.1.0", sep)
    assert page.count('<table class="separation">') == 1 and "<script>" not in page
    assert 'class="separated">separated<' in page and '<a href="http://ui/runs/flow-run/run-1">run <code>run-1' in page


def _splits(same: bool) -> pl.DataFrame:
    """One release version with pointwise, paper-centric and reviewer-centric results (reviewer-centric
    equal to pointwise when ``same``) and their average, as the evaluation writes them (its ``n``: splits)."""
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    out = []
    for scorer, base in (("bm25", 0.30), ("tpms", 0.25)):
        losses = {"pointwise": (base, 120), "paper_centric": (base + 0.05, 80),
                  "reviewer_centric": (base if same else base + 0.01, 120)}
        losses["average"] = (sum(v for v, _ in losses.values()) / 3, 3)
        for split, (loss, n) in losses.items():
            out.append(dict(benchmark="release", version="v1", split=split, scorer=scorer, metric="loss", value=loss,
                            ci_low=None if split == "average" else loss - 0.02, ci_high=None if split == "average" else loss + 0.02,
                            n=n, coverage=1.0, run_id="run-1", evaluated_at=when, release_status="published", baseline=None))
    return pl.DataFrame(out)


def test_synthetic_versions_say_so_in_the_page_the_section_and_the_chart() -> None:
    page, _ = results_page(_splits(True), {}, "now", "0.1.0", synthetic={("release", "v1")})
    assert 'class="synthetic-banner"' in page and page.count('<span class="synthetic">SYNTHETIC</span>') >= 3
    assert '<text class="stamp"' in page and 'aria-label="SYNTHETIC: Loss' in page
    real, _ = results_page(_splits(True), {}, "now", "0.1.0")
    assert "SYNTHETIC" not in real


def test_average_rows_count_the_pairs_of_their_splits_not_the_splits() -> None:
    (sec,) = sections(_splits(False), {})
    average = {r["scorer"]: r["n"] for r in sec.rows if r["split"] == "average"}
    assert average == {"bm25": "320 in 3 splits", "tpms": "320 in 3 splits"}
    assert {r["n"] for r in sec.rows if r["split"] == "pointwise"} == {"120"}


def test_a_split_with_the_same_pairs_and_results_as_another_is_shown_once() -> None:
    (same,) = sections(_splits(True), {})
    assert sorted({r["split"] for r in same.rows}) == ["average", "paper_centric", "pointwise = reviewer_centric"]
    assert same.same_splits and "reviewer_centric" in same.same_splits[0]
    assert len(same.chart.bars) == 6  # two scorers x three rows, not four
    (apart,) = sections(_splits(False), {})
    assert not apart.same_splits and len(apart.rows) == 8


def test_assignment_and_attack_get_tables_and_a_chart_of_their_own() -> None:
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    base = dict(benchmark="warehouse", version="v1", n=50, coverage=None, run_id="run-1", evaluated_at=when,
                release_status=None, ci_low=None, ci_high=None)
    extra = [dict(base, split="assignment:candidates", scorer="tpms", metric=m, value=v, basis="k=3 per paper, load<=6, objective=sum")
             for m, v in [("assigned_rating", 3.55), ("papers_with_expert", 0.82), ("worst_paper_best", 1.0), ("known_share", 1.0)]]
    extra += [dict(base, split=f"attack:start={st}:min_profile=1", scorer="tpms", metric=m, value=v, basis="")
              for st in (4, 12) for m, v in [("success_at_k", 0.9), ("median_rank_after", 1.0), ("median_rank_before", float(st))]]
    extra += [dict(base, split="attack", scorer="trivial", metric="success_at_k", value=None, basis="immune: scores every pair alike")]
    df = pl.concat([rows().with_columns(basis=pl.lit(None, pl.Utf8)), pl.DataFrame(extra)], how="diagonal_relaxed")
    page, _ = results_page(df, {}, "now", "0.1.0", synthetic=[("warehouse", "v1")])
    assert "The assignment each scorer yields" in page and "3.55" in page and "82%" in page
    assert "What colluders can make each scorer do" in page and "90% (rank 4 → 1)" in page
    assert "immune: scores every pair alike" in page and "share of attacked pairs reaching the top k" in page
    assert "SYNTHETIC: Collusion attack success" in page
    main = page.split("The assignment each scorer yields")[0].split('id="b2"')[-1]
    assert "assignment:candidates</td>" not in main and "attack:start" not in main


def _lr_shaped(stale_average: bool = False) -> pl.DataFrame:
    """One version as the evaluation writes LR-bench-shaped data: reviewer-centric holds the
    pointwise pairs (the pair metrics copied under both names), only pointwise has ranking metrics,
    and each scorer has a paired difference to the baseline tpms. ``stale_average``: the average as
    an evaluation older than the recognition of repeated splits wrote it (three splits, one twice)."""
    when = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    out = []

    def add(split: str, scorer: str, metric: str, value: float, n: int, ci: bool = True, baseline: str | None = None) -> None:
        out.append(dict(benchmark="warehouse", version="w1", split=split, scorer=scorer, metric=metric, value=value,
                        ci_low=value - 0.02 if ci else None, ci_high=value + 0.02 if ci else None, n=n, coverage=1.0,
                        run_id="run-1", evaluated_at=when, release_status=None, baseline=baseline))

    for scorer, base in (("bm25", 0.30), ("tpms", 0.25)):
        for split, loss, n in (("pointwise", base, 120), ("reviewer_centric", base, 120), ("paper_centric", base + 0.06, 80)):
            add(split, scorer, "loss", loss, n)
            add(split, scorer, "accuracy", 1 - loss, n)
        add("pointwise", scorer, "NDCG@10", base + 0.4, 30, ci=False)
        splits = [base, base + 0.06] + ([base] if stale_average else [])
        add("average", scorer, "loss", sum(splits) / len(splits), len(splits), ci=False)
    for split in ("pointwise", "reviewer_centric", "paper_centric"):
        add(split, "bm25 - tpms", "loss", 0.05, 120 if split != "paper_centric" else 80, baseline="tpms")
    return pl.DataFrame(out)


def test_real_shaped_repeated_splits_are_shown_once_and_counted_once() -> None:
    (sec,) = sections(_lr_shaped(), {})
    assert sorted({r["split"] for r in sec.rows}) == ["average", "paper_centric", "pointwise = reviewer_centric"]
    assert sec.repeats == {"reviewer_centric": "pointwise"} and "counted once" in sec.same_splits[0]
    average = {r["scorer"]: r for r in sec.rows if r["split"] == "average"}
    assert average["bm25"]["n"] == "200 in 2 splits"  # 120 + 80 distinct pairs, not 120 + 120 + 80
    assert average["bm25"]["headline"][0][1] == "0.330"  # the evaluation's own average, untouched
    merged = next(r for r in sec.rows if r["scorer"] == "tpms" and r["split"].startswith("pointwise"))
    assert merged["other"] == ["0.650"]  # pointwise's ranking metric stays on the merged row


def test_an_average_that_counted_a_repeated_split_is_taken_again() -> None:
    (sec,) = sections(_lr_shaped(stale_average=True), {})
    average = {r["scorer"]: r for r in sec.rows if r["split"] == "average"}
    assert average["bm25"]["headline"][0][1] == "0.330" and average["tpms"]["headline"][0][1] == "0.280"
    assert any("bm25, tpms is taken here over the distinct splits" in n for n in sec.same_splits)


def test_paired_differences_are_a_table_of_their_own_not_scorers() -> None:
    (sec,) = sections(_lr_shaped(), {})
    assert {r["scorer"] for r in sec.rows} == {"bm25", "tpms"}
    assert [b.label for b in sec.chart.bars if " - " in b.label] == []
    assert [(r["scorer"], r["split"]) for r in sec.differences] == [("bm25 - tpms", "pointwise = reviewer_centric"),
                                                                    ("bm25 - tpms", "paper_centric")]
    assert all(" - " not in r["scorer"] for b in overview([sec]) for r in b["rows"])
    page, _ = results_page(_lr_shaped(), {}, "now", "0.1.0")
    assert "2 scorers" in page and page.count('<table class="differences">') == 1
    chart = page.split('<svg class="loss-chart"')[1].split("</svg>")[0]
    assert "bm25 - tpms" not in chart


def test_scorer_pairs_of_a_repeated_split_are_named_as_the_tables_name_it() -> None:
    pairs = [dict(benchmark="warehouse", split=split, scorer_a="tpms", scorer_b="bm25", value=-0.05, ci_low=-0.08,
                  ci_high=-0.01, order_holds=0.99, n=120, separated=True, more_needed=None)
             for split in ("pointwise", "reviewer_centric", "paper_centric")]
    sep = separation_by_version(pairs, [dict(benchmark="warehouse", benchmark_version="w1", run_id="run-1")], {})
    page, _ = results_page(_lr_shaped(), {}, "now", "0.1.0", sep)
    table = page.split('<table class="separation">')[1].split("</table>")[0]
    assert table.count("<tr><td>tpms</td>") == 2 and "<td>pointwise = reviewer_centric</td>" in table
    assert "<td>reviewer_centric</td>" not in table


def test_the_other_metrics_come_one_table_per_cutoff_with_breakable_headers() -> None:
    rows_ = [{"scorer": "tpms", "split": "pointwise", "other": ["0.9", "0.5", "0.6", "0.7"]},
             {"scorer": "tpms", "split": "average", "other": ["–", "–", "–", "–"]}]
    tables = other_tables(rows_, ["InstitutionDiversity@10", "NDCG@5", "Recall_hard@10", "coverage_gap"])
    assert [t["cutoff"] for t in tables] == [None, "5", "10"]
    assert tables[2]["headers"] == [("InstitutionDiversity@10", ["Institution", "Diversity"]),
                                    ("Recall_hard@10", ["Recall_", "hard"])]
    assert tables[2]["rows"] == [{"scorer": "tpms", "split": "pointwise", "cells": ["0.9", "0.6"]}]  # no all-dash row
    page, _ = results_page(_lr_shaped(), {}, "now", "0.1.0")
    assert "At the top 10 of each list (@10)" in page and 'title="NDCG@10">NDCG</th>' in page


def test_a_benchmark_of_one_version_has_no_overview_column_of_its_own() -> None:
    assert overview(sections(_lr_shaped(), {})) == []
    page, _ = results_page(_lr_shaped(), {}, "now", "0.1.0")
    assert 'id="overview"' not in page
    assert 'id="overview"' in results_page(rows(), {}, "now", "0.1.0")[0]  # two versions: side by side
