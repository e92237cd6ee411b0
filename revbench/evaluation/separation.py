"""Can a benchmark tell two scorers apart, and if not, how many more rated tuples would it take?

Every two scorers evaluated on one split are compared on the pairs the split's main table rests
on (those every scorer covers), with the bootstrap replicates that table used: the same seed,
the same cluster counts ``c`` (see :mod:`revbench.evaluation.metrics.bootstrap`), so for A and B::

    d       = loss_A - loss_B                        (A is the scorer with the lower loss: d <= 0)
    d*_r    = loss*_A,r - loss*_B,r                  (replicate r: both on the same resample)
    CI      = the 2.5th and 97.5th percentiles of d*
    order   = share of replicates with d*_r of the sign of d (A still strictly better)
    h       = the interval's half on zero's side: d - lo when d > 0, hi - d when d < 0

The pair is *separated* when the interval excludes zero. A cluster bootstrap's interval narrows
as ``1/sqrt(K)`` for K clusters (anchors, reviewers), and at the benchmark's current mix (the
same tuples per cluster, the same categories and rating levels) the n tuples grow with K, so at
n' tuples ``h' = h sqrt(n / n')``. The interval excludes zero once ``h' < |d|``::

    n_needed = n (h / |d|)^2          more = max(1, ceil(n_needed) - n)

This assumes the observed difference is the true one and stays so as the benchmark grows: it is
the size at which the *expected* interval just clears zero, so a round of that size separates the
pair about half the time; for about 80% of the time take ``((1.96 + 0.84) / 1.96)^2``, about
2.04 times ``n_needed``. With ``d = 0`` no size helps: "not separable by size alone". On a
pointwise split (the gold standard) a "tuple" is an ordered pair of papers rated by one reviewer.
Read from a small benchmark, ``d`` is itself noisy and the size goes as ``1/d^2``: for close pairs
the estimate is then optimistic (``benchmarks/power_bench.py`` measures by how much).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from revbench.errors import UsageError
from revbench.evaluation.evaluate import Evaluator, _cluster_matrix, _point
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.model import Scores
from revbench.evaluation.report import ReportTable

NOT_SEPARABLE = "not separable by size alone"
POWER_80 = ((1.96 + 0.84) / 1.96) ** 2
"""How many times ``n_needed`` separates a pair about 80% of the time rather than half of it."""


@dataclass(frozen=True)
class PairDifference:
    """The paired difference in loss of two scorers on the same tuples (see the module)."""

    diff: float
    ci_low: float | None
    ci_high: float | None
    order_holds: float | None
    """Share of the replicates in which the better scorer stays strictly better (None when d = 0)."""
    n: int
    separated: bool
    n_needed: float | None
    """Tuples at which the interval would clear zero (None when separated or d = 0)."""
    more_needed: int | None
    """``ceil(n_needed) - n`` (None when separated or d = 0)."""


@dataclass(frozen=True)
class Separation(PairDifference):
    """A :class:`PairDifference` of two named scorers on one benchmark split."""

    benchmark: str = ""
    split: str = ""
    scorer_a: str = ""
    scorer_b: str = ""
    n_clusters: int = 0


def tuples_needed(n: int, diff: float, half_width: float) -> float | None:
    """``n (half_width / |diff|)^2``: the tuples at which an interval of ``half_width`` on ``n``
    tuples, shrinking as ``1/sqrt(n)``, would just exclude zero, assuming ``diff`` is the true
    difference. None when ``diff`` is 0 (not separable by size alone)."""
    if diff == 0:
        return None
    return n * (half_width / abs(diff)) ** 2


def paired_difference(value_a: float, value_b: float, reps_a: np.ndarray, reps_b: np.ndarray, n: int,
                      level: float = 0.95) -> PairDifference:
    """``value_a - value_b`` with its percentile interval over the paired replicates (same
    resamples for both), the share in which its sign holds and, when the interval holds zero,
    the tuples needed to separate them (see the module)."""
    d = value_a - value_b
    rd = np.asarray(reps_a, float) - np.asarray(reps_b, float)
    lo, hi = bootstrap.interval(rd, level)
    defined = rd[~np.isnan(rd)]
    order = float(np.mean(np.sign(defined) == np.sign(d))) if d != 0 and defined.size else None
    if lo is None or hi is None:
        return PairDifference(d, None, None, order, n, False, None, None)
    separated = lo > 0 or hi < 0
    if separated or d == 0:
        return PairDifference(d, lo, hi, order, n, separated, None, None)
    needed = tuples_needed(n, d, d - lo if d > 0 else hi - d)
    # Not yet separated: at least one more tuple, even where the interval just touches zero.
    more = None if needed is None else max(1, math.ceil(needed) - n)
    return PairDifference(d, lo, hi, order, n, False, needed, more)


def split_separations(evaluator: Evaluator, runs: list[Scores]) -> list[Separation]:
    """Every two scorers of ``runs`` on every split of the evaluator's benchmark (a split that
    repeats another's pairs once), on the pairs every scorer covers and with the replicates of
    :meth:`Evaluator.evaluate_all`: the differences of its table's loss values, with intervals."""
    out: list[Separation] = []
    if not evaluator.n_resamples:
        return out
    for sd in evaluator._splits:
        if sd.split.name in evaluator.same_as or not sd.pairs.height:
            continue
        diffs = {id(s): [evaluator._diffs(sd, d) for d in evaluator._draws(s, sd.unit)] for s in runs}
        own = {i: [~np.isnan(x) for x in ds] for i, ds in diffs.items()}
        present = [s for s in runs if any(m.any() for m in own[id(s)])]
        if len(present) < 2:
            continue
        common = [np.logical_and.reduce([own[id(s)][d] for s in present if own[id(s)][d].any()]
                                        or [np.zeros(sd.pairs.height, bool)])
                  for d in range(len(evaluator.benchmark.draws) or 1)]
        k = len(sd.labels)
        counts = bootstrap.replicate_counts(k, evaluator.n_resamples, evaluator.seed)
        loss: dict[str, tuple[float, np.ndarray]] = {}
        for s in present:
            shared = [c & o for c, o in zip(common, own[id(s)], strict=True)]
            nums, dens = _cluster_matrix("loss", evaluator._arrays(sd, diffs[id(s)], shared), k)
            value = _point(nums, dens)
            if value is not None:
                loss[s.scorer] = (value, bootstrap.replicates(nums, dens, counts))
        n = int(common[0].sum())
        for a, b in combinations(loss, 2):
            if loss[b][0] < loss[a][0]:
                a, b = b, a
            pd = paired_difference(loss[a][0], loss[b][0], loss[a][1], loss[b][1], n)
            out.append(Separation(**asdict(pd), benchmark=evaluator.benchmark.name, split=sd.split.name,
                                  scorer_a=a, scorer_b=b, n_clusters=int(np.unique(sd.codes[common[0]]).size)))
    return out


