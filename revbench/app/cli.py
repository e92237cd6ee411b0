"""The ``revbench`` command line: builds the settings once and hands them to the flows."""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from revbench.app.console import console, print_disambiguation, print_ingest_summary, print_pools, print_report, print_status
from revbench.app.entry import DEMO_SINCE, DEMO_UNTIL, build_settings, prepare_process, resolve_track
from revbench.settings import Settings, render_env_example

app = typer.Typer(help="Build, refresh and evaluate benchmarks of reviewer expertise.", no_args_is_help=True)

Track = Annotated[
    bool | None,
    typer.Option("--track/--no-track", help="Run as a Prefect flow run (visible in the UI) or in this process; "
                                            "default: tracked when a Prefect API is configured"),
]


def _setup() -> Settings:
    settings = build_settings()
    prepare_process(settings)
    return settings


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/] {message}", soft_wrap=True, highlight=False)
    return typer.Exit(code)


@app.command()
def ingest(
    since: Annotated[str, typer.Option(help="First last-revision date, YYYY-MM-DD")],
    until: Annotated[str, typer.Option(help="Last last-revision date, YYYY-MM-DD (inclusive)")],
    categories: Annotated[list[str] | None, typer.Option("--categories", "-c", help="arXiv categories")] = None,
    json_out: Annotated[Path | None, typer.Option(help="Also write the run summary as JSON")] = None,
    track: Track = None,
) -> None:
    """Crawl arXiv, enrich with Semantic Scholar, extract PDFs with GROBID and load the corpus."""
    try:
        s, u = date.fromisoformat(since), date.fromisoformat(until)
    except ValueError as exc:
        raise typer.BadParameter(f"dates must be YYYY-MM-DD: {exc}") from exc
    if u < s:
        raise typer.BadParameter("--until is before --since")
    settings = _setup()
    from revbench.flows.ingest import ingest_flow

    summary = ingest_flow.run(settings, s, u, categories=categories or None, track=resolve_track(track, long_flow=True))
    print_ingest_summary(summary)
    if json_out:
        json_out.write_text(json.dumps({k: v for k, v in summary.items() if k != "summary_markdown"}, indent=2, default=str))


@app.command()
def demo(
    papers: Annotated[int, typer.Option(help="Papers in the synthetic demo world")] = 300,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic world")] = 7,
    fault_rate: Annotated[float, typer.Option(help="Share of replayed requests that fail transiently")] = 0.05,
    track: Track = None,
) -> None:
    """Offline end-to-end run: a SYNTHETIC world behind a local replay server, through every stage."""
    settings = _setup()
    from revbench.app.demo import run_demo

    run_demo(settings, papers, seed, fault_rate, track=resolve_track(track, long_flow=True))


