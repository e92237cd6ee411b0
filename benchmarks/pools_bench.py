"""Pools at LR-bench scale and the embedding task's throughput.

Scale: 160k papers (the generator's truth world: authorship, names, topics), 4,000 queries
(800 per category), SYNTHETIC unit vectors (topic centroids plus noise, 384 dimensions) in
place of real embeddings. Times and peak memory of recall (faiss range search), candidate
evidence, COI, screening and assignment.

Embedding: our cached, length-sorted task against a plain ``SentenceTransformer.encode`` of the
same real texts (titles and abstracts of the demo world), in the same run; then the cached re-run.

    .venv/bin/python -m benchmarks.pools_bench
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import polars as pl

RESULTS = Path(__file__).resolve().parent / "results"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scale(world: Path, per_category: int, tau: float) -> dict[str, float]:
    from revbench.tasks import pools

    m = pl.read_parquet(world / "truth" / "mentions.parquet")
    shown = pl.read_parquet(world / "mentions.parquet").select("arxiv_id", "position", "name", "email")
    topics = pl.read_parquet(world / "truth" / "paper_topics.parquet")
    papers = topics.with_columns(pl.col("topic").str.split("/").list.first().alias("primary_category")).sort("arxiv_id")
    ids = papers["arxiv_id"].to_list()
    rng = np.random.default_rng(0)
    topic_ids = sorted(set(papers["topic"].to_list()))
    centroids = rng.normal(size=(len(topic_ids), 384)).astype(np.float32)
    tix = np.array([topic_ids.index(t) for t in papers["topic"].to_list()])
    vectors = centroids[tix] + 1.0 * rng.normal(size=(len(ids), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    links = m.select("arxiv_id", pl.col("person_id").alias("author_id"))
    edges = (links.join(links, on="arxiv_id").filter(pl.col("author_id") < pl.col("author_id_right"))
             .select(pl.col("author_id").alias("author_a"), pl.col("author_id_right").alias("author_b")).unique())
    names = dict(m.join(shown, on=["arxiv_id", "position"]).select("person_id", "name").unique("person_id").iter_rows())
    emails = dict(m.join(shown, on=["arxiv_id", "position"]).filter(pl.col("email").is_not_null())
                  .select("person_id", "email").unique("person_id").iter_rows())
    recent = dict(links.group_by("author_id").agg(pl.len()).iter_rows())
    out: dict[str, float] = {"papers": len(ids), "mentions": m.height, "people": len(names)}
    t = time.perf_counter()
    samples = pools.sample_queries(papers, ["cs.AI", "cs.CL", "cs.CV", "cs.IR", "cs.LG"], per_category, 0, set())
    queries = samples["arxiv_id"].to_list()
    out["sample_s"] = time.perf_counter() - t
    t = time.perf_counter()
    nb = pools.range_neighbors(vectors, ids, queries, tau)
    out["recall_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ev = pools.candidate_evidence(nb, links)
    out["evidence_s"] = time.perf_counter() - t
    t = time.perf_counter()
    coi = pools.conflicts(ev, links.filter(pl.col("arxiv_id").is_in(queries)), edges, names=names)
    after = ev.join(coi.select("query_id", "author_id"), on=["query_id", "author_id"], how="anti")
    out["coi_s"] = time.perf_counter() - t
    t = time.perf_counter()
    scr = pools.screening(after, recent, emails, 3)
    kept = after.join(scr.select("query_id", "author_id"), on=["query_id", "author_id"], how="anti")
    out["screening_s"] = time.perf_counter() - t
    t = time.perf_counter()
    a = pools.assign(kept, 6, 10, 0)
    out["assignment_s"] = time.perf_counter() - t
    out.update(queries=len(queries), neighbors=nb.height, evidence_rows=ev.height, coi_exclusions=coi.height,
               screened_out=scr.height, assignments=a.height, invited=a["author_id"].n_unique(),
               max_load=int(a.group_by("author_id").len()["len"].max() or 0), peak_rss_mb=rss_mb())
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in out.items()}


def embedding(world: Path, n: int) -> dict[str, float]:
    from revbench.ml.embeddings import EmbeddingCache
    from revbench.ml.models import load_model

    docs = pl.read_parquet(world / "arxiv.parquet").head(n)
    texts = []
    for row in docs.iter_rows(named=True):
        entry = row["versions"][-1]["entry"]
        title = entry.split("<title>")[1].split("</title>")[0]
        summary = entry.split("<summary>")[1].split("</summary>")[0]
        texts.append(f"{title} {summary}")
    model = load_model()
    model.encode(texts[:8])  # warm-up outside both timings
    t = time.perf_counter()
    model.encode(texts)
    plain = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(Path(tmp), "all-MiniLM-L6-v2")
        cache._model = model
        t = time.perf_counter()
        cache.embed(texts)
        ours = time.perf_counter() - t
        t = time.perf_counter()
        cache.embed(texts)
        cached = time.perf_counter() - t
    from revbench.ml.models import device

    return {"texts": n, "device": device(), "plain_encode_texts_per_s": round(n / plain, 1),
            "ours_texts_per_s": round(n / ours, 1), "ratio_ours_vs_plain": round(plain / ours, 2),
            "cached_rerun_s": round(cached, 3), "cached_speedup": round(plain / max(cached, 1e-9), 0)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--papers", type=int, default=160000)
    p.add_argument("--per-category", type=int, default=800)
    p.add_argument("--tau", type=float, default=0.6)
    p.add_argument("--embed-texts", type=int, default=600)
    a = p.parse_args()
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world

    demo = Path("data/bench/world-demo")
    ensure_world(demo, WorldSpec(n_papers=300, seed=7, start=date(2026, 9, 1), end=date(2026, 10, 31)))
    emb = embedding(demo, min(a.embed_texts, 300))
    big = Path(f"data/bench/world-{a.papers}-truth")
    ensure_world(big, WorldSpec(n_papers=a.papers, seed=11, documents=False))
    sc = scale(big, a.per_category, a.tau)
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "embedding": emb, "scale": sc}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pools.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
