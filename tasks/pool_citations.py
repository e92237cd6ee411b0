"""Citation recall, the pools' second path: the authors of corpus papers a query cites join its
candidates (exHarmony builds its candidates from the authors of cited works; DESIGN.md's pools).

A cited paper gives its authors the evidence a neighbour paper gives (``query_id, author_id,
neighbor_id, similarity``, the similarity from the vectors the pools embedded), so COI, screening,
the workload cap and assignment treat them alike. Each evidence row and each invitation records its
``path``: ``semantic`` (a neighbour above tau), ``citation`` (a paper the query cites) or ``both``.

Every function is pure over frames and arrays; the flow reads the citations from the warehouse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from revbench.schemas.tables import RECALL_PATHS
from revbench.tasks.pools import EVIDENCE_SCHEMA, PAIR, candidate_evidence

CITED_SCHEMA = {"query_id": pl.Utf8, "neighbor_id": pl.Utf8}
NO_CITATIONS = pl.DataFrame(schema=CITED_SCHEMA)
"""What a round recalls by citation with the path off."""
PATH_EVIDENCE_SCHEMA = {**EVIDENCE_SCHEMA, "path": pl.Utf8}


def applies(state: dict[str, Any] | None, replace: bool) -> bool:
    """Whether citation recall may shape this build of a round (``state``: the round's current
    version from the warehouse, or None for a new round), given that the setting is on.

    A round recorded without ``citation_recall`` in its parameters (every round built before the
    path existed, and any built with it off) is rebuilt without it: a re-run reproduces it instead
    of being refused for the new setting or drawing other candidates; ``replace`` rebuilds it with
    the path, keeping the old version as superseded."""
    if state is None or replace:
        return True
    return "citation_recall" in (state.get("parameters") or {})


def citation_neighbors(cited: pl.DataFrame, vectors: np.ndarray, ids: list[str]) -> pl.DataFrame:
    """``query_id, neighbor_id, similarity`` for each (query, cited paper) of ``cited``: the inner
    product of their unit vectors, as the faiss index scores a neighbour. A paper without a vector
    (not among ``ids``) is left out."""
    pos = {a: i for i, a in enumerate(ids)}
    rows = [(q, n) for q, n in cited.select("query_id", "neighbor_id").iter_rows() if q in pos and n in pos]
    schema = {"query_id": pl.Utf8, "neighbor_id": pl.Utf8, "similarity": pl.Float64}
    if not rows:
        return pl.DataFrame(schema=schema)
    x = np.asarray(vectors, dtype=np.float32)
    qi = np.array([pos[q] for q, _ in rows], dtype=np.int64)
    ni = np.array([pos[n] for _, n in rows], dtype=np.int64)
    sims = np.einsum("ij,ij->i", x[qi], x[ni]).astype(np.float64)
    return pl.DataFrame({"query_id": [q for q, _ in rows], "neighbor_id": [n for _, n in rows], "similarity": sims},
                        schema=schema)


def recall(semantic: pl.DataFrame, cited: pl.DataFrame, vectors: np.ndarray, ids: list[str],
           links: pl.DataFrame) -> pl.DataFrame:
    """The round's evidence with each row's ``path``: ``semantic`` (``candidate_evidence`` of the
    neighbours above tau) joined by the authors of the papers the queries cite (``cited``:
    ``query_id, neighbor_id``). A neighbour found both ways is one row, ``both``, with the
    similarity faiss gave it; with no citations every row is ``semantic`` and nothing else changes."""
    by_citation = candidate_evidence(citation_neighbors(cited, vectors, ids), links)
    key = ["query_id", "author_id", "neighbor_id"]
    merged = (semantic.select(list(EVIDENCE_SCHEMA)).with_columns(pl.lit(True).alias("_s"))
              .join(by_citation.select(*key, pl.col("similarity").alias("_cs"), pl.lit(True).alias("_c")),
                    on=key, how="full", coalesce=True))
    path = (pl.when(pl.col("_s") & pl.col("_c")).then(pl.lit("both"))
            .when(pl.col("_s")).then(pl.lit("semantic")).otherwise(pl.lit("citation")))
    return (merged.with_columns(pl.col("_s").fill_null(False), pl.col("_c").fill_null(False))
            .select(*key, pl.coalesce("similarity", "_cs").alias("similarity"), path.alias("path"))
            .cast(PATH_EVIDENCE_SCHEMA).sort(key))  # type: ignore[arg-type]


def pair_paths(evidence: pl.DataFrame) -> pl.DataFrame:
    """``query_id, author_id, path``: how each candidate came into each query's pool (``both`` when
    any of their evidence was found each way); a candidate both paths find is one pair."""
    semantic = pl.col("path").is_in(["semantic", "both"]).any()
    cited = pl.col("path").is_in(["citation", "both"]).any()
    return (evidence.group_by(PAIR).agg(semantic.alias("_s"), cited.alias("_c"))
            .select(*PAIR, pl.when(pl.col("_s") & pl.col("_c")).then(pl.lit("both"))
                    .when(pl.col("_s")).then(pl.lit("semantic")).otherwise(pl.lit("citation")).alias("path"))
            .sort(PAIR))


def with_paths(assignments: pl.DataFrame, evidence: pl.DataFrame) -> pl.DataFrame:
    """``assignments`` with the ``path`` that found each invited pair (from its ``evidence``)."""
    return assignments.join(pair_paths(evidence), on=PAIR, how="left", maintain_order="left")


def path_counts(frame: pl.DataFrame) -> dict[str, int]:
    """Rows of ``frame`` by ``path``, every path named (0 where none)."""
    counts = dict(frame.group_by("path").len().iter_rows()) if frame.height else {}
    return {p: int(counts.get(p, 0)) for p in RECALL_PATHS}