def more_clusters(s: PairDifference, n_clusters: int) -> int | None:
    """``more_needed`` in clusters at today's tuples per cluster: the queries a pools round adds
    for paper-centric tuples, the raters for the pointwise split (None when none is asked)."""
    if s.n_needed is None or not s.n:
        return None
    return max(1, math.ceil(n_clusters * s.n_needed / s.n) - n_clusters)


def separation_rows(seps: list[Separation]) -> list[dict[str, Any]]:
    """JSON-ready rows, one per pair and split (``metric`` ``loss_difference``, ``value`` the
    difference, as the result rows name theirs)."""
    return [{"benchmark": s.benchmark, "split": s.split, "scorer_a": s.scorer_a, "scorer_b": s.scorer_b,
             "metric": "loss_difference", "value": s.diff, "ci_low": s.ci_low, "ci_high": s.ci_high,
             "order_holds": s.order_holds, "n": s.n, "n_clusters": s.n_clusters, "separated": s.separated,
             "n_needed": None if s.n_needed is None else math.ceil(s.n_needed), "more_needed": s.more_needed,
             "more_clusters": more_clusters(s, s.n_clusters)}
            for s in seps]


def _needed_cell(s: Separation) -> str:
    if s.separated:
        return "separated"
    if s.diff == 0:
        return NOT_SEPARABLE
    if s.more_needed is None:
        return "–"
    return f"{s.more_needed:,} (x{(s.n + s.more_needed) / max(s.n, 1):.1f})"


