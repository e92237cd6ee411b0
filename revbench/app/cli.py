"""The ``revbench`` command line: builds the settings once and hands them to the flows.

Every error ends in one line on stderr (``--debug`` adds the traceback) and an exit code:
2 for a request that cannot run as given (nothing was done), 3 for an unreachable service,
4 for a warehouse held by another run, 5 for a damaged warehouse, 130 for an interrupt,
1 for anything else.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from revbench.app.console import (
    console,
    err_console,
    print_disambiguation,
    print_ingest_summary,
    print_pools,
    print_report,
)
from revbench.app.entry import (
    DEMO_SINCE,
    DEMO_UNTIL,
    build_settings,
    check_output_dir,
    check_output_file,
    prepare_process,
    resolve_track,
)
from revbench.app import cli_ops, cli_ui
from revbench.app.cli_common import MixWorlds, Track, app, fetching, mixed, parse_date, setup
from revbench.app.cli_survey import survey_app
from revbench.errors import RevbenchError, UsageError, clear_interrupt, interrupt_noted
from revbench.settings import ReplaySettings, Settings, render_env_example


@app.command()
@fetching(("ingest",))
def ingest(
    since: Annotated[str, typer.Option(help="First last-revision date, YYYY-MM-DD")],
    until: Annotated[str, typer.Option(help="Last last-revision date, YYYY-MM-DD (inclusive)")],
    categories: Annotated[list[str] | None, typer.Option("--categories", "-c", help="arXiv categories (default: settings)")] = None,
    json_out: Annotated[Path | None, typer.Option(help="Also write the run summary as JSON")] = None,
    mix_worlds: MixWorlds = False,
    track: Track = None,
) -> None:
    """Crawl arXiv, enrich with Semantic Scholar, extract PDFs with GROBID and load the corpus."""
    s, u = parse_date(since, "--since"), parse_date(until, "--until")
    if u < s:
        raise UsageError(f"--until {until} is before --since {since}")
    if json_out:
        check_output_file(json_out, "--json-out")
    settings = setup(**({"arxiv.categories": categories} if categories else {}), **mixed(mix_worlds))
    from revbench.flows.ingest import ingest_flow

    summary = ingest_flow.run(settings, s, u, track=resolve_track(track, long_flow=True))
    print_ingest_summary(summary)
    if json_out:
        json_out.write_text(json.dumps({k: v for k, v in asdict(summary).items() if k != "summary_markdown"}, indent=2,
                                       default=str))


app.command()(fetching(("graph",), flag=False)(cli_ops.graph))  # in the stages' order: after ingest, before disambiguate

@app.command()
def demo(
    papers: Annotated[int | None, typer.Option(min=20, help="Papers in the synthetic demo world (default 300)")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic world")] = 7,
    fault_rate: Annotated[float, typer.Option(help="Share of replayed requests that fail transiently (0 to 1)")] = 0.05,
    cassettes: Annotated[Path | None, typer.Option(help="Directory of recorded real answers (routes.json and/or VCR *.yaml cassettes) the replay server gives before the world's")] = None,
    world: Annotated[str | None, typer.Option(help="KIND=PATH: rebuild a published benchmark (lrbench or goldstandard) from its files instead of a SYNTHETIC world, and compare the rebuild with it")] = None,
    citation_link: Annotated[float, typer.Option(min=0.0, max=8.0, help="How strongly the SYNTHETIC world's citations follow subject and expertise (1: calibrated to real data; 0: blind to both); for measuring what the graph is worth")] = 1.0,
    track: Track = None,
) -> None:
    """Offline end-to-end run: a SYNTHETIC world behind a local replay server, through every stage;
    with --world, a world imported from LR-bench or the gold standard, compared with the original."""
    try:
        replay = ReplaySettings(fault_rate=fault_rate, fault_seed=seed, timeout_delay_seconds=3.0, retry_after_seconds=1)
    except ValueError as exc:
        raise UsageError(f"--fault-rate {fault_rate}: expected a share from 0 to 1 ({exc.errors()[0]['msg']})") from None  # type: ignore[attr-defined]
    # The demo sets its own values; the ones it stored for later commands are not for it.
    settings = build_settings(demo_data=False)
    from revbench.worlds import check_demo_folder

    check_demo_folder(settings)  # a real warehouse is never set aside for a SYNTHETIC world
    if world is not None:
        from revbench.app.rebuild import load_source, run_rebuild

        if cassettes is not None or papers is not None or citation_link != 1.0:
            flag = "--cassettes" if cassettes is not None else "--papers" if papers is not None else "--citation-link"
            raise UsageError(f"{flag}: not with --world (the benchmark's files make the whole world)")
        source = load_source(world)  # a wrong --world or a bad file is one line before anything starts
        prepare_process(settings)
        run_rebuild(settings, source, seed, replay, track=resolve_track(track, long_flow=True))
        return
    prepare_process(settings)
    from revbench.app.demo import run_demo

    if cassettes is not None:
        from revbench.replay.cassettes import load_recordings

        load_recordings(cassettes)  # a bad recording is one line here, not a dead replay process later
    run_demo(settings, 300 if papers is None else papers, seed, replay, track=resolve_track(track, long_flow=True), cassettes=cassettes,
             citation_link=citation_link)


@app.command()
def evaluate(
    benchmark: Annotated[list[str], typer.Option("--benchmark", "-b", help="NAME=PATH; NAME is goldstandard, lrbench, openreview, warehouse (alone: this warehouse), release or weak")] = [],  # noqa: B006
    scorer: Annotated[list[str], typer.Option("--scorer", "-s", help="Scorer spec, e.g. tpms, tpms:compat=reference or embedding:pooling=max; trained: every adapter from revbench train")] = [],  # noqa: B006
    predictions: Annotated[list[str], typer.Option("--predictions", "-p", help="NAME[@BENCHMARK]=PATH of scores computed elsewhere")] = [],  # noqa: B006
    baseline: Annotated[str | None, typer.Option(help="Scorer the others are compared with (paired intervals)")] = None,
    bootstrap: Annotated[int, typer.Option(min=0, help="Bootstrap resamples (0: no intervals)")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap")] = 0,
    allow_partial: Annotated[bool, typer.Option("--allow-partial", help="Evaluate predictions that cover only part of a benchmark (coverage is reported)")] = False,
    json_out: Annotated[Path | None, typer.Option(help="Write the results as a JSON list of rows")] = None,
    report: Annotated[Path | None, typer.Option(help="Directory for report.md, loss.png and predictions (OpenReview, RATE and TREC formats)")] = None,
    plot: Annotated[bool | None, typer.Option("--plot/--no-plot", help="Draw loss.png (default: when --report is given)")] = None,
    graph_from: Annotated[str | None, typer.Option(help="s2: give the gold standard its graph from Semantic Scholar (REVBENCH_S2__BASE_URL), cached under the data dir")] = None,
    allow_rejected: Annotated[bool, typer.Option("--allow-rejected", help="Read a release its curator rejected (refused otherwise)")] = False,
    track: Track = None,
) -> None:
    """Evaluate similarity scorers (and external predictions) on benchmarks.

    With neither --scorer nor --predictions, trivial and tpms run; with --predictions alone,
    only the given files are evaluated."""
    if json_out:
        check_output_file(json_out, "--json-out")
    if report:
        check_output_dir(report, "--report")
    settings = setup(**({"release.evaluate_rejected": True} if allow_rejected else {}))
    from revbench.evaluation.plan import plan_evaluation
    from revbench.flows.evaluate import evaluate_flow

    plan = plan_evaluation(settings, benchmark, scorer or None, predictions, baseline, graph_from)
    out = evaluate_flow.run(
        settings, benchmarks=benchmark, scorers=scorer or None, predictions=predictions, baseline=baseline,
        bootstrap=bootstrap, seed=seed, report_dir=str(report) if report else None, allow_partial=allow_partial,
        json_out=str(json_out) if json_out else None, plot=report is not None if plot is None else plot,
        track=resolve_track(track, long_flow=False), plan=plan, graph_from=graph_from,
    )
    print_report(out.tables)
    for line in out.warnings:
        console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
    for name, dropped in out.dropped.items():
        console.print(f"{name}: left out " + ", ".join(f"{n} ({reason})" for reason, n in sorted(dropped.items())))
    console.print(f"Report: [cyan]{out.report_dir}[/] (report.md, results.json, separation.json, predictions/, trec/, exports.json"
                  + (", loss.png)" if out.plot else ")") + f"; run {out.run_id}")


@app.command()
def embed(
    benchmark: Annotated[list[str], typer.Option("--benchmark", "-b", help="NAME=PATH as for evaluate (warehouse alone: this warehouse)")],
    model: Annotated[list[str], typer.Option("--model", "-m", help="Model name or path, adapter folder, or hashing (default: REVBENCH_EMBED__MODELS)")] = [],  # noqa: B006
    track: Track = None,
) -> None:
    """Embed a benchmark's texts with each model (GPU when present), cached and exported with a manifest."""
    settings = setup()
    from revbench.flows.embed import embed_flow

    out = embed_flow.run(settings, benchmarks=benchmark, models=model or None, track=resolve_track(track, long_flow=False))
    from revbench.app.console import print_embed

    print_embed(out)


