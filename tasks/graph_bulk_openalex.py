"""The OpenAlex snapshot's works and authors (taken apart by ``revbench.warehouse.bulk_openalex``)
as the graph stage's ``openalex`` answers: the rows ``tasks.graph_fetch.add_work`` and
``openalex_graph.author_rows`` make of the same entities, with the same values.

References, topics and authorships are made over whole columns by the parsers' rules. The
institutions are the parser's own (``openalex_graph``): each distinct authorship's places and
each distinct institution parsed once, however many papers name them, then merged per paper as
``authorship_rows`` merges them (a later authorship's aliases added to the first row of its
institution), and per author as ``author_rows`` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl

from revbench.clients import openalex_graph
from revbench.clients.openalex import arxiv_doi
from revbench.schemas.graph import PAPER_AUTHORSHIPS, PAPER_TOPICS
from revbench.tasks.graph_bulk import Framed, as_text, citations_of, fetches_of, in_order

SOURCE = openalex_graph.SOURCE
_PLAIN = r'^[ !#-\[\]-~]*$'
"""Printable ASCII but ``"`` and ``\\``: what ``json.dumps`` writes unescaped with ``ensure_ascii``."""


def openalex_dois(arxiv_ids: list[str]) -> list[str]:
    """The snapshot's ``doi`` values (a ``https://doi.org/`` URL, compared in lower case) of ``arxiv_ids``."""
    return [f"https://doi.org/{arxiv_doi(a).lower()}" for a in arxiv_ids]


def openalex_id(column: pl.Expr) -> pl.Expr:
    """``openalex_graph.openalex_id``: the last segment of the URL (trailing slashes aside), null when none."""
    tail = as_text(column).str.strip_chars_end("/").str.split("/").list.last()
    return pl.when(tail.str.len_bytes() > 0).then(tail)


def bare_orcid(column: pl.Expr) -> pl.Expr:
    """``openalex_graph.bare_orcid``: the ORCID iD a value ends in, upper case; null when none."""
    return as_text(column).str.extract(r"(?i)(\d{4}-\d{4}-\d{4}-\d{3}[\dX])$", 1).str.to_uppercase()


def _person(author_id: str, orcid: str) -> list[pl.Expr]:
    key = openalex_id(pl.col(author_id))
    return [pl.when(key.is_not_null()).then(pl.lit("openalex:") + key).alias("person"), bare_orcid(pl.col(orcid)).alias("orcid")]


def author_keys(works: dict[str, pl.DataFrame]) -> list[str]:
    """The author ids (as the works write them) whose profiles give the affiliations with years."""
    return sorted(set(works["authorships"].filter(pl.col("author_id").str.len_bytes() > 0)["author_id"].to_list()))


def _references(refs: pl.DataFrame) -> pl.DataFrame:
    """``openalex_graph.citation_rows``: each referenced work by its id, in the list's order."""
    wid = openalex_id(pl.col("ref"))
    rows = refs.select("arxiv_id", "ordinal", wid.alias("cited_openalex_id")).drop_nulls("cited_openalex_id")
    plain = pl.col("cited_openalex_id").str.contains(_PLAIN)
    ids = pl.when(plain).then(pl.format('{{"openalex": "{}"}}', "cited_openalex_id")).otherwise(
        pl.col("cited_openalex_id").map_elements(lambda w: json.dumps({"openalex": w}), return_dtype=pl.Utf8))
    return citations_of(rows.select(pl.col("arxiv_id").alias("citing_arxiv_id"), pl.lit(SOURCE).alias("source"),
                                    "ordinal", "cited_openalex_id", pl.lit([], pl.List(pl.Utf8)).alias("intents"),
                                    ids.alias("external_ids")))


