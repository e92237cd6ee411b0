"""The ``warehouse`` kind: the benchmark the ratings flow builds in revbench's own warehouse."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from revbench.errors import InputError
from revbench.evaluation.importers.registry import benchmark_kind
from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA,
    GRAPH_COAUTHORS_SCHEMA,
    GRAPH_HISTORY_SCHEMA,
    GRAPH_INSTITUTIONS_SCHEMA,
    GRAPH_REFERENCES_SCHEMA,
    GRAPH_TOPICS_SCHEMA,
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    SPLIT_PAPER_CENTRIC,
    SPLIT_POINTWISE,
    SPLIT_REVIEWER_CENTRIC,
    TUPLES_SCHEMA,
    Benchmark,
    BenchmarkGraph,
    Split,
)


@benchmark_kind("warehouse")
def load_warehouse(path: Path, profile_max_papers: int = 20, lock_wait: float = 0.0) -> Benchmark:
    """The warehouse's own benchmark, built by the ratings flow: the kept ratings as the
    pointwise split (each rated paper with its list of rated candidates), the paper-centric and
    reviewer-centric tuples as two more splits, the rated papers as submissions, and each rater's
    most recent corpus papers (at most ``profile_max_papers``; rated papers left out) as profile,
    and the scholarly graph around them when the graph stage stored any (else ``graph`` is None),
    with each rater's whole history (every corpus paper of theirs, uncapped) and the reference
    lists of all these papers.
    Waits up to ``lock_wait`` seconds for a run that holds the file."""
    from revbench.warehouse import Warehouse  # DuckDB loads only when this kind is read

    with Warehouse.open(path, read_only=True, lock_wait=lock_wait) as wh:
        if not wh.has_table("rating_tuples"):
            raise InputError(f"the warehouse at {path} predates the ratings stage: run `revbench ratings` first")
        f = wh.ratings.benchmark_frames(profile_max_papers)
        pool = wh.ratings.benchmark_pool() if wh.has_table("pool_evidence") and wh.has_table("pool_exclusions") else None
        graph = None
        if wh.graph.has_graph():
            papers = sorted(set(f["papers"]["paper_id"]) | set(f["profiles"]["paper_id"]))
            graph = wh.ratings.benchmark_graph(papers, sorted(set(f["ratings"]["reviewer_id"])), history=True)
    if f["ratings"].height == 0:
        raise InputError(f"the warehouse at {path} holds no kept ratings yet: send a survey round (`revbench survey send`) "
                         "and pull its answers (`revbench ratings`) first")
    if f["papers"].height == 0:  # no text to score: every scorer would score nothing
        rated = f["ratings"]["paper_id"].unique().sort()
        raise InputError(f"the warehouse at {path} holds {f['ratings'].height} kept ratings of {rated.len()} papers but "
                         f"none of those papers (e.g. {rated[0]!r}): ingest them again (`revbench ingest` over their "
                         "window) or restore the warehouse from a backup (`revbench restore`)")
    digest = hashlib.sha256()
    for name in ("ratings", "tuples"):
        digest.update(f[name].write_csv().encode())
    return Benchmark(
        name="warehouse", version=digest.hexdigest()[:12], submissions=f["papers"].cast(PAPERS_SCHEMA),
        draws=[f["profiles"].cast(PROFILE_SCHEMA)],
        splits=[Split(SPLIT_POINTWISE, ratings=f["ratings"].cast(RATINGS_SCHEMA), candidate_lists=True),
                *pairwise_splits(f["tuples"])],
        pool=None if pool is None else pool.cast({"reviewer_id": pl.Utf8, "paper_id": pl.Utf8}),
        graph=None if graph is None else BenchmarkGraph(
            citations=graph["citations"].cast(GRAPH_CITATIONS_SCHEMA), topics=graph["topics"].cast(GRAPH_TOPICS_SCHEMA),
            reviewer_institutions=graph["reviewer_institutions"].cast(GRAPH_INSTITUTIONS_SCHEMA),
            coauthors=graph["coauthors"].cast(GRAPH_COAUTHORS_SCHEMA), history=graph["history"].cast(GRAPH_HISTORY_SCHEMA),
            references=graph["references"].cast(GRAPH_REFERENCES_SCHEMA)),
    )


def pairwise_splits(t: pl.DataFrame) -> list[Split]:
    """The paper-centric and reviewer-centric splits of revbench's tuples (``kind, anchor_id,
    positive_id, negative_id, rating_pos, rating_neg``); the anchor is the resampled cluster."""
    anchor, pos, neg = pl.col("anchor_id"), pl.col("positive_id"), pl.col("negative_id")
    ratings = (pl.col("rating_pos").cast(pl.Float64), pl.col("rating_neg").cast(pl.Float64), anchor.alias("cluster"))
    pc = t.filter(pl.col("kind") == "paper_centric").select(
        pos.alias("reviewer_pos"), anchor.alias("paper_pos"), neg.alias("reviewer_neg"), anchor.alias("paper_neg"), *ratings)
    rc = t.filter(pl.col("kind") == "reviewer_centric").select(
        anchor.alias("reviewer_pos"), pos.alias("paper_pos"), anchor.alias("reviewer_neg"), neg.alias("paper_neg"), *ratings)
    return [Split(SPLIT_PAPER_CENTRIC, tuples=pc.cast(TUPLES_SCHEMA)),
            Split(SPLIT_REVIEWER_CENTRIC, tuples=rc.cast(TUPLES_SCHEMA))]
