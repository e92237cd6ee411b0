"""The scholarly graph's tables: citation edges, paper topics, institutions and author affiliations
(issue 35), with the fetch records that make a refresh incremental.

The S2, OpenAlex and GROBID parsers produce frames with exactly these columns; a paper is known by
the warehouse's ``arxiv_id`` (without version). Not part of a release (``schemas.release``).
"""

from __future__ import annotations

import polars as pl

from revbench.schemas.model import ARXIV_ID_PATTERN, Column, Table

CITATION_SOURCES: tuple[str, ...] = ("s2", "openalex", "grobid")
TOPIC_SCHEMES: tuple[str, ...] = ("arxiv", "s2-fos", "openalex-topic")
TOPIC_ORIGINS: tuple[str, ...] = ("arxiv", "external", "s2-fos-model", "openalex")
"""Who assigned a topic: arXiv's categories; S2's fields of study from an external source or its own
classifier (``s2-fos-model``); OpenAlex's topic model."""
AFFILIATION_SOURCES: tuple[str, ...] = ("openalex", "grobid", "s2")
FETCH_SOURCES: tuple[str, ...] = ("s2", "openalex", "grobid", "arxiv")
FETCH_KINDS: tuple[str, ...] = ("references", "topics", "affiliations")
SCHEMES_OF_SOURCE: dict[str, tuple[str, ...]] = {"arxiv": ("arxiv",), "s2": ("s2-fos",), "openalex": ("openalex-topic",)}
"""The topic schemes a source's answer replaces when a paper's topics are fetched again."""

_TS = pl.Datetime("us", "UTC")
_YEAR = {"min_value": 1400, "max_value": 2100}
VERSIONED_ARXIV_PATTERN = ARXIV_ID_PATTERN.removesuffix("$") + r"(?:v\d+)?$"
DOI_PATTERN = r"^10\.\d{4,9}/[^\sA-Z]+$"
ROR_PATTERN = r"^0[0-9a-hj-km-np-tv-z]{6}\d{2}$"
ORCID_PATTERN = r"^\d{4}-\d{4}-\d{4}-\d{3}[\dX]$"


def _paper(name: str, doc: str, nullable: bool = False) -> Column:
    return Column(name, pl.Utf8, nullable=nullable, pattern=ARXIV_ID_PATTERN, doc=doc, since=15)


CITATIONS = Table(
    name="citations",
    columns=(
        _paper("citing_arxiv_id", "the citing paper (a warehouse paper)"),
        Column("source", pl.Utf8, nullable=False, allowed=CITATION_SOURCES, since=15,
               doc="who gave the reference list: s2, openalex or grobid (each source keeps its own list)"),
        Column("ordinal", pl.Int64, nullable=False, min_value=0, since=15,
               doc="position in the citing paper's reference list as the source gives it, from 0"),
        _paper("cited_arxiv_id", "the warehouse paper the cited work resolved to (DOI, then arXiv id, then "
                                 "normalised title and year); null when none", nullable=True),
        Column("cited_s2_id", pl.Utf8, since=15, doc="Semantic Scholar paperId of the cited work (null ids are kept by title)"),
        Column("cited_openalex_id", pl.Utf8, since=15, doc="OpenAlex work id of the cited work"),
        Column("cited_doi", pl.Utf8, pattern=DOI_PATTERN, since=15, doc="DOI of the cited work, lower-case, no https://doi.org/"),
        Column("cited_arxiv", pl.Utf8, pattern=VERSIONED_ARXIV_PATTERN, since=15,
               doc="arXiv id of the cited work as the source gave it (whether or not it is in the warehouse)"),
        Column("cited_title", pl.Utf8, since=15, doc="title of the cited work as the source gave it"),
        Column("cited_year", pl.Int64, since=15, doc="publication year of the cited work", **_YEAR),
        Column("is_influential", pl.Boolean, since=15, doc="S2's isInfluential; null where the source has none"),
        Column("intents", pl.List(pl.Utf8), since=15, doc="S2's citation intents (background, methodology, result)"),
        Column("n_contexts", pl.Int64, min_value=0, since=15, doc="number of citing sentences S2 gave; null where unknown"),
        Column("external_ids", pl.Utf8, since=15, doc="JSON of every external id the source gave for the cited work"),
        Column("match_keys", pl.List(pl.Utf8), since=17,
               doc="the normalised keys the resolution looked the cited work up by (doi:, arxiv:, title:); null until "
                   "it first ran on this row. A later run re-resolves an unresolved reference only when a paper "
                   "loaded since has one of its keys"),
    ),
    primary_key=("citing_arxiv_id", "source", "ordinal"),
    doc="Citation edges: each reference of a warehouse paper, per source, resolved to a warehouse paper when it is one.",
    since=15,
    # Millions of rows, a share of them replaced every run: DuckDB's index of the key made a day
    # later's delete and insert of 150k references 3x slower and its commit 50x (2.0 s against 0.04 s
    # at 160k papers), for a key every writer keeps anyway (each replaces a paper's list whole).
    key_unindexed_since=21,
)