def separation_table(seps: list[Separation], same_as: dict[tuple[str, str], tuple[str, str]] | None = None) -> ReportTable:
    """The report's table of scorer pairs: A (the lower loss), B, the split, ``loss_A - loss_B``
    with its 95% interval, the share of resamples in which A stays better, and the tuples a
    bigger benchmark at today's mix would need to separate them."""
    names: dict[tuple[str, str], list[str]] = {}
    for (bench, split), (_, original) in (same_as or {}).items():
        names.setdefault((bench, original), []).append(split)
    rows = [[s.scorer_a, s.scorer_b, f"{s.benchmark} · " + " = ".join([s.split, *names.get((s.benchmark, s.split), [])]),
             "–" if s.ci_low is None or s.ci_high is None else f"{s.diff:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]",
             "–" if s.order_holds is None else f"{100 * s.order_holds:.1f}%", f"{s.n:,}", _needed_cell(s)]
            for s in seps]
    return ReportTable("Can the benchmark tell the scorers apart? loss_A - loss_B on the same tuples (A: the lower loss; "
                       "more tuples: for the interval to exclude zero, at today's mix, if the difference is the true one)",
                       ["scorer A", "scorer B", "split", "diff [95% CI]", "order holds", "tuples", "more tuples needed"],
                       rows)


def read_separation(report_dir: Path) -> list[dict[str, Any]]:
    """The scorer pairs an evaluation report wrote (``separation.json`` in ``report_dir``)."""
    path = report_dir / "separation.json"
    if not path.is_file():
        raise UsageError(f"--target-from-report {report_dir}: no separation.json there "
                         f"(write one with `revbench evaluate -b ... --report {report_dir}`)")
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"split", "scorer_a", "scorer_b", "separated"} <= r.keys()
                                             for r in rows):
        raise UsageError(f"{path}: not a list of scorer pairs as `revbench evaluate --report` writes them")
    return rows


def next_round_pair(rows: list[dict[str, Any]], pair: str | None = None) -> dict[str, Any]:
    """The paper-centric pair that sizes the next pools round, on revbench's own benchmark (the
    warehouse, else a release; the rounds extend it, not a public benchmark evaluated beside it):
    ``pair`` (``A,B`` in either order, as the report names the scorers, parameters included),
    else the pair not yet separated that needs the fewest more anchors (``more_clusters``)."""
    own = [r for r in rows if r["split"] == "paper_centric" and r.get("benchmark") in ("warehouse", "release")]
    if any(r.get("benchmark") == "warehouse" for r in own):
        own = [r for r in own if r.get("benchmark") == "warehouse"]
    if not own:
        raise UsageError("--target-from-report: the report has no scorer pairs on revbench's own paper-centric tuples "
                         "(evaluate `-b warehouse` with --report DIR)")
    if pair is not None:
        own = [r for r in own if pair in (f"{r['scorer_a']},{r['scorer_b']}", f"{r['scorer_b']},{r['scorer_a']}")]
        if not own:
            known = sorted({f"{r['scorer_a']},{r['scorer_b']}" for r in rows if r["split"] == "paper_centric"})
            raise UsageError(f"--target-pair {pair}: no paper-centric pair of these scorers in the report "
                             f"(it has: {'; '.join(known) or 'none'})")
        if own[0]["separated"]:
            raise UsageError(f"--target-pair {pair}: already separated on the paper-centric tuples; no round is needed for it")
    open_pairs = [r for r in own if not r["separated"] and isinstance(r.get("more_clusters"), int) and r["more_clusters"] > 0]
    if not open_pairs:
        raise UsageError("--target-from-report: every paper-centric pair is separated already or cannot be separated by "
                         f"size alone ({NOT_SEPARABLE}); size the round with --per-category")
    return min(open_pairs, key=lambda r: r["more_clusters"])
