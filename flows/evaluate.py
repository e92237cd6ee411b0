"""The evaluate flow: benchmarks -> scorers -> metrics with intervals -> results table and report."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from revbench.errors import UsageError
from revbench.evaluation.assignment_report import assignment_tables, attack_tables, plot_attack, summary_lines
from revbench.evaluation.evaluate import Evaluator, cross_benchmark_average, diversity_absent, with_companions
from revbench.evaluation.exports import export_formats
from revbench.evaluation.inputs import label_circularity, load_inputs, warn_training_overlap
from revbench.evaluation.model import Benchmark, MetricValue, Scores
from revbench.evaluation.plan import EvaluationPlan, plan_evaluation
from revbench.evaluation.report import ReportTable, plot_loss, report_tables, results_frame
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.separation import Separation, separation_rows, separation_table, split_separations
from revbench.flows.artifact_markdown import evaluation_markdown
from revbench.flows.common import (Run, StageResult, current_run_id, flow_run, publish_markdown, publish_table,
                                   revbench_flow, stage)
from revbench.flows.pieces import map_pieces
from revbench.flows.results import ConfiguredEvaluation, FlowResult
from revbench.release_checks import check_recorded_releases
from revbench.schemas.tables import EVAL_RESULTS
from revbench.settings import Settings
from revbench.tasks.evaluate import dropped_by_benchmark, json_rows, stored_results
from revbench.warehouse import utcnow

log = logging.getLogger("revbench.evaluate")
SameAs = dict[tuple[str, str], tuple[str, str]]


@dataclass
class UnrecordedRun:
    """A run that leaves no trace in the warehouse (a files-only evaluation without ``--record``):
    its id and settings, no warehouse session."""

    settings: Settings
    run_id: str
    wh: None = None

    def require(self, *services: str) -> None:
        """As :meth:`Run.require`: each service probed before the work that needs it."""
        Run.require(self, *services)  # type: ignore[arg-type]  # it reads and narrows .settings alone


@dataclass
class _LocalStage:
    """What a stage of an unrecorded run works with: its settings and a result kept nowhere."""

    settings: Settings
    result: StageResult


@contextmanager
def run_stage(run: Run | UnrecordedRun, name: str) -> Iterator[Any]:
    """:func:`~revbench.flows.common.stage` for a recorded run; for an unrecorded one, a stage whose
    result is kept nowhere (no warehouse to write ``run_stages`` to)."""
    if isinstance(run, UnrecordedRun):
        yield _LocalStage(run.settings, StageResult(name))
        return
    with stage(run, name) as st:
        yield st


@contextmanager
def unrecorded_run(settings: Settings) -> Iterator[UnrecordedRun]:
    """The run of an evaluation that is not stored: a fresh id, the warehouse never opened."""
    yield UnrecordedRun(settings, current_run_id())


def score_piece(settings: Settings, index: int, benchmark: Benchmark, spec: str) -> tuple[int, str, Scores, float]:
    """One scorer over one benchmark, in whichever process runs it (a thread, or a Dask worker:
    it builds its own scorer, and embeddings and LLM answers come from the shared caches)."""
    t = time.perf_counter()
    scores = make_scorer(spec, Context(settings)).score(benchmark)
    return index, spec, scores, time.perf_counter() - t


def score_all(run: Run | UnrecordedRun, loaded: list[Benchmark], specs: list[str]) -> dict[tuple[int, str], Scores]:
    """Every scorer on every benchmark as independent pieces (on the run's task runner when
    tracked); scorers that call a service are probed first and run under its concurrency tag."""
    with run_stage(run, "score") as st:
        tag: dict[str, str | None] = {}  # the service whose concurrency limit a scorer's pieces share
        built = {spec: make_scorer(spec, Context(run.settings)) for spec in specs}
        work = [(i, spec) for i, b in enumerate(loaded) if not b.name.startswith("lrbench:") for spec in specs]
        for i, spec in work:  # a scorer without its inputs refuses before any scorer spends its time
            built[spec].check(loaded[i])
        for spec in specs:
            services = built[spec].services()
            if services:
                run.require(*services)
            tag[spec] = services[0] if services else None
        out: dict[tuple[int, str], Scores] = {}
        seconds: dict[str, float] = {}
        for service in sorted({tag[spec] for _, spec in work}, key=str):
            pieces = [(run.settings, i, loaded[i], spec) for i, spec in work if tag[spec] == service]
            for i, spec, scores, secs in map_pieces(score_piece, pieces, "score", service,
                                                    in_flight=getattr(run.settings.limits, service) if service else 0):
                out[(i, spec)] = scores
                seconds[f"{spec} on {loaded[i].name}"] = round(secs, 2)
        st.result.rows_in = len(work)
        st.result.rows_out = sum(d.height for s in out.values() for d in s.draws)
        st.result.notes = {"seconds": seconds}
    return out


def export_predictions(scores: Scores, benchmark: Benchmark, report_dir: Path) -> None:
    """Each scorer's predictions in the OpenReview ``{reviewer: {paper: score}}`` format."""
    for d in range(len(scores.draws)):
        path = predictions_path(report_dir, benchmark.name, scores.scorer, d + 1 if len(scores.draws) > 1 else None)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(scores.to_openreview(d)))