@app.command()
def evaluate(
    benchmark: Annotated[list[str], typer.Option("--benchmark", "-b", help="NAME=PATH; NAME is goldstandard, lrbench, openreview or warehouse")] = [],  # noqa: B006
    scorer: Annotated[list[str], typer.Option("--scorer", "-s", help="Scorer spec, e.g. tpms, tpms:compat=reference or embedding:pooling=max")] = [],  # noqa: B006
    predictions: Annotated[list[str], typer.Option("--predictions", "-p", help="NAME[@BENCHMARK]=PATH of scores computed elsewhere")] = [],  # noqa: B006
    baseline: Annotated[str | None, typer.Option(help="Scorer the others are compared with (paired intervals)")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples (0: no intervals)")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap")] = 0,
    json_out: Annotated[Path | None, typer.Option(help="Write the results as a JSON list of rows")] = None,
    report: Annotated[Path | None, typer.Option(help="Directory for report.md, loss.png and predictions")] = None,
    plot: Annotated[bool | None, typer.Option("--plot/--no-plot", help="Draw loss.png (default: when --report is given)")] = None,
    track: Track = None,
) -> None:
    """Evaluate similarity scorers (and external predictions) on benchmarks.

    With neither --scorer nor --predictions, trivial and tpms run; with --predictions alone,
    only the given files are evaluated."""
    settings = _setup()
    from revbench.evaluation.plan import PlanError, plan_evaluation
    from revbench.flows.evaluate import evaluate_flow

    try:
        plan_evaluation(settings, benchmark, scorer or None, predictions)
    except PlanError as exc:
        raise _fail(str(exc)) from exc
    try:
        out = evaluate_flow.run(
            settings, benchmarks=benchmark, scorers=scorer or None, predictions=predictions, baseline=baseline,
            bootstrap=bootstrap, seed=seed, report_dir=str(report) if report else None,
            json_out=str(json_out) if json_out else None, plot=report is not None if plot is None else plot,
            track=resolve_track(track, long_flow=False),
        )
    except (ValueError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from exc
    print_report(out["tables"])
    console.print(f"Report: [cyan]{out['report_dir']}[/] (report.md, results.json, predictions/"
                  + (", loss.png)" if out["plot"] else ")"))


@app.command()
def pools(
    round: Annotated[int, typer.Option("--round", help="Sampling round (re-running a round reproduces it)")] = 1,
    per_category: Annotated[int | None, typer.Option(help="Query papers per category")] = None,
    tau: Annotated[float | None, typer.Option(help="Similarity threshold of neighbours")] = None,
    track: Track = None,
) -> None:
    """Sample query papers, recall candidates, filter conflicts, screen and assign invitations."""
    settings = _setup()
    from revbench.flows.pools import pools_flow

    try:
        stats = pools_flow.run(settings, round=round, per_category=per_category, tau=tau,
                               track=resolve_track(track, long_flow=True))
    except ValueError as exc:
        raise _fail(str(exc)) from exc
    print_pools(stats, tau_report=True)


@app.command()
def disambiguate(
    fallback: Annotated[bool, typer.Option("--fallback", help="Use the offline fallback even when an LLM is configured")] = False,
    track: Track = None,
) -> None:
    """Resolve author mentions to canonical authors (re-deciding only blocks whose inputs changed)."""
    settings = _setup()
    if fallback:
        settings = settings.with_overrides(disambiguate={"use_llm": False})
    from revbench.flows.disambiguate import disambiguate_flow

    print_disambiguation(disambiguate_flow.run(settings, track=resolve_track(track, long_flow=True)))


@app.command()
def status() -> None:
    """Warehouse counts by table, rejects by reason and the latest runs."""
    settings = build_settings()
    from revbench.warehouse import Warehouse

    if not settings.warehouse_path.exists():
        console.print(f"No warehouse at {settings.warehouse_path}; run `revbench demo` or `revbench ingest`.")
        raise typer.Exit(1)
    with Warehouse.open(settings.warehouse_path, read_only=True) as wh:
        print_status(str(settings.warehouse_path), wh.schema_version(), wh.table_counts(), wh.reject_counts().to_dicts(),
                     wh.latest_runs(5).to_dicts())


@app.command()
def world(
    out: Annotated[Path, typer.Option(help="Directory to write the world to")],
    papers: Annotated[int, typer.Option(help="Number of papers")] = 300,
    seed: Annotated[int, typer.Option(help="Seed")] = 7,
    since: Annotated[str, typer.Option(help="Window start YYYY-MM-DD")] = DEMO_SINCE.isoformat(),
    until: Annotated[str, typer.Option(help="Window end YYYY-MM-DD")] = DEMO_UNTIL.isoformat(),
    documents: Annotated[bool, typer.Option(help="Also write PDFs and TEI")] = True,
) -> None:
    """Generate a SYNTHETIC world (services' answers plus hidden truth)."""
    from revbench.synth.world import WorldSpec, generate_world

    spec = WorldSpec(n_papers=papers, seed=seed, start=date.fromisoformat(since), end=date.fromisoformat(until), documents=documents)
    with console.status(f"generating {papers} SYNTHETIC papers"):
        manifest = generate_world(out, spec)
    console.print_json(json.dumps(manifest["counts"]))


@app.command("env-example")
def env_example() -> None:
    """Print a .env.example listing every setting with its description and default."""
    console.print(render_env_example(), markup=False, highlight=False, soft_wrap=True)


def main() -> None:
    """The ``revbench`` console script."""
    try:
        app()
    except SystemExit as exc:
        _exit(exc.code)
    _exit(0)


def _exit(code: int | str | None) -> None:
    """End the process. When Prefect was never loaded (an in-process run), skip interpreter
    teardown: with polars, DuckDB and pyarrow loaded it takes about 0.25 s, a quarter of a
    one-off command, and nothing is left to clean (the warehouse is closed, files are written).
    Tracked runs exit normally so Prefect's exit handlers send their last events and logs."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    if "prefect" in sys.modules:
        raise SystemExit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    main()
