"""Conflicts of interest by institution identity, from the scholarly graph's author affiliations.

Two people conflict on a query paper when both were at one institution within ``window`` years of
the paper's year: each side's stint there reaches into ``[year - window, year]``. A stint with no
years counts (a conflict is excluded when unsure), and its evidence says the years are unknown.

One institution is known by its ``institution_key`` (``ror:<id>`` when a source gave a ROR id, so
every spelling of it meets; else ``name:<normalised name>``), and two keys are one institution by
these rules, each named in the evidence (``RULES``), from what the graph stores of its institutions
(``aliases``, ``lineage``, ``related``: ``institution_identities``):

- ``same ror`` / ``same name``: the same key;
- ``ror successor``: two ROR ids one succeeded the other (ROR's successor and predecessor, as an
  OpenAlex record gives them), through any chain of them;
- ``name matched alias``: a ``name:`` key whose name, normalised alike, is the display name or an
  alias of a ROR institution (its alternatives, acronyms, the strings OpenAlex matched to it): the
  case of a string OpenAlex matched on one paper and not on another. A name several institutions
  bear meets each of them (a conflict is excluded when unsure);
- ``parent/child``: one is part of the other (OpenAlex's lineage, or ROR's parent and child); two
  parts of one parent are not one institution.

The graph knows people by the id their source gave (``person_key``: ``openalex:A…``, ``orcid:…``,
``s2:…``); ``revbench.keys.person_links`` ties those to the warehouse's author ids through what a mention holds:
its ORCID, its Semantic Scholar author id, or its place in the paper that showed the affiliation.

This is the stronger of the pools' two institution rules; ``pools.same_affiliation_coi`` (off by
default) compares the PDFs' affiliation strings of the authors' papers, without ids or years.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import polars as pl

from revbench.keys import institution_key, normalize_affiliation, person_links

CONFLICT_SCHEMA = {"query_id": pl.Utf8, "author_id": pl.Utf8, "reason": pl.Utf8, "detail": pl.Utf8, "evidence": pl.Utf8}
REASON = "same_institution"
RULES: tuple[str, ...] = ("same ror", "same name", "ror successor", "name matched alias", "parent/child")
"""How two stints' institutions were found one, strongest first: a pair's evidence names the first that holds."""
IDENTITY_SCHEMA = {"institution_key": pl.Utf8, "identity": pl.Utf8, "kind": pl.Utf8, "via": pl.Utf8}
SUCCESSION = ("successor", "predecessor")


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


def _column(df: pl.DataFrame, name: str) -> list[Any]:
    return df[name].to_list() if name in df.columns else [None] * df.height


class _Successions:
    """ROR ids joined by succession: one root per chain (its smallest key), and the links that made it."""

    def __init__(self) -> None:
        self.up: dict[str, str] = {}
        self.links: list[tuple[str, str]] = []

    def root(self, key: str) -> str:
        while self.up.get(key, key) != key:
            key = self.up[key]
        return key

    def join(self, old: str, new: str) -> None:
        self.links.append((old, new))
        a, b = sorted((self.root(old), self.root(new)))
        if a != b:
            self.up[b] = a

    def via(self) -> dict[str, str]:
        """Each chain's root -> its links, in words."""
        out: dict[str, list[str]] = {}
        for old, new in sorted(set(self.links)):
            out.setdefault(self.root(old), []).append(f"{old} succeeded by {new}")
        return {root: "; ".join(lines) for root, lines in out.items()}


def institution_identities(institutions: pl.DataFrame, keys: Iterable[str] = ()) -> pl.DataFrame:
    """``institution_key, identity, kind, via``: what each institution key (of ``institutions``, and
    ``keys`` besides) meets another by. ``institutions`` holds ``institution_key`` and, where
    known, ``name``, ``aliases``, ``lineage``, ``related`` and ``openalex_id`` (schemas/graph.py).
    Kinds: ``self``, the key's own identity (its ROR succession's root: every id of a chain
    shares it); ``name``, a ROR institution whose display name or alias is the ``name:`` key's
    normalised name; ``part``, an institution the key is part of. Two keys are one institution
    when they share an identity and not both as a ``part`` (two parts of a parent are two)."""
    rows = list(zip(*(_column(institutions, c) for c in ("institution_key", "name", "aliases", "lineage", "related",
                                                         "openalex_id")), strict=True))
    by_openalex = {oid: key for key, *_rest, oid in rows if oid}

    def ref(entry: dict[str, Any]) -> str | None:
        return institution_key(entry.get("ror"), None) or by_openalex.get(entry.get("openalex_id") or "")

    chains = _Successions()
    parts: list[tuple[str, str]] = []  # (part, whole)
    names: dict[str, list[tuple[str, str]]] = {}
    for key, name, aliases, lineage, related, _oid in rows:
        for entry in related or []:
            other = ref(entry)
            if other is None or other == key:
                continue
            rel = entry.get("relationship")
            if rel == "successor":
                chains.join(key, other)
            elif rel == "predecessor":
                chains.join(other, key)
            elif rel in ("parent", "child"):
                parts.append((key, other) if rel == "parent" else (other, key))
        parts += [(key, whole) for oid in lineage or [] if (whole := by_openalex.get(oid)) and whole != key]
        if key.startswith("ror:"):
            for text, how in [(name, "display name"), *((a, "alias") for a in aliases or [])]:
                norm = normalize_affiliation(text) if text else None
                if norm:
                    names.setdefault(norm, []).append((key, f"{how} {text!r} of {key}"))
    chain_via = chains.via()
    out: list[tuple[str, str, str, str | None]] = []
    for key in dict.fromkeys([r[0] for r in rows] + list(keys)):
        root = chains.root(key)
        out.append((key, root, "self", chain_via.get(root)))
        if key.startswith("name:"):
            out += [(key, chains.root(ror), "name", via) for ror, via in names.get(key.removeprefix("name:"), [])]
    out += [(part, chains.root(whole), "part", f"{part} is part of {whole}") for part, whole in parts]
    return pl.DataFrame(out, schema=IDENTITY_SCHEMA, orient="row").unique(["institution_key", "identity", "kind"],
                                                                         keep="first", maintain_order=True)


