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
        authors = [
            {"author_id": a.get("authorId"), "name": a.get("name")} for a in (ans or {}).get("authors") or []
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
