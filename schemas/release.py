"""The release schema: every table a release holds, declared once. Identifiers are keyed-hash
release ids, categories and arXiv ids (each with a pattern); the only free text is titles and
abstracts (``FREE_TEXT``), and a test keeps it that way."""

from __future__ import annotations

import polars as pl

from revbench.schemas.graph import TOPIC_SCHEMES
from revbench.schemas.model import Column, Table
from revbench.schemas.tables import ARXIV_ID_PATTERN

REVIEWER_ID = r"^r_[0-9a-f]{16}$"
PAPER_ID = r"^p_[0-9a-f]{16}$"
FREE_TEXT: frozenset[str] = frozenset({"title", "abstract"})
PUBLICATION = pl.Struct({"title": pl.Utf8, "abstract": pl.Utf8, "year": pl.Int64})
PUBLICATION_DOCS: dict[str, str] = {"title": "the publication's title", "abstract": "its abstract",
                                    "year": "the year it first appeared on arXiv"}
"""What each field of a reviewer's publication holds (the card and Croissant describe them)."""
_RATING = {"min_value": 1, "max_value": 5}
_R_ID = "release id of a reviewer (r_ + 16 hex of a keyed hash; the same person in every release)"
_P_ID = "release id of a paper (p_ + 16 hex of a keyed hash; the same paper in every release)"
_GAP = "rating_pos - rating_neg (1-4)"

POINTWISE = Table(
    name="pointwise",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID, doc="the rater: " + _R_ID),
             Column("paper_id", pl.Utf8, nullable=False, pattern=PAPER_ID, doc="the rated paper: " + _P_ID),
             Column("rating", pl.Int64, nullable=False, doc="self-assessed expertise on the five-level BARS scale "
                                                            "(1 not familiar .. 5 expert)", **_RATING)),
    primary_key=("reviewer_id", "paper_id"),
    doc="Every kept rating: a reviewer's self-assessed expertise (1-5 BARS) for a paper.",
)
PAPER_CENTRIC = Table(
    name="paper_centric",
    columns=(Column("paper_id", pl.Utf8, nullable=False, pattern=PAPER_ID, doc="the anchor paper: " + _P_ID),
             Column("reviewer_pos", pl.Utf8, nullable=False, pattern=REVIEWER_ID,
                    doc="the reviewer who rated the paper higher (reviewer id)"),
             Column("reviewer_neg", pl.Utf8, nullable=False, pattern=REVIEWER_ID,
                    doc="the reviewer who rated the paper lower (reviewer id)"),
             Column("rating_pos", pl.Int64, nullable=False, doc="reviewer_pos's rating of the paper", **_RATING),
             Column("rating_neg", pl.Int64, nullable=False, doc="reviewer_neg's rating of the paper", **_RATING),
             Column("gap", pl.Int64, nullable=False, min_value=1, max_value=4, doc=_GAP)),
    primary_key=("paper_id", "reviewer_pos", "reviewer_neg"),
    doc="(p, r+, r-): two reviewers of one paper whose ratings differ, the higher one positive.",
)
REVIEWER_CENTRIC = Table(
    name="reviewer_centric",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID, doc="the anchor reviewer: " + _R_ID),
             Column("paper_pos", pl.Utf8, nullable=False, pattern=PAPER_ID,
                    doc="the paper the reviewer rated higher (paper id)"),
             Column("paper_neg", pl.Utf8, nullable=False, pattern=PAPER_ID,
                    doc="the paper the reviewer rated lower (paper id)"),
             Column("rating_pos", pl.Int64, nullable=False, doc="the reviewer's rating of paper_pos", **_RATING),
             Column("rating_neg", pl.Int64, nullable=False, doc="the reviewer's rating of paper_neg", **_RATING),
             Column("gap", pl.Int64, nullable=False, min_value=1, max_value=4, doc=_GAP)),
    primary_key=("reviewer_id", "paper_pos", "paper_neg"),
    doc="(r, p+, p-): two papers of one reviewer whose ratings differ, the higher one positive.",
)
PAPERS = Table(
    name="papers",
    columns=(Column("paper_id", pl.Utf8, nullable=False, pattern=PAPER_ID, doc=_P_ID),
             Column("arxiv_id", pl.Utf8, nullable=False, pattern=ARXIV_ID_PATTERN,
                    doc="the paper's arXiv identifier, without version"),
             Column("title", pl.Utf8, nullable=False, doc="the paper's title as on arXiv"),
             Column("abstract", pl.Utf8, nullable=False, doc="the paper's abstract as on arXiv"),
             Column("category", pl.Utf8, nullable=False, pattern=r"^[a-z\-]+(?:\.[A-Za-z\-]+)?$",
                    doc="the paper's primary arXiv category (e.g. cs.LG)"),
             Column("year", pl.Int64, nullable=False, min_value=1991, max_value=2100,
                    doc="the year the paper first appeared on arXiv")),
    primary_key=("paper_id",),
    doc="The rated papers: title and abstract only (no authors).",
)
REVIEWERS = Table(
    name="reviewers",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID, doc=_R_ID),
             Column("publications", pl.List(PUBLICATION), nullable=False,
                    doc="title, abstract and year of their papers of the last years (the profile)")),
    primary_key=("reviewer_id",),
    doc="Each rater's profile: their recent publications, titles and abstracts only.",
)