def _rule() -> pl.Expr:
    same = pl.col("institution_key") == pl.col("institution_key_q")
    part = (pl.col("kind") == "part") | (pl.col("kind_q") == "part")
    return (pl.when(same & pl.col("institution_key").str.starts_with("ror:")).then(pl.lit("same ror"))
            .when(same).then(pl.lit("same name"))
            .when((pl.col("kind") == "self") & (pl.col("kind_q") == "self")).then(pl.lit("ror successor"))
            .when(part).then(pl.lit("parent/child"))
            .otherwise(pl.lit("name matched alias")))


def _via() -> pl.Expr:
    """What joined two keys that are not the same: the succession's links, else the side(s) not met as themselves."""
    sides = pl.concat_str([pl.when(pl.col("kind") != "self").then(pl.col("via")),
                           pl.when(pl.col("kind_q") != "self").then(pl.col("via_q"))], separator="; ", ignore_nulls=True)
    return (pl.when(pl.col("rule").is_in(["same ror", "same name"])).then(pl.lit(None, pl.Utf8))
            .when(pl.col("rule") == "ror successor").then(pl.col("via")).otherwise(sides))


def institution_conflicts(pairs: pl.DataFrame, query_authors: pl.DataFrame, paper_years: dict[str, int | None],
                          stints: pl.DataFrame, window: int, institutions: pl.DataFrame | None = None) -> pl.DataFrame:
    """Candidates (``pairs``: ``query_id, author_id``) who were at one of a query author's
    institutions within ``window`` years of the query's year, one row per pair with its evidence
    (the strongest rule of ``RULES``, then the first institution and query author by key, so reruns
    name the same one). ``query_authors`` is ``arxiv_id, author_id``; ``stints`` comes from
    ``author_stints``; ``institutions`` is the graph's ``institutions`` table, what keys meet by
    (``institution_identities``; without it, the stints' keys and names alone). A query whose year
    is unknown is checked against every year. A candidate is never in conflict with themself."""
    if not stints.height or not pairs.height:
        return pl.DataFrame(schema=CONFLICT_SCHEMA)
    known = institutions if institutions is not None else stints.select("institution_key", "name").unique()
    ident = institution_identities(known, stints["institution_key"].unique().sort().to_list())
    qa = query_authors.select(pl.col("arxiv_id").alias("query_id"), pl.col("author_id").alias("query_author"))
    years = pl.DataFrame({"query_id": list(paper_years), "year": list(paper_years.values())},
                         schema={"query_id": pl.Utf8, "year": pl.Int64})
    cand = pairs.select("query_id", "author_id").unique().join(years, on="query_id", how="left")
    side = stints.select("author_id", "institution_key", "name", "first_year", "last_year", "source").join(
        ident, on="institution_key")
    mine = cand.join(side, on="author_id").filter(pl.col("year").is_null() | _within(pl.col("year"), window))
    theirs = (qa.join(years, on="query_id", how="left").join(side.rename({"author_id": "query_author"}), on="query_author")
              .filter(pl.col("year").is_null() | _within(pl.col("year"), window)).drop("year"))
    order = {r: i for i, r in enumerate(RULES)}
    hits = (mine.join(theirs, on=["query_id", "identity"], suffix="_q")
            .filter((pl.col("author_id") != pl.col("query_author"))
                    & ~((pl.col("kind") == "part") & (pl.col("kind_q") == "part")))
            .with_columns(_rule().alias("rule"))
            .with_columns(pl.col("rule").replace_strict(order, return_dtype=pl.Int64).alias("rank"), _via().alias("via"))
            .sort("query_id", "author_id", "rank", "institution_key", "query_author", "institution_key_q", "source",
                  "source_q", "first_year", "first_year_q", nulls_last=True)
            .unique(["query_id", "author_id"], keep="first", maintain_order=True))
    rows = []
    for h in hits.iter_rows(named=True):
        evidence = {"institution_key": h["institution_key"], "institution": h["name"], "query_author": h["query_author"],
                    "candidate_years": [h["first_year"], h["last_year"]], "candidate_source": h["source"],
                    "author_years": [h["first_year_q"], h["last_year_q"]], "author_source": h["source_q"],
                    "paper_year": h["year"], "window_years": window, "rule": h["rule"],
                    "query_institution_key": h["institution_key_q"], "query_institution": h["name_q"], "via": h["via"]}
        if h["institution_key"] == h["institution_key_q"]:
            there = "there"
        else:
            there = f"at {h['name_q']} ({h['institution_key_q']})"
        detail = (f"was at {h['name']} ({h['institution_key']}) {_span(h['first_year'], h['last_year'])} "
                  f"[{h['source']}]; query author {h['query_author']} was {there} "
                  f"{_span(h['first_year_q'], h['last_year_q'])} [{h['source_q']}]; "
                  + (f"{h['rule']}: {h['via']}; " if h["via"] else "")
                  + f"within {window} years of {h['year'] if h['year'] is not None else 'the paper (year unknown)'}")
        rows.append({"query_id": h["query_id"], "author_id": h["author_id"], "reason": REASON, "detail": detail,
                     "evidence": json.dumps(evidence, sort_keys=True)})
    return pl.DataFrame(rows, schema=CONFLICT_SCHEMA).sort("query_id", "author_id")


