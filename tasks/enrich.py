"""Semantic Scholar enrichment: S2 paper ids and author ids for crawled papers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import polars as pl

from revbench.schemas.tables import S2_PAPERS


def batches(ids: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(ids), size):
        yield ids[i : i + size]


def s2_frame(arxiv_ids: list[str], answers: list[dict[str, Any] | None], fetched_at: datetime) -> pl.DataFrame:
    """Rows of ``s2_papers`` for one batch answer; unknown papers are kept as ``found = false``
    so they are not asked again."""
    rows = []
    for aid, ans in zip(arxiv_ids, answers, strict=True):
        # S2 writes "authors": null for some papers, and an author it could not resolve has
        # "authorId": null: kept with its name, in order, so positions still line up.
        authors = [
            {"author_id": a.get("authorId"), "name": a.get("name")}
            for a in (ans or {}).get("authors") or []
            if isinstance(a, dict)
        ]
        rows.append(
            {
                "arxiv_id": aid,
                "found": ans is not None,
                "s2_paper_id": (ans or {}).get("paperId"),
                "authors": authors,
                "record_hash": hashlib.sha256(json.dumps(ans, sort_keys=True).encode()).hexdigest(),
                "fetched_at": fetched_at,
            }
        )
    return S2_PAPERS.conform(pl.DataFrame(rows, schema_overrides={"authors": S2_PAPERS.column("authors").dtype}))


def history_rows(s2_author_id: str, papers: list[dict[str, Any]], fetched_at: datetime) -> list[dict[str, Any]]:
    """Rows of ``s2_author_papers`` for one author's publication list: a marker row (empty
    ``paper_key``) saying the author was fetched, then one row per paper that has an S2 id, with
    its year and ``externalIds.ArXiv`` where S2 knows them (``externalIds`` may be null)."""
    rows: list[dict[str, Any]] = [
        {"s2_author_id": s2_author_id, "paper_key": "", "year": None, "arxiv_id": None, "fetched_at": fetched_at}
    ]
    for p in papers:
        if isinstance(p, dict) and p.get("paperId"):
            rows.append({"s2_author_id": s2_author_id, "paper_key": p["paperId"], "year": p.get("year"),
                         "arxiv_id": (p.get("externalIds") or {}).get("ArXiv"), "fetched_at": fetched_at})
    return rows