def predictions_path(report_dir: Path, benchmark: str, scorer: str, draw: int | None = None) -> Path:
    """Where :func:`export_predictions` puts a scorer's predictions on a benchmark (one file per
    draw where there are several)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in scorer)
    return report_dir / "predictions" / benchmark.replace(":", "_") / f"{safe}{f'_d{draw}' if draw else ''}.json"


@dataclass(frozen=True)
class EvaluateResult(FlowResult):
    """What an evaluation stored and wrote: its rows (as JSON rows), the report as markdown and as
    tables, where the report is, the loss plot (when drawn) and what each loader left out."""

    run_id: str
    rows: list[dict[str, Any]]
    markdown: str
    tables: list[ReportTable]
    report_dir: str
    plot: str | None
    dropped: dict[str, dict[str, int]]
    separation: list[dict[str, Any]] = field(default_factory=list)
    """Every two scorers' paired difference in loss per split (``separation.json``)."""
    warnings: list[str] = field(default_factory=list)
    """Lines a reader of the results must see (a scorer reading what made a weak benchmark's labels),
    also at the end of the report."""
    judgements: list[str] = field(default_factory=list)
    """One line for each of the assignment and the attack, when they ran (the demo prints them)."""


@dataclass(frozen=True)
class Comparison:
    """How the scorers are compared: the baseline asked for, the bootstrap resamples and their seed;
    whether each is also judged by the assignment it yields and attacked by colluders."""

    baseline: str | None
    bootstrap: int
    seed: int
    assignment: bool = False
    attack: bool = False


def assignment_metric_rows(run: Run | UnrecordedRun, loaded: list[Benchmark], scored: dict[tuple[int, str], Scores],
                           preds: list[tuple[int, Scores]], plan: EvaluationPlan, how: Comparison) -> list[MetricValue]:
    """Every scorer's assignment quality on every benchmark (:mod:`revbench.evaluation.assignment_eval`):
    over the rated candidates from the scores already made, over the pool (where there is one)
    from the scorers run once more on its pairs (a predictions file covers the rated pairs only)."""
    # Only with --assignment: a plain evaluation never builds an assignment.
    from revbench.evaluation.assignment_eval import AssignmentSetup, assignment_rows, pool_benchmark

    a = run.settings.assignment
    setup = AssignmentSetup(a.reviewers_per_paper, a.max_load, a.objective)
    rows: list[MetricValue] = []
    with run_stage(run, "assignment") as st:
        for i, bench in enumerate(loaded):
            runs = with_companions([scored[(i, spec)] for spec in plan.scorers if (i, spec) in scored])
            runs += [s for j, s in preds if j == i]
            pool = pool_benchmark(bench)
            pool_runs = None if pool is None else with_companions(
                [make_scorer(spec, Context(run.settings)).score(pool) for spec in plan.scorers if (i, spec) in scored])
            base = next((s for s in runs if s.scorer in (how.baseline, plan.baseline)), None) if how.baseline else None
            rows += assignment_rows(bench, runs, setup, base, how.bootstrap, how.seed, pool_runs)
        st.result.rows_out = len(rows)
        st.result.notes["setup"] = setup.basis
    return rows


