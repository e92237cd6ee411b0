"""What the augmented self-supervision (``revbench train --objective augment``) learns from: the
corpus papers that are not query papers (so no rated one) and have a title or an abstract to make
two views of, at most ``anchors`` of them drawn by a seeded order. Pure over polars frames; the
flow reads the warehouse, writes the rows and trains."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from revbench.errors import InputError
from revbench.tasks.factor_pairs import seeded_order

MIN_PAPERS = 2
"""The in-batch loss needs two papers or more: each paper's other view is told from the others'."""


@dataclass(frozen=True)
class AugmentPapers:
    """The training papers chosen (``paper_id, title, abstract``, by ``paper_id``), the corpus papers
    that are not query papers, and how many of those had neither a title nor an abstract."""

    chosen: pl.DataFrame
    unrated: int
    empty: int


def has_text() -> pl.Expr:
    """A paper with a title or an abstract that is more than whitespace (null counts as empty)."""
    return ((pl.col("title").fill_null("").str.strip_chars() != "")
            | (pl.col("abstract").fill_null("").str.strip_chars() != ""))


def usable_papers(papers: pl.DataFrame, queries: pl.DataFrame) -> pl.DataFrame:
    """The papers augmentation may train on: every paper of ``papers`` (``paper_id, title,
    abstract, ...``) that is not a query paper (``queries``: ``paper_id``; a query paper may be
    rated, and a rated paper must never be trained on) and has a title or an abstract."""
    return papers.join(queries, on="paper_id", how="anti").filter(has_text())


def augment_papers(papers: pl.DataFrame, queries: pl.DataFrame, anchors: int, seed: int) -> AugmentPapers:
    """At most ``anchors`` of the ``usable_papers``, drawn by ``seeded_order`` on ``seed`` and
    sorted by ``paper_id``. Fewer than ``MIN_PAPERS`` is an ``InputError``: the in-batch loss needs
    two or more."""
    unrated = papers.join(queries, on="paper_id", how="anti").height
    usable = usable_papers(papers, queries)
    chosen = seeded_order(usable, seed, "paper_id").head(anchors).sort("paper_id")
    if chosen.height < MIN_PAPERS:
        raise InputError(f"{chosen.height} unrated paper(s) with a title or abstract: the in-batch loss needs two "
                         "or more (run `revbench ingest` first, or `revbench demo`)")
    return AugmentPapers(chosen.select("paper_id", "title", "abstract"), unrated, unrated - usable.height)
