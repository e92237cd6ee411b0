"""Conflicts of interest by institution identity, from the scholarly graph's author affiliations.

Two people conflict on a query paper when both were at one institution within ``window`` years of
the paper's year: each side's stint there reaches into ``[year - window, year]``. One institution
is one ``institution_key`` (``ror:<id>`` when a source gave a ROR id, so every spelling of it meets;
else ``name:<normalised name>``, which meets only the exact same normalised name). A stint with no
years counts (a conflict is excluded when unsure), and its evidence says the years are unknown.

The graph knows people by the id their source gave (``person_key``: ``openalex:A…``, ``orcid:…``,
``s2:…``); ``revbench.person_links`` ties those to the warehouse's author ids through what a mention holds:
its ORCID, its Semantic Scholar author id, or its place in the paper that showed the affiliation.

This is the stronger of the pools' two institution rules; ``pools.same_affiliation_coi`` (off by
default) compares the PDFs' affiliation strings of the authors' papers, without ids or years.
"""

from __future__ import annotations

import json

import polars as pl


CONFLICT_SCHEMA = {"query_id": pl.Utf8, "author_id": pl.Utf8, "reason": pl.Utf8, "detail": pl.Utf8, "evidence": pl.Utf8}
REASON = "same_institution"


def author_stints(links: pl.DataFrame, affiliations: pl.DataFrame) -> pl.DataFrame:
    """``author_id, institution_key, name, first_year, last_year, source``: the graph's affiliations
    by warehouse author (``affiliations`` with the institution's ``name`` where it is stored: one
    name per institution, so both sides of a conflict name it alike; its key where none is)."""
    name = pl.col("name") if "name" in affiliations.columns else pl.lit(None, pl.Utf8)
    aff = affiliations.select("person_key", "institution_key",
                              pl.coalesce(name.min().over("institution_key"), pl.col("institution_key")).alias("name"),
                              "first_year", "last_year", "source")
    return (links.select("person_key", "author_id").join(aff, on="person_key").drop("person_key").unique()
            .sort("author_id", "institution_key", "source", "first_year", nulls_last=True))


def _within(year: pl.Expr, window: int) -> pl.Expr:
    """A stint reaches into the window ``[year - window, year]`` (unknown ends reach anywhere)."""
    return ((pl.col("last_year").is_null() | (pl.col("last_year") >= year - window))
            & (pl.col("first_year").is_null() | (pl.col("first_year") <= year)))


def _span(first: int | None, last: int | None) -> str:
    if first is None and last is None:
        return "years unknown"
    return f"{first if first is not None else '?'}-{last if last is not None else '?'}"


def institution_conflicts(pairs: pl.DataFrame, query_authors: pl.DataFrame, paper_years: dict[str, int | None],
                          stints: pl.DataFrame, window: int) -> pl.DataFrame:
    """Candidates (``pairs``: ``query_id, author_id``) who were at one of a query author's
    institutions within ``window`` years of the query's year, one row per pair with its evidence
    (the first institution and query author by key, so reruns name the same one). ``query_authors``
    is ``arxiv_id, author_id``; ``stints`` comes from ``author_stints``. A query whose year is
    unknown is checked against every year. A candidate is never in conflict with themself."""
    if not stints.height or not pairs.height:
        return pl.DataFrame(schema=CONFLICT_SCHEMA)
    qa = query_authors.select(pl.col("arxiv_id").alias("query_id"), pl.col("author_id").alias("query_author"))
    years = pl.DataFrame({"query_id": list(paper_years), "year": list(paper_years.values())},
                         schema={"query_id": pl.Utf8, "year": pl.Int64})
    cand = pairs.select("query_id", "author_id").unique().join(years, on="query_id", how="left")
    side = stints.select("author_id", "institution_key", "name", "first_year", "last_year", "source")
    mine = cand.join(side, on="author_id").filter(pl.col("year").is_null() | _within(pl.col("year"), window))
    theirs = (qa.join(years, on="query_id", how="left").join(side.rename({"author_id": "query_author"}), on="query_author")
              .filter(pl.col("year").is_null() | _within(pl.col("year"), window)).drop("year"))
    hits = (mine.join(theirs, on=["query_id", "institution_key"], suffix="_q")
            .filter(pl.col("author_id") != pl.col("query_author"))
            .sort("query_id", "author_id", "institution_key", "query_author", "source", "source_q", "first_year",
                  "first_year_q", nulls_last=True)
            .unique(["query_id", "author_id"], keep="first", maintain_order=True))
    rows = []
    for h in hits.iter_rows(named=True):
        evidence = {"institution_key": h["institution_key"], "institution": h["name"], "query_author": h["query_author"],
                    "candidate_years": [h["first_year"], h["last_year"]], "candidate_source": h["source"],
                    "author_years": [h["first_year_q"], h["last_year_q"]], "author_source": h["source_q"],
                    "paper_year": h["year"], "window_years": window}
        detail = (f"was at {h['name']} ({h['institution_key']}) {_span(h['first_year'], h['last_year'])} "
                  f"[{h['source']}]; query author {h['query_author']} was there "
                  f"{_span(h['first_year_q'], h['last_year_q'])} [{h['source_q']}]; within {window} years of "
                  f"{h['year'] if h['year'] is not None else 'the paper (year unknown)'}")
        rows.append({"query_id": h["query_id"], "author_id": h["author_id"], "reason": REASON, "detail": detail,
                     "evidence": json.dumps(evidence, sort_keys=True)})
    return pl.DataFrame(rows, schema=CONFLICT_SCHEMA).sort("query_id", "author_id")