def attack_metric_rows(run: Run | UnrecordedRun, loaded: list[Benchmark], plan: EvaluationPlan) -> list[MetricValue]:
    """Every scorer attacked by a colluding author and reviewer on every benchmark it scored
    (:mod:`revbench.evaluation.attack`)."""
    # Only with --attack: a plain evaluation attacks nothing.
    from revbench.evaluation.attack import AttackSetup, attack_rows, keyword_rewriter, llm_rewriter

    a = run.settings.attack
    setup = AttackSetup(tuple(a.start_ranks), a.pairs_per_rank, run.settings.assignment.reviewers_per_paper,
                        tuple(a.min_profiles), a.terms, a.seed)
    rows: list[MetricValue] = []
    with run_stage(run, "attack") as st:
        scorers = [make_scorer(spec, Context(run.settings)) for spec in plan.scorers]
        rewriter = keyword_rewriter
        if a.rewrite == "llm":
            from revbench.clients.llm import LlmClient

            run.require("llm")
            rewriter = llm_rewriter(LlmClient(run.settings.llm, run.settings.http, cache_dir=run.settings.cache_dir))
        for bench in loaded:
            if not bench.name.startswith("lrbench:"):
                rows += attack_rows(bench, scorers, setup, rewriter)
        st.result.rows_out = len(rows)
    return rows


def metric_rows(loaded: list[Benchmark], scored: dict[tuple[int, str], Scores], preds: list[tuple[int, Scores]],
                plan: EvaluationPlan, how: Comparison, report: Path) -> tuple[list[MetricValue], SameAs, list[Separation]]:
    """Every scorer's metrics on every benchmark (each scorer's predictions exported beside the
    report), then the cross-benchmark average; with the splits that repeat another's pairs and
    every two scorers' paired difference in loss."""
    rows: list[MetricValue] = []
    seps: list[Separation] = []
    same_as: SameAs = {}  # (benchmark, split) holding the same pairs as another
    for i, bench in enumerate(loaded):
        runs: list[Scores] = [scored[(i, spec)] for spec in plan.scorers if (i, spec) in scored]
        runs = with_companions(runs) + [s for j, s in preds if j == i]
        base = next((s for s in runs if s.scorer in (how.baseline, plan.baseline)), None) if how.baseline else None
        if how.baseline and base is None:
            log.warning("baseline %r was not evaluated on %s; no paired differences", how.baseline, bench.name)
        evaluator = Evaluator(bench, n_resamples=how.bootstrap, seed=how.seed)
        same_as |= {(bench.name, split): (bench.name, other) for split, other in evaluator.same_as.items()}
        for s in runs:
            export_predictions(s, bench, report)
        export_formats(bench, runs, report)  # RATE and TREC files, with what each left out
        # Together: every scorer is compared on the pairs all of them cover.
        rows += evaluator.evaluate_all(runs, base)
        seps += split_separations(evaluator, runs)
    rows += cross_benchmark_average(rows, set(same_as))
    return rows, same_as, seps


