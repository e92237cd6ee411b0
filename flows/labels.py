"""The labels flow: weak labels from the graph. Read the warehouse's query papers, authorships,
citations and kept ratings, build the weak benchmark and its agreement with the survey, read the
graph around its papers and reviewers (where the warehouse has one), and write the folder that
``revbench evaluate -b weak=DIR`` reads.

The warehouse is opened read-only and nothing is written to it, so, like the backup flow, it
records no run there: :func:`write_labels` does the work in-process, and :func:`labels_flow` runs
it tracked, publishing what it wrote as artifacts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from revbench.errors import InputError
from revbench.evaluation.importers.weak import GRAPH_FRAMES, write_weak
from revbench.flows.common import publish_markdown, publish_table, revbench_flow
from revbench.flows.results import FlowResult
from revbench.settings import Settings
from revbench.tasks.weak_labels import (
    MIN_AGREEMENT_POSITIVES, Agreement, agreement, label_all_pairs, no_positive_hint, weak_benchmark,
)


@dataclass(frozen=True)
class LabelsResult(FlowResult):
    """What ``revbench labels`` wrote: the folder, its version, sizes, and the agreement."""

    out: str
    version: str
    source: str
    submissions: int
    reviewers: int
    positives: int
    candidates: int
    agreement: Agreement


def write_labels(settings: Settings, source: str, out: Path, experts: int = 15, negatives: int = 20,
                 seed: int = 0, min_positives: int = MIN_AGREEMENT_POSITIVES) -> LabelsResult:
    """Build the ``source`` (authorship or citations) weak benchmark of this warehouse into ``out``;
    its agreement with the survey is computed only on ``min_positives`` weak positives or more."""
    from revbench.warehouse import Warehouse

    path = settings.warehouse_path
    if not path.is_file():
        raise InputError(f"no warehouse at {path}: run `revbench ingest` (and `revbench graph` for citations) first")
    with Warehouse.open(path, read_only=True) as wh:
        frames = wh.labels.weak_label_frames()
        if not frames["queries"].height:
            raise InputError(f"the warehouse at {path} holds no query papers: sample some with `revbench pools` first")
        built = weak_benchmark(source, frames, experts, negatives, seed)
        if not built.submissions.height:
            raise InputError(f"no query paper of the warehouse at {path} has a weak positive from {source}: "
                             f"{no_positive_hint(source, frames, experts, built.pool)}")
        graph: dict[str, pl.DataFrame] = {}  # as the warehouse benchmark: a warehouse without a graph gives a benchmark without one
        if wh.graph.has_graph():
            papers = sorted(set(built.submissions["paper_id"]) | set(built.profiles["paper_id"]))
            got = wh.ratings.benchmark_graph(papers, sorted(set(built.profiles["reviewer_id"])))
            graph = {name: got[frame] for name, frame in GRAPH_FRAMES.items()}
    agreed = agreement(label_all_pairs(source, frames, experts), min_positives)
    meta = {"source": source, "experts": experts, "negatives": negatives, "seed": seed,
            "agreement": {"n_pairs": agreed.n_pairs, "n_positive": agreed.n_positive,
                          "kendall_tau": agreed.kendall_tau, "auc": agreed.auc,
                          "min_positives": agreed.min_positives}}
    manifest = write_weak(out, {"submissions": built.submissions, "profiles": built.profiles, "labels": built.labels,
                                **graph}, meta)
    pos = int(built.labels["label"].sum())
    return LabelsResult(str(out), manifest["version"], source, built.submissions.height, built.pool, pos,
                        built.labels.height, agreed)


def summary_rows(result: LabelsResult) -> list[dict[str, str | int | float | None]]:
    """The labels-summary artifact's rows: what the folder holds and its agreement with the survey."""
    a = result.agreement
    return [{"what": k, "value": v} for k, v in {
        "source": result.source, "version": result.version, "submissions": result.submissions,
        "reviewers": result.reviewers, "weak positives": result.positives, "candidates": result.candidates,
        "rated pairs": a.n_pairs, "rated weak positives": a.n_positive, "Kendall tau": a.kendall_tau, "AUC": a.auc,
    }.items()]


@revbench_flow("labels")
def labels_flow(settings: Settings, source: str, out: Path, experts: int = 15, negatives: int = 20, seed: int = 0,
                min_positives: int = MIN_AGREEMENT_POSITIVES) -> LabelsResult:
    """Build the ``source`` (authorship or citations) weak benchmark of this warehouse into ``out``
    (:func:`write_labels`) and publish what it holds, its agreement with the survey and how to
    evaluate it."""
    result = write_labels(settings, source, out, experts, negatives, seed, min_positives)
    publish_table("labels-summary", summary_rows(result), f"Weak benchmark {result.version} ({result.source}) in {result.out}")
    publish_markdown("labels-agreement", f"{result.agreement.line()}\n\nEvaluate it: `revbench evaluate -b weak={result.out}`",
                     "The weak labels' agreement with the survey")
    return result
