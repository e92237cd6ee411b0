"""What an evaluation reads, loaded and checked before any work: the benchmarks and prediction
files of a checked :class:`~revbench.evaluation.plan.EvaluationPlan`, and the warning that a
trained adapter is evaluated on papers it saw in training. The evaluate and embed flows call it."""

from __future__ import annotations

import logging

import polars as pl

from revbench.errors import InputError, UsageError
from revbench.evaluation.exports import file_name
from revbench.evaluation.importers import coverage, is_lr_flat, load_benchmark, load_lr_flat, load_predictions
from revbench.evaluation.importers.warehouse import load_warehouse
from revbench.evaluation.model import Benchmark, Scores
from revbench.evaluation.plan import EvaluationPlan, export_key
from revbench.files import file_sha256

log = logging.getLogger("revbench.evaluate")  # the evaluate flow's logger, as before the move


def load_inputs(plan: EvaluationPlan, allow_partial: bool, profile_max_papers: int = 20,
                lock_wait: float = 0.0) -> tuple[list[Benchmark], list[tuple[int, Scores]]]:
    """Load and check every benchmark and prediction file before any work, so bad input writes
    nothing. A file that leaves pairs of its benchmark unscored is an error unless
    ``allow_partial`` (then every row reports its coverage). A warehouse benchmark waits up to
    ``lock_wait`` seconds for a run that holds its file."""
    loaded = [load_warehouse(path, profile_max_papers, lock_wait) if kind == "warehouse" else load_benchmark(kind, path)
              for kind, path in plan.benchmarks]
    names = [b.name for b in loaded]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        # Reports, exports and scorer pairs are kept by benchmark name: a second one would overwrite the first.
        raise UsageError(f"-b: {len(loaded)} benchmarks but {', '.join(twice)} named twice ("
                         + ", ".join(f"{k}={p}" for (k, p), b in zip(plan.benchmarks, loaded, strict=True) if b.name in twice)
                         + "); evaluate them in separate runs, each with its own --report folder")
    preds: list[tuple[int, Scores]] = []
    for k, p in enumerate(plan.predictions):
        if is_lr_flat(p.path):
            # LR-bench's flat predictions carry their labels: a benchmark of their own.
            name = f"lrbench:{p.path.stem}"
            same = next((q for q in plan.predictions[:k]
                         if export_key(q.path.stem) == export_key(p.path.stem) and is_lr_flat(q.path)), None)
            if same is not None:
                # Both would be the benchmark lrbench:<stem>: one's exports would overwrite the other's.
                raise UsageError(f"--predictions {same.name}={same.path} and --predictions {p.name}={p.path} are both "
                                 f"LR-bench flat files named {p.path.name} and would write the same export files "
                                 f"(trec/{file_name(name)}/); copy one under another name")
            split, scores = load_lr_flat(p.path)
            loaded.append(Benchmark(name, p.path.stem, pl.DataFrame(), [pl.DataFrame()], [split]))
            preds.append((len(loaded) - 1, Scores(p.name, [scores], f"predictions:{p.path.name}", file_sha256(p.path))))
            continue
        candidates = [i for i, b in enumerate(loaded) if not p.target or b.name == p.target]
        if len(candidates) != 1:
            raise InputError(f"--predictions {p.name}={p.path}: say which benchmark it scores, as NAME@BENCHMARK=PATH")
        bench = loaded[candidates[0]]
        scores = load_predictions(p.path, p.name, bench)
        covered, needed, example = coverage(bench, scores)
        if covered < needed and not allow_partial:
            raise InputError(
                f"--predictions {p.name}={p.path} scores {covered} of the {needed} reviewer-paper pairs {bench.name} needs "
                f"(missing e.g. reviewer {example[0]!r}, paper {example[1]!r}); pass --allow-partial to evaluate on the "
                "covered pairs, with the coverage in every result")
        preds.append((candidates[0], scores))
    return loaded, preds


def warn_training_overlap(specs: list[str], loaded: list[Benchmark]) -> None:
    """A trained adapter evaluated on papers it saw in training (as weak-supervision text, never
    with a label) gets optimistic numbers there: say so, with the count."""
    from revbench.evaluation.scorers.base import parse_spec

    models = [(spec, model) for spec in specs if (model := parse_spec(spec)[1].get("model", ""))]
    if not models:
        return  # no scorer names a model (predictions files, tpms): the ML modules stay unloaded
    from revbench.ml.models import is_adapter
    from revbench.ml.training import training_ids

    for spec, model in models:
        if not is_adapter(model):
            continue
        seen = training_ids(model)
        for b in loaded:
            overlap = seen & set(b.submissions["paper_id"].to_list()) if b.submissions.height else set()
            if overlap:
                log.warning("%s was trained on text of %d of the %d submissions of %s (weak supervision, no ratings): "
                            "its results there are optimistic", spec, len(overlap), b.submissions.height, b.name)


LABEL_READERS = {"citations": ("citation", "cof")}
"""The scorers that read what each weak-label rule read (``cof`` holds the ``citation`` factor).
``authorship`` has none: the graph holds no author of a submission (the held-out paper's own
authorship is in no graph frame), though authors citing their own work favour ``citation`` there."""


def label_circularity(specs: list[str], loaded: list[Benchmark]) -> list[str]:
    """One warning line per benchmark whose labels came from a rule (``Benchmark.labels_from``)
    that a scorer in ``specs`` reads too: its numbers there measure the rule, not expertise.
    Not refused: how well a scorer recovers the rule is still worth seeing."""
    from revbench.evaluation.scorers.base import parse_spec

    out = []
    for b in loaded:
        readers = [spec for spec in specs if parse_spec(spec)[0] in LABEL_READERS.get(b.labels_from or "", ())]
        if readers:
            out.append(f"{b.name}: its labels came from {b.labels_from} and {', '.join(readers)} "
                       f"{'reads' if len(readers) == 1 else 'read'} them too, so {'its' if len(readers) == 1 else 'their'} "
                       "results there measure the label rule, not expertise")
    return out