def _topics(topics: pl.DataFrame) -> pl.DataFrame:
    """``openalex_graph.topic_rows``: ``topics`` then ``primary_topic``, each topic once."""
    score = pl.col("score")
    rows = topics.sort("eid", "idx").select(
        "arxiv_id", openalex_id(pl.col("id")).alias("topic"), as_text(pl.col("label")).alias("label"),
        pl.when(score.is_between(0, 1)).then(score).alias("score"),
        *(as_text(pl.col(c)).alias(c) for c in ("domain", "field", "subfield")))
    rows = rows.drop_nulls("topic").unique(["arxiv_id", "topic"], keep="first", maintain_order=True)
    return PAPER_TOPICS.conform(rows.with_columns(scheme=pl.lit(openalex_graph.SCHEME), origin=pl.lit(SOURCE)))


def _authorships(people: pl.DataFrame) -> pl.DataFrame:
    """``openalex_graph.person_rows``: each authorship with an author id or an ORCID iD."""
    name = pl.coalesce(as_text(pl.col("raw_name")), as_text(pl.col("display_name")))
    rows = people.filter(pl.col("person").is_not_null() | pl.col("orcid").is_not_null())
    return PAPER_AUTHORSHIPS.conform(rows.select("arxiv_id", pl.lit(SOURCE).alias("source"), "position",
                                                 pl.col("person").alias("person_key"), "orcid", name.alias("name")))


class _Parsed(dict):
    """The parser's answer for each distinct JSON text, parsed once (many authorships share their places)."""

    def __init__(self, parse: Any) -> None:
        super().__init__()
        self.parse = parse

    def __missing__(self, text: str | None) -> Any:
        self[text] = value = self.parse(json.loads(text)) if text else None
        return value


def _groups(frame: pl.DataFrame, columns: list[str]) -> Iterator[tuple[Any, list[tuple[Any, ...]]]]:
    """``frame``'s rows (``columns``, the first the group) one group at a time, in the frame's order."""
    group: list[tuple[Any, ...]] = []
    for row in frame.select(columns).iter_rows():
        if group and row[0] != group[0][0]:
            yield group[0][0], group
            group = []
        group.append(row)
    if group:
        yield group[0][0], group


