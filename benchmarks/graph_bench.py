"""The cost of UniPR's ``cof`` scorer against ``embedding`` alone, same benchmark, same run.

The benchmark has the gold standard's shape at ``--scale`` times its size (SYNTHETIC, as in
``eval_bench``: 20-paper profiles, 8 rated papers per reviewer) with a graph: each paper has its
topic's arXiv category and an OpenAlex-like topic, each submission cites ``--cites`` profile
papers (half on its topic, a quarter of the citations influential). Both scorers run with the
embedding cache WARM (the texts are embedded once before any timing), so the comparison is what
``cof`` adds to the embedding scorer's own work: the topic and citation factors, pooling three
times and the fusion with its three ablations. The scorers run in turn in each of ``--repeat``
rounds (so a shared machine's load weighs on all alike); the median round of each is reported.

    .venv/bin/python -m benchmarks.graph_bench --scale 1 --repeat 15 --model hashing
    .venv/bin/python -m benchmarks.graph_bench --scale 7 --repeat 5 --model hashing --out graph_scorers-x7.json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path

from revbench.evaluation.model import (
    GRAPH_CITATIONS_SCHEMA, GRAPH_COAUTHORS_SCHEMA, GRAPH_INSTITUTIONS_SCHEMA, GRAPH_TOPICS_SCHEMA,
    PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, Benchmark, BenchmarkGraph, Split, frame,
)
from revbench.evaluation.scorers import Context, make_scorer
from revbench.settings import Settings
from revbench.synth.draw import Generator, WorldSpec

RESULTS = Path(__file__).resolve().parent / "results"


def make_dataset(scale: int, cites: int, seed: int = 7) -> Benchmark:
    g = Generator(WorldSpec(seed=seed))
    reviewers = [f"r{i}" for i in range(58 * scale)]
    expertise = {r: g.choice(g.topic_ids) for r in reviewers}
    subs, ratings, profile, topic_of = [], [], [], {}
    for r in reviewers:
        for k in range(20):
            t = expertise[r] if g.rng.random() < 0.8 else g.choice(g.topic_ids)
            title = g.title(t)
            pid = f"{r}-{k}"
            topic_of[pid] = t
            profile.append({"reviewer_id": r, "paper_id": pid, "title": title, "abstract": g.abstract(t, title), "year": 2015 + k % 10})
        for _ in range(8):
            t = expertise[r] if g.rng.random() < 0.5 else g.choice(g.topic_ids)
            pid = f"p{len(subs)}"
            topic_of[pid] = t
            title = g.title(t)
            subs.append({"paper_id": pid, "title": title, "abstract": g.abstract(t, title), "year": 2025})
            base = 5 if t == expertise[r] else 3 if t.split("/")[0] == expertise[r].split("/")[0] else 1
            ratings.append({"reviewer_id": r, "paper_id": pid, "rating": float(min(5, max(1, base + int(g.rng.integers(-1, 2)))))})
    by_topic: dict[str, list[str]] = {}
    for q in profile:
        by_topic.setdefault(topic_of[q["paper_id"]], []).append(q["paper_id"])
    everyone = [q["paper_id"] for q in profile]
    edges = []
    for s in subs:
        near = by_topic.get(topic_of[s["paper_id"]], everyone)
        for i in range(cites):
            pool = near if i % 2 == 0 else everyone
            edges.append({"citing_id": s["paper_id"], "cited_id": pool[int(g.rng.integers(0, len(pool)))],
                          "is_influential": bool(g.rng.random() < 0.25), "source": "s2"})
    topics = [row for pid, t in topic_of.items() for row in (
        {"paper_id": pid, "scheme": "arxiv", "topic": t.split("/")[0], "score": None},
        {"paper_id": pid, "scheme": "openalex-topic", "topic": t, "score": round(0.5 + 0.5 * float(g.rng.random()), 3)})]
    graph = BenchmarkGraph(frame(edges, GRAPH_CITATIONS_SCHEMA).unique(["citing_id", "cited_id"]), frame(topics, GRAPH_TOPICS_SCHEMA),
                           frame(None, GRAPH_INSTITUTIONS_SCHEMA), frame(None, GRAPH_COAUTHORS_SCHEMA))
    return Benchmark("graph-shaped", "synthetic", frame(subs, PAPERS_SCHEMA), [frame(profile, PROFILE_SCHEMA)],
                     [Split("pointwise", ratings=frame(ratings, RATINGS_SCHEMA), candidate_lists=True)], graph=graph)


def timed(specs: list[str], bench: Benchmark, settings: Settings, repeat: int) -> list[tuple[float, int]]:
    """Median seconds and rows (companions included) of each spec, the specs run in turn in each
    of ``repeat`` rounds, so a load that comes and goes on a shared machine weighs on all alike."""
    scorers = [make_scorer(spec, Context(settings)) for spec in specs]
    times: list[list[float]] = [[] for _ in specs]
    rows = [0] * len(specs)
    for _ in range(repeat):
        for i, scorer in enumerate(scorers):
            t = time.perf_counter()
            scores = scorer.score(bench)
            times[i].append(time.perf_counter() - t)
            rows[i] = sum(d.height for s in [scores, *scores.companions] for d in s.draws)
    return [(statistics.median(t), n) for t, n in zip(times, rows, strict=True)]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=int, default=2)
    p.add_argument("--cites", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default="graph_scorers.json", help="the results file under benchmarks/results/")
    p.add_argument("--model", default="", help="the embedding model (default the scorer's); `hashing` where the "
                   "sentence model would take too long to warm the cache: warm, both cost the same per text")
    a = p.parse_args()
    emb_spec = f"embedding:model={a.model}" if a.model else "embedding"
    cof_spec = f"cof:semantic={emb_spec}" if a.model else "cof"
    bench = make_dataset(a.scale, a.cites)
    settings = Settings(data_dir=Path("data/bench/graph"))
    t0 = time.perf_counter()
    make_scorer(emb_spec, Context(settings)).score(bench)  # warms the cache (and loads the model) for both
    warm_up = time.perf_counter() - t0
    make_scorer(cof_spec, Context(settings)).score(bench)  # imports what the graph factors use, once
    (emb, emb_rows), (emb3, _), (cof, cof_rows), (weights, _) = timed(
        [emb_spec, f"{emb_spec}{',' if a.model else ':'}pooling=topk_mean:3", cof_spec,
         f"{cof_spec}{',' if a.model else ':'}fusion=weights"], bench, settings, a.repeat)
    assert bench.graph is not None
    result = {
        "dataset": f"gold-standard shape x{a.scale}, SYNTHETIC: {bench.splits[0].ratings.height} rated pairs, "
                   f"{bench.submissions.height} submissions, {bench.draws[0].height} profile papers, "
                   f"{bench.graph.citations.height} citations, {bench.graph.topics.height} topic rows",
        "cache": "warm for both (every text embedded once before timing)",
        "model": a.model or "the embedding scorer's default",
        "repeat": a.repeat,
        "warm_up_s": round(warm_up, 2),
        "embedding_s": round(emb, 3),
        "embedding_topk_mean3_s": round(emb3, 3),
        "cof_s": round(cof, 3),
        "cof_weights_s": round(weights, 3),
        "cof_over_embedding": round(cof / emb, 2),
        "cof_weights_over_embedding": round(weights / emb, 2),
        "embedding_rows": emb_rows,
        "cof_rows_with_companions": cof_rows,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
