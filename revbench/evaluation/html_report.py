"""The page to share: every benchmark version x scorer x split from the warehouse's evaluation
results as one self-contained HTML file (inline style and SVG, no script, nothing fetched).

Pure: the caller reads the rows and the runs' addresses and writes the text. The geometry of the
charts is computed here so that the template only draws it."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from revbench.evaluation.model import SPLIT_AVERAGE
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
    """``split -> the earlier split it repeats``: splits (other than the average) whose every row
    (scorer, metric, value, interval, pairs, coverage) equals an earlier split's, as pointwise and
    reviewer-centric do when every reviewer rated every paper of theirs."""
    cols = ["scorer", "metric", "value", "ci_low", "ci_high", "n", "coverage"]
    seen: dict[tuple[Any, ...], str] = {}
    out: dict[str, str] = {}
    for split in sorted(set(df["split"].to_list()) - {SPLIT_AVERAGE}, key=_split_key):
        rows = df.filter(pl.col("split") == split).select(cols).sort("scorer", "metric")
        key = tuple(rows.iter_rows())
        if key in seen:
            out[split] = seen[key]
        else:
            seen[key] = split
    return out


def _pairs_label(n: int | None, split: str, scorer: str, df: pl.DataFrame) -> str:
    """The Pairs cell: a split's rated pairs; for the average, the pairs of the splits it averages
    (its own ``n`` counts splits, not pairs)."""
    if split != SPLIT_AVERAGE:
        return "–" if n is None else f"{n:,}"
    parts = (df.filter((pl.col("scorer") == scorer) & (pl.col("metric") == "loss") & (pl.col("split") != SPLIT_AVERAGE)
                       & ~pl.col("split").str.ends_with(":own_coverage") & pl.col("value").is_not_null())
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
    part = df.filter(pl.col("split").str.starts_with("assignment:") & ~pl.col("scorer").str.contains(" - "))
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


def _section(i: int, benchmark: str, version_: str, df: pl.DataFrame, run_urls: Mapping[str, str],
             top: float, synthetic: bool = False) -> Section:
    judged = _judged(df, synthetic)
    full, df = df, df.filter(~pl.col("split").str.contains(JUDGED))
    rows: list[dict[str, Any]] = []
    other = sorted(set(df["metric"].to_list()) - set(HEADLINE))
    repeats = duplicate_splits(df)
    shown = df.filter(~pl.col("split").is_in(list(repeats)))
    by_key = {(r["scorer"], r["split"], r["metric"]): r for r in shown.iter_rows(named=True)}
    pairs = sorted({(r["scorer"], r["split"]) for r in by_key.values()}, key=lambda p: (p[0], _split_key(p[1])))
    also = {kept: [s for s, k in repeats.items() if k == kept] for kept in set(repeats.values())}
    for scorer, split in pairs:
        cells = {m: by_key.get((scorer, split, m)) for m in (*HEADLINE, *other)}
        any_row = next(c for c in cells.values() if c is not None)
        loss = cells["loss"] or {}
        rows.append({
            "scorer": scorer, "split": " = ".join([split, *also.get(split, [])]),
            "n": _pairs_label(any_row["n"], split, scorer, df),
            "coverage": _share(any_row["coverage"]),
            "partial": any_row["coverage"] is not None and any_row["coverage"] < 1,
            "loss": loss.get("value"), "loss_low": loss.get("ci_low"), "loss_high": loss.get("ci_high"),
            "headline": [(m, _fmt(c["value"]) if c else "–", _interval(c["ci_low"], c["ci_high"]) if c else "")
                         for m, c in ((m, cells[m]) for m in HEADLINE)],
            "other": [_fmt(cells[m]["value"]) if cells[m] else "–" for m in other],
        })
    runs = [{"run_id": rid, "url": run_urls.get(rid), "scorers": ", ".join(g["scorer"].unique().sort().to_list())}
            for (rid,), g in full.sort("evaluated_at", "scorer").group_by("run_id", maintain_order=True)]
    status = full["release_status"].drop_nulls()
    notes = [f"{' and '.join(dup)}: the same pairs and results as {kept}, so shown once, as \"{kept} = {' = '.join(dup)}\""
             for kept, dup in sorted(also.items())]
    return Section(f"b{i}", benchmark, version_, status[0] if status.len() else None,
                   f"{full['evaluated_at'].min():%Y-%m-%d %H:%M} UTC", rows, other,
                   loss_chart(rows, top, "SYNTHETIC" if synthetic else None), runs, synthetic=synthetic, same_splits=notes,
                   assignment=judged[0], attack=judged[1], attack_chart=judged[2])


def sections(results: pl.DataFrame, run_urls: Mapping[str, str],
             synthetic: Collection[tuple[str, str]] = ()) -> list[Section]:
    """One section per benchmark version of ``results`` (rows as
    ``Warehouse.evaluate.evaluation_results`` returns them), in their order; ``synthetic`` names the
    (benchmark, version) pairs whose data is SYNTHETIC."""
    out = []
    # One axis for every chart, so that versions compare at a glance.
    loss = results.filter((pl.col("metric") == "loss") & ~pl.col("split").str.contains(JUDGED))
    top = _nice_top(max((v for c in ("value", "ci_low", "ci_high") for v in loss[c].drop_nulls().to_list()), default=1.0))
    keys = results.select("benchmark", "version").unique(maintain_order=True).iter_rows()
    for i, (benchmark, version_) in enumerate(keys, start=1):
        part = results.filter((pl.col("benchmark") == benchmark) & (pl.col("version") == version_))
        out.append(_section(i, benchmark, version_, part, run_urls, top, (benchmark, version_) in synthetic))
    return out


def overview(secs: list[Section]) -> list[dict[str, Any]]:
    """Per benchmark, the loss of each scorer (rows) on each version (columns), split by split:
    ``benchmark, versions, rows`` with rows ``scorer, split, cells`` (value and interval, or None
    where the scorer was not evaluated on that version)."""
    out = []
    for benchmark in dict.fromkeys(s.benchmark for s in secs):
        mine = [s for s in secs if s.benchmark == benchmark]
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
        s.separation = (separation or {}).get((s.benchmark, s.version))
    return render(TEMPLATE, sections=secs, overview=overview(secs), template_version=version(TEMPLATE),
                  generated_at=generated_at,
                  revbench_version=revbench_version, headline=HEADLINE,
                  n_benchmarks=len({s.benchmark for s in secs}), n_scorers=results["scorer"].n_unique(),
                  n_runs=results["run_id"].n_unique(), any_synthetic=any(x.synthetic for x in secs))
