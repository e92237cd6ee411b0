"""Which candidates a round of pools leaves out, and in which order the rules apply. Pure over
polars frames; the flow reads the warehouse, fetches the Semantic Scholar histories and saves.

The rules run in two passes, because the second needs what the first leaves: the candidates
still in after the first are the ones whose Semantic Scholar histories the flow fetches.

1. :func:`corpus_conflicts`, on what the corpus and the graph show (``tasks.pools.conflicts``):
   a query's own authors, their co-authors by the corpus's co-authorship edges, anyone whose name
   could be one of those (a split identity), anyone sharing an affiliation string with a query
   author (``pools.same_affiliation_coi``), and anyone who was at one of a query author's
   institutions within ``pools.coi_institution_years`` of the paper (``pools.coi_by_institution``:
   ``tasks.coi.institution_conflicts`` over the graph).
2. :func:`screen_candidates`, on the histories too: co-authors the Semantic Scholar histories show
   (``tasks.coi.history_coauthors``), then screening (``tasks.pools.screening``: fewer than
   ``pools.min_recent_papers`` recent papers, or no usable email).

A pair left out by a rule is not looked at by the later ones; the exclusions of the round are
every rule's rows, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from revbench.tasks import coi, pools


@dataclass(frozen=True)
class CorpusConflicts:
    """The first pass: the conflicts the corpus and the graph show (``query_id, author_id, reason,
    detail``, with ``evidence`` when the institution rule found any), and the candidates'
    evidence rows left after them."""

    conflicts: pl.DataFrame
    after: pl.DataFrame


@dataclass(frozen=True)
class Screened:
    """The second pass: every exclusion of the round (the first pass's conflicts, the histories'
    co-authors, the screening's rows, in that order), the candidates' evidence rows kept, and each
    candidate's first email (where an invitation goes)."""

    exclusions: pl.DataFrame
    kept: pl.DataFrame
    emails: dict[str, str | None]


def query_authors(links: pl.DataFrame, queries: list[str]) -> pl.DataFrame:
    """The authorship links (``arxiv_id, author_id``) of the query papers."""
    return links.filter(pl.col("arxiv_id").is_in(queries))


def corpus_conflicts(evidence: pl.DataFrame, authors_of_queries: pl.DataFrame, edges: pl.DataFrame,
                     authors: pl.DataFrame, papers: pl.DataFrame, graph: dict[str, pl.DataFrame] | None,
                     same_affiliation: bool, institution_years: int) -> CorpusConflicts:
    """The first pass over the candidates' ``evidence`` (``query_id, author_id, ...``): own
    authors, co-authors by ``edges``, namesakes of either (by ``authors``' names), shared
    affiliation strings when ``same_affiliation``, and shared institutions within
    ``institution_years`` of the paper's year (``papers``: ``arxiv_id, year``) when the graph's
    COI inputs (``graph``: the warehouse's ``coi_inputs``) are given. ``authors_of_queries``:
    ``arxiv_id, author_id`` of the query papers."""
    affiliations = pools.author_affiliations(authors) if same_affiliation else None
    by_institution = None
    if graph is not None:
        years = dict(papers.select("arxiv_id", "year").iter_rows())
        by_institution = coi.graph_conflicts(graph, evidence, authors_of_queries, years, institution_years)
    rows = pools.conflicts(evidence, authors_of_queries, edges, affiliations, pools.author_names(authors), by_institution)
    return CorpusConflicts(rows, pools.without_pairs(evidence, rows))


def history_ids(candidate_ids: list[str], authors_of_queries: pl.DataFrame, authors: pl.DataFrame) -> list[str]:
    """The Semantic Scholar author ids whose histories the second pass reads: the candidates'
    (``candidate_ids``) and the query authors' too, where an earlier round fetched them (as
    candidates); sorted, each once."""
    return sorted(set(candidate_ids) | set(pools.candidate_s2_ids(authors_of_queries, authors)))


def screen_candidates(first: CorpusConflicts, authors_of_queries: pl.DataFrame, authors: pl.DataFrame,
                      histories: pl.DataFrame, candidate_ids: list[str], papers: pl.DataFrame,
                      author_years: pl.DataFrame, recent_years: int, min_recent_papers: int) -> Screened:
    """The second pass over the candidates ``first`` left: co-authors by the Semantic Scholar
    ``histories`` (``s2_author_id, paper_key, year, arxiv_id`` of :func:`history_ids`), then the
    screening, counting recent papers (``recent_years`` back from the newest of ``papers``) in the
    corpus (``author_years``) and in the candidates' own histories (``candidate_ids``)."""
    late = coi.history_coauthors(first.after, authors_of_queries, authors, histories)
    since = pools.first_recent_year(papers, recent_years)
    recent = pools.recent_counts(author_years, authors, histories.filter(pl.col("s2_author_id").is_in(candidate_ids)), since)
    emails = pools.first_emails(authors)
    after_coi = pools.without_pairs(first.after, late)
    screened = pools.screening(after_coi, recent, emails, min_recent_papers)
    exclusions = pl.concat([first.conflicts, late, screened], how="diagonal")
    return Screened(exclusions, pools.without_pairs(after_coi, screened), emails)