def metrics_stage(run: Run | UnrecordedRun, loaded: list[Benchmark], preds: list[tuple[int, Scores]], plan: EvaluationPlan,
                  how: Comparison, report: Path) -> tuple[pl.DataFrame, pl.DataFrame, SameAs, list[Separation], list[str]]:
    """Score, compute the metrics and append them to ``eval_results`` (a recorded run). Returns the results, the
    rows stored, the splits that repeat another's pairs, the scorer pairs' differences and the
    warnings that a scorer reads what a weak benchmark's labels came from (kept in the stage's notes)."""
    with run_stage(run, "metrics") as st:
        if how.attack and run.settings.attack.rewrite == "llm":
            run.require("llm")  # before any scorer spends its time, not after
        scored = score_all(run, loaded, plan.scorers)
        rows, same_as, seps = metric_rows(loaded, scored, preds, plan, how, report)
        if how.assignment:
            rows += assignment_metric_rows(run, loaded, scored, preds, plan, how)
        if how.attack:
            rows += attack_metric_rows(run, loaded, plan)
        df = results_frame(rows)
        stored = stored_results(df, loaded, run.run_id, utcnow())
        if run.wh is not None:
            run.wh.evaluate.upsert(EVAL_RESULTS, stored)
        st.result.rows_in, st.result.rows_out = len(loaded), df.height
        st.result.rejected = sum(n for b in loaded for n in b.dropped.values())
        st.result.notes["dropped"] = dropped_by_benchmark(loaded)
        st.result.notes["label_circularity"] = circular = label_circularity(plan.scorers, loaded)
    return df, stored, same_as, seps, circular


def write_report(report: Path, df: pl.DataFrame, markdown: str, rows: list[dict[str, Any]], same_as: SameAs,
                 plot: bool, json_out: str | None, separation: list[dict[str, Any]] | None = None) -> Path | None:
    """``report.md``, ``loss.png`` (with ``plot``), ``results.json`` and the scorer pairs'
    ``separation.json`` in ``report``, the rows also in ``json_out``; returns the plot's path
    when one was drawn."""
    report.mkdir(parents=True, exist_ok=True)
    (report / "report.md").write_text(markdown + "\n")
    png = plot_loss(df, report / "loss.png", same_as=same_as) if plot else None
    (report / "results.json").write_text(json.dumps(rows, indent=1))
    # Beside the result rows, not among them: their readers expect one scorer per row.
    (report / "separation.json").write_text(json.dumps(separation or [], indent=1))
    if json_out:
        Path(json_out).write_text(json.dumps(rows, indent=1))
    return png


def finish_report(run_id: str, loaded: list[Benchmark], df: pl.DataFrame, stored: pl.DataFrame, same_as: SameAs,
                  seps: list[Separation], warn: list[str], report: Path, plot: bool, json_out: str | None,
                  attack: bool) -> EvaluateResult:
    """The report's tables (the assignment's and the attack's after the metrics'), its files and
    the run's artifacts, and the flow's result."""
    rows_out = json_rows(stored)
    no_diversity = {b.name: why for b in loaded if (why := diversity_absent(b)) is not None}
    tables = (report_tables(df, same_as=same_as, no_diversity=no_diversity)
              + ([separation_table(seps, same_as)] if seps else []) + assignment_tables(df) + attack_tables(df))
    md = "\n".join([t.to_markdown() for t in tables] + [f"\n> warning: {line}" for line in warn])
    sep_rows = separation_rows(seps)
    png = write_report(report, df, md, rows_out, same_as, plot, json_out, sep_rows)
    if plot and attack:
        plot_attack(df, report / "attack.png")
    # In the UI's narrow page the scorer pairs come one table per split (report.md keeps one table).
    publish_markdown("evaluation-report", evaluation_markdown(tables, warn),
                     "Loss and accuracy per split (best in bold; 95% intervals under the values)")
    publish_table("evaluation-results", df.filter(pl.col("metric").is_in(["loss", "accuracy"])).to_dicts(),
                  "Loss and accuracy with 95% intervals")
    publish_table("evaluation-separation", sep_rows, "Scorer pairs: paired loss difference, 95% CI, tuples needed")
    return EvaluateResult(run_id, rows_out, md, tables, str(report), str(png) if png else None,
                          dropped_by_benchmark(loaded), sep_rows, warn, summary_lines(df))


