"""What an evaluation will run, checked before any work: benchmarks, scorers, prediction files.

Every name a result row can carry must be unambiguous: a scorer and a predictions file with the
same name, two scorers with the same label, or two prediction files of one name on one
benchmark are errors here, before anything is loaded or scored; so are names that differ but
become the same export file name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from revbench.errors import UsageError
from revbench.evaluation.exports import file_name
from revbench.evaluation.importers.registry import KIND_MODULES
from revbench.evaluation.model import DIFFERENCE, difference_name
from revbench.evaluation.scorers.base import Context, make_scorer
from revbench.settings import Settings

BENCHMARK_KINDS = tuple(KIND_MODULES)
DEFAULT_SCORERS = ("trivial", "tpms")
NOTHING_TO_EVALUATE = "give at least one --benchmark or --predictions"


class PlanError(UsageError):
    """An evaluation request that cannot run as given; the message names the flag and value."""


@dataclass(frozen=True)
class PredictionsFile:
    """``-p NAME[@BENCHMARK]=PATH``."""

    name: str
    target: str | None
    path: Path


@dataclass(frozen=True)
class EvaluationPlan:
    """A validated evaluation request."""

    benchmarks: list[tuple[str, Path]]
    scorers: list[str]
    predictions: list[PredictionsFile]
    baseline: str | None = None
    """The label the ``--baseline`` scorer's results carry (a scorer's label or a file's name)."""
    graph_from: str | None = None
    """Where the benchmarks without a graph of their own get one (``s2``: the gold standard's
    Semantic Scholar ids through the S2 client); None: nowhere."""




def parse_named(item: str, flag: str) -> tuple[str, Path]:
    """``NAME=PATH``; an error names the flag and the item."""
    name, eq, path = item.partition("=")
    if not eq or not name.strip() or not path.strip():
        raise PlanError(f"{flag} {item!r} is not NAME=PATH")
    return name.strip(), Path(path.strip()).expanduser()


def check_scorers(settings: Settings, specs: list[str], flag: str = "--scorer") -> dict[str, str]:
    """Each scorer spec built once (unknown names and bad parameters are errors naming ``flag``),
    no two of them the same scorer; returns label -> spec."""
    context = Context(settings)
    labels: dict[str, str] = {}
    for spec in specs:
        try:
            label = make_scorer(spec, context).label
        except ValueError as exc:
            raise PlanError(f"{flag} {spec!r}: {exc}") from exc
        if label in labels:
            raise PlanError(f"{flag} {spec!r} and {flag} {labels[label]!r} are the same scorer ({label})")
        labels[label] = spec
    return labels


def trained_scorers(settings: Settings) -> list[str]:
    """``rate:model=PATH`` of every adapter ``revbench train`` left under ``DATA_DIR/models/``."""
    from revbench.ml.models import is_adapter

    return [f"rate:model={p}" for p in sorted((settings.data_dir / "models").glob("*/adapter")) if is_adapter(str(p))]


def expand_trained(settings: Settings, specs: list[str]) -> list[str]:
    """The scorer ``trained`` stands for every trained adapter (see :func:`trained_scorers`)."""
    if "trained" not in specs:
        return specs
    found = trained_scorers(settings)
    if not found:
        raise PlanError(f"--scorer trained: no trained model under {settings.data_dir / 'models'} (run `revbench train`)")
    out: list[str] = []
    for s in specs:
        out += found if s == "trained" else [s]
    return out


def check_baseline(settings: Settings, baseline: str | None, labels: dict[str, str],
                   preds: list[PredictionsFile]) -> str | None:
    """The label of the ``--baseline`` scorer: a scorer of the run (by label or by a spec that
    builds the same scorer, e.g. one written with its defaults) or a predictions file's name. A
    name that is neither would give results with no paired differences, so it is refused."""
    if baseline is None:
        return None
    names = {p.name for p in preds}
    if baseline in labels or baseline in names:
        return baseline
    try:
        label = make_scorer(baseline, Context(settings)).label
    except ValueError:
        label = None
    if label in labels:
        return label
    known = ", ".join([*labels, *sorted(names)]) or "none"
    raise PlanError(f"--baseline {baseline!r} is not a scorer of this run (its scorers and prediction files: {known}); "
                    "name one of them, or add it with --scorer")


def check_difference_names(labels: dict[str, str], preds: list[PredictionsFile], baseline: str | None) -> None:
    """Refuse a scorer whose own label is the paired-difference name of another scorer (or file) of
    the run to ``baseline``: ``eval_results``' key has no ``baseline``, so one row would replace the other."""
    if baseline is None:
        return
    for other in [*labels, *(p.name for p in preds)]:
        paired = difference_name(other, baseline)
        if other != baseline and paired in labels:
            raise PlanError(f"--scorer {labels[paired]!r} is labelled {paired!r}, the name of the paired difference of "
                            f"{other!r} to --baseline {baseline!r}: both rows would take one key of the results; "
                            "drop one of the two scorers or give another --baseline")


def check_benchmarks(settings: Settings, benchmarks: list[str]) -> list[tuple[str, Path]]:
    """Each ``--benchmark KIND=PATH`` (or ``warehouse``: this installation's own warehouse) as
    ``(kind, path)``: a kind of :data:`BENCHMARK_KINDS` and a path that exists, else an error
    naming the item."""
    benches = []
    for item in benchmarks:
        # The warehouse benchmark defaults to this installation's own warehouse.
        kind, path = ("warehouse", settings.warehouse_path) if item.strip() == "warehouse" else parse_named(item, "--benchmark")
        if kind not in BENCHMARK_KINDS:
            raise PlanError(f"--benchmark {item!r}: unknown kind {kind!r}; expected one of {', '.join(BENCHMARK_KINDS)}")
        if not path.exists():
            raise PlanError(f"--benchmark {item!r}: {path} does not exist")
        benches.append((kind, path))
    return benches


