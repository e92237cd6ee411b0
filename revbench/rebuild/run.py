"""What a rebuild's run fixes and runs below the application: the scorers it evaluates, its
queries, its release key, and the evaluation of the original and the rebuilt release together."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import polars as pl

from revbench.flows.evaluate import evaluate_flow
from revbench.settings import Settings
from revbench.synth.imported import QUERY_CATEGORY

REBUILD_SCORERS = ["trivial", "tpms", "bm25:pooling=mean", "embedding:pooling=mean", "rate:keywords=offline"]
"""Every scorer that runs offline (the llm scorer needs a real model behind its endpoint; rate takes
its keywords from YAKE on both sides, not from LR-bench's keywords file on one of them)."""


def rebuild_queries(held: pl.DataFrame) -> dict[str, Any]:
    """What makes a rebuild's queries the benchmark's: drawn from the query papers alone, all of
    them (a structure of the world, not a setting either pool configuration chooses)."""
    return {"query_categories": [QUERY_CATEGORY], "queries_per_category": max(1, held["paper_id"].n_unique())}


def rebuild_release_key(manifest: dict[str, Any]) -> str:
    """The release id key of a rebuild, from its world: the ids (which the bootstrap resamples in
    their order) and so every interval are the same in every data folder. A rebuild publishes
    nothing anyone could link back: its people are synthesised."""
    return hashlib.sha256(f"revbench-rebuild-release\x1f{manifest['spec_key']}".encode()).hexdigest()


def evaluate_both(s: Settings, kind: str, source: Path, release_dir: Path, out: Path, track: bool) -> list[dict[str, Any]]:
    """Every offline scorer on the original benchmark and on the rebuilt release, in one run (so
    both share the bootstrap's seed and the scorers their caches); the predictions go to ``out``,
    where :func:`revbench.rebuild.compare.comparison` reads them again."""
    out.mkdir(parents=True, exist_ok=True)
    res = evaluate_flow.run(s, benchmarks=[f"{kind}={source}", f"release={release_dir}"], scorers=REBUILD_SCORERS,
                            predictions=[], baseline=None, bootstrap=s.ratings.bootstrap, seed=0, report_dir=str(out),
                            allow_partial=False, json_out=None, plot=True, track=track)
    return res.rows
