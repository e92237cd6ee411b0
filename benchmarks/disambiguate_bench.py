"""Author disambiguation: quality against a SYNTHETIC world's truth, and cost at LR-bench scale.

Quality, on the demo world (what the services show of each mention): pairwise and B-cubed
precision, recall and F1 for rules only, rules plus the offline fallback, and rules plus an LLM
(the replay server's OpenAI-compatible stand-in, through the real client).

Scale: the generator's 160k-paper world (about 545k mentions) loaded into a fresh warehouse,
then the disambiguate flow with the fallback, timed, with the process's peak memory, and the
number of name blocks the LLM path would send (blocks needing verification) as a share of
mentions.

    .venv/bin/python -m benchmarks.disambiguate_bench [--papers 160000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl

RESULTS = Path(__file__).resolve().parent / "results"


def world_mentions(world: Path) -> pl.DataFrame:
    """What the services show of each mention, with its paper's title (the LLM prompt's topics)."""
    titles = {r["arxiv_id"]: r["versions"][-1]["entry"].split("<title>")[1].split("</title>")[0]
              for r in pl.read_parquet(world / "arxiv.parquet", columns=["arxiv_id", "versions"]).iter_rows(named=True)}
    return pl.read_parquet(world / "mentions.parquet").with_columns(
        pl.lit(None, pl.Utf8).alias("affiliation"), pl.col("arxiv_id").replace_strict(titles, default=None).alias("title"))


def quality(world: Path) -> dict[str, dict[str, float]]:
    from revbench.clients.llm import LlmClient
    from revbench.replay import spawn_replay
    from revbench.replay.server import replay_overrides
    from revbench.settings import Settings
    from revbench.synth.truth import disambiguation_quality, load_truth
    from revbench.tasks.disambiguate import disambiguate, fallback_decider
    from revbench.tasks.llm_clusters import llm_decider

    mentions = world_mentions(world)
    truth = load_truth(world)
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, spawn_replay(None) as base:
        settings = Settings(data_dir=Path(tmp)).with_overrides(**replay_overrides(base))
        client = LlmClient(settings.llm, settings.http, cache_dir=Path(tmp))
        for name, decider in [("rules only", None), ("rules + fallback", fallback_decider(0.92)),
                              ("rules + LLM", llm_decider(client))]:
            res = disambiguate(mentions, {}, decider, name, 500, 0.5, None, concurrency=4)
            q = disambiguation_quality(truth, res.links)
            q["merges"] = dict(res.merges)
            if decider is not None and name.endswith("LLM"):
                q["llm_calls"] = client.requests_made
            out[name] = q
    return out


def load_into_warehouse(world: Path, path: Path) -> int:
    """Papers and mentions of a world written straight into a warehouse (no ingest)."""
    from revbench.schemas.tables import MENTIONS, PAPERS
    from revbench.warehouse import Warehouse

    m = pl.read_parquet(world / "mentions.parquet")
    now = datetime.now(UTC)
    topics = pl.read_parquet(world / "truth" / "paper_topics.parquet")
    papers = (
        m.group_by("arxiv_id").agg(pl.len().alias("n_authors"), pl.col("year").first())
        .join(topics, on="arxiv_id")
        .with_columns(
            pl.lit("SYNTHETIC").alias("title"), pl.lit("SYNTHETIC").alias("abstract"),
            pl.col("topic").str.split("/").list.first().alias("primary_category"),
            pl.col("topic").str.split("/").list.slice(0, 1).alias("categories"),
            pl.lit(1).alias("version"), pl.lit(now).alias("updated"), pl.lit(now).alias("loaded_at"),
            pl.col("arxiv_id").map_elements(lambda a: hashlib.sha256(a.encode()).hexdigest(), return_dtype=pl.Utf8).alias("pdf_sha256"),
            pl.lit(1.0).alias("title_similarity"), pl.col("arxiv_id").alias("input_hash"),
        )
    )
    mentions = m.rename({"surname": "pdf_name"}).with_columns(pl.lit(None, pl.Utf8).alias("affiliation"))
    with Warehouse.open(path) as wh:
        wh.ingest.upsert(PAPERS, papers)
        wh.ingest.upsert(MENTIONS, mentions)
    return m.height


def scale_run(world: Path) -> dict[str, float]:
    """Run in a child process so that its peak memory is its own."""
    from revbench.app.entry import prepare_process
    from revbench.flows.disambiguate import disambiguate_flow
    from revbench.settings import Settings
    from revbench.tasks.disambiguate import UnionFind, decide_block, instances_of, mentions_frame_to_blocks, needs_decision

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp)).with_overrides(disambiguate={"use_llm": False})
        prepare_process(settings)
        t0 = time.perf_counter()
        n = load_into_warehouse(world, Path(tmp) / "warehouse.duckdb")
        load_s = time.perf_counter() - t0
        from prefect import flow

        flow(name="warm-up")(lambda: None)()
        t1 = time.perf_counter()
        res = disambiguate_flow(settings)
        flow_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        rerun = disambiguate_flow(settings)
        rerun_s = time.perf_counter() - t2
    blocks, _ = mentions_frame_to_blocks(world_mentions(world), 500)
    need = 0
    for key, members in blocks.items():
        # What the LLM would be asked: blocks whose clusters after the exact rules still need a verdict.
        links = decide_block(key, members, None, 0.5).links
        uf = UnionFind(len(members))
        index = {m.key: i for i, m in enumerate(members)}
        first: dict[str, int] = {}
        for k, cid, _m, _e in links:
            if cid in first:
                uf.union(first[cid], index[k])
            else:
                first[cid] = index[k]
        insts = instances_of(members, uf)
        if len(insts) > 1 and needs_decision(insts, 0.5):
            need += 1
    return {"mentions": n, "load_s": round(load_s, 1), "flow_s": round(flow_s, 1), "rerun_s": round(rerun_s, 1),
            "authors": res.authors, "edges": res.edges, "blocks": res.blocks,
            "rerun_blocks_decided": rerun.blocks_decided,
            "llm_calls_needed": need, "llm_calls_per_mention": round(need / n, 4),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--papers", type=int, default=160000)
    p.add_argument("--scale-child", type=Path)
    a = p.parse_args()
    if a.scale_child:
        print(json.dumps(scale_run(a.scale_child)))
        return
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world

    demo = Path("data/bench/world-demo")
    ensure_world(demo, WorldSpec(n_papers=300, seed=7, start=date(2026, 9, 1), end=date(2026, 10, 31)))
    q = quality(demo)
    big = Path(f"data/bench/world-{a.papers}-truth")
    t0 = time.perf_counter()
    ensure_world(big, WorldSpec(n_papers=a.papers, seed=11, documents=False))
    gen_s = time.perf_counter() - t0
    child = subprocess.run([sys.executable, "-m", "benchmarks.disambiguate_bench", "--scale-child", str(big)],
                           capture_output=True, text=True, check=True)
    scale = json.loads(child.stdout.strip().splitlines()[-1])
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "quality_demo_world": q,
              "scale": {**scale, "papers": a.papers, "world_generation_s": round(gen_s, 1)}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "disambiguate.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