def _work_people(people: pl.DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """``openalex_graph.authorship_rows`` of every work: (institutions, affiliations, affiliations per paper)."""
    institutions: list[dict[str, Any]] = []
    affiliations: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    # the parser's own rule for one authorship's institutions
    parsed = _Parsed(openalex_graph._authorship_institutions)
    for aid, rows in _groups(people, ["arxiv_id", "year", "position", "person", "orcid", "places"]):
        insts: dict[str, dict[str, Any]] = {}
        affs: dict[tuple[str, str], dict[str, Any]] = {}
        for _, year, position, person, orcid, places in rows:
            found = parsed[places] or []
            for inst in found:
                key = inst["institution_key"]
                insts[key] = openalex_graph._with_aliases(insts[key], inst["aliases"] or []) if key in insts else inst
            if person is None:
                continue
            for inst in found:
                affs.setdefault((person, inst["institution_key"]), {
                    "person_key": person, "orcid": orcid, "institution_key": inst["institution_key"], "first_year": year,
                    "last_year": year, "source": SOURCE, "arxiv_id": aid, "position": position})
        institutions += insts.values()
        affiliations += affs.values()
        counts[aid] = len(affs)
    return institutions, affiliations, counts


def _profiles(authors: dict[str, pl.DataFrame], named: dict[str, str]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``openalex_graph.author_rows`` of each author ``named`` (OpenAlex id -> the paper that named
    them), in that order: (institutions, affiliations, failures: those the snapshot lacks)."""
    people = authors["authors"].sort("key").with_columns(tail=pl.col("key").str.split("/").list.last()).unique(
        "tail", keep="last", maintain_order=True).select("eid", "tail", *_person("id", "orcid"))
    places = authors["places"].join(people, on="eid").sort("eid", "idx")
    by_id = {tail: (person, orcid, []) for _, tail, person, orcid in people.iter_rows()}
    for tail, rows in _groups(places, ["tail", "institution", "years"]):
        by_id[tail][2].extend(rows)
    institutions: list[dict[str, Any]] = []
    affiliations: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    parsed = _Parsed(openalex_graph.institution_row)
    for author_id, aid in named.items():
        if author_id not in by_id:
            failures.append({"arxiv_id": aid, "source": SOURCE, "kind": "affiliations",
                             "error": f"author {author_id}: not in the snapshot"})
            continue
        person, orcid, rows = by_id[author_id]
        insts: dict[str, dict[str, Any]] = {}
        affs: dict[str, dict[str, Any]] = {}
        for _, text, years in rows:
            inst = parsed[text]
            if inst is None:
                continue
            key = inst["institution_key"]
            insts.setdefault(key, inst)
            years = [y for y in years if 1400 <= y <= 2100]
            if person is None:
                continue
            row = affs.setdefault(key, {"person_key": person, "orcid": orcid, "institution_key": key, "first_year": None,
                                        "last_year": None, "source": SOURCE, "arxiv_id": None, "position": None})
            if years:  # two affiliations naming one institution (a ROR and its merged twin) widen one row
                row["first_year"] = min(y for y in (row["first_year"], *years) if y is not None)
                row["last_year"] = max(y for y in (row["last_year"], *years) if y is not None)
        institutions += insts.values()
        affiliations += affs.values()
    return institutions, affiliations, failures


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame | None:
    return pl.DataFrame(rows, infer_schema_length=None) if rows else None


def _last_of_each(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with a row given again (the same parsed institution, named by paper after paper)
    kept once, where it was last given: the store keeps per institution the last value given of
    each column and every alias, which a row given twice does not change."""
    seen: set[int] = set()
    out = [r for r in reversed(rows) if not (id(r) in seen or seen.add(id(r)))]
    return out[::-1]


def openalex_framed(arxiv_ids: list[str], works: dict[str, pl.DataFrame],
                    authors: dict[str, pl.DataFrame] | None = None) -> Framed:
    """The ``openalex`` answers for ``arxiv_ids`` from the snapshot's ``works`` (by DOI) and
    ``authors`` (the profiles of the people the works name, for their affiliations with years;
    an author named but absent is a named failure, asked again next run)."""
    ids = list(dict.fromkeys(arxiv_ids))
    keys = pl.DataFrame({"arxiv_id": ids, "key": openalex_dois(ids)}, schema={"arxiv_id": pl.Utf8, "key": pl.Utf8})
    year = pl.col("year")
    mine = keys.join(works["works"], on="key").select(
        "eid", "arxiv_id", openalex_id(pl.col("id")).alias("wid"), pl.when(year.is_between(1400, 2100)).then(year).alias("year"))
    refs = _references(works["refs"].join(mine, on="eid").sort("eid", "ordinal"))
    topics = _topics(works["topics"].join(mine, on="eid"))
    people = works["authorships"].join(mine, on="eid").sort("eid", "position").with_columns(*_person("author_id", "orcid"))
    people = in_order(people, ids)
    institutions, affiliations, counts = _work_people(people)
    named: dict[str, str] = {}
    for a in affiliations:
        named.setdefault(a["person_key"].removeprefix("openalex:"), a["arxiv_id"])
    failures: list[dict[str, Any]] = []
    if authors is not None:
        more, widened, failures = _profiles(authors, named)
        institutions, affiliations = institutions + more, affiliations + widened
    n_affs = pl.DataFrame({"arxiv_id": [a for a, n in counts.items() for _ in range(n)]}, schema={"arxiv_id": pl.Utf8})
    found = mine.select("arxiv_id", pl.col("wid").alias("source_paper_id"))
    fetches = fetches_of(ids, SOURCE, {"references": refs.rename({"citing_arxiv_id": "arxiv_id"}), "topics": topics,
                                       "affiliations": n_affs}, found)
    work_ids = {wid: aid for aid, wid in in_order(found, ids).iter_rows() if wid}
    return Framed(SOURCE, in_order(refs, ids, "citing_arxiv_id", "ordinal"), in_order(topics, ids), fetches,
                  institutions=_frame(_last_of_each(institutions)), affiliations=_frame(affiliations),
                  authorships=in_order(_authorships(people), ids), failures=failures, work_ids=work_ids)
