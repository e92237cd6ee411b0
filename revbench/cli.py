"""The ``revbench`` command line."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table as RichTable

from revbench.settings import Settings

app = typer.Typer(help="Build, refresh and evaluate benchmarks of reviewer expertise.", no_args_is_help=True)
console = Console()

DEMO_SINCE = date(2026, 9, 1)
DEMO_UNTIL = date(2026, 10, 31)


def _quiet_libraries() -> None:
    for name in ("httpx", "httpcore", "urllib3", "arxiv", "grobid_client", "bm25s", "sentence_transformers"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _prefect_defaults(settings: Settings) -> None:
    # The ephemeral Prefect server cold-starts in ~20 s on two cores; the default timeout is shorter.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_HOME", str((settings.data_dir / "prefect").resolve()))


def print_ingest_summary(summary: dict[str, Any]) -> None:
    """Stages, rejects by reason and totals, as tables."""
    t = RichTable(title="Ingest stages")
    for col in ("stage", "in", "out", "rejected", "seconds"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for s in summary["stages"]:
        t.add_row(s["stage"], str(s["rows_in"]), str(s["rows_out"]), str(s["rejected"]), f"{s['seconds']:.1f}")
    console.print(t)
    r = RichTable(title="Papers rejected, by reason")
    r.add_column("reason")
    r.add_column("this run", justify="right")
    r.add_column("in warehouse", justify="right")
    for reason, n in summary["rejects_in_warehouse"].items():
        r.add_row(reason, str(summary["rejects_this_run"].get(reason, 0)), str(n))
    console.print(r)
    tot = summary["totals"]
    console.print(
        f"[bold]{tot['papers']}[/] papers and [bold]{tot['mentions']}[/] author mentions in the warehouse; "
        f"{tot['rejects']} papers rejected."
    )
    console.print(f"Warehouse: [cyan]{summary['warehouse']}[/]")


@app.command()
def ingest(
    since: Annotated[str, typer.Option(help="First last-revision date, YYYY-MM-DD")],
    until: Annotated[str, typer.Option(help="Last last-revision date, YYYY-MM-DD (inclusive)")],
    categories: Annotated[list[str] | None, typer.Option("--categories", "-c", help="arXiv categories")] = None,
    json_out: Annotated[Path | None, typer.Option(help="Also write the run summary as JSON")] = None,
) -> None:
    """Crawl arXiv, enrich with Semantic Scholar, extract PDFs with GROBID and load the corpus."""
    settings = Settings()
    _prefect_defaults(settings)
    _quiet_libraries()
    try:
        s, u = date.fromisoformat(since), date.fromisoformat(until)
    except ValueError as exc:
        raise typer.BadParameter(f"dates must be YYYY-MM-DD: {exc}") from exc
    if u < s:
        raise typer.BadParameter("--until is before --since")
    from flows.ingest import ingest_flow

    summary = ingest_flow(since=s, until=u, categories=categories or None)
    print_ingest_summary(summary)
    if json_out:
        json_out.write_text(json.dumps({k: v for k, v in summary.items() if k != "summary_markdown"}, indent=2, default=str))


@app.command()
def demo(
    papers: Annotated[int, typer.Option(help="Papers in the synthetic demo world")] = 300,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic world")] = 7,
    fault_rate: Annotated[float, typer.Option(help="Share of replayed requests that fail transiently")] = 0.05,
) -> None:
    """Offline end-to-end run: a SYNTHETIC world behind a local replay server, ingested for real."""
    settings = Settings()
    _prefect_defaults(settings)
    _quiet_libraries()
    from revbench.replay import spawn_replay
    from revbench.replay.server import client_env
    from revbench.settings import ReplaySettings
    from revbench.synth.world import WorldSpec, ensure_world

    t0 = time.monotonic()
    world_dir = settings.worlds_dir / f"demo-{papers}-{seed}"
    spec = WorldSpec(n_papers=papers, seed=seed, start=DEMO_SINCE, end=DEMO_UNTIL)
    with console.status("generating the SYNTHETIC demo world"):
        manifest = ensure_world(world_dir, spec)
    _demo_warehouse_for(settings, manifest)
    c = manifest["counts"]
    console.print(
        f"[yellow]SYNTHETIC[/] demo world: {c['papers']} papers, {c['mentions']} mentions, "
        f"{c['persons']} people, {c['bad_records']} deliberately bad records -> {world_dir}"
    )
    replay = ReplaySettings(fault_rate=fault_rate, fault_seed=seed, timeout_delay_seconds=3.0, retry_after_seconds=1)
    with spawn_replay(world_dir, replay) as base:
        console.print(f"replay server on {base} (faults: {fault_rate:.0%} of requests, all transient)")
        os.environ.update(client_env(base))
        os.environ.setdefault("REVBENCH_HTTP__TIMEOUT_SECONDS", "2")
        os.environ.setdefault("REVBENCH_GROBID__TIMEOUT_SECONDS", "2")
        os.environ.setdefault("REVBENCH_HTTP__BACKOFF_INITIAL_SECONDS", "0.05")
        os.environ.setdefault("REVBENCH_HTTP__BACKOFF_MAX_SECONDS", "1")
        from flows.ingest import ingest_flow

        summary = ingest_flow(since=DEMO_SINCE, until=DEMO_UNTIL, synthetic=True)
        print_ingest_summary(summary)
        from flows.disambiguate import disambiguate_flow

        dis = disambiguate_flow()
        print_disambiguation(dis, settings, world_dir)
        from flows.pools import pools_flow

        pool_stats = pools_flow(round=1, per_category=10)
    print_pools(pool_stats, settings, world_dir)
    _demo_evaluation(settings, world_dir, seed)
    console.print(f"demo finished in {time.monotonic() - t0:.0f} s; run it again for a cheap refresh.")
    console.print(
        f"Flow runs and artifacts: PREFECT_HOME={os.environ['PREFECT_HOME']} .venv/bin/prefect server start"
    )


@app.command()
def evaluate(
    benchmark: Annotated[list[str], typer.Option("--benchmark", "-b", help="NAME=PATH; NAME is goldstandard, lrbench, openreview or warehouse")] = [],  # noqa: B006
    scorer: Annotated[list[str], typer.Option("--scorer", "-s", help="Scorer spec, e.g. tpms or embedding:pooling=max")] = [],  # noqa: B006
    predictions: Annotated[list[str], typer.Option("--predictions", "-p", help="NAME[@BENCHMARK]=PATH of scores computed elsewhere")] = [],  # noqa: B006
    baseline: Annotated[str | None, typer.Option(help="Scorer the others are compared with (paired intervals)")] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples (0: no intervals)")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap")] = 0,
    json_out: Annotated[Path | None, typer.Option(help="Write the results as a JSON list of rows")] = None,
    report: Annotated[Path | None, typer.Option(help="Directory for report.md, loss.png and predictions")] = None,
) -> None:
    """Evaluate similarity scorers (and external predictions) on benchmarks."""
    if not benchmark and not predictions:
        raise typer.BadParameter("give at least one --benchmark or --predictions")
    settings = Settings()
    _prefect_defaults(settings)
    _quiet_libraries()
    from flows.evaluate import evaluate_flow

    try:
        out = evaluate_flow(
            benchmarks=benchmark, scorers=scorer or (["trivial", "tpms"] if benchmark else []), predictions=predictions,
            baseline=baseline, bootstrap=bootstrap, seed=seed, report_dir=str(report) if report else None,
            json_out=str(json_out) if json_out else None,
        )
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    from rich.markdown import Markdown

    console.print(Markdown(out["markdown"]))
    console.print(f"Report: [cyan]{out['report_dir']}[/] (report.md, loss.png, predictions/)")


def _demo_warehouse_for(settings: Settings, manifest: dict[str, Any]) -> None:
    """The demo's warehouse belongs to one demo world: when the world changed (another seed,
    size or generator version), the old demo warehouse and caches are set aside, not mixed in."""
    marker = settings.data_dir / ".demo-world"
    key = f"{manifest['spec_key']}-format{manifest['format']}"
    if settings.warehouse_path.exists() and (not marker.exists() or marker.read_text() != key):
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = settings.data_dir / f"previous-demo-{stamp}"
        aside.mkdir(parents=True)
        for p in settings.data_dir.glob("warehouse.duckdb*"):
            p.rename(aside / p.name)
        console.print(f"the demo world changed; the previous demo warehouse was moved to {aside}")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(key)


def print_disambiguation(res: dict[str, Any], settings: Settings, world_dir: Path | None = None) -> None:
    """Authors, merges by method and, for a synthetic world, quality against its truth."""
    t = RichTable(title=f"Author disambiguation (decider {res['decider']})")
    t.add_column("method")
    t.add_column("merges this run", justify="right")
    t.add_column("mentions linked by", justify="right")
    for m in ("email", "affiliation", "llm", "fallback", "singleton"):
        t.add_row(m, str(res["merges"].get(m, 0)), str(res["links_by_method"].get(m, 0)))
    console.print(t)
    console.print(
        f"{res['mentions']} mentions -> [bold]{res['authors']}[/] authors, {res['edges']} co-authorship edges; "
        f"{res['blocks_decided']} of {res['blocks']} name blocks decided this run; LLM calls {res['llm_calls']} "
        f"({res['llm_cached']} from cache)."
    )
    if world_dir is not None:
        import polars as pl

        from schemas.tables import AUTHOR_LINKS
        from tasks.disambiguate import pairwise_scores
        from warehouse import Warehouse

        with Warehouse.open(settings.warehouse_path) as wh:
            links = wh.read(AUTHOR_LINKS)
        pred = {f"{a}:{p}": c for a, p, c in links.select("arxiv_id", "position", "author_id").iter_rows()}
        truth = {f"{a}:{p}": t for a, p, t in pl.read_parquet(world_dir / "truth" / "mentions.parquet").iter_rows()}
        q = pairwise_scores(pred, truth)
        console.print(
            f"Against the SYNTHETIC world's truth: pairwise precision [bold]{q['pairwise_precision']:.3f}[/], "
            f"recall {q['pairwise_recall']:.3f}, F1 {q['pairwise_f1']:.3f}; B-cubed precision {q['bcubed_precision']:.3f}, "
            f"recall {q['bcubed_recall']:.3f} ({q['predicted_authors']} authors found, {q['true_authors']} real)."
        )


def print_pools(stats: dict[str, Any], settings: Settings, world_dir: Path | None = None) -> None:
    """Pool sizes through the filters, exclusions, invitations; for a synthetic world, a COI audit."""
    t = RichTable(title=f"Candidate pools, round {stats['round']} ({stats['queries']} queries)")
    for col in ("stage", "median", "mean", "queries with none"):
        t.add_column(col, justify="left" if col == "stage" else "right")
    for key, label in (("pool_before_coi", "recalled"), ("pool_after_coi", "after COI"), ("pool_after_screening", "after screening")):
        v = stats[key]
        t.add_row(label, f"{v['median']:.0f}", f"{v['mean']:.1f}", str(v["zero"]))
    console.print(t)
    console.print(
        "exclusions: " + ", ".join(f"{k} {v}" for k, v in sorted(stats["exclusions"].items())) +
        f"; {stats['assignments']} invitations to {stats['invited_candidates']} candidates (at most "
        f"{stats['max_queries_per_candidate']} queries each); {stats['queries_short_of_target']} queries below target; "
        f"{stats['embedded_now']} papers embedded now; files in {stats['out_dir']}"
    )
    if world_dir is not None:
        from tasks.audit import coi_violations

        v = coi_violations(settings, world_dir, stats["round"])
        console.print(f"COI audit against the SYNTHETIC truth: {v} invitations pair a reviewer with a paper they or a co-author of its authors wrote.")


@app.command()
def pools(
    round: Annotated[int, typer.Option("--round", help="Sampling round (re-running a round reproduces it)")] = 1,
    per_category: Annotated[int | None, typer.Option(help="Query papers per category")] = None,
    tau: Annotated[float | None, typer.Option(help="Similarity threshold of neighbours")] = None,
) -> None:
    """Sample query papers, recall candidates, filter conflicts, screen and assign invitations."""
    settings = Settings()
    _prefect_defaults(settings)
    _quiet_libraries()
    from flows.pools import pools_flow

    try:
        stats = pools_flow(round=round, per_category=per_category, tau=tau)
    except ValueError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    print_pools(stats, settings)
    tr = RichTable(title="Pool size by threshold (to choose tau)")
    for col in ("tau", "median", "mean", "p90", "queries without candidates"):
        tr.add_column(col, justify="right")
    for r in stats["tau_report"]:
        tr.add_row(f"{r['tau']:.2f}", f"{r['median']:.0f}", f"{r['mean']:.1f}", f"{r['p90']:.0f}", str(r["queries_without_candidates"]))
    console.print(tr)


@app.command()
def disambiguate(
    fallback: Annotated[bool, typer.Option("--fallback", help="Use the offline fallback even when an LLM is configured")] = False,
) -> None:
    """Resolve author mentions to canonical authors (re-deciding only blocks whose inputs changed)."""
    settings = Settings()
    _prefect_defaults(settings)
    _quiet_libraries()
    if fallback:
        os.environ["REVBENCH_DISAMBIGUATE__USE_LLM"] = "false"
    from flows.disambiguate import disambiguate_flow

    print_disambiguation(disambiguate_flow(), settings)


def _demo_evaluation(settings: Settings, world_dir: Path, seed: int) -> None:
    """Evaluate the standard scorers on a SYNTHETIC panel simulated from the world's truth."""
    from flows.evaluate import evaluate_flow
    from revbench.evaluation.simulate import simulate_panel
    from warehouse import Warehouse

    with Warehouse.open(settings.warehouse_path) as wh:
        papers = wh.corpus_papers()
    panel_dir = world_dir / "panel"
    stats = simulate_panel(papers, world_dir, panel_dir, seed=seed)
    console.print(
        f"[yellow]SYNTHETIC[/] rating panel: {stats['panelists']} panelists rated {stats['queries']} papers "
        f"({stats['ratings']} ratings) -> {panel_dir}"
    )
    out = evaluate_flow(
        benchmarks=[f"openreview={panel_dir}"], scorers=["trivial", "tpms", "bm25", "embedding"], baseline="tpms",
        bootstrap=1000, seed=seed, report_dir=str(settings.data_dir / "reports" / "demo"),
    )
    from rich.markdown import Markdown

    console.print(Markdown(out["markdown"]))
    console.print(f"Evaluation report: [cyan]{out['report_dir']}[/]")


