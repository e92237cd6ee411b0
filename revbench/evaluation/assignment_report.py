"""The assignment and attack rows of an evaluation as report tables, a figure and one line each."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

# The split names, not the assignment: every evaluation's report reads these tables (empty
# without --assignment), and only a judged one needs the assignment's solver and metrics.
from revbench.evaluation.model import SPLIT_ASSIGNMENT_CANDIDATES as CANDIDATES
from revbench.evaluation.model import SPLIT_ASSIGNMENT_POOL as POOL
from revbench.evaluation.model import is_difference
from revbench.evaluation.report import ReportTable

JUDGED_TITLES = ("· assignment over", "· collusion attack")
"""What the titles of the assignment's and the attack's tables hold (a run's printers show these
as one line each, :func:`summary_lines`; ``report.md`` keeps the tables)."""


def is_judged(table: ReportTable) -> bool:
    """Whether ``table`` is one of the assignment's or the attack's."""
    return any(t in table.title for t in JUDGED_TITLES)


_ATTACK = re.compile(r"^attack:start=(\d+):min_profile=(\d+)$")
_INSTANCE = {CANDIDATES: "each paper's rated candidates", POOL: "the whole reviewer pool (unrated pairs unknown)"}


def _cell(r: dict[str, object], digits: int = 2, pct: bool = False) -> str:
    v = r.get("value")
    if v is None:
        return "–"
    fmt = (lambda x: f"{100 * float(x):.0f}%") if pct else (lambda x: f"{float(x):.{digits}f}")
    lo, hi = r.get("ci_low"), r.get("ci_high")
    return fmt(v) + (f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else "")


def assignment_tables(df: pl.DataFrame) -> list[ReportTable]:
    """Per benchmark and instance: each scorer's assignment quality, then its paired differences."""
    out: list[ReportTable] = []
    rows = df.filter(pl.col("split").is_in([CANDIDATES, POOL]))
    for (bench, split), part in rows.group_by("benchmark", "split", maintain_order=True):
        basis = part["basis"].drop_nulls().first() if "basis" in part.columns else ""
        body, diffs = [], []
        # Keyed by the baseline too: a scorer's own label may read like a difference's name.
        keys = part.select("scorer", "baseline", is_difference().alias("difference")).unique(maintain_order=True)
        for scorer, baseline, difference in keys.iter_rows():
            mine = part.filter((pl.col("scorer") == scorer) & pl.col("baseline").eq_missing(baseline))
            m = {r["metric"]: r for r in mine.iter_rows(named=True)}
            line = [scorer, _cell(m.get("assigned_rating", {})), _cell(m.get("papers_with_expert", {}), pct=True),
                    _cell(m.get("worst_paper_best", {}), 0), _cell(m.get("known_share", {}), pct=True)]
            (diffs if difference else body).append(line)
        n = int(part["n"].max() or 0)
        title = f"### {bench} · assignment over {_INSTANCE.get(str(split), split)} ({basis}; {n} papers)"
        cols = ["scorer", "mean rating assigned", "papers with an expert (≥4)", "worst paper's best", "pairs with a rating"]
        out.append(ReportTable(title, cols, body))
        if diffs:
            out.append(ReportTable(f"### {bench} · assignment over {_INSTANCE.get(str(split), split)}: paired differences "
                                   "(papers resampled)", ["difference", *cols[1:]], diffs))
    return out


