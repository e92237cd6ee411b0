"""The evaluation's command: ``evaluate`` (similarity scorers and outside predictions on benchmarks),
with the report tables it prints (``ratings`` and ``release`` print them too, when they evaluate)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import Track, setup
from revbench.app.console import console
from revbench.app.entry import check_output_dir, check_output_file, resolve_track


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
        assignment=assignment, attack=attack,
    )
    print_report(out.tables)
    for line in out.judgements:
        console.print(line, highlight=False, soft_wrap=True)
    for line in out.warnings:
        console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
    for name, dropped in out.dropped.items():
        console.print(f"{name}: left out " + ", ".join(f"{n} ({reason})" for reason, n in sorted(dropped.items())))
    console.print(f"Report: [cyan]{out.report_dir}[/] (report.md, results.json, separation.json, predictions/, trec/, exports.json"
                  + (", loss.png" if out.plot else "") + (", attack.png" if out.plot and attack else "") + f"); run {out.run_id}")


def print_evaluation(evaluation: Any) -> None:
    """A flow's configured evaluation (``ConfiguredEvaluation``): its tables, but the assignment's
    and the attack's as one line each (their tables are in the report)."""
    from revbench.evaluation.assignment_report import is_judged

    print_report([t for t in evaluation.tables if not is_judged(t)])
    for line in evaluation.judgements:
        console.print(line, highlight=False, soft_wrap=True)


def print_report(tables: list[Any]) -> None:
    """Evaluation report tables (``revbench.evaluation.report.ReportTable``), best values in bold."""
    import re

    for t in tables:
        if not t.header:
            # A line in place of a table: what is absent and why.
            console.print(t.title.lstrip("# "), markup=False)
            continue
        table = RichTable(title=t.title.lstrip("# "), title_justify="left")
        for i, h in enumerate(t.header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in t.rows:
            table.add_row(*[re.sub(r"\*\*(.+?)\*\*", r"[bold]\1[/]", c.replace("[", "\\[")) for c in row])
        console.print(table)
        for note in getattr(t, "notes", []):
            console.print(f"  {note}", markup=False, highlight=False)
