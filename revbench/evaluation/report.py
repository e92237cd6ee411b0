"""Results as the papers print them: a markdown table (best in bold, never trivial, never a partial scorer
over a complete one) and a plot of loss with intervals."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl

from revbench.evaluation.evaluate import OWN_COVERAGE, TRIVIAL
from revbench.evaluation.model import SPLIT_AVERAGE, MetricValue, is_difference

RESULT_SCHEMA = {
    "benchmark": pl.Utf8, "split": pl.Utf8, "scorer": pl.Utf8, "metric": pl.Utf8,
    "value": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64, "spec": pl.Utf8,
    "coverage": pl.Float64, "predictions_sha256": pl.Utf8, "ties": pl.Float64, "basis": pl.Utf8, "baseline": pl.Utf8,
}
RANKING_SHOWN = ("P_hard@5", "P_soft@5", "P_hard@10", "NDCG@10", "MRR_hard@10", "Recall_hard@10", "WKTD@10")
DIVERSITY_SHOWN = tuple(f"{name}@{k}" for name in ("InstitutionDiversity", "CoauthorDiversity") for k in (5, 10))
LOWER_IS_BETTER = {"loss"} | {f"WKTD@{k}" for k in (5, 10)}


def results_frame(rows: list[MetricValue]) -> pl.DataFrame:
    return pl.DataFrame([asdict(r) for r in rows], schema=RESULT_SCHEMA) if rows else pl.DataFrame(schema=RESULT_SCHEMA)


@dataclass
class ReportTable:
    """One table of the report: a title, a header and rows of cells (``**bold**`` marks the best)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    """Lines under the table: what a row stands on where it is not plain scores, and scorers that
    decided few of the compared pairs."""

    def to_markdown(self) -> str:
        if not self.header:
            # A line in place of a table: what is absent and why.
            return self.title + "\n"
        lines = [self.title, "", "| " + " | ".join(self.header) + " |", "|---|" + "---|" * (len(self.header) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        lines += ([""] + [f"- {n}" for n in self.notes]) if self.notes else []
        return "\n".join(lines) + "\n"


def _cell(value: float | None, lo: float | None, hi: float | None, best: bool) -> str:
    if value is None:
        return "–"
    text = f"{value:.3f}"
    if lo is not None and hi is not None:
        text += f" [{lo:.2f}, {hi:.2f}]"
    return f"**{text}**" if best else text


def _pct(coverage: float) -> str:
    """A share as a percentage that never rounds a partial coverage up to 100%."""
    return "100%" if coverage >= 1.0 else f"{math.floor(coverage * 1000) / 10:g}%"


def _coverage(rows: pl.DataFrame, scorer: str) -> float:
    cov = rows.filter(pl.col("scorer") == scorer)["coverage"].drop_nulls()
    return float(cov.min()) if cov.len() else 1.0


def _best(s: pl.DataFrame, metric: str) -> float | None:
    """The best value of ``metric`` in a table: never ``trivial``'s (a reference line), and among
    scorers that cover every pair when one does (a partial scorer is never best over a complete one)."""
    cand = s.filter((pl.col("metric") == metric) & pl.col("value").is_not_null() & (pl.col("scorer") != TRIVIAL))
    complete = cand.filter(pl.col("coverage").is_null() | (pl.col("coverage") >= 1.0))
    pool = complete if complete.height else cand
    if pool.height == 0:
        return None
    return pool["value"].min() if metric in LOWER_IS_BETTER else pool["value"].max()  # type: ignore[return-value]


def _eligible(s: pl.DataFrame, scorer: str) -> bool:
    """Whether ``scorer`` may be marked best in its table (see :func:`_best`)."""
    if scorer == TRIVIAL:
        return False
    complete = s.filter((pl.col("scorer") != TRIVIAL) & (pl.col("coverage").is_null() | (pl.col("coverage") >= 1.0)))
    return complete.height == 0 or _coverage(s, scorer) >= 1.0


TIES_SHOWN = 0.01
"""A split's table has a ties column once a scorer ties at least this share of its pairs."""
FEW_DECIDED = 0.5
"""A scorer that ties at least this share of a split's pairs gets a line under the table: its loss
and accuracy rest on the rest (a tie costs half in the loss and counts wrong in accuracy)."""


def _ties(rows: pl.DataFrame, scorer: str) -> float | None:
    t = rows.filter((pl.col("scorer") == scorer) & (pl.col("metric") == "loss"))["ties"].drop_nulls()
    return float(t.max()) if t.len() else None


def _shows_ties(s: pl.DataFrame) -> bool:
    return bool(s.filter(pl.col("ties") >= TIES_SHOWN).height)


def stand_on_notes(s: pl.DataFrame) -> list[str]:
    """Lines saying what the rows of one split's table stand on: each scorer that tied most of the
    pairs, and each basis (how cof fused) with the scorers it applies to."""
    notes = []
    for scorer in s["scorer"].unique(maintain_order=True).to_list():
        tied = _ties(s, scorer)
        if tied is not None and tied >= FEW_DECIDED:
            notes.append(f"{scorer} tied {_pct(tied)} of these pairs: its loss and accuracy rest on the "
                         f"{_pct(1 - tied)} it decided")
    with_basis = s.filter((pl.col("basis").fill_null("") != "") & pl.col("metric").is_in(["loss", "accuracy"]))
    for (basis,), g in with_basis.group_by("basis", maintain_order=True):
        notes.append(f"{', '.join(g['scorer'].unique(maintain_order=True).to_list())}: {basis}")
    return notes


def _rows(s: pl.DataFrame, cols: list[str], show_coverage: bool, mark_best: bool, show_ties: bool = False) -> list[list[str]]:
    best = {m: _best(s, m) for m in cols} if mark_best else {}
    rows = []
    for scorer in s["scorer"].unique(maintain_order=True).to_list():
        covered = _coverage(s, scorer)
        cells = [scorer] + ([_pct(covered)] if show_coverage else [])
        if show_ties:
            tied = _ties(s, scorer)
            cells.append("–" if tied is None else _pct(tied) if tied < 1 else "100%")
        eligible = mark_best and _eligible(s, scorer)
        for m in cols:
            r = s.filter((pl.col("scorer") == scorer) & (pl.col("metric") == m))
            if r.height == 0:
                cells.append("–")
                continue
            row = r.row(0, named=True)
            cells.append(_cell(row["value"], row["ci_low"], row["ci_high"],
                               eligible and row["value"] is not None and row["value"] == best.get(m)))
        rows.append(cells)
    return rows


def report_tables(df: pl.DataFrame, metrics: tuple[str, ...] = ("loss", "accuracy", "easy_accuracy", "hard_accuracy"),
                  same_as: dict[tuple[str, str], tuple[str, str]] | None = None,
                  no_diversity: dict[str, str] | None = None) -> list[ReportTable]:
    """One table per benchmark and split: scorers as rows, metrics as columns, the best of each
    column in bold (lowest loss, highest accuracy).

    The numbers of a split rest on the pairs every scorer covers (the title says so when a
    scorer left pairs out); a scorer's coverage is shown in every table where one is below 100%,
    such a scorer is never marked best over one that covers every pair, and ``trivial`` is never
    marked best. Splits that hold the same pairs (``same_as``: ``(benchmark, split)`` -> the
    split it repeats) are shown once under both names. Each scorer's value on all the pairs it
    covers follows, where it differs, in a table of its own with no best; then paired
    differences, then ranking metrics, then diversity (or, for a benchmark in ``no_diversity``,
    one line saying why it has none)."""
    out = []
    dup = same_as or {}
    names: dict[tuple[str, str], list[str]] = {}
    for (bench, split), (_, original) in dup.items():
        names.setdefault((bench, original), []).append(split)
    main = df.filter(~is_difference())
    for bench in main["benchmark"].unique(maintain_order=True).to_list():
        b = main.filter(pl.col("benchmark") == bench)
        splits = [x for x in b["split"].unique(maintain_order=True).to_list()
                  if not x.endswith(OWN_COVERAGE) and (bench, x) not in dup]
        for split in splits:
            s = b.filter(pl.col("split") == split)
            cols = [m for m in metrics if s.filter(pl.col("metric") == m).height]
            if not cols:
                continue
            shown = " = ".join([split, *names.get((bench, split), [])])
            partial = s.filter(pl.col("coverage") < 1.0).height > 0
            title = f"### {bench} · {shown}"
            if names.get((bench, split)):
                title += " (the same pairs: shown and averaged once)"
            if split == SPLIT_AVERAGE:
                counted = [x for x in splits if x != SPLIT_AVERAGE]
                title += f" of {', '.join(counted)}" if counted else ""
                if partial:
                    title += "; each split on the pairs every scorer covers"
            elif partial:
                n = s.filter(pl.col("metric") == "loss")["n"].max()
                title += (f": every scorer on the {n} pairs all of them cover; best in bold among scorers "
                          "that cover every pair, when one does")
            ties = _shows_ties(s)
            out.append(ReportTable(title, ["scorer", *(["coverage"] if partial else []), *(["ties"] if ties else []), *cols],
                                   _rows(s, cols, partial, True, ties), stand_on_notes(s)))
            own = b.filter(pl.col("split") == split + OWN_COVERAGE)
            # trivial's line is the same on any pairs: its own-coverage row alone tells nothing new.
            if own.filter(pl.col("scorer") != TRIVIAL).height:
                # Each scorer's value on every pair it covers: scorers rest on different pairs here.
                mixed = pl.concat([own, s.filter(~pl.col("scorer").is_in(own["scorer"].unique().to_list()))])
                order = s["scorer"].unique(maintain_order=True).to_list()
                mixed = mixed.with_columns(pl.col("scorer").replace_strict({x: i for i, x in enumerate(order)},
                                                                           default=len(order), return_dtype=pl.Int64)
                                           .alias("_o")).sort("_o", maintain_order=True).drop("_o")
                out.append(ReportTable(f"### {bench} · {shown}, each scorer on every pair it covers "
                                       "(different pairs: not compared, no best)",
                                       ["scorer", "coverage", *cols], _rows(mixed, cols, True, False)))
    diffs = [r for r in df.filter(is_difference() & (pl.col("metric") == "loss")).iter_rows(named=True)
             if not r["split"].endswith(OWN_COVERAGE) and (r["benchmark"], r["split"]) not in dup]
    if diffs:
        out.append(ReportTable("Paired differences in loss on the pairs both cover (negative: better than the baseline)",
                               ["benchmark", "split", "difference", "value [95% CI]"],
                               [[r["benchmark"], " = ".join([r["split"], *names.get((r["benchmark"], r["split"]), [])]),
                                 r["scorer"], _cell(r["value"], r["ci_low"], r["ci_high"], False)] for r in diffs]))
    ranking = df.filter(pl.col("metric").is_in(list(RANKING_SHOWN)))
    for bench in ranking["benchmark"].unique(maintain_order=True).to_list():
        r = ranking.filter(pl.col("benchmark") == bench)
        shown = [m for m in RANKING_SHOWN if m in set(r["metric"].to_list())]
        partial = r.filter(pl.col("coverage") < 1.0).height > 0
        rows = []
        for scorer in r["scorer"].unique(maintain_order=True).to_list():
            vals = {m: v for m, v in r.filter(pl.col("scorer") == scorer).select("metric", "value").iter_rows()}
            rows.append([scorer, *([_pct(_coverage(r, scorer))] if partial else []),
                         *["–" if vals.get(m) is None else f"{vals[m]:.3f}" for m in shown]])
        note = "; a candidate a scorer left unscored counts as not retrieved" if partial else ""
        out.append(ReportTable(f"Ranking metrics on {bench} (mean over papers with a relevant candidate{note}; "
                               "all of them in results.json)", ["scorer", *(["coverage"] if partial else []), *shown], rows))
    return out + diversity_tables(df, no_diversity or {})


def diversity_tables(df: pl.DataFrame, no_diversity: dict[str, str]) -> list[ReportTable]:
    """Per benchmark and split, each scorer's diversity of its top k; a title-only table (one
    line) for each benchmark of ``no_diversity`` saying why it has none."""
    out = []
    div = df.filter(pl.col("metric").is_in(list(DIVERSITY_SHOWN)))
    for bench, split in div.select("benchmark", "split").unique(maintain_order=True).iter_rows():
        d = div.filter((pl.col("benchmark") == bench) & (pl.col("split") == split))
        shown = [m for m in DIVERSITY_SHOWN if m in set(d["metric"].to_list())]
        rows = []
        for scorer in d["scorer"].unique(maintain_order=True).to_list():
            vals = {m: v for m, v in d.filter(pl.col("scorer") == scorer).select("metric", "value").iter_rows()}
            rows.append([scorer, *["–" if vals.get(m) is None else f"{vals[m]:.3f}" for m in shown]])
        out.append(ReportTable(f"Diversity of the top k on {bench} · {split} (distinct institutions, or co-author "
                               "clusters, per reviewer recommended; mean over papers; higher: more varied)",
                               ["scorer", *shown], rows))
    out += [ReportTable(f"Diversity on {bench}: {why}", [], []) for bench, why in no_diversity.items()]
    return out


def plot_loss(df: pl.DataFrame, path: Path, same_as: dict[tuple[str, str], tuple[str, str]] | None = None) -> Path | None:
    """Loss per scorer with 95% intervals, one marker series per (benchmark, split) compared on
    the pairs every scorer covers (a split repeating another's pairs is drawn once)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df.filter((pl.col("metric") == "loss") & ~is_difference() & pl.col("value").is_not_null()
                  & ~pl.col("split").str.ends_with(OWN_COVERAGE))
    for bench, split in same_as or {}:
        d = d.filter((pl.col("benchmark") != bench) | (pl.col("split") != split))
    if d.height == 0:
        return None
    scorers = d["scorer"].unique(maintain_order=True).to_list()
    series = d.select("benchmark", "split").unique(maintain_order=True).rows()
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(scorers) + 2), 4.5))
    width = 0.8 / max(len(series), 1)
    for i, (bench, split) in enumerate(series):
        s = d.filter((pl.col("benchmark") == bench) & (pl.col("split") == split))
        xs, ys, lo, hi = [], [], [], []
        for r in s.iter_rows(named=True):
            xs.append(scorers.index(r["scorer"]) - 0.4 + width * (i + 0.5))
            ys.append(r["value"])
            lo.append(r["value"] - (r["ci_low"] if r["ci_low"] is not None else r["value"]))
            hi.append((r["ci_high"] if r["ci_high"] is not None else r["value"]) - r["value"])
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label=f"{bench} / {split}")
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(len(scorers)), scorers, rotation=20, ha="right")
    ax.set_ylabel("weighted Kendall-tau loss (lower is better)")
    ax.set_ylim(0, max(0.6, float(d["ci_high"].fill_null(d["value"]).max()) + 0.05))
    ax.legend(fontsize=8)
    ax.set_title("Loss with 95% bootstrap intervals")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_across_releases(rows: pl.DataFrame, metric: str, split: str, path: Path) -> Path:
    """One line per scorer across releases (``scorer, version, value, ci_low, ci_high``, releases
    in build order), with its intervals: drift after each refresh at a glance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    versions = list(dict.fromkeys(rows["version"].to_list()))
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(versions) + 3), 4))
    for scorer in sorted(set(rows["scorer"].to_list())):
        s = rows.filter(pl.col("scorer") == scorer).drop_nulls("value")
        xs = [versions.index(v) for v in s["version"].to_list()]
        ys = s["value"].to_list()
        lo = [y - (lo if lo is not None else y) for y, lo in zip(ys, s["ci_low"].to_list(), strict=True)]
        hi = [(h if h is not None else y) - y for y, h in zip(ys, s["ci_high"].to_list(), strict=True)]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=scorer)
    ax.set_xticks(range(len(versions)), versions)
    ax.set_xlabel("release")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} on {split}, across releases")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