app.command()(cli_ops.train)


@app.command()
@fetching(("pools",))
def pools(
    round: Annotated[int, typer.Option("--round", min=1, help="Sampling round (re-running a round reproduces it)")] = 1,
    per_category: Annotated[int | None, typer.Option(help="Query papers per category")] = None,
    tau: Annotated[float | None, typer.Option(help="Similarity threshold of neighbours, 0 < tau <= 1")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Rebuild a round that has invitations with other parameters (the current version is kept as superseded)")] = False,
    target_from_report: Annotated[Path | None, typer.Option(help="Size the round from an evaluation report folder (its separation.json): the query papers per category that would separate the closest scorer pair on paper-centric tuples, at the yield of the rounds so far")] = None,
    target_pair: Annotated[str | None, typer.Option(help="With --target-from-report: the scorer pair A,B to separate (default: the one needing the fewest more anchors)")] = None,
    mix_worlds: MixWorlds = False,
    track: Track = None,
) -> None:
    """Sample query papers, recall candidates, filter conflicts, screen and assign invitations."""
    if target_from_report is not None and per_category is not None:
        raise UsageError("--per-category and --target-from-report both size the round; give one")
    if target_pair is not None and target_from_report is None:
        raise UsageError("--target-pair needs --target-from-report DIR")
    changes = {k: v for k, v in {"pools.queries_per_category": per_category, "pools.tau": tau}.items() if v is not None}
    settings = setup(**changes, **mixed(mix_worlds))
    if target_from_report is not None:
        settings = settings.with_overrides(pools={"queries_per_category": _round_target(settings, target_from_report, target_pair)})
    from revbench.flows.pools import pools_flow

    stats = pools_flow.run(settings, round=round, replace=replace, track=resolve_track(track, long_flow=True))
    print_pools(stats, tau_report=True)


def _round_target(settings: Settings, report: Path, pair: str | None) -> int:
    """Query papers per category for the next round, from a report's scorer pairs (says how)."""
    from rich.markup import escape

    from revbench.evaluation.separation import next_round_pair, read_separation
    from revbench.tasks.pools import round_target
    from revbench.warehouse import Warehouse

    if pair is not None and "," not in pair:
        raise UsageError(f"--target-pair {pair!r}: give two scorer names as A,B")
    chosen = next_round_pair(read_separation(report.expanduser()), pair)
    if not settings.warehouse_path.exists():
        raise UsageError(f"no warehouse at {settings.warehouse_path}: run `revbench ingest` and a first round first")
    with Warehouse.open(settings.warehouse_path, read_only=True, lock_wait=settings.warehouse.lock_wait_seconds) as wh:
        queries, anchors = wh.pools.round_yield()
    try:
        target = round_target(chosen["more_clusters"], anchors, queries, len(settings.arxiv.categories))
    except ValueError as exc:
        raise UsageError(f"--target-from-report: {exc}") from None
    console.print(f"Round size from {escape(str(report))}: {escape(chosen['scorer_a'])} vs {escape(chosen['scorer_b'])} "
                  f"need {target.line()}; "
                  "that separates them about half the time if their difference is the true one (x2.04 for 80%)")
    return target.per_category


@app.command()
@fetching(None)
def refresh(
    stages: Annotated[str | None, typer.Option(help="Comma-separated stages to run (default: REVBENCH_REFRESH__STAGES)")] = None,
    until: Annotated[str | None, typer.Option(help="Last day of the ingest window, YYYY-MM-DD (default: yesterday, UTC)")] = None,
    runner: Annotated[str | None, typer.Option(help="Task runner of tracked runs: threads or dask")] = None,
    mix_worlds: MixWorlds = False,
    track: Track = None,
) -> None:
    """Every configured stage in order, each skipped (with its reason) when its inputs did not change."""
    changes: dict[str, Any] = {}
    if stages is not None:
        changes["refresh.stages"] = [x.strip() for x in stages.split(",") if x.strip()]
    if until is not None:
        changes["refresh.until"] = parse_date(until, "--until")
    if runner is not None:
        changes["runner.kind"] = runner
    settings = setup(**changes, **mixed(mix_worlds))
    from revbench.app.console import print_refresh
    from revbench.flows.refresh import refresh_flow

    print_refresh(refresh_flow.run(settings, track=resolve_track(track, long_flow=True)))


@app.command()
def disambiguate(
    fallback: Annotated[bool, typer.Option("--fallback", help="Use the offline fallback even when an LLM is configured")] = False,
    track: Track = None,
) -> None:
    """Resolve author mentions to canonical authors (re-deciding only blocks whose inputs changed)."""
    settings = setup(**({"disambiguate.use_llm": False} if fallback else {}))
    from revbench.flows.disambiguate import disambiguate_flow

    print_disambiguation(disambiguate_flow.run(settings, track=resolve_track(track, long_flow=True)))


@app.command()
def ratings(
    decide: Annotated[str | None, typer.Option(help="Decide every undecided flag: keep or drop (recorded with --curator); without it the unattended policy applies, or a tracked run waits for the curator in the Prefect UI")] = None,
    curator: Annotated[str, typer.Option(help="Who decides (recorded with each decision)")] = "",
    evaluate: Annotated[bool | None, typer.Option("--evaluate/--no-evaluate", help="End with the evaluation on the warehouse benchmark (default: REVBENCH_RATINGS__EVALUATE_AFTER)")] = None,
    track: Track = None,
) -> None:
    """Pull survey answers into ratings: de-duplicate, flag, apply curator decisions, build tuples and statistics."""
    if decide is not None and decide not in ("keep", "drop"):
        raise UsageError(f"--decide {decide!r}: expected keep or drop")
    settings = setup()
    from revbench.app.console import print_ratings
    from revbench.flows.ratings import ratings_flow

    out = ratings_flow.run(settings, decide=decide, curator=curator or (os.environ.get("USER", "") if decide else ""),
                           evaluate=evaluate, track=resolve_track(track, long_flow=True))
    print_ratings(out)


release_app = typer.Typer(help="Export the cleaned benchmark as a versioned, audited, checksummed release folder, "
                                "published on a curator's go; `release verify PATH` checks one.",
                           invoke_without_command=True)
app.add_typer(release_app, name="release")


@release_app.callback()
def release(
    ctx: typer.Context,
    version: Annotated[str | None, typer.Option("--version", help="Release name (default: the next vN)")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Build an unpublished release again (the old one is kept under releases/.replaced/); a published one is never replaced")] = False,
    only_if_changed: Annotated[bool, typer.Option("--only-if-changed", help="Make no release when nothing changed since the last published one (the default unless --force; kept for scripts)")] = False,
    force: Annotated[bool, typer.Option("--force", help="Build the release even when it equals the last published one")] = False,
    approve: Annotated[str | None, typer.Option(help="The curator's go: yes publishes, no rejects; with an existing --version, decides on it without a rebuild")] = None,
    approver: Annotated[str, typer.Option(help="Who decides (recorded with the decision)")] = "",
    track: Track = None,
) -> None:
    """Export the cleaned benchmark as a versioned, audited, checksummed release folder, published on a curator's go."""
    if ctx.invoked_subcommand is not None:
        given = [f for f, v in (("--version", version), ("--replace", replace), ("--only-if-changed", only_if_changed),
                                ("--force", force), ("--approve", approve), ("--approver", approver), ("--track", track))
                 if v]
        if given:
            raise UsageError(f"{given[0]} belongs to `revbench release`, not to `revbench release {ctx.invoked_subcommand}`")
        return
    if approve is not None and approve not in ("yes", "no"):
        raise UsageError(f"--approve {approve!r}: expected yes or no")
    if force and only_if_changed:
        raise UsageError("--force builds a release even when nothing changed, --only-if-changed only when something "
                         "did; give one")
    settings = setup()
    from revbench.app.console import print_release
    from revbench.flows.release import release_flow

    out = release_flow.run(settings, version=version, replace=replace, only_if_changed=only_if_changed, approve=approve,
                           approver=approver or (os.environ.get("USER", "") if approve else ""), force=force,
                           track=resolve_track(track, long_flow=True))
    print_release(out)


@release_app.command("verify")
def release_verify(
    path: Annotated[Path, typer.Argument(help="The release folder (holding manifest.json)")],
) -> None:
    """Check a release: each file against manifest.json (size, sha256), nothing unlisted, the manifest against the warehouse; a rejected one exits 8."""
    settings = setup()
    from revbench.app.console import print_release_verified
    from revbench.release_checks import verify_recorded
    from revbench.release_files import refuse_rejected

    release = verify_recorded(settings, path)
    refuse_rejected(release, "its files match its manifest, but")
    print_release_verified(release)


@app.command()
def report(
    releases: Annotated[bool, typer.Option("--releases", help="Each metric of each scorer across the published releases")] = False,
    metric: Annotated[str, typer.Option(help="The metric to follow (loss, accuracy, easy_accuracy, hard_accuracy, ...)")] = "loss",
    split: Annotated[str, typer.Option(help="The split (average, pointwise, paper_centric, reviewer_centric)")] = "average",
    html: Annotated[Path | None, typer.Option("--html", metavar="DIR", help="Write DIR/index.html: every benchmark x scorer x version evaluated, one self-contained page to share")] = None,
    evaluation_report: Annotated[list[Path], typer.Option("--evaluation-report", metavar="DIR", help="With --html: a folder `revbench evaluate --report` wrote; its scorer pairs (separation.json) join the page")] = [],  # noqa: B006
) -> None:
    """Results across releases: a table, and a plot in data/reports/releases/; with --html, a page to share."""
    if evaluation_report and html is None:
        raise UsageError("--evaluation-report adds the scorer pairs to the page: give --html DIR too")
    if not releases and html is None:
        raise UsageError("say what to report: --releases, or --html DIR")
    if html is not None:
        check_output_dir(html, "--html")
        from revbench.app.results_page import read_evaluation_report, write_results_page

        pairs = [read_evaluation_report(d) for d in evaluation_report]
    settings = setup()
    if html is not None:
        write_results_page(settings, html.expanduser(), pairs)
        if not releases:
            return
    from revbench.app.console import print_release_report
    from revbench.evaluation.report import plot_across_releases
    from revbench.release_checks import release_report

    rows = release_report(settings, metric, split)
    if rows.height == 0:
        raise UsageError(f"no release has results for metric {metric!r} on split {split!r}: publish a release "
                         "(`revbench release --approve yes`), or check --metric and --split")
    png = plot_across_releases(rows, metric, split, settings.data_dir / "reports" / "releases" / f"{metric}-{split}.png")
    print_release_report(rows, metric, split, png)


# The operator's and the survey's commands live in their own modules; registered here, after
# ``report`` and before ``world``, so that ``--help`` and the generated reference keep their order.
app.command()(fetching(None, flag=False)(cli_ops.serve))
app.command()(cli_ui.ui)
app.add_typer(survey_app, name="survey")
for command in (cli_ops.status, cli_ops.doctor, cli_ops.backup, cli_ops.restore, cli_ops.labels, cli_ops.models):
    app.command()(command)


@app.command()
def world(
    out: Annotated[Path, typer.Option(help="Directory to write the world to")],
    papers: Annotated[int, typer.Option(min=1, help="Number of papers")] = 300,
    seed: Annotated[int, typer.Option(help="Seed")] = 7,
    since: Annotated[str, typer.Option(help="Window start YYYY-MM-DD")] = DEMO_SINCE.isoformat(),
    until: Annotated[str, typer.Option(help="Window end YYYY-MM-DD")] = DEMO_UNTIL.isoformat(),
    documents: Annotated[bool, typer.Option(help="Also write PDFs and TEI")] = True,
    extra_days: Annotated[int, typer.Option(min=0, help="Growth days after --until, each adding new papers")] = 0,
    graph: Annotated[bool, typer.Option(help="Also draw the scholarly graph (--no-graph: a world as before it)")] = True,
) -> None:
    """Generate a SYNTHETIC world (services' answers plus hidden truth)."""
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import generate_world

    s, u = parse_date(since, "--since"), parse_date(until, "--until")
    if u < s:
        raise UsageError(f"--until {until} is before --since {since}")
    check_output_dir(out, "--out")
    spec = WorldSpec(n_papers=papers, seed=seed, start=s, end=u, documents=documents, extra_days=extra_days,
                     graph=graph)
    with console.status(f"generating {papers} SYNTHETIC papers"):
        manifest = generate_world(out, spec)
    console.print_json(json.dumps(manifest["counts"]))


@app.command("env-example")
def env_example() -> None:
    """Print a .env.example listing every setting with its description and default."""
    console.print(render_env_example(), markup=False, highlight=False, soft_wrap=True, end="")


def main(argv: list[str] | None = None) -> None:
    """The ``revbench`` console script."""
    from revbench.app.entry import install_unraisable_hook

    install_unraisable_hook()
    if hasattr(signal, "SIGUSR1"):
        # `kill -USR1 PID` prints every thread's stack to stderr and the command goes on: what
        # an operator (or a test that timed out) asks a run that seems stuck.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    # -v anywhere on the line: the details a default run leaves out (every note, third-party
    # warnings, the revbench logger's DEBUG lines).
    from revbench.app import entry

    entry.VERBOSE[0] = "--verbose" in args or "-v" in args
    entry.quiet_third_party_warnings()
    _exit(run([a for a in args if a not in ("--debug", "--verbose", "-v")], debug))


def _say(message: str) -> None:
    err_console.print(f"[red]error:[/] {message}", soft_wrap=True, highlight=False, markup=True)


def run(args: list[str], debug: bool = False) -> int:
    """Run the command line on ``args``; errors become one line and an exit code."""
    clear_interrupt()
    try:
        rv = app(args, standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except typer.TyperException as exc:  # a bad flag, as typer reports it
        command = " ".join(a for a in args[:1] if not a.startswith("-"))
        _say(f"{exc.format_message()} (see `revbench {command} --help`)".replace("  ", " "))
        return exc.exit_code
    except RevbenchError as exc:
        if debug:
            traceback.print_exc()
        _say(str(exc).replace("[", "\\["))
        return exc.exit_code
    except Exception as exc:  # an error we did not expect: one line, the traceback on request
        if interrupt_noted():  # our interrupt, wrapped in a library's error on its way out
            return _interrupted()
        if debug:
            traceback.print_exc()
        hint = "" if debug else " (add --debug for the traceback)"
        _say(f"{type(exc).__name__}: {exc}".replace("[", "\\[") + hint)
        return 1
    if code == 130:  # typer turns Ctrl-C (and our SIGTERM) into exit code 130
        return _interrupted()
    return code


def _interrupted() -> int:
    _say("interrupted; a run in progress was marked cancelled and keeps what it committed: "
         "run the same command again to resume")
    return 130


def _exit(code: int) -> None:
    """End the process the way the interpreter would, less its last step: threads are joined
    and exit handlers run (Prefect drains its logs and events and stops its temporary server
    there), then the process exits without tearing down every module. That teardown costs about
    0.25 s with polars, DuckDB and pyarrow loaded (a quarter of a one-off command) and, after an
    interrupted tracked run, makes DuckDB's bindings print pages of "leaked instance" notices
    for objects Prefect still held; nothing is left to clean (the warehouse is closed, files written)."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize does first
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