@revbench_flow("evaluate")
def evaluate_flow(
    settings: Settings,
    benchmarks: list[str],
    scorers: list[str] | None = None,
    predictions: list[str] | None = None,
    baseline: str | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    report_dir: str | None = None,
    json_out: str | None = None,
    plot: bool = True,
    allow_partial: bool = False,
    plan: EvaluationPlan | None = None,
    graph_from: str | None = None,
    assignment: bool = False,
    attack: bool = False,
    record: bool = True,
) -> EvaluateResult:
    """Evaluate every scorer and prediction file on every benchmark; store, report, return rows.

    Without ``scorers``, ``trivial`` and ``tpms`` run when no predictions file is given. ``plot`` draws ``loss.png``
    (matplotlib costs most of a second: one-off commands skip it unless asked). Results are appended: each run's rows
    carry its run id, every scorer's spec and the hash of any predictions file; earlier runs' rows stay in
    ``eval_results``. ``plan`` is these arguments as :func:`plan_evaluation` checked them already (the command line
    checks them before a tracked run starts Prefect); without it they are checked here, once either way. ``graph_from``:
    see ``with_graphs``. ``assignment``: each scorer also judged by the assignment it yields (settings ``assignment``);
    ``attack``: each also attacked by a colluding author and reviewer (settings ``attack``). Without ``record`` nothing
    is stored, the warehouse not even opened (the command line's files-only evaluation without ``--record``)."""
    plan = plan or plan_evaluation(settings, benchmarks, scorers, predictions or [], baseline, graph_from)
    if bootstrap < 0:
        raise UsageError(f"--bootstrap {bootstrap}: expected 0 or more resamples")
    check_recorded_releases(settings, plan.benchmarks)
    loaded, preds = load_inputs(plan, allow_partial, settings.ratings.profile_max_papers,
                                settings.warehouse.lock_wait_seconds)
    if plan.graph_from is not None:
        # Only when a graph is asked of S2: graph_s2 brings the client's retry policy (tenacity).
        from revbench.evaluation.importers.graph_s2 import with_graphs

        loaded = with_graphs(settings, plan.benchmarks, loaded, plan.graph_from)
    warn_training_overlap(plan.scorers, loaded)
    params = dict(benchmarks=benchmarks, scorers=plan.scorers, predictions=predictions or [], baseline=baseline,
                  bootstrap=bootstrap, seed=seed, allow_partial=allow_partial,
                  # Only when asked: a run without it records the parameters runs recorded before it.
                  **({"graph_from": plan.graph_from} if plan.graph_from else {}),
                  **({"assignment": settings.assignment.model_dump()} if assignment else {}),
                  **({"attack": settings.attack.model_dump()} if attack else {}))
    report = Path(report_dir) if report_dir else settings.data_dir / "reports" / "evaluate"
    with flow_run(settings, "evaluate", params) if record else unrecorded_run(settings) as run:
        how = Comparison(baseline, bootstrap, seed, assignment, attack)
        df, stored, same_as, seps, warn = metrics_stage(run, loaded, preds, plan, how, report)
        return finish_report(run.run_id, loaded, df, stored, same_as, seps, warn, report, plot, json_out, attack)


def evaluate_configured(settings: Settings, benchmark: str, report_dir: Path) -> ConfiguredEvaluation:
    """``REVBENCH_RATINGS__EVALUATE_SCORERS`` on one benchmark (``KIND=PATH``), as the ratings and
    release flows end: a subflow when tracked, in-process otherwise."""
    from revbench.flows.pieces import prefect_active

    judged = settings.ratings.evaluate_judged
    ev = evaluate_flow.run(settings, benchmarks=[benchmark], scorers=list(settings.ratings.evaluate_scorers),
                           bootstrap=settings.ratings.bootstrap, report_dir=str(report_dir), track=prefect_active(),
                           assignment=judged, attack=judged)
    return ConfiguredEvaluation(ev.run_id, ev.markdown, ev.tables, ev.report_dir, ev.judgements)