SOURCE_CITATION_COLUMNS: tuple[str, ...] = tuple(c for c in CITATIONS.names if c != "match_keys")
"""The columns a source's reference list fills (``match_keys`` is the resolution's own)."""

PAPER_TOPICS = Table(
    name="paper_topics",
    columns=(
        _paper("arxiv_id", "the paper"),
        Column("scheme", pl.Utf8, nullable=False, allowed=TOPIC_SCHEMES, since=15,
               doc="arxiv (categories), s2-fos (S2 fields of study) or openalex-topic"),
        Column("topic", pl.Utf8, nullable=False, min_length=1, since=15, doc="the topic's id or name, as the scheme gives it"),
        Column("label", pl.Utf8, since=15, doc="the topic's display name"),
        Column("origin", pl.Utf8, nullable=False, allowed=TOPIC_ORIGINS, since=15,
               doc="who assigned it: arxiv; S2 external or s2-fos-model; openalex"),
        Column("score", pl.Float64, min_value=0, max_value=1, since=15, doc="the source's confidence; null where it gives none"),
        Column("domain", pl.Utf8, since=15, doc="OpenAlex only: the topic's domain"),
        Column("field", pl.Utf8, since=15, doc="OpenAlex only: the topic's field"),
        Column("subfield", pl.Utf8, since=15, doc="OpenAlex only: the topic's subfield"),
    ),
    primary_key=("arxiv_id", "scheme", "topic", "origin"),
    doc="Topics of each paper under each scheme, with who assigned them.",
    since=15,
)

INSTITUTION_RELATIONSHIPS: tuple[str, ...] = ("successor", "predecessor", "parent", "child")
"""The associated institutions kept: those that make two ids one institution (a ROR id deprecated for
its successor) or one a part of the other; OpenAlex's ``related`` says neither and is left out."""
INSTITUTION_RELATION = pl.Struct({"relationship": pl.Utf8, "ror": pl.Utf8, "openalex_id": pl.Utf8, "name": pl.Utf8})

INSTITUTIONS = Table(
    name="institutions",
    columns=(
        Column("institution_key", pl.Utf8, nullable=False, pattern=r"^(?:ror:0[0-9a-z]{6}\d{2}|name:.+)$", since=15,
               doc="ror:<ROR id> when known, else name:<normalised name>: one institution under any spelling"),
        Column("ror", pl.Utf8, pattern=ROR_PATTERN, since=15, doc="the bare ROR id (no https://ror.org/)"),
        Column("name", pl.Utf8, nullable=False, min_length=1, since=15, doc="display name"),
        Column("country", pl.Utf8, pattern=r"^[A-Z]{2}$", since=15, doc="ISO 3166-1 alpha-2 country code"),
        Column("type", pl.Utf8, since=15, doc="ROR/OpenAlex type (education, company, facility...)"),
        Column("openalex_id", pl.Utf8, since=15, doc="OpenAlex institution id"),
        Column("aliases", pl.List(pl.Utf8), since=19,
               doc="other names of it as the source gave them: OpenAlex's display_name_alternatives and "
                   "display_name_acronyms (a whole institution's record) and each affiliation string OpenAlex "
                   "matched to it alone (its institution part); an unmatched name (name:...) meets it by these. "
                   "Null where no answer gave any; a later answer adds to them"),
        Column("lineage", pl.List(pl.Utf8), since=19,
               doc="OpenAlex ids of the institutions it is part of (OpenAlex's lineage, itself left out): a "
                   "conflict check counts parent and child as one institution, never two siblings"),
        Column("related", pl.List(INSTITUTION_RELATION), since=19,
               doc="a whole institution's associated_institutions that say who it is (ROR's successor and "
                   "predecessor, parent and child), each with its ROR id, OpenAlex id and name; null where the "
                   "answer had none"),
    ),
    primary_key=("institution_key",),
    doc="Institutions by identity (ROR when known), so a conflict check compares institutions, not spellings.",
    since=15,
)