RELEASE_TABLES: tuple[Table, ...] = (POINTWISE, PAPER_CENTRIC, REVIEWER_CENTRIC, PAPERS, REVIEWERS)

# The graph around the release's papers and reviewers (issue 36), the frames of
# revbench.evaluation.model.BenchmarkGraph. Ids only: a paper is its release id when it was rated, else
# (a reviewer's publication, which carries no id) the sha1 of its title as released, which is the id the
# release importer gives that publication; an institution is its ROR id, or a keyed hash of the
# normalised name when no source gave one (GROBID's affiliation strings are free text that can hold a
# person's name or address, so no name of an institution is released). Topics are the schemes'
# vocabularies (arXiv categories, S2 fields of study, OpenAlex topic ids), still read by the audit.
GRAPH_PAPER_ID = r"^(?:p_[0-9a-f]{16}|[0-9a-f]{40})$"
INSTITUTION_ID = r"^(?:ror:0[0-9a-z]{6}\d{2}|i_[0-9a-f]{16})$"
GRAPH_VOCABULARY: frozenset[str] = frozenset({"topic"})
"""Graph columns holding a scheme's vocabulary rather than an id (the privacy audit reads them)."""
_G_PAPER = ("a paper: its release id when rated, else the sha1 of the title of the reviewer's publication it is "
            "(the id the release importer gives it)")
_YEARS = {"min_value": 1400, "max_value": 2100}

GRAPH_CITATIONS = Table(
    name="graph_citations",
    columns=(Column("citing_id", pl.Utf8, nullable=False, pattern=GRAPH_PAPER_ID, doc="the citing paper: " + _G_PAPER),
             Column("cited_id", pl.Utf8, nullable=False, pattern=GRAPH_PAPER_ID, doc="the cited paper: " + _G_PAPER),
             Column("is_influential", pl.Boolean, doc="influential by any source (Semantic Scholar's isInfluential); "
                                                      "null where no source says"),
             Column("source", pl.Utf8, nullable=False, pattern=r"^(?:s2|openalex|grobid)(?:,(?:s2|openalex|grobid))*$",
                    doc="every source that gave the citation, comma-joined (s2, openalex, grobid)")),
    primary_key=("citing_id", "cited_id"),
    doc="Citations among the release's papers and its reviewers' publications.",
)
GRAPH_TOPICS = Table(
    name="graph_topics",
    columns=(Column("paper_id", pl.Utf8, nullable=False, pattern=GRAPH_PAPER_ID, doc=_G_PAPER),
             Column("scheme", pl.Utf8, nullable=False, allowed=TOPIC_SCHEMES,
                    doc="arxiv (categories), s2-fos (S2 fields of study) or openalex-topic (OpenAlex topic ids)"),
             Column("topic", pl.Utf8, nullable=False, min_length=1, doc="the topic as the scheme names it"),
             Column("score", pl.Float64, min_value=0, max_value=1, doc="the highest confidence any source gave; null "
                                                                        "where none gives one")),
    primary_key=("paper_id", "scheme", "topic"),
    doc="Topics of the release's papers and its reviewers' publications, per scheme.",
)
GRAPH_INSTITUTIONS = Table(
    name="graph_institutions",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID, doc=_R_ID),
             Column("institution_key", pl.Utf8, nullable=False, pattern=INSTITUTION_ID,
                    doc="ror:<ROR id>, else i_ + 16 hex of a keyed hash of the normalised name (never a name)"),
             Column("first_year", pl.Int64, doc="first year the reviewer is seen there", **_YEARS),
             Column("last_year", pl.Int64, doc="last year the reviewer is seen there", **_YEARS)),
    primary_key=("reviewer_id", "institution_key"),
    doc="Where each reviewer was, and when, by institution identity.",
)
GRAPH_COAUTHORS = Table(
    name="graph_coauthors",
    columns=(Column("reviewer_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID, doc=_R_ID),
             Column("other_id", pl.Utf8, nullable=False, pattern=REVIEWER_ID, doc="a co-author among the reviewers: " + _R_ID)),
    primary_key=("reviewer_id", "other_id"),
    doc="Reviewers who wrote a paper together, both directions.",
)

GRAPH_TABLES: tuple[Table, ...] = (GRAPH_CITATIONS, GRAPH_TOPICS, GRAPH_INSTITUTIONS, GRAPH_COAUTHORS)
"""Optional: a release carries them when the warehouse held a graph; one built before them has none."""
