"""A rebuild's pools against the original's rated pairs: the similarity of each reviewer to each
query paper with the pools' model, the pool settings fitted to the original, the copy of the
warehouse the product's settings run on, and each rated pair's fate in round 1 of a warehouse's pools."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.ml.embeddings import settings_cache
from revbench.schemas.tables import ASSIGNMENTS, AUTHOR_LINKS, POOL_EVIDENCE, POOL_EXCLUSIONS, QUERY_SAMPLES
from revbench.settings import Settings
from revbench.synth.truth import load_truth
from revbench.tasks import rebuild as rb
from revbench.tasks.pools import first_recent_year, paper_texts
from revbench.warehouse import Warehouse


@dataclass(frozen=True)
class PoolsChoice:
    """The two pool configurations of a rebuild: the product's settings (as configured) run on a
    copy of the warehouse, and the settings fitted to the original's candidate sets, whose pools
    the survey, the release and the comparison use."""

    defaults: dict[str, Any]
    fitted: dict[str, Any]
    fit: rb.PoolFit
    defaults_warehouse: Path


def product_settings(s: Settings) -> dict[str, Any]:
    """The pool settings a fit replaces, as ``s`` configures them."""
    p = s.pools
    return {"tau": p.tau, "candidates_per_query": p.candidates_per_query,
            "max_queries_per_candidate": p.max_queries_per_candidate, "min_recent_papers": p.min_recent_papers}


def defaults_copy(s: Settings) -> Path:
    """A data folder beside ``s``'s (``pools-defaults``) holding a copy of its warehouse and its
    cache by link, where the product's settings run round 1 without touching the rebuild's own
    pools; made anew each time (it derives from this rebuild's warehouse alone)."""
    copy_dir = s.data_dir / "pools-defaults"
    if copy_dir.exists():
        shutil.rmtree(copy_dir)
    copy_dir.mkdir(parents=True)
    for part in (s.warehouse_path, s.warehouse_path.with_name(s.warehouse_path.name + ".wal")):
        if part.exists():  # a log not yet checkpointed is part of the file's state
            shutil.copyfile(part, copy_dir / part.name)
    (copy_dir / "cache").symlink_to(s.cache_dir.resolve(), target_is_directory=True)
    return copy_dir


def similarities(s: Settings, corpus: pl.DataFrame, mentions: pl.DataFrame, persons: list[str],
                 queries: list[str]) -> pl.DataFrame:
    """For every person and query paper, the highest cosine between the query and any other
    corpus paper of the person, with the pools' model (the vectors come from the cache the pools
    filled): ``person_id, arxiv_id, similarity`` (null for a person with no other paper)."""
    vectors = settings_cache(s, s.pools.model).embed(paper_texts(corpus, s.pools.model))
    row = {a: i for i, a in enumerate(corpus["arxiv_id"].to_list())}
    papers_of: dict[str, list[int]] = {}
    for a, person in mentions.select("arxiv_id", "person_id").unique().sort("person_id", "arxiv_id").iter_rows():
        if a in row:
            papers_of.setdefault(person, []).append(row[a])
    qs = [q for q in dict.fromkeys(queries) if q in row]
    qi = np.array([row[q] for q in qs], dtype=np.int64)
    out: dict[str, list[Any]] = {"person_id": [], "arxiv_id": [], "similarity": []}
    for person in dict.fromkeys(persons):
        mine = np.array(papers_of.get(person, []), dtype=np.int64)
        sims: list[float | None]
        if mine.size == 0 or qi.size == 0:
            sims = [None] * len(qs)
        else:
            m = vectors[mine] @ vectors[qi].T
            m[mine[:, None] == qi[None, :]] = -np.inf  # a person's own query paper is no evidence for it
            best = m.max(axis=0)
            sims = [None if not np.isfinite(x) else float(x) for x in best]
        out["person_id"] += [person] * len(qs)
        out["arxiv_id"] += qs
        out["similarity"] += sims
    return pl.DataFrame(out, schema={"person_id": pl.Utf8, "arxiv_id": pl.Utf8, "similarity": pl.Float64})


def held_similarity(s: Settings, corpus: pl.DataFrame, mentions: pl.DataFrame, held: pl.DataFrame) -> pl.DataFrame:
    """:func:`similarities` of the held pairs alone."""
    pairs = held.select("person_id", "arxiv_id").drop_nulls().unique()
    sims = similarities(s, corpus, mentions, pairs["person_id"].unique().sort().to_list(),
                        pairs["arxiv_id"].unique().sort().to_list())
    return pairs.join(sims, on=["person_id", "arxiv_id"], how="left")


def fit_from_world(s: Settings, world_dir: Path) -> rb.PoolFit:
    """The pool settings fitted to the original's rated pairs (:func:`tasks.rebuild.fit_pools`),
    from the world's truth and the warehouse's corpus, with the pools' model."""
    held = pl.read_parquet(world_dir / "truth" / "benchmark_ratings.parquet")
    reviewers = pl.read_parquet(world_dir / "truth" / "reviewers.parquet")["person_id"].unique().sort().to_list()
    mentions = load_truth(world_dir).mentions
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        corpus = wh.ingest.corpus_papers()
    queries = held["arxiv_id"].drop_nulls().unique().sort().to_list()
    sims = similarities(s, corpus, mentions, reviewers, queries)
    since = first_recent_year(corpus, s.pools.recent_years)
    recent_papers = corpus.filter(pl.col("year") >= since).select("arxiv_id")
    recent = dict(mentions.join(recent_papers, on="arxiv_id").select("person_id", "arxiv_id").unique()
                  .group_by("person_id").len().iter_rows())
    return rb.fit_pools(sims, held.drop_nulls("arxiv_id"), recent, s.pools.min_recent_papers)


def identities(links: pl.DataFrame, mentions: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The world's people to the warehouse's authors, and the authors merged from two people."""
    linked = links.join(mentions, on=["arxiv_id", "position"]).select("person_id", "author_id").unique()
    # An author merged from two people's mentions is credited to neither: the panel answered for
    # one of them, and crediting the other would put a rating on the wrong reviewer.
    shared = linked.group_by("author_id").len().filter(pl.col("len") > 1)["author_id"].to_list()
    return linked.filter(~pl.col("author_id").is_in(shared)), shared


def pool_fates(warehouse: Path, mentions: pl.DataFrame, held: pl.DataFrame, similarity: pl.DataFrame) -> pl.DataFrame:
    """:func:`tasks.rebuild.pair_fates` of round 1 of the pools in ``warehouse`` (``mentions``:
    the world's truth, whose person each mention is)."""
    with Warehouse.open(warehouse, read_only=True) as wh:
        links, corpus = wh.read(AUTHOR_LINKS), wh.ingest.corpus_papers()
        queries = set(wh.pools.read_round(QUERY_SAMPLES, 1)["arxiv_id"].to_list())
        evidence, exclusions = wh.pools.read_round(POOL_EVIDENCE, 1), wh.pools.read_round(POOL_EXCLUSIONS, 1)
        assignments = wh.pools.read_round(ASSIGNMENTS, 1)
    linked, _shared = identities(links, mentions)
    return rb.pair_fates(held, linked, set(corpus["arxiv_id"].to_list()), queries, evidence, exclusions, assignments,
                         similarity)
