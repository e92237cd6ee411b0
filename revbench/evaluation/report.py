"""Results as the papers print them: a markdown table (best in bold) and a plot of loss with intervals."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from revbench.evaluation.model import MetricValue

RESULT_SCHEMA = {
    "benchmark": pl.Utf8, "split": pl.Utf8, "scorer": pl.Utf8, "metric": pl.Utf8,
    "value": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "n": pl.Int64, "spec": pl.Utf8,
    "coverage": pl.Float64, "predictions_sha256": pl.Utf8,
}
RANKING_SHOWN = ("P_hard@5", "P_soft@5", "P_hard@10", "NDCG@10", "MRR_hard@10", "Recall_hard@10", "WKTD@10")
LOWER_IS_BETTER = {"loss"} | {f"WKTD@{k}" for k in (5, 10)}


def results_frame(rows: list[MetricValue]) -> pl.DataFrame:
    return pl.DataFrame([asdict(r) for r in rows], schema=RESULT_SCHEMA) if rows else pl.DataFrame(schema=RESULT_SCHEMA)


@dataclass
class ReportTable:
    """One table of the report: a title, a header and rows of cells (``**bold**`` marks the best)."""

    title: str
    header: list[str]
    rows: list[list[str]]

    def to_markdown(self) -> str:
        lines = [self.title, "", "| " + " | ".join(self.header) + " |", "|---|" + "---|" * (len(self.header) - 1)]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines) + "\n"


def _cell(value: float | None, lo: float | None, hi: float | None, best: bool) -> str:
    if value is None:
        return "–"
    text = f"{value:.3f}"
    if lo is not None and hi is not None:
        text += f" [{lo:.2f}, {hi:.2f}]"
    return f"**{text}**" if best else text


def report_tables(df: pl.DataFrame, metrics: tuple[str, ...] = ("loss", "accuracy", "easy_accuracy", "hard_accuracy")) -> list[ReportTable]:
    """One table per benchmark and split: scorers as rows, metrics as columns, the best of each
    column in bold (lowest loss, highest accuracy) among scorers that covered every pair, with a
    coverage column when one did not; then paired differences, then ranking metrics."""
    out = []
    main = df.filter(~pl.col("scorer").str.contains(" - "))
    for bench in main["benchmark"].unique(maintain_order=True).to_list():
        b = main.filter(pl.col("benchmark") == bench)
        for split in b["split"].unique(maintain_order=True).to_list():
            s = b.filter(pl.col("split") == split)
            cols = [m for m in metrics if s.filter(pl.col("metric") == m).height]
            full = pl.col("coverage").is_null() | (pl.col("coverage") >= 1.0)
            partial = s.filter(~full).height > 0
            best = {}
            for m in cols:
                # Scorers evaluated on part of the pairs are not comparable: never "best".
                v = s.filter((pl.col("metric") == m) & pl.col("value").is_not_null() & full)["value"]
                if v.len():
                    best[m] = v.min() if m in LOWER_IS_BETTER else v.max()
            rows = []
            for scorer in s["scorer"].unique(maintain_order=True).to_list():
                cov = s.filter(pl.col("scorer") == scorer)["coverage"].drop_nulls()
                covered = float(cov.min()) if cov.len() else 1.0
                cells = [scorer] + ([f"{covered:.0%}"] if partial else [])
                for m in cols:
                    r = s.filter((pl.col("scorer") == scorer) & (pl.col("metric") == m))
                    if r.height == 0:
                        cells.append("–")
                        continue
                    row = r.row(0, named=True)
                    cells.append(_cell(row["value"], row["ci_low"], row["ci_high"],
                                       covered >= 1.0 and row["value"] is not None and row["value"] == best.get(m)))
                rows.append(cells)
            header = ["scorer", *(["coverage"] if partial else []), *cols]
            out.append(ReportTable(f"### {bench} · {split}", header, rows))
    diffs = df.filter(pl.col("scorer").str.contains(" - ") & (pl.col("metric") == "loss"))
    if diffs.height:
        out.append(ReportTable("Paired differences in loss (negative: better than the baseline)",
                               ["benchmark", "split", "difference", "value [95% CI]"],
                               [[r["benchmark"], r["split"], r["scorer"], _cell(r["value"], r["ci_low"], r["ci_high"], False)]
                                for r in diffs.iter_rows(named=True)]))
    ranking = df.filter(pl.col("metric").is_in(list(RANKING_SHOWN)))
    for bench in ranking["benchmark"].unique(maintain_order=True).to_list():
        r = ranking.filter(pl.col("benchmark") == bench)
        shown = [m for m in RANKING_SHOWN if m in set(r["metric"].to_list())]
        rows = []
        for scorer in r["scorer"].unique(maintain_order=True).to_list():
            vals = {m: v for m, v in r.filter(pl.col("scorer") == scorer).select("metric", "value").iter_rows()}
            rows.append([scorer, *["–" if vals.get(m) is None else f"{vals[m]:.3f}" for m in shown]])
        out.append(ReportTable(f"Ranking metrics on {bench} (mean over papers with a relevant candidate; all of them in results.json)",
                               ["scorer", *shown], rows))
    return out


def markdown_table(df: pl.DataFrame) -> str:
    """The report as markdown (what report.md and the Prefect artifact hold)."""
    return "\n".join(t.to_markdown() for t in report_tables(df))


def plot_loss(df: pl.DataFrame, path: Path) -> Path | None:
    """Loss per scorer with 95% intervals, one marker series per (benchmark, split)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df.filter((pl.col("metric") == "loss") & ~pl.col("scorer").str.contains(" - ") & pl.col("value").is_not_null())
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
