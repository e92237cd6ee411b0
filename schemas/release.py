"""The release schema: every table a release holds, declared once. Identifiers are keyed-hash
release ids, categories and arXiv ids (each with a pattern); the only free text is titles and
abstracts (``FREE_TEXT``), and a test keeps it that way."""

from __future__ import annotations

import polars as pl

from revbench.schemas.model import Column, Table
from revbench.schemas.tables import ARXIV_ID_PATTERN

REVIEWER_ID = r"^r_[0-9a-f]{16}$"
PAPER_ID = r"^p_[0-9a-f]{16}$"
FREE_TEXT: frozenset[str] = frozenset({"title", "abstract"})
PUBLICATION = pl.Struct({"title": pl.Utf8, "abstract": pl.Utf8, "year": pl.Int64})
_RATING = {"min_value": 1, "max_value": 5}

POINTWISE = Table(
    name="pointwise",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID),
             Column("paper_id", pl.Utf8, nullable=False, pattern=PAPER_ID),
             Column("rating", pl.Int64, nullable=False, **_RATING)),
    primary_key=("reviewer_id", "paper_id"),
    doc="Every kept rating: a reviewer's self-assessed expertise (1-5 BARS) for a paper.",
)
PAPER_CENTRIC = Table(
    name="paper_centric",
    columns=(Column("paper_id", pl.Utf8, nullable=False, pattern=PAPER_ID),
             Column("reviewer_pos", pl.Utf8, nullable=False, pattern=REVIEWER_ID),
             Column("reviewer_neg", pl.Utf8, nullable=False, pattern=REVIEWER_ID),
             Column("rating_pos", pl.Int64, nullable=False, **_RATING),
             Column("rating_neg", pl.Int64, nullable=False, **_RATING),
             Column("gap", pl.Int64, nullable=False, min_value=1, max_value=4)),
    primary_key=("paper_id", "reviewer_pos", "reviewer_neg"),
    doc="(p, r+, r-): two reviewers of one paper whose ratings differ, the higher one positive.",
)
REVIEWER_CENTRIC = Table(
    name="reviewer_centric",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID),
             Column("paper_pos", pl.Utf8, nullable=False, pattern=PAPER_ID),
             Column("paper_neg", pl.Utf8, nullable=False, pattern=PAPER_ID),
             Column("rating_pos", pl.Int64, nullable=False, **_RATING),
             Column("rating_neg", pl.Int64, nullable=False, **_RATING),
             Column("gap", pl.Int64, nullable=False, min_value=1, max_value=4)),
    primary_key=("reviewer_id", "paper_pos", "paper_neg"),
    doc="(r, p+, p-): two papers of one reviewer whose ratings differ, the higher one positive.",
)
PAPERS = Table(
    name="papers",
    columns=(Column("paper_id", pl.Utf8, nullable=False, pattern=PAPER_ID),
             Column("arxiv_id", pl.Utf8, nullable=False, pattern=ARXIV_ID_PATTERN),
             Column("title", pl.Utf8, nullable=False),
             Column("abstract", pl.Utf8, nullable=False),
             Column("category", pl.Utf8, nullable=False, pattern=r"^[a-z\-]+(?:\.[A-Za-z\-]+)?$"),
             Column("year", pl.Int64, nullable=False, min_value=1991, max_value=2100)),
    primary_key=("paper_id",),
    doc="The rated papers: title and abstract only (no authors).",
)
REVIEWERS = Table(
    name="reviewers",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID),
             Column("publications", pl.List(PUBLICATION), nullable=False,
                    doc="title, abstract and year of their papers of the last years (the profile)")),
    primary_key=("reviewer_id",),
    doc="Each rater's profile: their recent publications, titles and abstracts only.",
)

RELEASE_TABLES: tuple[Table, ...] = (POINTWISE, PAPER_CENTRIC, REVIEWER_CENTRIC, PAPERS, REVIEWERS)