def attack_tables(df: pl.DataFrame) -> list[ReportTable]:
    """Per benchmark and minimum profile size: each scorer's attack success by starting rank;
    immune scorers with why."""
    out: list[ReportTable] = []
    att = df.filter(pl.col("split").str.starts_with("attack"))
    for bench in att["benchmark"].unique(maintain_order=True).to_list():
        b = att.filter(pl.col("benchmark") == bench)
        parsed = [(int(m.group(1)), int(m.group(2))) for s in b["split"].unique().to_list() if (m := _ATTACK.match(s))]
        starts = sorted({s for s, _ in parsed})
        immune = b.filter(pl.col("split") == "attack").unique("scorer", maintain_order=True)
        for mp in sorted({m for _, m in parsed}):
            rows = []
            for scorer in b.filter(pl.col("split").str.ends_with(f":min_profile={mp}"))["scorer"].unique(maintain_order=True).to_list():
                cells = []
                for st in starts:
                    got = {r["metric"]: r["value"] for r in b.filter((pl.col("scorer") == scorer)
                                                                    & (pl.col("split") == f"attack:start={st}:min_profile={mp}"))
                           .iter_rows(named=True)}
                    k, after = got.get("success_at_k"), got.get("median_rank_after")
                    cells.append("–" if k is None else f"{100 * k:.0f}% (→{after:g})")
                rows.append([scorer, *cells])
            rows += [[r["scorer"], *(["immune"] * len(starts))] for r in immune.iter_rows(named=True)]
            basis = {s: r for s, r in zip(b["split"].to_list(), b["basis"].to_list(), strict=True)}
            heads = []
            for st in starts:
                text = basis.get(f"attack:start={st}:min_profile={mp}", "") or ""
                paper = re.search(r"the paper's (\d+)", text)
                heads.append(f"start {st}" + (f" (paper: {paper.group(1)})" if paper else ""))
            kk = re.search(r"k=(\d+)", next(iter(basis.values()), "") or "")
            out.append(ReportTable(
                f"### {bench} · collusion attack: the reviewer keeps {mp} paper{'s' if mp > 1 else ''}, the abstract is "
                f"rewritten; share of pairs reaching the top {kk.group(1) if kk else 'k'} (median rank after)",
                ["scorer", *heads], rows,
                [f"{r['scorer']}: immune, {str(r['basis']).removeprefix('immune: ')}" for r in immune.iter_rows(named=True)]))
    return out


def summary_lines(df: pl.DataFrame) -> list[str]:
    """One short line for each judgement (the demo prints them): the best assignment over the
    rated candidates, and the attack's success at the paper's smallest starting rank."""
    lines = []
    cand = df.filter((pl.col("split") == CANDIDATES) & (pl.col("metric") == "assigned_rating")
                     & ~is_difference() & pl.col("value").is_not_null())
    if cand.height:
        best = cand.sort("value", descending=True).row(0, named=True)
        worst = cand.sort("value").row(0, named=True)
        lines.append(f"Assignment: {best['scorer']} assigns the best-rated reviewers (mean {best['value']:.2f}), "
                     f"{worst['scorer']} the worst ({worst['value']:.2f}), on {best['n']} papers' rated candidates")
    att = df.filter(pl.col("split").str.contains(":min_profile=1$") & (pl.col("metric") == "success_at_k")
                    & pl.col("value").is_not_null())
    if att.height:
        per = att.group_by("scorer", maintain_order=True).agg(pl.col("value").mean()).sort("value")
        lo, hi = per.row(0, named=True), per.row(per.height - 1, named=True)
        lines.append(f"Collusion attack: {100 * hi['value']:.0f}% of attacked pairs reach the top k under {hi['scorer']}, "
                     f"{100 * lo['value']:.0f}% under {lo['scorer']} (mean over starting ranks)")
    return lines


def plot_attack(df: pl.DataFrame, path: Path) -> Path | None:
    """Attack success by starting rank, one line per scorer (the paper's attack, one kept paper)."""
    att = df.filter(pl.col("split").str.contains(":min_profile=1$") & (pl.col("metric") == "success_at_k")
                    & pl.col("value").is_not_null())
    if att.height == 0:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    att = att.with_columns(start=pl.col("split").str.extract(r"start=(\d+)", 1).cast(pl.Int64))
    for scorer in att["scorer"].unique(maintain_order=True).to_list():
        s = att.filter(pl.col("scorer") == scorer).sort("start")
        ax.plot(s["start"].to_list(), [100 * v for v in s["value"].to_list()], marker="o", label=scorer)
    ax.set_xlabel("starting rank of the colluding reviewer")
    ax.set_ylabel("pairs reaching the top k (%)")
    ax.set_ylim(-5, 105)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
