"""The bulk datasets' rows (``revbench.warehouse.bulk``) as the graph stage's answers: the same
``Fetched`` the API pieces return, made by the same parsers, so a paper read from S2AG or the
OpenAlex snapshot lands in the same tables with the same values as one asked over HTTP.

S2AG rows are put in the Graph API's shape first: a citation becomes a ``/references`` edge
(``citedPaper`` with its ``paperId``, the 40-hex id of the paper's ``url``, its ``externalIds``,
title and year from the ``papers`` dataset; ``isInfluential``; ``contexts`` and ``intents`` only
where S2 wrote them, so null stays unknown). A cited paper the ``papers`` dataset does not hold
keeps its corpus id (``externalIds.CorpusId``), so no edge loses what the bulk file said.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from revbench.clients import openalex_graph, s2_graph
from revbench.clients.openalex import arxiv_doi
from revbench.tasks.graph_fetch import Fetched, add_work

_DOI_URL = re.compile(r"^https?://(?:dx\.)?doi\.org/", re.I)


def _json(text: Any) -> Any:
    return None if text is None else json.loads(text)


def _paper_id(url: Any) -> str | None:
    """The 40-hex paper id at the end of an S2 paper URL (``.../paper/<sha>``)."""
    tail = str(url or "").rstrip("/").rpartition("/")[2]
    return tail if len(tail) == 40 and all(c in "0123456789abcdef" for c in tail) else None


def cited_paper(corpus_id: int | None, row: dict[str, Any] | None) -> dict[str, Any]:
    """A cited paper in the Graph API's shape, from its S2AG ``papers`` row (or its corpus id alone)."""
    if row is None:
        return {"paperId": None, "externalIds": {"CorpusId": str(corpus_id)} if corpus_id is not None else {}}
    return {"paperId": _paper_id(row.get("url")), "externalIds": _json(row.get("externalids")) or {},
            "title": row.get("title"), "year": row.get("year")}


def citation_edge(row: dict[str, Any], cited: dict[str, Any]) -> dict[str, Any]:
    """One S2AG ``citations`` row as a ``/paper/{id}/references`` edge."""
    edge: dict[str, Any] = {"citedPaper": cited, "isInfluential": row.get("isinfluential")}
    contexts, intents = _json(row.get("contexts")), _json(row.get("intents"))
    if contexts is not None:
        edge["contexts"] = contexts
    if intents is not None:
        # S2AG writes one list of intents per context; the API's edge lists the intents once
        edge["intents"] = [i for group in intents for i in (group if isinstance(group, list) else [group])]
    return edge


def s2ag_fetched(arxiv_ids: list[str], papers: pl.DataFrame, citations: pl.DataFrame, cited: pl.DataFrame) -> Fetched:
    """The ``s2`` answers for ``arxiv_ids`` from S2AG: each paper's fields of study and references
    (``papers``: their rows by ``arxiv``; ``citations``: the rows they cite; ``cited``: the cited
    papers' rows). A paper S2AG does not hold is recorded as not found, as the API's 404 is."""
    out = Fetched("s2")
    by_arxiv = {r["arxiv"]: r for r in papers.iter_rows(named=True) if r["arxiv"]}
    by_corpus = {r["corpusid"]: r for r in cited.iter_rows(named=True)}
    edges: dict[int, list[dict[str, Any]]] = {}
    for row in citations.iter_rows(named=True):
        cid = row["citedcorpusid"]
        edges.setdefault(row["citingcorpusid"], []).append(citation_edge(row, cited_paper(cid, by_corpus.get(cid))))
    for aid in arxiv_ids:
        row = by_arxiv.get(aid)
        if row is None:
            out.fetched(aid, "topics", False, 0)
            out.fetched(aid, "references", False, 0)
            continue
        pid = _paper_id(row.get("url"))
        topics = s2_graph.topic_rows(aid, {"s2FieldsOfStudy": _json(row.get("s2fieldsofstudy"))})
        out.topics += topics
        out.fetched(aid, "topics", True, len(topics), pid)
        refs = s2_graph.reference_rows(aid, edges.get(row["corpusid"], []))
        out.citations += refs
        out.fetched(aid, "references", True, len(refs), pid)
    return out


def openalex_dois(arxiv_ids: list[str]) -> list[str]:
    """The snapshot's ``doi`` values (a ``https://doi.org/`` URL, compared in lower case) of ``arxiv_ids``."""
    return [f"https://doi.org/{arxiv_doi(a).lower()}" for a in arxiv_ids]


def openalex_fetched(arxiv_ids: list[str], works: pl.DataFrame, authors: pl.DataFrame) -> Fetched:
    """The ``openalex`` answers for ``arxiv_ids`` from the snapshot: ``works`` (``key`` the DOI in
    lower case, ``entity`` the work) read by the API's own parser; ``authors`` (``key`` the author
    id URL, ``entity`` the author) for the affiliations with years."""
    out = Fetched("openalex")
    by_doi = {_DOI_URL.sub("", str(k)).lower(): v for k, v in works.select("key", "entity").iter_rows()}
    named: dict[str, str] = {}
    for aid in arxiv_ids:
        text = by_doi.get(arxiv_doi(aid).lower())
        add_work(out, aid, None if text is None else json.loads(text), named)
    by_id = {str(k).rsplit("/", 1)[-1]: v for k, v in authors.select("key", "entity").iter_rows()}
    for author_id, aid in named.items():
        text = by_id.get(author_id)
        if text is None:
            out.failures.append({"arxiv_id": aid, "source": "openalex", "kind": "affiliations",
                                 "error": f"author {author_id}: not in the snapshot"})
            continue
        insts, affs = openalex_graph.author_rows(json.loads(text))
        out.institutions += insts
        out.affiliations += affs
    return out
