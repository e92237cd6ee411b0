"""The evaluate flow: benchmarks -> scorers -> metrics with intervals -> results table and report."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.common import StageResult, publish_markdown, publish_table, record_stage, recorded_run
from revbench.evaluation.evaluate import Evaluator, cross_benchmark_average
from revbench.evaluation.importers import is_lr_flat, load_benchmark, load_lr_flat, load_predictions
from revbench.evaluation.model import Benchmark, MetricValue, Scores
from revbench.evaluation.report import markdown_table, plot_loss, results_frame
from revbench.evaluation.scorers import Context, make_scorer
from revbench.settings import Settings
from schemas.tables import EVAL_RESULTS
from warehouse import Warehouse, utcnow

log = logging.getLogger("revbench.evaluate")


def parse_named(items: list[str], what: str) -> list[tuple[str, Path]]:
    """``NAME=PATH`` pairs; a clear error names the offending item."""
    out = []
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise ValueError(f"{what} {item!r} is not NAME=PATH")
        out.append((name.strip(), Path(path).expanduser()))
    return out


@task(name="load-benchmarks", cache_policy=NO_CACHE)
def load_stage(benchmarks: list[str], predictions: list[str]) -> tuple[list[Benchmark], list[tuple[int, Scores]]]:
    """Load every benchmark, and every prediction file against the benchmark it belongs to."""
    loaded = [load_benchmark(kind, path) for kind, path in parse_named(benchmarks, "--benchmark")]
    preds: list[tuple[int, Scores]] = []
    for spec, path in parse_named(predictions, "--predictions"):
        name, _, target = spec.partition("@")
        if is_lr_flat(path):
            # LR-bench's flat predictions carry their labels: a benchmark of their own.
            split, scores = load_lr_flat(path)
            loaded.append(Benchmark(f"lrbench:{path.stem}", path.stem, pl.DataFrame(), [pl.DataFrame()], [split]))
            preds.append((len(loaded) - 1, Scores(name, [scores])))
            continue
        candidates = [i for i, b in enumerate(loaded) if not target or b.name == target]
        if len(candidates) != 1:
            raise ValueError(f"--predictions {spec}: say which benchmark it scores, as NAME@BENCHMARK=PATH")
        preds.append((candidates[0], load_predictions(path, name, loaded[candidates[0]])))
    return loaded, preds


@task(name="score", cache_policy=NO_CACHE)
def score_stage(benchmark: Benchmark, spec: str, cache_dir: Path) -> Scores:
    """Run one scorer over one benchmark (embeddings and LLM answers come from the cache)."""
    return make_scorer(spec, Context(cache_dir=cache_dir)).score(benchmark)


def export_predictions(scores: Scores, benchmark: Benchmark, report_dir: Path) -> None:
    """Each scorer's predictions in the OpenReview ``{reviewer: {paper: score}}`` format."""
    out = report_dir / "predictions" / benchmark.name.replace(":", "_")
    out.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scores.scorer)
    for d in range(len(scores.draws)):
        suffix = f"_d{d + 1}" if len(scores.draws) > 1 else ""
        (out / f"{safe}{suffix}.json").write_text(json.dumps(scores.to_openreview(d)))


@flow(name="evaluate", log_prints=True)
def evaluate_flow(
    benchmarks: list[str],
    scorers: list[str] | None = None,
    predictions: list[str] | None = None,
    baseline: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    report_dir: str | None = None,
    json_out: str | None = None,
) -> dict[str, Any]:
    """Evaluate every scorer and prediction file on every benchmark; store, report, return rows."""
    settings = Settings()
    scorers = scorers if scorers is not None else ["trivial", "tpms"]
    params = dict(benchmarks=benchmarks, scorers=scorers, predictions=predictions or [], baseline=baseline,
                  bootstrap=bootstrap, seed=seed)
    report = Path(report_dir) if report_dir else settings.data_dir / "reports" / "evaluate"
    with recorded_run(settings, "evaluate", params) as run_id:
        t0 = time.monotonic()
        loaded, preds = load_stage(benchmarks, predictions or [])
        rows: list[MetricValue] = []
        for i, bench in enumerate(loaded):
            runs: list[Scores] = [] if bench.name.startswith("lrbench:") else [
                score_stage(bench, spec, settings.cache_dir) for spec in scorers
            ]
            runs += [s for j, s in preds if j == i]
            base = next((s for s in runs if s.scorer == baseline), None) if baseline else None
            if baseline and base is None:
                log.warning("baseline %r was not evaluated on %s; no paired differences", baseline, bench.name)
            evaluator = Evaluator(bench, n_resamples=bootstrap, seed=seed)
            for s in runs:
                export_predictions(s, bench, report)
                rows += evaluator.evaluate(s, baseline=base if base is not None and s is not base else None)
        rows += cross_benchmark_average(rows)
        df = results_frame(rows)
        versions = {b.name: b.version for b in loaded}
        versions["all"] = "+".join(sorted(f"{b.name}@{b.version}" for b in loaded))
        stored = df.with_columns(
            pl.col("benchmark").replace_strict(versions, return_dtype=pl.Utf8).alias("benchmark_version"),
            pl.lit(run_id).alias("run_id"), pl.lit(utcnow()).alias("evaluated_at"),
        )
        with Warehouse.open(settings.warehouse_path) as wh:
            wh.upsert(EVAL_RESULTS, stored)
        md = markdown_table(df)
        report.mkdir(parents=True, exist_ok=True)
        (report / "report.md").write_text(md + "\n")
        plot = plot_loss(df, report / "loss.png")
        (report / "results.json").write_text(json.dumps(df.to_dicts(), indent=1))
        if json_out:
            Path(json_out).write_text(json.dumps(df.to_dicts(), indent=1))
        publish_markdown("evaluation-report", md, "Loss and accuracy per split (best in bold)")
        publish_table("evaluation-results", df.filter(pl.col("metric").is_in(["loss", "accuracy"])).to_dicts(),
                      "Loss and accuracy with 95% intervals")
        record_stage(settings, run_id, StageResult("evaluate", rows_in=len(loaded), rows_out=df.height,
                                                   seconds=time.monotonic() - t0))
        return {"run_id": run_id, "rows": df.to_dicts(), "markdown": md, "report_dir": str(report),
                "plot": str(plot) if plot else None}
