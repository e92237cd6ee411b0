"""Metrics of scorers on a benchmark: every split, every draw, intervals and paired differences, on the
pairs every scorer covers."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from revbench.evaluation.metrics import accuracy as acc_metric
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.metrics.loss import costs
from revbench.evaluation.metrics.coauthor_diversity import coauthor_clusters, coauthor_diversity
from revbench.evaluation.metrics.institution_diversity import institution_diversity
from revbench.evaluation.metrics.ranking import CUTOFFS, ranked_candidates, ranking_metrics
from revbench.evaluation.model import (SPLIT_AVERAGE, UNIT_PAPER, Benchmark, MetricValue, Scores, Split, difference_name,
                                       is_difference_row)
from revbench.evaluation.pairs import PairArrays, pairs_unit, split_pairs

PAIR_METRICS = ("loss", *acc_metric.NAMES)
AVERAGED = ("loss", "accuracy")


OWN_COVERAGE = ":own_coverage"
"""Suffix of the split name of rows computed on every pair a scorer covers, kept beside the
split's own rows (computed on the pairs every scorer of the run covers) when the two differ."""
TRIVIAL = "trivial"
"""The scorer that scores every pair alike: a reference line, never the best of a table."""
NO_GRAPH = "the benchmark carries no graph (no institutions or co-authors of its reviewers), so no diversity metrics"


def diversity_absent(benchmark: Benchmark) -> str | None:
    """Why ``benchmark``'s report has no diversity metrics though it has ranking metrics (None
    when it has them, or has no candidate lists to rank at all)."""
    ranked = any(s.candidate_lists and s.ratings is not None for s in benchmark.splits)
    return NO_GRAPH if ranked and benchmark.graph is None else None


@dataclass
class _SplitData:
    split: Split
    pairs: pl.DataFrame
    labels: np.ndarray
    codes: np.ndarray
    """Each pair's cluster as an index into ``labels`` (one order for every scorer)."""
    digest: str
    """sha256 of the split's ordered pairs with their clusters: equal digests, equal splits."""
    unit: str
    """What every pair holds fixed (:func:`revbench.evaluation.pairs.pairs_unit`): the unit a
    scorer's numbers need only be comparable within."""


def _pairs_digest(pairs: pl.DataFrame) -> str:
    cols = ["reviewer_a", "paper_a", "rating_a", "reviewer_b", "paper_b", "rating_b", "cluster"]
    return hashlib.sha256(pairs.select(cols).sort(cols).write_csv().encode()).hexdigest()


def _num_den(metric: str, arr: PairArrays) -> tuple[np.ndarray, np.ndarray]:
    """Per-pair numerator and denominator whose sums' ratio is the metric."""
    if metric == "loss":
        return costs(arr.weight, arr.diff), arr.weight
    m = acc_metric.mask(metric, arr.rating_a, arr.rating_b)
    return ((arr.diff > 0) & m).astype(float), m.astype(float)


