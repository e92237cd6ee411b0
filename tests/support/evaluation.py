"""A small hand-made benchmark (also with a scholarly graph) and an OpenReview-layout dataset on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA,
    GRAPH_COAUTHORS_SCHEMA,
    GRAPH_INSTITUTIONS_SCHEMA,
    GRAPH_TOPICS_SCHEMA,
    PAPERS_SCHEMA,
    PROFILE_SCHEMA,
    RATINGS_SCHEMA,
    Benchmark,
    BenchmarkGraph,
    Split,
    frame,
)


def bench() -> Benchmark:
    subs = frame([
        dict(paper_id="s1", title="Dense retrieval for reviewer assignment", abstract="Matching submissions to reviewers with dense retrieval."),
        dict(paper_id="s2", title="Graph neural networks for molecules", abstract="Message passing predicts molecular properties."),
    ], PAPERS_SCHEMA)
    profile = frame([
        dict(reviewer_id="ir", paper_id="a", title="Learning to rank for expert finding", abstract="Reviewer assignment via retrieval of experts."),
        dict(reviewer_id="ir", paper_id="b", title="Dense passage retrieval", abstract="Dual encoders for retrieval."),
        dict(reviewer_id="gnn", paper_id="c", title="Message passing neural networks", abstract="Graph networks for molecular property prediction."),
    ], PROFILE_SCHEMA)
    ratings = frame([dict(reviewer_id=r, paper_id=p, rating=x) for r, p, x in
                     [("ir", "s1", 5.0), ("ir", "s2", 1.0), ("gnn", "s1", 1.0), ("gnn", "s2", 5.0)]], RATINGS_SCHEMA)
    return Benchmark("hand", "1", subs, [profile], [Split("pointwise", ratings=ratings, candidate_lists=True)])


def graph_bench() -> Benchmark:
    """``bench`` with years, two more papers of ``ir`` (``d`` without topics, ``e`` without a
    year) and a graph: s1 cites a (influential, 10 years older) and b (same year); s2 cites b,
    c (10 years older) and e (influential); a citation between two profile papers (a -> c) that
    no scorer may count; topics under two schemes (arXiv categories unscored, OpenAlex scored)."""
    b = bench()
    years = {"s1": 2024, "s2": 2024, "a": 2014, "b": 2024, "c": 2014, "d": 2024, "e": None}
    more = frame([dict(reviewer_id="ir", paper_id="d", title="Query expansion", abstract="Pseudo relevance feedback."),
                  dict(reviewer_id="ir", paper_id="e", title="Neural ranking", abstract="Cross-encoders rerank passages.")],
                 PROFILE_SCHEMA)
    year = pl.col("paper_id").replace_strict(years, return_dtype=pl.Int64).alias("year")
    profile, subs = pl.concat([b.draws[0], more]).with_columns(year), b.submissions.with_columns(year)
    citations = frame([dict(citing_id=p, cited_id=q, is_influential=i, source=s) for p, q, i, s in [
        ("s1", "a", True, "s2"), ("s1", "b", None, "openalex"), ("s2", "b", False, "openalex,s2"),
        ("s2", "c", False, "s2"), ("s2", "e", True, "s2"), ("a", "c", True, "s2")]], GRAPH_CITATIONS_SCHEMA)
    topics = frame([dict(paper_id=p, scheme=s, topic=t, score=x) for p, s, t, x in [
        ("s1", "arxiv", "cs.IR", None), ("s2", "arxiv", "cs.LG", None), ("a", "arxiv", "cs.IR", None),
        ("a", "arxiv", "cs.CL", None), ("b", "arxiv", "cs.IR", None), ("c", "arxiv", "cs.LG", None),
        ("e", "arxiv", "cs.CV", None),
        ("s1", "openalex-topic", "T1", 0.9), ("s1", "openalex-topic", "T2", 0.3), ("a", "openalex-topic", "T1", 0.6),
        ("a", "openalex-topic", "T2", 0.8), ("c", "openalex-topic", "T3", 1.0), ("s2", "openalex-topic", "T3", 0.5),
        ("s2", "openalex-topic", "T1", 0.5)]], GRAPH_TOPICS_SCHEMA)
    graph = BenchmarkGraph(
        citations=citations, topics=topics,
        reviewer_institutions=frame([dict(reviewer_id="ir", institution_key="ror:00f54p054", first_year=2019, last_year=2024)],
                                    GRAPH_INSTITUTIONS_SCHEMA),
        coauthors=frame(None, GRAPH_COAUTHORS_SCHEMA))
    return Benchmark("hand-graph", "1", subs, [profile], b.splits, graph=graph)


def write_openreview(d: Path) -> Path:
    b = bench()
    (d / "archives").mkdir(parents=True)
    (d / "submissions.json").write_text(json.dumps(
        {p: {"id": p, "content": {"title": t, "abstract": a}} for p, t, a in b.submissions.select("paper_id", "title", "abstract").iter_rows()}
    ))
    for (r,), g in b.draws[0].group_by("reviewer_id"):
        (d / "archives" / f"~{r}.jsonl").write_text("\n".join(
            json.dumps({"id": p, "content": {"title": t, "abstract": a, "year": 2024}})
            for p, t, a in g.select("paper_id", "title", "abstract").iter_rows()) + "\n")
    b.splits[0].ratings.rename({"reviewer_id": "reviewer", "paper_id": "paper"}).write_csv(d / "ratings.csv")
    return d


def rate_cited_authors(wh: Any, truth: dict, links: pl.DataFrame) -> tuple[list[str], list[str]]:  # type: ignore[type-arg]
    """Kept ratings of papers that cite others of ours, by the authors of the papers they cite
    (``truth``: the world's graph); returns the rated papers and the raters."""
    from datetime import UTC, datetime

    from revbench.schemas.tables import RATINGS

    ours = set(wh.graph.paper_identifiers()["arxiv_id"])
    refs = {p: {r["arxiv_id"] for r in truth["references"][p]} & ours - {p} for p in ours}
    subs = sorted(p for p in ours if refs[p])[:4]
    cited = set().union(*(refs[p] for p in subs)) - set(subs)
    reviewers = sorted(set(links.filter(pl.col("arxiv_id").is_in(sorted(cited)))["author_id"]))
    rows = [dict(reviewer_id=r, paper_id=p, rating=1 + (i + j) % 5, invitation_id=f"inv_{r}", round=1, category="cs.IR",
                 event_id=i * 10 + j, epoch="e1", rated_at=datetime(2026, 9, 21, tzinfo=UTC), n_events=1, status="kept",
                 flags=[]) for i, r in enumerate(reviewers) for j, p in enumerate(subs)]
    wh.upsert(RATINGS, pl.DataFrame(rows))
    return subs, reviewers
