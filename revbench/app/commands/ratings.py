"""The ratings' commands: ``ratings`` (survey answers into ratings: de-duplicated, flagged, decided,
built into tuples and statistics) and ``labels`` (a weak benchmark from the graph, with its agreement
with the ratings), with what each prints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

from revbench.app.cli_common import Track, setup
from revbench.app.commands.evaluate import print_evaluation
from revbench.app.console import console, print_markdown
from revbench.app.entry import build_settings, check_output_dir, resolve_track
from revbench.errors import UsageError

if TYPE_CHECKING:  # the flow loads only when the command runs it
    from revbench.flows.ratings import RatingsResult


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
    from revbench.flows.ratings import ratings_flow

    out = ratings_flow.run(settings, decide=decide, curator=curator or (os.environ.get("USER", "") if decide else ""),
                           evaluate=evaluate, track=resolve_track(track, long_flow=True))
    print_ratings(out)


def labels(
    from_: Annotated[str, typer.Option("--from", metavar="SOURCE", help="authorship (a paper's own authors) or citations (authors of the corpus papers it cites)", show_default=False)],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Folder the weak benchmark goes to (new, empty, or an earlier weak benchmark)", show_default=False)],
    experts: Annotated[int, typer.Option("--experts", min=0, help="Keep only reviewers with more than N corpus papers (exHarmony's experts)")] = 15,
    negatives: Annotated[int, typer.Option("--negatives", min=0, help="Sampled non-positive candidates per submission")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the sampled candidates")] = 0,
    min_positives: Annotated[int, typer.Option("--min-positives", min=1, help="Weak positives among the rated pairs below which the agreement with the survey is not computed (too few to measure)")] = 30,
) -> None:
    """Write a weak benchmark from the graph (exHarmony) that `revbench evaluate -b weak=DIR` reads, with its agreement with the survey's ratings."""
    from revbench.tasks.weak_labels import SOURCES

    if from_ not in SOURCES:
        raise UsageError(f"--from {from_!r}: expected one of {', '.join(SOURCES)}")
    check_output_dir(out, "--out")
    settings = build_settings()
    from revbench.flows.labels import write_labels

    print_labels(write_labels(settings, from_, out, experts=experts, negatives=negatives, seed=seed,
                              min_positives=min_positives))


def print_ratings(out: RatingsResult, quality: dict[str, Any] | None = None) -> None:
    """What one ratings run did: events in, ratings out by status, flags and their decisions,
    tuples, statistics, and the evaluation when it ran; with ``quality``, the flags judged
    against a SYNTHETIC truth."""
    if out.survey_store:
        line = out.survey_store
        console.print(line[0].upper() + line[1:], markup=False, highlight=False, soft_wrap=True)  # one greppable line
    console.print(
        f"Ratings: {out.events_pulled} new survey events ({out.events} in all: {out.duplicates} duplicates "
        f"superseded, {out.skips} skips, {out.unknown_invitation + out.unknown_paper + out.invalid_rating} rejected) -> "
        f"[bold]{out.ratings}[/] ratings: {out.kept} kept, {out.dropped} dropped, {out.pending} pending; "
        f"{out.paper_centric_tuples} paper-centric and {out.reviewer_centric_tuples} reviewer-centric tuples.")
    if out.flag_list:
        t = RichTable(title=f"Quality flags ({out.flags_asked} asked this run)", title_justify="left")
        for col in ("flag", "ratings", "evidence", "decision"):
            t.add_column(col)
        for f in out.flag_list:
            ev = ", ".join(f"{k}={v}" for k, v in f["evidence"].items() if k != "ratings")
            t.add_row(f["flag_id"], str(len(f["paper_ids"])), ev, f"{f['decision'] or 'undecided'} ({f['decided_by'] or '-'})")
        console.print(t)
    if quality:
        console.print(
            f"Flags against the [yellow]SYNTHETIC[/] truth: {quality['flagged']} respondents flagged, "
            f"{quality['planted']} planted low-effort respondents answered; precision {quality['precision']:.2f}, "
            f"recall {quality['recall']:.2f}")
    print_markdown(out.statistics)
    if out.figure:
        console.print(f"Figure: [cyan]{out.figure}[/]")
    if out.evaluation:
        console.print("Evaluation on the warehouse benchmark:")
        print_evaluation(out.evaluation)
        console.print(f"Evaluation report: [cyan]{out.evaluation.report_dir}[/]")


def print_labels(r: Any) -> None:
    """What ``revbench labels`` wrote (a ``flows.labels.LabelsResult``), its agreement with the survey
    and how to evaluate it."""
    console.print(f"Weak benchmark {r.version} ({r.source}) in [cyan]{r.out}[/]: {r.submissions} submissions, "
                  f"{r.reviewers} reviewers, {r.positives} weak positives among {r.candidates} candidates", soft_wrap=True)
    console.print(r.agreement.line(), highlight=False, soft_wrap=True)
    console.print(f"Evaluate it: revbench evaluate -b weak={r.out}", highlight=False, soft_wrap=True)