def _cluster_matrix(metric: str, arrays: list[PairArrays], n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    nums, dens = [], []
    for arr in arrays:
        num, den = _num_den(metric, arr)
        nums.append(bootstrap.cluster_sums(num, arr.cluster, n_clusters))
        dens.append(bootstrap.cluster_sums(den, arr.cluster, n_clusters))
    return np.vstack(nums), np.vstack(dens)


def _point(nums: np.ndarray, dens: np.ndarray) -> float | None:
    per_draw = [n.sum() / d.sum() for n, d in zip(nums, dens, strict=True) if d.sum() > 0]
    return float(np.mean(per_draw)) if per_draw else None


class Evaluator:
    """Evaluates scorers on one benchmark with shared bootstrap replicates (so differences
    between scorers are paired).

    Scorers are compared on the pairs they all cover: when one leaves pairs of a split unscored
    (a reviewer without publications), every scorer's row for that split rests on the pairs
    every scorer covers, and a second row (split ``<name>:own_coverage``) keeps each one's value
    on all the pairs it covers. Splits that hold the same pairs (the pointwise split and the
    reviewer-centric tuples built from the same ratings) are computed once, reported under both
    names (:attr:`same_as`), and counted once in the average."""

    def __init__(self, benchmark: Benchmark, n_resamples: int = 1000, seed: int = 0):
        self.benchmark = benchmark
        self.n_resamples = n_resamples
        self.seed = seed
        self._splits = []
        for s in benchmark.splits:
            pairs = split_pairs(s)
            labels = np.array(sorted(pairs["cluster"].unique().to_list())) if pairs.height else np.array([], dtype=str)
            index = {lab: i for i, lab in enumerate(labels)}
            codes = np.array([index[c] for c in pairs["cluster"].to_list()], dtype=np.int64)
            self._splits.append(_SplitData(s, pairs, labels, codes, _pairs_digest(pairs), pairs_unit(pairs)))
        self._clusters: dict[str, str] | None = None
        """Co-author clusters of the benchmark's reviewers, computed once for every split and scorer."""
        self.same_as: dict[str, str] = {}
        """A split that holds the same pairs as an earlier one -> that earlier split."""
        first: dict[str, str] = {}
        for sd in self._splits:
            if sd.pairs.height and sd.digest in first:
                self.same_as[sd.split.name] = first[sd.digest]
            else:
                first.setdefault(sd.digest, sd.split.name)

    def _draws(self, scores: Scores, unit: str = UNIT_PAPER) -> list[pl.DataFrame]:
        """One frame per profile draw, made for ``unit`` where the scorer made scores for it."""
        own = scores.for_unit(unit)
        return [own[min(d, len(own) - 1)] for d in range(len(self.benchmark.draws) or 1)]

    @staticmethod
    def _diffs(sd: _SplitData, scores: pl.DataFrame) -> np.ndarray:
        """``score_a - score_b`` for every pair of the split, in its order; NaN where the scorer
        left a side unscored."""
        s = scores.select("reviewer_id", "paper_id", "score").unique(subset=["reviewer_id", "paper_id"], keep="first")
        j = (
            sd.pairs.select("reviewer_a", "paper_a", "reviewer_b", "paper_b").with_row_index("_i")
            .join(s, left_on=["reviewer_a", "paper_a"], right_on=["reviewer_id", "paper_id"], how="left")
            .rename({"score": "score_a"})
            .join(s, left_on=["reviewer_b", "paper_b"], right_on=["reviewer_id", "paper_id"], how="left")
            .rename({"score": "score_b"})
            .sort("_i")
        )
        return (j["score_a"] - j["score_b"]).cast(pl.Float64).fill_null(float("nan")).to_numpy()

    @staticmethod
    def _arrays(sd: _SplitData, diffs: list[np.ndarray], masks: list[np.ndarray]) -> list[PairArrays]:
        ra, rb = sd.pairs["rating_a"].to_numpy().astype(float), sd.pairs["rating_b"].to_numpy().astype(float)
        return [PairArrays(ra[m], rb[m], d[m], sd.codes[m], len(sd.labels)) for d, m in zip(diffs, masks, strict=True)]

    def _pair_rows(self, split: str, scores: Scores, arrays: list[PairArrays], counts: np.ndarray, k: int,
                   coverage: float | None, baseline: Scores | None = None,
                   base_arrays: list[PairArrays] | None = None, unit: str = UNIT_PAPER) -> list[MetricValue]:
        rows = []
        name = self.benchmark.name
        tied = [float((a.diff == 0).mean()) for a in arrays if len(a)]
        extra = dict(spec=scores.spec, coverage=coverage, predictions_sha256=scores.source_sha256,
                     ties=float(np.mean(tied)) if tied else None, basis=scores.basis.get(unit, ""))
        for metric in PAIR_METRICS:
            nums, dens = _cluster_matrix(metric, arrays, k)
            value = _point(nums, dens)
            n = int(_num_den(metric, arrays[0])[1].astype(bool).sum()) if arrays else 0
            reps = bootstrap.replicates(nums, dens, counts)
            lo, hi = bootstrap.interval(reps) if value is not None and self.n_resamples else (None, None)
            rows.append(MetricValue(name, split, scores.scorer, metric, value, lo, hi, n, **extra))
            if base_arrays is not None and baseline is not None:
                bn, bd = _cluster_matrix(metric, base_arrays, k)
                bvalue = _point(bn, bd)
                if value is not None and bvalue is not None:
                    dlo, dhi = bootstrap.interval(reps - bootstrap.replicates(bn, bd, counts))
                    rows.append(MetricValue(name, split, difference_name(scores.scorer, baseline.scorer), metric,
                                            value - bvalue, dlo, dhi, n, difference_name(scores.spec, baseline.spec),
                                            coverage, basis=extra["basis"], baseline=baseline.scorer))
        return rows

    def evaluate_all(self, runs: list[Scores], baseline: Scores | None = None) -> list[MetricValue]:
        """Every scorer of ``runs`` on every split, compared on the pairs they all cover (see the
        class), with ranking metrics where a split has candidate lists, each scorer's average
        over the distinct splits, and paired differences to ``baseline`` (one of ``runs``)."""
        rows: list[MetricValue] = []
        name = self.benchmark.name
        done: dict[str, list[MetricValue]] = {}
        averaged: dict[int, dict[str, list[float]]] = {id(s): {m: [] for m in AVERAGED} for s in runs}
        covered: dict[int, list[float]] = {id(s): [] for s in runs}
        for sd in self._splits:
            here: list[MetricValue] = []
            original = self.same_as.get(sd.split.name)
            if original is not None:
                # The same pairs as an earlier split: its numbers, under this name too.
                here += [replace(r, split=r.split.replace(original, sd.split.name, 1))
                         for r in done[original] if r.metric in PAIR_METRICS]
            else:
                here += self._split_rows(sd, runs, baseline, averaged, covered)
            if sd.split.candidate_lists and sd.split.ratings is not None:
                for s in runs:
                    cov = next((r.coverage for r in here if r.scorer == s.scorer and r.split == sd.split.name), None)
                    # a paper's candidates are ranked against each other: the scores made for that unit
                    ranked = s.for_unit(UNIT_PAPER)[0]
                    extra = dict(spec=s.spec, coverage=cov, predictions_sha256=s.source_sha256,
                                 basis=s.basis.get(UNIT_PAPER, ""))
                    for metric, (value, nq) in ranking_metrics(sd.split.ratings, ranked).items():
                        v = None if value != value else value  # NaN: no query had a relevant candidate
                        here.append(MetricValue(name, sd.split.name, s.scorer, metric, v, None, None, nq, **extra))
                    for metric, (dv, nq) in self._diversity(sd.split.ratings, ranked).items():
                        here.append(MetricValue(name, sd.split.name, s.scorer, metric, dv, None, None, nq, **extra))
            done[sd.split.name] = here
            rows += here
        if len(self._splits) - len(self.same_as) > 1:
            for s in runs:
                for metric, values in averaged[id(s)].items():
                    if values:
                        rows.append(MetricValue(name, SPLIT_AVERAGE, s.scorer, metric, float(np.mean(values)), None, None,
                                                len(values), s.spec, min(covered[id(s)], default=None), s.source_sha256))
        return rows

    def _diversity(self, ratings: pl.DataFrame, scores: pl.DataFrame) -> dict[str, tuple[float | None, int]]:
        """Diversity of each paper's top k at the ranking metrics' cutoffs; none without a graph
        (the report says why: :func:`diversity_absent`)."""
        graph = self.benchmark.graph
        if graph is None:
            return {}
        if self._clusters is None:
            reviewers = {r for d in self.benchmark.draws if "reviewer_id" in d.columns for r in d["reviewer_id"].to_list()}
            reviewers |= {r for s in self.benchmark.splits if s.ratings is not None for r in s.ratings["reviewer_id"].to_list()}
            self._clusters = coauthor_clusters(sorted(reviewers), graph.coauthors)
        subs = self.benchmark.submissions
        years = dict(subs.select("paper_id", "year").iter_rows()) if {"paper_id", "year"} <= set(subs.columns) else {}
        ranked = ranked_candidates(ratings, scores)
        return {**institution_diversity(ranked, years, graph.reviewer_institutions, CUTOFFS),
                **coauthor_diversity(ranked, self._clusters, CUTOFFS)}

    def _split_rows(self, sd: _SplitData, runs: list[Scores], baseline: Scores | None,
                    averaged: dict[int, dict[str, list[float]]], covered: dict[int, list[float]]) -> list[MetricValue]:
        total = sd.pairs.height
        diffs = {id(s): [self._diffs(sd, d) for d in self._draws(s, sd.unit)] for s in runs}
        own = {i: [~np.isnan(x) for x in ds] for i, ds in diffs.items()}
        n_draws = len(self.benchmark.draws) or 1
        # A scorer that covers no pair at all has nothing to compare: it must not empty everyone's subset.
        common = [np.logical_and.reduce([own[id(s)][d] for s in runs if own[id(s)][d].any()] or [np.zeros(total, bool)])
                  for d in range(n_draws)]
        k = len(sd.labels)
        counts = bootstrap.replicate_counts(k, self.n_resamples, self.seed)
        base = baseline if baseline is not None and any(s is baseline for s in runs) else None
        # Within a scorer's own pairs too (a scorer that covers nothing has an empty share of it).
        shared = {i: [c & o for c, o in zip(common, masks, strict=True)] for i, masks in own.items()}
        base_arrays = self._arrays(sd, diffs[id(base)], shared[id(base)]) if base is not None else None
        rows: list[MetricValue] = []
        for s in runs:
            cov = float(np.mean([m.sum() / total for m in own[id(s)]])) if total else None
            split_rows = self._pair_rows(sd.split.name, s, self._arrays(sd, diffs[id(s)], shared[id(s)]), counts, k, cov,
                                         base, base_arrays if s is not base else None, sd.unit)
            rows += split_rows
            for r in split_rows:
                if r.scorer == s.scorer and r.metric in AVERAGED and r.value is not None:
                    averaged[id(s)][r.metric].append(r.value)
            if cov is not None:
                covered[id(s)].append(cov)
            if any((o != c).any() for o, c in zip(own[id(s)], shared[id(s)], strict=True)):
                rows += self._pair_rows(sd.split.name + OWN_COVERAGE, s, self._arrays(sd, diffs[id(s)], own[id(s)]),
                                        counts, k, cov, unit=sd.unit)
        return rows

    def evaluate(self, scores: Scores, baseline: Scores | None = None) -> list[MetricValue]:
        """``scores`` alone (with ``baseline``, on the pairs both cover): its rows and the paired
        differences; see :meth:`evaluate_all`."""
        if baseline is None or baseline is scores:
            return self.evaluate_all([scores])
        return [r for r in self.evaluate_all([scores, baseline], baseline) if r.scorer != baseline.scorer]


def with_companions(runs: list[Scores]) -> list[Scores]:
    """``runs`` and every run's companions after them (a factor alone as ``cof`` hands it back,
    each factor left out), each a row of the report; a companion named like a scorer already
    there (a factor also asked for on its own) is not repeated."""
    out = list(runs)
    names = {s.scorer for s in runs}
    for s in runs:
        for c in s.companions:
            if c.scorer not in names:
                out.append(c)
                names.add(c.scorer)
    return out


def cross_benchmark_average(rows: list[MetricValue], same_as: set[tuple[str, str]] | None = None) -> list[MetricValue]:
    """Per scorer, the mean loss and accuracy over every split of every benchmark it was
    evaluated on (the papers' "average" column across LR paper-centric, LR reviewer-centric and
    the gold standard); only for scorers seen on more than one benchmark. A split in ``same_as``
    (``(benchmark, split)`` holding the same pairs as another split) and the ``:own_coverage``
    rows are not counted."""
    out = []
    skip = same_as or set()
    scorers = {r.scorer for r in rows if not is_difference_row(r)}
    for scorer in sorted(scorers):
        for metric in AVERAGED:
            vals = [r for r in rows if r.scorer == scorer and r.metric == metric and r.split != SPLIT_AVERAGE
                    and r.value is not None and not r.split.endswith(OWN_COVERAGE) and (r.benchmark, r.split) not in skip]
            if len({r.benchmark for r in vals}) > 1:
                covs = [r.coverage for r in vals if r.coverage is not None]
                out.append(MetricValue("all", SPLIT_AVERAGE, scorer, metric, float(np.mean([r.value for r in vals])), None, None,
                                       len(vals), vals[0].spec, min(covs) if covs else None))
    return out
