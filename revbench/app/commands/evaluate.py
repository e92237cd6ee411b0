"""The evaluation's command: ``evaluate`` (similarity scorers and outside predictions on benchmarks),
with the report tables it prints (``ratings`` and ``release`` print them too, when they evaluate)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from revbench.app.cli_common import Track, setup
from revbench.app.console import console
from revbench.app.entry import check_output_dir, check_output_file, resolve_track
from revbench.app.lean_evaluate import print_tables, report_line

if TYPE_CHECKING:
    from revbench.evaluation.plan import EvaluationPlan


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
    assignment: Annotated[bool, typer.Option("--assignment", help="Also judge each scorer by the assignment it yields (settings REVBENCH_ASSIGNMENT__*)")] = False,
    attack: Annotated[bool, typer.Option("--attack", help="Also attack each scorer with a colluding author and reviewer (settings REVBENCH_ATTACK__*)")] = False,
    record: Annotated[bool, typer.Option("--record", help="Store the run and its rows in the warehouse's eval_results when only --predictions are evaluated on files (no -b, or -b goldstandard, lrbench or openreview=PATH); a --scorer, -b warehouse, release or weak, and a tracked run always store")] = False,
    track: Track = None,
) -> None:
    """Evaluate similarity scorers (and external predictions) on benchmarks.

    With neither --scorer nor --predictions, trivial and tpms run; with --predictions alone,
    only the given files are evaluated, and nothing is stored unless --record or --track (on the
    benchmarks read from files; -b warehouse, release and weak always store)."""
    if json_out:
        check_output_file(json_out, "--json-out")
    if report:
        check_output_dir(report, "--report")
    settings = setup(**({"release.evaluate_rejected": True} if allow_rejected else {}))
    from revbench.evaluation.plan import plan_evaluation
    from revbench.flows.evaluate import evaluate_flow

    plan = plan_evaluation(settings, benchmark, scorer or None, predictions, baseline, graph_from)
    tracked = resolve_track(track, long_flow=False)
    out = evaluate_flow.run(
        settings, benchmarks=benchmark, scorers=scorer or None, predictions=predictions, baseline=baseline,
        bootstrap=bootstrap, seed=seed, report_dir=str(report) if report else None, allow_partial=allow_partial,
        json_out=str(json_out) if json_out else None, plot=report is not None if plot is None else plot,
        track=tracked, plan=plan, graph_from=graph_from, assignment=assignment, attack=attack,
        record=record or tracked or stores(plan),
    )
    print_report(out.tables)
    for line in out.judgements:
        console.print(line, highlight=False, soft_wrap=True)
    for line in out.warnings:
        console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
    for name, dropped in out.dropped.items():
        console.print(f"{name}: left out " + ", ".join(f"{n} ({reason})" for reason, n in sorted(dropped.items())))
    console.print(report_line(out.report_dir, out.run_id, bool(out.plot), attack))


FILE_KINDS = ("goldstandard", "lrbench", "openreview")
"""Benchmarks read from files given as KIND=PATH: evaluating prediction files on them stores only when asked."""


def stores(plan: EvaluationPlan) -> bool:
    """Whether an untracked evaluation stores its run and rows without ``--record``: a scorer's run
    (numbers this installation computed, which ``revbench report`` compares across runs), or one on
    this project's own benchmarks (the warehouse, a release, weak labels), followed across versions.
    Prediction files alone on benchmarks read from files are a one-off look at numbers computed
    elsewhere: no warehouse is opened (loading DuckDB alone takes most of what RATE's or the gold
    standard's whole script does)."""
    def own(kind: str, path: Path) -> bool:
        # An LR-bench folder with a manifest is a release (``check_recorded_releases`` reads it as one).
        return kind not in FILE_KINDS or (kind == "lrbench" and (path / "manifest.json").is_file())

    return bool(plan.scorers) or any(own(kind, path) for kind, path in plan.benchmarks)


def print_evaluation(evaluation: Any) -> None:
    """A flow's configured evaluation (``ConfiguredEvaluation``): its tables, but the assignment's
    and the attack's as one line each (their tables are in the report)."""
    from revbench.evaluation.assignment_report import is_judged

    print_report([t for t in evaluation.tables if not is_judged(t)])
    for line in evaluation.judgements:
        console.print(line, highlight=False, soft_wrap=True)


def print_report(tables: list[Any]) -> None:
    """Evaluation report tables (``revbench.evaluation.report.ReportTable``), best values in bold; the
    lean lane prints its own through the same function (``revbench.app.lean_evaluate``)."""
    print_tables(tables, console)
