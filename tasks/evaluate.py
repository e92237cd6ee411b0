"""What the evaluate flow makes of its metric rows: the rows the warehouse keeps and the JSON
rows a run returns and writes. Pure over frames; the flow reads the inputs and writes the files."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from revbench.evaluation.model import Benchmark
from revbench.schemas.tables import EVAL_RESULTS


def stored_results(results: pl.DataFrame, benchmarks: list[Benchmark], run_id: str, now: datetime) -> pl.DataFrame:
    """``results`` as rows of ``eval_results``: each with its benchmark's version and digest (the
    cross-benchmark ``all`` rows with every version joined and no digest), the run and the time."""
    versions = {b.name: b.version for b in benchmarks}
    versions["all"] = "+".join(sorted(f"{b.name}@{b.version}" for b in benchmarks))
    digests: dict[str, str | None] = {b.name: b.digest for b in benchmarks}
    digests["all"] = None
    return EVAL_RESULTS.conform(results.with_columns(
        pl.col("benchmark").replace_strict(versions, return_dtype=pl.Utf8).alias("benchmark_version"),
        pl.col("benchmark").replace_strict(digests, return_dtype=pl.Utf8).alias("benchmark_digest"),
        pl.lit(run_id).alias("run_id"), pl.lit(now).alias("evaluated_at"),
    ))


def json_rows(stored: pl.DataFrame) -> list[dict[str, Any]]:
    """Stored result rows as JSON-ready dicts (the time as ISO text)."""
    return [{**r, "evaluated_at": r["evaluated_at"].isoformat()} for r in stored.to_dicts()]


def dropped_by_benchmark(benchmarks: list[Benchmark]) -> dict[str, dict[str, int]]:
    """What each benchmark's loader left out, by reason (benchmarks that dropped nothing omitted)."""
    return {b.name: b.dropped for b in benchmarks if b.dropped}
