"""The statistics of a benchmark's kept ratings, read by the ratings report and the release card:
counts by category and round, the three distributions of LR-bench's Figure 2 (papers per
annotator, annotators per paper, ratings) with the figure itself, and the agreement
(Krippendorff's alpha, ordinal).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl


@dataclass
class RatingStats:
    """What the statistics stage reports about the kept ratings."""

    ratings: int
    annotators: int
    papers: int
    by_category: pl.DataFrame
    by_round: pl.DataFrame
    papers_per_annotator: pl.DataFrame
    annotators_per_paper: pl.DataFrame
    rating_counts: pl.DataFrame
    alpha: float | None
    """Krippendorff's alpha (ordinal) over papers rated by two or more annotators; None below two such papers."""
    alpha_papers: int

    def markdown(self) -> str:
        """Counts by category and by round, and the agreement, as markdown tables."""
        def table(df: pl.DataFrame) -> str:
            head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * df.width + "\n"
            return head + "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in df.iter_rows())

        alpha = "n/a (fewer than two papers with two or more annotators)" if self.alpha is None else f"{self.alpha:.3f}"
        return (f"**{self.ratings} ratings** by {self.annotators} annotators on {self.papers} papers\n\n"
                f"### By category\n\n{table(self.by_category)}\n### By round\n\n{table(self.by_round)}\n"
                f"Agreement (Krippendorff's alpha, ordinal, {self.alpha_papers} papers with two or more annotators): "
                f"**{alpha}**\n")


def agreement(ratings: pl.DataFrame) -> tuple[float | None, int]:
    """Krippendorff's alpha at the ordinal level over papers with two or more kept ratings
    (reviewers x papers, missing where a reviewer did not rate a paper)."""
    import krippendorff

    multi = ratings.filter(pl.len().over("paper_id") >= 2)
    papers = sorted(set(multi["paper_id"].to_list()))
    if len(papers) < 2 or multi["rating"].n_unique() < 2:
        return None, len(papers)
    # Papers x levels counts, not a reviewers x papers matrix: at scale the dense matrix is mostly
    # empty and costs gigabytes (40,000 reviewers x 8,000 papers: 8 GB and 38 s; counts: 0.1 s).
    counts = (multi.group_by("paper_id", "rating").len().pivot(on="rating", index="paper_id", values="len")
              .sort("paper_id").fill_null(0))
    levels = [str(v) for v in range(1, 6)]
    counts = counts.with_columns([pl.lit(0, dtype=pl.UInt32).alias(v) for v in levels if v not in counts.columns]).select(levels)
    alpha = krippendorff.alpha(value_counts=counts.to_numpy(), value_domain=list(range(1, 6)), level_of_measurement="ordinal")
    return float(alpha), len(papers)


def statistics(ratings: pl.DataFrame) -> RatingStats:
    """Counts of the kept ratings by category and round, the three distributions of LR-bench's
    Figure 2 (papers per annotator, annotators per paper, ratings) and the agreement."""
    kept = ratings.filter(pl.col("status") == "kept")

    def by(col: str) -> pl.DataFrame:
        return (kept.group_by(col).agg(pl.len().alias("ratings"), pl.col("paper_id").n_unique().alias("papers"),
                                       pl.col("reviewer_id").n_unique().alias("annotators"),
                                       pl.col("rating").mean().round(2).alias("mean_rating"))
                .sort(col))

    def counts(col: str, name: str) -> pl.DataFrame:
        per = kept.group_by(col).agg(pl.len().alias(name))
        return per.group_by(name).agg(pl.len().alias("count")).sort(name)

    alpha, n_alpha = agreement(kept)
    return RatingStats(
        ratings=kept.height, annotators=kept["reviewer_id"].n_unique(), papers=kept["paper_id"].n_unique(),
        by_category=by("category").with_columns(pl.col("category").fill_null("unknown")), by_round=by("round"),
        papers_per_annotator=counts("reviewer_id", "papers"), annotators_per_paper=counts("paper_id", "annotators"),
        rating_counts=kept.group_by("rating").agg(pl.len().alias("count")).sort("rating"),
        alpha=alpha, alpha_papers=n_alpha)


def plot_distributions(stats: RatingStats, path: Path, synthetic: bool = False) -> Path:
    """LR-bench's Figure 2 for these ratings: papers per annotator, annotators per paper, ratings;
    ``synthetic`` says SYNTHETIC in the title and across every panel, so the picture cannot be
    passed around as a real panel's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    panels = [(stats.papers_per_annotator, "papers", "query papers per annotator"),
              (stats.annotators_per_paper, "annotators", "annotators per query paper"),
              (stats.rating_counts, "rating", "ratings (1 No Expertise ... 5 Top Expert)")]
    for ax, (df, col, title) in zip(axes, panels, strict=True):
        ax.bar(df[col].to_list(), df["count"].to_list(), color="#4c72b0")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("count")
        ax.set_xticks(df[col].to_list())
        if synthetic:
            ax.text(0.5, 0.5, "SYNTHETIC", transform=ax.transAxes, ha="center", va="center", rotation=25,
                    fontsize=26, color="#c0392b", alpha=0.25, fontweight="bold")
    head = f"{stats.ratings} kept ratings, {stats.annotators} annotators, {stats.papers} papers"
    fig.suptitle(f"SYNTHETIC: {head} from a simulated panel" if synthetic else head, fontsize=11,
                 color="#c0392b" if synthetic else "black")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
