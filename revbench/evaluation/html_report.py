"""The page to share: every benchmark version x scorer x split from the warehouse's evaluation
results as one self-contained HTML file (inline style and SVG, no script, nothing fetched).

Pure: the caller reads the rows and the runs' addresses and writes the text. The geometry of the
charts is computed here so that the template only draws it."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from revbench.evaluation.evaluate import AVERAGED, OWN_COVERAGE, PAIR_METRICS
from revbench.evaluation.model import SPLIT_AVERAGE, is_difference
from revbench.templates import render, version

TEMPLATE = "reports/results.html.j2"
# The metrics with bootstrap intervals, shown in the main table; every other metric goes into a
# folded table beneath it.
HEADLINE = ("loss", "accuracy", "easy_accuracy", "hard_accuracy")
SPLIT_ORDER = ("average", "pointwise", "paper_centric", "reviewer_centric")

# Chart geometry in SVG user units (a label's width is estimated from its length at 12px).
LABEL_W, PLOT_W, ROW_H, TOP, BOTTOM, CHAR_W = 160, 440, 24, 8, 34, 7


@dataclass(frozen=True)
class Bar:
    """One scorer's loss on one split: the dot at ``x``, the whisker from ``x_low`` to ``x_high``
    (None without an interval; the dot is None without a value)."""

    label: str
    y: float
    value: str
    interval: str
    x: float | None
    x_low: float | None
    x_high: float | None


@dataclass(frozen=True)
class Chart:
    """An error-bar chart of loss for one benchmark version."""

    width: int
    height: int
    plot_x: int
    plot_w: int
    axis_y: float
    ticks: list[tuple[float, str]]
    bars: list[Bar]
    stamp: str | None = None
    """Written across the plot (SYNTHETIC), so a chart cut out of the page still says it."""
    axis: str = "loss (lower is better)"


@dataclass
class Section:
    """One benchmark version: its rows (scorer x split), the other metrics, its chart, its runs and,
    when a report folder gave them, its scorer pairs."""

    anchor: str
    benchmark: str
    version: str
    release_status: str | None
    evaluated_at: str
    rows: list[dict[str, Any]]
    other_metrics: list[str]
    chart: Chart
    runs: list[dict[str, str | None]] = field(default_factory=list)  # run_id, url (or None), scorers
    separation: dict[str, Any] | None = None  # run_id, url and rows of the scorer pairs, when given
    synthetic: bool = False
    """The version's data came from a simulated world and panel: every place it is shown says so."""
    same_splits: list[str] = field(default_factory=list)
    """Notes on splits shown once because another split has the same pairs and results."""
    assignment: list[dict[str, Any]] = field(default_factory=list)
    """Each scorer's assignment quality (``revbench evaluate --assignment``), one row per instance."""
    attack: list[dict[str, Any]] = field(default_factory=list)
    """Each scorer's collusion attack success by starting rank (``--attack``), one row per minimum profile."""
    attack_chart: Chart | None = None
    differences: list[dict[str, Any]] = field(default_factory=list)
    """The paired differences to the baseline (``bm25 - tpms``), rows as the main table's."""
    repeats: dict[str, str] = field(default_factory=dict)
    """``split -> the split it repeats``, left out of every table of the section."""
    other_tables: list[dict[str, Any]] = field(default_factory=list)
    """The other metrics, one table per cutoff (:func:`other_tables`)."""


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{_fmt(low)}, {_fmt(high)}]"


def _share(x: float | None) -> str:
    # 99.6% must not read as 100%: only full coverage is shown without decimals.
    return "–" if x is None else "100%" if x >= 1 else f"{x:.1%}"


def _split_key(split: str) -> tuple[int, str]:
    return (SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER), split)


def _nice_top(x: float) -> float:
    """The axis end: the smallest of 1, 2, 2.5 or 5 times a power of ten at or above ``x``."""
    if x <= 0:
        return 1.0
    base = 10 ** math.floor(math.log10(x))
    return next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= x - 1e-12)