AUTHOR_AFFILIATIONS = Table(
    name="author_affiliations",
    columns=(
        Column("person_key", pl.Utf8, nullable=False, pattern=r"^[a-z0-9]+:\S+$", since=15,
               doc="the id the source gave, prefixed: openalex:A..., orcid:..., s2:..."),
        Column("orcid", pl.Utf8, pattern=ORCID_PATTERN, since=15, doc="the person's ORCID iD, bare form"),
        Column("institution_key", pl.Utf8, nullable=False, since=15, doc="institutions.institution_key"),
        Column("first_year", pl.Int64, since=15, doc="first year the person is seen there", **_YEAR),
        Column("last_year", pl.Int64, since=15, doc="last year the person is seen there", **_YEAR),
        Column("source", pl.Utf8, nullable=False, allowed=AFFILIATION_SOURCES, since=15, doc="openalex, grobid or s2"),
        _paper("arxiv_id", "the paper whose authorship showed it; null when the source is a profile's history",
               nullable=True),
        Column("position", pl.Int64, min_value=0, since=15,
               doc="the person's place (from 0) in ``arxiv_id``'s author list: links the person to that paper's "
                   "warehouse author when no ORCID or S2 id does (revbench.keys.person_links)"),
    ),
    primary_key=("person_key", "institution_key", "source"),
    doc="Who was at which institution in which years, per source (a later sighting widens the years).",
    since=15,
)

PAPER_AUTHORSHIPS = Table(
    name="paper_authorships",
    columns=(
        _paper("arxiv_id", "the paper"),
        Column("source", pl.Utf8, nullable=False, allowed=("openalex",), since=16, doc="who gave the author list"),
        Column("position", pl.Int64, nullable=False, min_value=0, since=16,
               doc="the author's place (from 0) in the source's list: the warehouse mention at that place is this "
                   "authorship when the names are compatible (lists can differ)"),
        Column("person_key", pl.Utf8, pattern=r"^[a-z0-9]+:\S+$", since=16,
               doc="openalex:A...: the source's author profile (null when OpenAlex resolved none)"),
        Column("orcid", pl.Utf8, pattern=ORCID_PATTERN, since=16, doc="the ORCID iD the source gave, bare form"),
        Column("name", pl.Utf8, since=16, doc="the author's name as the paper wrote it (else the profile's)"),
    ),
    primary_key=("arxiv_id", "source", "position"),
    doc="Each paper's authorships as a source lists them, with the ids it gives (identity evidence for "
        "disambiguation; replaced whenever the paper is fetched again).",
    since=16,
)

GRAPH_FETCHES = Table(
    name="graph_fetches",
    columns=(
        _paper("arxiv_id", "the paper asked about"),
        Column("source", pl.Utf8, nullable=False, allowed=FETCH_SOURCES, since=15),
        Column("kind", pl.Utf8, nullable=False, allowed=FETCH_KINDS, since=15, doc="references, topics or affiliations"),
        Column("found", pl.Boolean, nullable=False, since=15, doc="false when the source does not know the paper"),
        Column("n_rows", pl.Int64, nullable=False, min_value=0, since=15, doc="rows the answer gave (0 is an answer too)"),
        Column("run_id", pl.Utf8, since=15),
        Column("fetched_at", _TS, nullable=False, since=15),
        Column("source_paper_id", pl.Utf8, since=16,
               doc="the source's own id of the paper when its answer gave one (OpenAlex work id, S2 paperId): "
                   "later papers' references that name it by that id alone resolve to it (OpenAlex's referenced_works)"),
    ),
    primary_key=("arxiv_id", "source", "kind"),
    doc="Which paper was asked of which source for what: a refresh asks only about papers without a row here "
        "(a paper with no references has none in citations, but has its row here).",
    since=15,
)

GRAPH_TABLES: tuple[Table, ...] = (CITATIONS, PAPER_TOPICS, INSTITUTIONS, AUTHOR_AFFILIATIONS, GRAPH_FETCHES)