def graph_conflicts(graph: dict[str, pl.DataFrame], pairs: pl.DataFrame, query_authors: pl.DataFrame,
                    paper_years: dict[str, int | None], window: int) -> pl.DataFrame:
    """``institution_conflicts`` over what the warehouse's ``coi_inputs`` read: its people tied to
    author ids (``revbench.keys.person_links``), their stints, and its institutions."""
    stints = author_stints(person_links(graph["mentions"], graph["affiliations"]), graph["affiliations"])
    return institution_conflicts(pairs, query_authors, paper_years, stints, window, graph.get("institutions"))


def history_coauthors(pairs: pl.DataFrame, query_authors: pl.DataFrame, authors: pl.DataFrame,
                      s2: pl.DataFrame) -> pl.DataFrame:
    """Co-authorship the corpus does not show: a candidate and a query author whose Semantic
    Scholar histories (``s2``: ``s2_author_id, paper_key``) both list one paper. A paper the ingest
    rejected (a PDF that belongs to another paper), or never crawled, holds no author links, yet
    binds its authors all the same. ``pairs``: ``query_id, author_id``; ``query_authors``:
    ``arxiv_id, author_id``; ``authors``: ``author_id, s2_author_ids``. Rows ``query_id,
    author_id, reason, detail`` with reason ``coauthor``, the paper named in the detail."""
    schema = {"query_id": pl.Utf8, "author_id": pl.Utf8, "reason": pl.Utf8, "detail": pl.Utf8}
    if s2.height == 0 or pairs.height == 0:
        return pl.DataFrame(schema=schema)
    owners = (authors.select("author_id", pl.col("s2_author_ids").alias("s2_author_id"))
              .explode("s2_author_id").drop_nulls())
    # a paper named by its arXiv id where S2 gives one (a person can look it up), else S2's id
    label = (pl.lit("arXiv:") + pl.col("arxiv_id")) if "arxiv_id" in s2.columns else pl.lit(None, pl.Utf8)
    held = (s2.filter(pl.col("paper_key") != "")
            .select("s2_author_id", "paper_key", pl.coalesce(label, pl.lit("S2 paper ") + pl.col("paper_key")).alias("paper"))
            .join(owners, on="s2_author_id").select("author_id", "paper_key", "paper").unique(["author_id", "paper_key"]))
    qa = query_authors.select(pl.col("arxiv_id").alias("query_id"), pl.col("author_id").alias("query_author"))
    found = (pairs.select("query_id", "author_id").unique().join(qa, on="query_id")
             .filter(pl.col("author_id") != pl.col("query_author"))
             .join(held, on="author_id")
             .join(held.drop("paper").rename({"author_id": "query_author"}), on=["query_author", "paper_key"])
             .sort("query_author", "paper_key").group_by("query_id", "author_id", maintain_order=True)
             .agg(pl.col("query_author").first(), pl.col("paper").first()))
    return found.select("query_id", "author_id", pl.lit("coauthor").alias("reason"),
                        ("co-authored " + pl.col("paper") + " with query author " + pl.col("query_author")
                         + " (Semantic Scholar histories)").alias("detail")).sort("query_id", "author_id").cast(schema)