def loss_chart(rows: list[dict[str, Any]], top: float | None = None, stamp: str | None = None) -> Chart:
    """The loss of each row (``scorer``, ``split``, ``loss``, ``loss_low``, ``loss_high``) as a
    dot with its 95% interval as a whisker, on an axis from 0 to ``top`` (by default one that
    holds every interval)."""
    if top is None:
        extent = [v for r in rows for v in (r["loss"], r["loss_low"], r["loss_high"]) if v is not None]
        top = _nice_top(max(extent, default=1.0))

    labels = [f"{r['scorer']} · {r['split']}" for r in rows]
    plot_x = max(LABEL_W, CHAR_W * max(map(len, labels), default=0) + 16)

    def x_of(v: float | None) -> float | None:
        return None if v is None else round(plot_x + PLOT_W * min(max(v, 0.0), top) / top, 2)

    bars = []
    for i, (r, label) in enumerate(zip(rows, labels, strict=True)):
        has_interval = r["loss_low"] is not None and r["loss_high"] is not None
        bars.append(Bar(label, TOP + ROW_H * i + ROW_H / 2, _fmt(r["loss"]),
                        _interval(r["loss_low"], r["loss_high"]), x_of(r["loss"]),
                        x_of(r["loss_low"]) if has_interval else None, x_of(r["loss_high"]) if has_interval else None))
    axis_y = TOP + ROW_H * len(rows)
    ticks = [(round(plot_x + PLOT_W * k / 4, 2), f"{top * k / 4:g}") for k in range(5)]
    return Chart(plot_x + PLOT_W + 20, int(axis_y + BOTTOM), plot_x, PLOT_W, axis_y, ticks, bars, stamp)


def duplicate_splits(df: pl.DataFrame) -> dict[str, str]:
    """``split -> the earlier split it repeats``: splits (other than the average) whose pair metrics
    (loss and the accuracies: scorer, value, interval, pairs, coverage) equal an earlier split's,
    and whose other rows, if any, the earlier split has too. Pointwise and reviewer-centric hold the
    same pairs when every reviewer rated every paper of theirs; the evaluation then copies the pair
    metrics under both names, while the ranking metrics exist for the pointwise split alone."""
    cols = ["scorer", "metric", "value", "ci_low", "ci_high", "n", "coverage"]
    kept: list[tuple[str, tuple[Any, ...], set[tuple[Any, ...]]]] = []
    out: dict[str, str] = {}
    for split in sorted(set(df["split"].to_list()) - {SPLIT_AVERAGE}, key=_split_key):
        rows = df.filter(pl.col("split") == split).select(cols).sort("scorer", "metric")
        pair = tuple(rows.filter(pl.col("metric").is_in(PAIR_METRICS)).iter_rows())
        rest = set(rows.filter(~pl.col("metric").is_in(PAIR_METRICS)).iter_rows())
        earlier = next((k for k, p, r in kept if pair and p == pair and rest <= r), None)
        if earlier is None:
            kept.append((split, pair, rest))
        else:
            out[split] = earlier
    return out


def _repeated_by(repeats: Mapping[str, str]) -> dict[str, list[str]]:
    """``kept split -> the splits that repeat it``, from :func:`duplicate_splits`'s answer."""
    return {kept: [d for d, k in repeats.items() if k == kept] for kept in set(repeats.values())}


