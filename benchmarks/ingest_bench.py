"""Ingest cost on the replay server (no injected faults or latency).

Measures, in one run: the first ingest of N papers through the real clients and the Prefect
engine (papers per second, peak memory), an unchanged re-run as a fraction of the first, and a
baseline of bare sequential HTTP calls (one PDF GET plus one GROBID POST per paper, no parsing,
no warehouse) over a sample, so the pipeline's overhead is a ratio to the cost of the calls
themselves.

    .venv/bin/python -m benchmarks.ingest_bench --papers 20000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import polars as pl

RESULTS = Path(__file__).resolve().parent / "results"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bare_calls(base: str, world_dir: Path, sample: int) -> float:
    """Seconds per paper for a plain sequential PDF GET + GROBID POST."""
    docs = pl.read_parquet(world_dir / "documents.parquet", columns=["arxiv_id", "version"]).head(sample)
    t0 = time.perf_counter()
    with httpx.Client(timeout=30) as c:
        for aid, v in docs.iter_rows():
            pdf = c.get(f"{base}/arxiv/pdf/{aid}v{v}").content
            c.post(f"{base}/grobid/api/processHeaderDocument", files={"input": ("p.pdf", pdf, "application/pdf")})
    return (time.perf_counter() - t0) / max(docs.height, 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--papers", type=int, default=20000)
    p.add_argument("--baseline-sample", type=int, default=2000)
    p.add_argument("--work", type=Path, default=Path("data/bench"))
    a = p.parse_args()

    from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL, prepare_process
    from revbench.replay import spawn_replay
    from revbench.replay.server import replay_overrides
    from revbench.settings import Settings
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world

    world_dir = a.work / f"world-{a.papers}"
    t0 = time.perf_counter()
    manifest = ensure_world(world_dir, WorldSpec(n_papers=a.papers, seed=11, start=DEMO_SINCE, end=DEMO_UNTIL))
    gen_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp, spawn_replay(world_dir) as base:
        settings = Settings(data_dir=Path(tmp)).with_overrides(**replay_overrides(base))
        prepare_process(settings)
        from revbench.flows.ingest import ingest_flow

        baseline_s = bare_calls(base, world_dir, a.baseline_sample)
        # Start the ephemeral Prefect server outside the timed runs: it is a fixed cost of the
        # session, not of an ingest.
        from prefect import flow

        flow(name="warm-up")(lambda: None)()
        t1 = time.perf_counter()
        first = ingest_flow(settings, DEMO_SINCE, DEMO_UNTIL, synthetic=True)
        first_s = time.perf_counter() - t1
        mem_first = peak_rss_mb()
        t2 = time.perf_counter()
        second = ingest_flow(settings, DEMO_SINCE, DEMO_UNTIL, synthetic=True)
        second_s = time.perf_counter() - t2
    loaded = first.totals["papers"]
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
        "papers_in_world": manifest["counts"]["papers"],
        "world_generation_s": round(gen_s, 1),
        "first_run_s": round(first_s, 1),
        "papers_per_s": round(manifest["counts"]["papers"] / first_s, 1),
        "papers_loaded": loaded,
        "peak_rss_mb": round(mem_first, 0),
        "unchanged_rerun_s": round(second_s, 2),
        "rerun_fraction": round(second_s / first_s, 4),
        "rerun_changed": {s["stage"]: s["rows_out"] for s in second.stages},
        "bare_calls_s_per_paper": round(baseline_s, 5),
        "pipeline_s_per_paper": round(first_s / manifest["counts"]["papers"], 5),
        "overhead_ratio_vs_bare_calls": round((first_s / manifest["counts"]["papers"]) / baseline_s, 2),
        "stages_first_run": first.stages,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ingest.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