@app.command()
def status() -> None:
    """Warehouse counts by table, rejects by reason and the latest runs."""
    settings = Settings()
    from warehouse import Warehouse

    if not settings.warehouse_path.exists():
        console.print(f"No warehouse at {settings.warehouse_path}; run `revbench demo` or `revbench ingest`.")
        raise typer.Exit(1)
    with Warehouse.open(settings.warehouse_path, read_only=True) as wh:
        counts = wh.table_counts()
        rejects = wh.reject_counts().to_dicts()
        runs = wh.frame("SELECT run_id, flow, status, started_at, finished_at FROM runs ORDER BY started_at DESC LIMIT 5").to_dicts()
        version = wh.schema_version()
    t = RichTable(title=f"Warehouse {settings.warehouse_path} (schema v{version})")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in counts.items():
        t.add_row(name, str(n))
    console.print(t)
    r = RichTable(title="Rejected papers by reason")
    r.add_column("reason")
    r.add_column("papers", justify="right")
    for row in rejects:
        r.add_row(row["reason"], str(row["n"]))
    console.print(r)
    u = RichTable(title="Latest runs")
    for col in ("run_id", "flow", "status", "started_at", "finished_at"):
        u.add_column(col)
    for row in runs:
        u.add_row(*[str(row[c]) for c in ("run_id", "flow", "status", "started_at", "finished_at")])
    console.print(u)


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


def render_env_example() -> str:
    """The text of ``.env.example``, generated from the settings tree."""
    from pydantic import BaseModel

    lines = ["# revbench settings: every field, with its default. Copy to .env and edit.", ""]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                lines.append(f"# [{name}] {ann.__doc__.strip().splitlines()[0] if ann.__doc__ else ''}")
                walk(ann, f"{prefix}{name.upper()}__")
                lines.append("")
                continue
            default = field.get_default(call_default_factory=True)
            if default is None:
                value = ""
            elif isinstance(default, list):
                value = json.dumps(default)
            elif isinstance(default, bool):
                value = str(default).lower()
            else:
                value = str(default)
            lines.append(f"# {field.description or name}")
            lines.append(f"{prefix}{name.upper()}={value}")

    walk(Settings, "REVBENCH_")
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    app()