def distinct_averages(df: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``df`` (one version's rows, its repeated splits left out) with each average row of loss or
    accuracy that counted a repeated split (its ``n``, the splits averaged, exceeds the distinct
    splits: evaluations made before repeated splits were recognised) taken again over the
    distinct splits, and the scorers so corrected."""
    parts = df.filter(pl.col("metric").is_in(AVERAGED) & (pl.col("split") != SPLIT_AVERAGE)
                      & ~pl.col("split").str.ends_with(OWN_COVERAGE) & pl.col("value").is_not_null())
    means = parts.group_by("scorer", "metric").agg(pl.col("value").mean().alias("_mean"), pl.len().alias("_k"))
    joined = df.join(means, on=["scorer", "metric"], how="left")
    redo = (pl.col("split") == SPLIT_AVERAGE) & pl.col("_k").is_not_null() & (pl.col("n") > pl.col("_k"))
    fixed = sorted(set(joined.filter(redo)["scorer"].to_list()))
    out = joined.with_columns(value=pl.when(redo).then(pl.col("_mean")).otherwise(pl.col("value")),
                              n=pl.when(redo).then(pl.col("_k")).otherwise(pl.col("n")))
    return out.drop("_mean", "_k"), fixed


def _pairs_label(n: int | None, split: str, scorer: str, df: pl.DataFrame) -> str:
    """The Pairs cell: a split's rated pairs; for the average, the pairs of the splits it averages
    (its own ``n`` counts splits, not pairs), from ``df`` without the repeated splits, so a pair is
    counted once."""
    if split != SPLIT_AVERAGE:
        return "–" if n is None else f"{n:,}"
    parts = (df.filter((pl.col("scorer") == scorer) & (pl.col("metric") == "loss") & (pl.col("split") != SPLIT_AVERAGE)
                       & ~pl.col("split").str.ends_with(OWN_COVERAGE) & pl.col("value").is_not_null())
             .unique("split"))
    if parts.is_empty():
        return "–"
    k = parts.height
    return f"{int(parts['n'].sum()):,} in {k} split{'s' if k != 1 else ''}"


JUDGED = r"^(assignment:|attack)"
"""The splits of the assignment and the attack: tables of their own, never rows of the main table."""


def _judged(df: pl.DataFrame, synthetic: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Chart | None]:
    """The assignment's and the attack's rows of one version, and the attack's chart."""
    assignment = []
    part = df.filter(pl.col("split").str.starts_with("assignment:") & ~is_difference())
    for (split, scorer), g in part.group_by("split", "scorer", maintain_order=True):
        m = {r["metric"]: r for r in g.iter_rows(named=True)}

        def cell(name: str, digits: int = 2, pct: bool = False) -> tuple[str, str]:
            r = m.get(name) or {}
            scale = 100 if pct else 1
            f = (lambda v: "–" if v is None else f"{scale * v:.{0 if pct else digits}f}{'%' if pct else ''}")
            return f(r.get("value")), ("" if r.get("ci_low") is None else f"[{f(r['ci_low'])}, {f(r['ci_high'])}]")

        assignment.append({"scorer": scorer, "instance": str(split).removeprefix("assignment:"),
                           "basis": next(iter(m.values())).get("basis") or "", "rating": cell("assigned_rating"),
                           "expert": cell("papers_with_expert", pct=True), "worst": cell("worst_paper_best", 0),
                           "known": cell("known_share", pct=True), "n": next(iter(m.values()))["n"]})
    attack = []
    att = df.filter(pl.col("split").str.starts_with("attack:")).with_columns(
        start=pl.col("split").str.extract(r"start=(\d+)", 1).cast(pl.Int64),
        min_profile=pl.col("split").str.extract(r"min_profile=(\d+)", 1).cast(pl.Int64))
    starts = sorted(set(att["start"].to_list()))
    for (scorer, mp), g in att.sort("min_profile").group_by("scorer", "min_profile", maintain_order=True):
        got = {(r["start"], r["metric"]): r["value"] for r in g.iter_rows(named=True)}
        attack.append({"scorer": scorer, "min_profile": mp, "immune": False, "cells": [
            "–" if got.get((st, "success_at_k")) is None
            else f"{100 * got[(st, 'success_at_k')]:.0f}% (rank {got.get((st, 'median_rank_before')):g} → "
                 f"{got.get((st, 'median_rank_after')):g})" for st in starts]})
    for r in df.filter(pl.col("split") == "attack").unique("scorer", maintain_order=True).iter_rows(named=True):
        attack.append({"scorer": r["scorer"], "min_profile": None, "cells": [str(r.get("basis") or "immune")], "immune": True})
    for row in attack:
        row["starts"] = starts
    ones = att.filter((pl.col("min_profile") == 1) & (pl.col("metric") == "success_at_k"))
    chart = None
    if ones.height:
        mean = ones.group_by("scorer", maintain_order=True).agg(pl.col("value").mean())
        chart = loss_chart([{"scorer": sc, "split": "attack", "loss": v, "loss_low": None, "loss_high": None}
                            for sc, v in mean.iter_rows()], 1.0, "SYNTHETIC" if synthetic else None)
        chart = replace(chart, axis="share of attacked pairs reaching the top k (mean over starting ranks)")
    return assignment, attack, chart


def _header_parts(metric: str) -> list[str]:
    """A metric's header in pieces a browser may break between (``Institution|Diversity``,
    ``Recall_|hard``), the cutoff left to the table's caption: the columns stay narrow."""
    name = re.sub(r"@\d+$", "", metric)
    return [p for p in re.split(r"(?<=_)|(?<=[a-z])(?=[A-Z])", name) if p]


def other_tables(rows: list[dict[str, Any]], other: list[str]) -> list[dict[str, Any]]:
    """The metrics beside the headline ones (``other``, each row's ``other`` in that order) as one
    table per cutoff (``NDCG@5`` with the ``@5`` metrics; those without one first), each with the
    rows that have a value in it: ``cutoff`` (None: none), ``headers`` (metric, header pieces),
    ``rows`` (scorer, split, cells). One table of every metric would be far wider than the page."""
    groups: dict[str | None, list[int]] = {}
    for i, m in enumerate(other):
        cut = re.search(r"@(\d+)$", m)
        groups.setdefault(cut.group(1) if cut else None, []).append(i)
    out = []
    for cutoff in sorted(groups, key=lambda c: -1 if c is None else int(c)):
        idx = groups[cutoff]
        body = [{"scorer": r["scorer"], "split": r["split"], "cells": [r["other"][i] for i in idx]} for r in rows]
        out.append({"cutoff": cutoff, "headers": [(other[i], _header_parts(other[i])) for i in idx],
                    "rows": [b for b in body if any(v != "–" for v in b["cells"])]})
    return [t for t in out if t["rows"]]


def _table_rows(shown: pl.DataFrame, other: list[str], also: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """One display row per (scorer, split) of ``shown`` (no repeated split): the headline metrics
    with intervals, the ``other`` metrics, pairs and coverage; a split others repeat is named
    with them (``pointwise = reviewer_centric``)."""
    by_key = {(r["scorer"], r["split"], r["metric"]): r for r in shown.iter_rows(named=True)}
    keys = sorted({(r["scorer"], r["split"]) for r in by_key.values()}, key=lambda p: (p[0], _split_key(p[1])))
    rows = []
    for scorer, split in keys:
        cells = {m: by_key.get((scorer, split, m)) for m in (*HEADLINE, *other)}
        any_row = next(c for c in cells.values() if c is not None)
        loss = cells["loss"] or {}
        rows.append({
            "scorer": scorer, "split": " = ".join([split, *also.get(split, [])]),
            "n": _pairs_label(any_row["n"], split, scorer, shown),
            "coverage": _share(any_row["coverage"]),
            "partial": any_row["coverage"] is not None and any_row["coverage"] < 1,
            "loss": loss.get("value"), "loss_low": loss.get("ci_low"), "loss_high": loss.get("ci_high"),
            "headline": [(m, _fmt(c["value"]) if c else "–", _interval(c["ci_low"], c["ci_high"]) if c else "")
                         for m, c in ((m, cells[m]) for m in HEADLINE)],
            "other": [_fmt(cells[m]["value"]) if cells[m] else "–" for m in other],
        })
    return rows


def _section(i: int, benchmark: str, version_: str, df: pl.DataFrame, run_urls: Mapping[str, str],
             top: float, synthetic: bool = False) -> Section:
    judged = _judged(df, synthetic)
    full, df = df, df.filter(~pl.col("split").str.contains(JUDGED))
    repeats = duplicate_splits(df)
    shown, corrected = distinct_averages(df.filter(~pl.col("split").is_in(list(repeats))))
    # A paired difference (a row with a baseline) goes to a table of its own, never the scorers' or the chart.
    own, differences = shown.filter(~is_difference()), shown.filter(is_difference())
    other = sorted(set(own["metric"].to_list()) - set(HEADLINE))
    also = _repeated_by(repeats)
    rows = _table_rows(own, other, also)
    runs = [{"run_id": rid, "url": run_urls.get(rid), "scorers": ", ".join(g["scorer"].unique().sort().to_list())}
            for (rid,), g in full.sort("evaluated_at", "scorer").group_by("run_id", maintain_order=True)]
    status = full["release_status"].drop_nulls()
    notes = [f"{' and '.join(dup)}: the same pairs and results as {kept}, so shown once, as \"{kept} = {' = '.join(dup)}\", "
             "and counted once in the average and its pairs" for kept, dup in sorted(also.items())]
    if corrected:
        notes.append(f"The average of {', '.join(corrected)} is taken here over the distinct splits (the evaluation, "
                     "older than this page, counted a repeated split twice)")
    return Section(f"b{i}", benchmark, version_, status[0] if status.len() else None,
                   f"{full['evaluated_at'].min():%Y-%m-%d %H:%M} UTC", rows, other,
                   loss_chart(rows, top, "SYNTHETIC" if synthetic else None), runs, synthetic=synthetic, same_splits=notes,
                   assignment=judged[0], attack=judged[1], attack_chart=judged[2],
                   differences=_table_rows(differences, [], also), repeats=repeats,
                   other_tables=other_tables(rows, other))


def sections(results: pl.DataFrame, run_urls: Mapping[str, str],
             synthetic: Collection[tuple[str, str]] = ()) -> list[Section]:
    """One section per benchmark version of ``results`` (rows as
    ``Warehouse.evaluate.evaluation_results`` returns them), in their order; ``synthetic`` names the
    (benchmark, version) pairs whose data is SYNTHETIC."""
    out = []
    # One axis for every chart, so that versions compare at a glance.
    loss = results.filter((pl.col("metric") == "loss") & ~pl.col("split").str.contains(JUDGED)
                          & ~is_difference())
    top = _nice_top(max((v for c in ("value", "ci_low", "ci_high") for v in loss[c].drop_nulls().to_list()), default=1.0))
    keys = results.select("benchmark", "version").unique(maintain_order=True).iter_rows()
    for i, (benchmark, version_) in enumerate(keys, start=1):
        part = results.filter((pl.col("benchmark") == benchmark) & (pl.col("version") == version_))
        out.append(_section(i, benchmark, version_, part, run_urls, top, (benchmark, version_) in synthetic))
    return out


def overview(secs: list[Section]) -> list[dict[str, Any]]:
    """Per benchmark, the loss of each scorer (rows) on each version (columns), split by split:
    ``benchmark, versions, rows`` with rows ``scorer, split, cells`` (value and interval, or None
    where the scorer was not evaluated on that version). Only benchmarks with two versions or more:
    one version's column would repeat its own section's table."""
    out = []
    for benchmark in dict.fromkeys(s.benchmark for s in secs):
        mine = [s for s in secs if s.benchmark == benchmark]
        if len(mine) < 2:
            continue
        cells = {(r["scorer"], r["split"], s.anchor): (_fmt(r["loss"]), _interval(r["loss_low"], r["loss_high"]))
                 for s in mine for r in s.rows}
        keys = sorted({(sc, sp) for sc, sp, _ in cells}, key=lambda k: (k[0], _split_key(k[1])))
        out.append({"benchmark": benchmark, "versions": mine,
                    "rows": [{"scorer": sc, "split": sp, "cells": [cells.get((sc, sp, s.anchor)) for s in mine]}
                             for sc, sp in keys]})
    return out


def _verdict(row: Mapping[str, Any]) -> str:
    if row.get("separated"):
        return "separated"
    if row.get("value") == 0:
        return "not separable by size alone"
    more = row.get("more_needed")
    return "–" if more is None else f"{more:,} more tuple{'s' if more != 1 else ''}"


def separation_by_version(pairs: list[dict[str, Any]], result_rows: list[dict[str, Any]],
                          run_urls: Mapping[str, str]) -> dict[tuple[str, str], dict[str, Any]]:
    """The scorer pairs of one evaluation (``separation.json``), keyed by the benchmark version
    its result rows (``results.json`` of the same folder) name: ``run_id``, ``url`` and display
    ``rows`` (A, B, split, difference with interval, order held, tuples, what separates them)."""
    where = {r["benchmark"]: (r["benchmark_version"], r["run_id"]) for r in result_rows}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for p in pairs:
        if p["benchmark"] not in where:
            continue
        version_, run_id = where[p["benchmark"]]
        entry = out.setdefault((p["benchmark"], version_), {"run_id": run_id, "url": run_urls.get(run_id), "rows": []})
        entry["rows"].append({
            "scorer_a": p["scorer_a"], "scorer_b": p["scorer_b"], "split": p["split"],
            "diff": _fmt(p["value"]), "interval": _interval(p.get("ci_low"), p.get("ci_high")),
            "order_holds": "–" if p.get("order_holds") is None else f"{p['order_holds']:.1%}",
            "n": p["n"], "verdict": _verdict(p), "separated": bool(p.get("separated")),
        })
    return out


def results_page(results: pl.DataFrame, run_urls: Mapping[str, str], generated_at: str,
                 revbench_version: str, separation: Mapping[tuple[str, str], dict[str, Any]] | None = None,
                 synthetic: Collection[tuple[str, str]] = ()) -> tuple[str, str]:
    """The page's HTML and its template's version. ``run_urls`` maps a run id to its page in the
    Prefect UI (runs not in it are shown by id); ``separation`` (from
    :func:`separation_by_version`) adds the scorer pairs to their versions' sections. Every name
    in the page is escaped; ``synthetic`` names the (benchmark, version) pairs whose data is SYNTHETIC,
    which the page says at its top, in their sections and across their charts."""
    secs = sections(results, run_urls, synthetic)
    for s in secs:
        sep = (separation or {}).get((s.benchmark, s.version))
        if sep is not None:
            # The scorer pairs are named by split as the tables are: a repeated split's pairs (an
            # older report's) are left out, the split it repeats named with it.
            also = _repeated_by(s.repeats)
            sep = {**sep, "rows": [{**r, "split": " = ".join([r["split"], *also.get(r["split"], [])])}
                                   for r in sep["rows"] if r["split"] not in s.repeats]}
        s.separation = sep
    scorers = results.filter(~is_difference())["scorer"]
    return render(TEMPLATE, sections=secs, overview=overview(secs), template_version=version(TEMPLATE),
                  generated_at=generated_at, revbench_version=revbench_version, headline=HEADLINE,
                  n_benchmarks=len({s.benchmark for s in secs}), n_scorers=scorers.n_unique(),
                  n_runs=results["run_id"].n_unique(), any_synthetic=any(x.synthetic for x in secs))