def plan_benchmarks(settings: Settings, benchmarks: list[str]) -> EvaluationPlan:
    """A plan that loads ``benchmarks`` and scores nothing: no scorer, no predictions file, no
    baseline, no graph source (the embed flow's, which embeds the texts an evaluation's embedding
    scorers read before any of them runs). The benchmarks are checked as :func:`plan_evaluation`
    checks them, and at least one is needed."""
    benches = check_benchmarks(settings, benchmarks)
    if not benches:
        raise PlanError(NOTHING_TO_EVALUATE)
    return EvaluationPlan(benches, [], [])


def plan_evaluation(settings: Settings, benchmarks: list[str], scorers: list[str] | None,
                    predictions: list[str], baseline: str | None = None, graph_from: str | None = None) -> EvaluationPlan:
    """Parse and check an evaluation request. Without ``scorers`` (None), the default scorers
    run only when no predictions file was given either: with only ``-p``, nothing else runs.
    ``baseline`` must name a scorer or predictions file of the run; ``graph_from`` a graph source
    some benchmark of the run takes."""
    benches = check_benchmarks(settings, benchmarks)
    preds = []
    for item in predictions:
        spec, path = parse_named(item, "--predictions")
        name, _, target = spec.partition("@")
        if not name:
            raise PlanError(f"--predictions {item!r} has no name")
        if DIFFERENCE in name:
            # The rows are told apart by their baseline, not their names; a reader of the tables is not.
            raise PlanError(f"--predictions {item!r}: a name with {DIFFERENCE!r} in it looks like a paired difference "
                            f"of two scorers in the report's tables; name it otherwise, e.g. "
                            f"-p {name.replace(DIFFERENCE, '-')}={path}")
        if not path.exists():
            raise PlanError(f"--predictions {item!r}: {path} does not exist")
        if target and target not in {k for k, _ in benches}:
            raise PlanError(f"--predictions {item!r}: no --benchmark named {target!r}")
        preds.append(PredictionsFile(name, target or None, path))
    if not benches and not preds:
        raise PlanError(NOTHING_TO_EVALUATE)
    specs = list(scorers) if scorers is not None else ([] if preds else list(DEFAULT_SCORERS))
    specs = expand_trained(settings, specs)
    labels = check_scorers(settings, specs)
    seen: dict[tuple[str, str | None], Path] = {}
    for p in preds:
        if p.name in labels:
            raise PlanError(
                f"--predictions {p.name}={p.path} has the name of the scorer --scorer {labels[p.name]!r}; "
                f"rename the file's results, e.g. -p {p.name}_file={p.path}"
            )
        key = (p.name, p.target)
        if key in seen:
            raise PlanError(f"--predictions {p.name!r} is given twice ({seen[key]} and {p.path}); give each a name of its own")
        seen[key] = p.path
    check_export_names(labels, preds)
    if graph_from is not None:
        # Loaded only when a graph is asked for: graph_s2 brings the S2 client's retry policy
        # (tenacity, about 10 ms of a one-off evaluate that never reads a graph).
        from revbench.evaluation.importers.graph_s2 import check_graph_from

        check_graph_from(graph_from, [k for k, _ in benches])
    base = check_baseline(settings, baseline, labels, preds)
    check_difference_names(labels, preds, base)
    return EvaluationPlan(benches, specs, preds, base, graph_from)


def _given(p: PredictionsFile, name: str | None = None) -> str:
    return f"{name or p.name}{'@' + p.target if p.target else ''}={p.path}"


def export_key(name: str) -> str:
    """The part of every export path a scorer's or predictions file's name becomes (see
    :func:`revbench.evaluation.exports.file_name`), case folded: names differing only in case
    overwrite each other on macOS and Windows."""
    return file_name(name).casefold()


def _shared_file_name(a: str, b: str) -> str | None:
    """The export file name two runs' names would both write, if any: the same file name, or
    one that another's per-draw files take (``tpms`` on several draws writes ``tpms_d1``)."""
    ka, kb = export_key(a), export_key(b)
    if ka == kb or re.fullmatch(re.escape(kb) + r"_d\d+", ka):
        return file_name(a)
    return file_name(b) if re.fullmatch(re.escape(ka) + r"_d\d+", kb) else None


def check_export_names(labels: dict[str, str], preds: list[PredictionsFile]) -> None:
    """No two runs of one benchmark write the same export files: names that differ but become
    the same file name (``bm25:pooling=mean`` and ``bm25_pooling_mean``) would overwrite each
    other's predictions, RATE and TREC files while ``exports.json`` lists both."""
    seen: list[str] = []
    for label, spec in labels.items():
        for other in seen:
            if shared := _shared_file_name(label, other):
                raise PlanError(f"--scorer {labels[other]!r} and --scorer {spec!r} would both write export files "
                                f"named {shared!r}; evaluate them in separate runs, each with its own --report folder")
        seen.append(label)
    files: list[PredictionsFile] = []
    for p in preds:
        for label in seen:
            if shared := _shared_file_name(p.name, label):
                raise PlanError(f"--predictions {_given(p)} and --scorer {labels[label]!r} would both write export "
                                f"files named {shared!r}; rename the file's results, e.g. -p {_given(p, p.name + '_file')}")
        # A file without @BENCHMARK scores the run's only benchmark: it may meet any other file there.
        for q in files:
            shared = _shared_file_name(p.name, q.name)
            if shared and (q.target == p.target or q.target is None or p.target is None):
                raise PlanError(f"--predictions {_given(q)} and --predictions {_given(p)} would both write export "
                                f"files named {shared!r}; give each a name of its own")
        files.append(p)
