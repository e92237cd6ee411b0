"""Metrics of a scorer on a benchmark: every split, every draw, intervals and paired differences."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from revbench.evaluation.metrics import accuracy as acc_metric
from revbench.evaluation.metrics import bootstrap
from revbench.evaluation.metrics.loss import costs
from revbench.evaluation.metrics.ranking import ranking_metrics
from revbench.evaluation.model import SPLIT_AVERAGE, Benchmark, MetricValue, Scores, Split
from revbench.evaluation.pairs import PairArrays, score_pairs, split_pairs

PAIR_METRICS = ("loss", *acc_metric.NAMES)
AVERAGED = ("loss", "accuracy")


@dataclass
class _SplitData:
    split: Split
    pairs: pl.DataFrame
    labels: np.ndarray


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
    between scorers are paired)."""

    def __init__(self, benchmark: Benchmark, n_resamples: int = 1000, seed: int = 0):
        self.benchmark = benchmark
        self.n_resamples = n_resamples
        self.seed = seed
        self._splits = []
        for s in benchmark.splits:
            pairs = split_pairs(s)
            labels = np.array(sorted(pairs["cluster"].unique().to_list())) if pairs.height else np.array([], dtype=str)
            self._splits.append(_SplitData(s, pairs, labels))
        self._replicates: dict[tuple[str, str, str], np.ndarray] = {}

    def _arrays(self, sd: _SplitData, scores: Scores) -> list[PairArrays]:
        out = []
        index = {lab: i for i, lab in enumerate(sd.labels)}
        for d in range(len(self.benchmark.draws) or 1):
            arr = score_pairs(sd.pairs, scores.draws[min(d, len(scores.draws) - 1)])
            # Codes against the split's fixed label order, so every scorer shares replicates.
            if len(arr):
                labels = np.array(sorted(set(sd.pairs["cluster"].to_list())))
                # score_pairs codes densely over the pairs it kept; map back through their labels.
                kept = self._kept_labels(sd, scores.draws[min(d, len(scores.draws) - 1)])
                arr.cluster = np.array([index[c] for c in kept], dtype=np.int64)
                arr.n_clusters = len(labels)
            out.append(arr)
        return out

    @staticmethod
    def _kept_labels(sd: _SplitData, scores: pl.DataFrame) -> list[str]:
        s = scores.select("reviewer_id", "paper_id").unique().with_columns(pl.lit(True).alias("_ok"))
        j = (
            sd.pairs.join(s, left_on=["reviewer_a", "paper_a"], right_on=["reviewer_id", "paper_id"], how="left")
            .rename({"_ok": "_ok_a"})
            .join(s, left_on=["reviewer_b", "paper_b"], right_on=["reviewer_id", "paper_id"], how="left")
        )
        return j.filter(pl.col("_ok_a").is_not_null() & pl.col("_ok").is_not_null())["cluster"].to_list()

    def evaluate(self, scores: Scores, baseline: Scores | None = None) -> list[MetricValue]:
        """All pair metrics per split (with intervals), ranking metrics where a split has
        candidate lists, the average across splits, and paired differences to ``baseline``."""
        rows: list[MetricValue] = []
        name = self.benchmark.name
        split_values: dict[str, list[float]] = {m: [] for m in AVERAGED}
        for sd in self._splits:
            arrays = self._arrays(sd, scores)
            base_arrays = self._arrays(sd, baseline) if baseline is not None else None
            total = sd.pairs.height
            cov = float(np.mean([len(a) / total for a in arrays])) if total and arrays else None
            extra = dict(spec=scores.spec, coverage=cov, predictions_sha256=scores.source_sha256)
            k = len(sd.labels)
            counts = bootstrap.replicate_counts(k, self.n_resamples, self.seed)
            for metric in PAIR_METRICS:
                nums, dens = _cluster_matrix(metric, arrays, k)
                value = _point(nums, dens)
                n = int(_num_den(metric, arrays[0])[1].astype(bool).sum()) if arrays else 0
                reps = bootstrap.replicates(nums, dens, counts)
                lo, hi = bootstrap.interval(reps) if value is not None and self.n_resamples else (None, None)
                rows.append(MetricValue(name, sd.split.name, scores.scorer, metric, value, lo, hi, n, **extra))
                if value is not None and metric in split_values:
                    split_values[metric].append(value)
                if base_arrays is not None and baseline is not None:
                    bn, bd = _cluster_matrix(metric, base_arrays, k)
                    bvalue = _point(bn, bd)
                    if value is not None and bvalue is not None:
                        dlo, dhi = bootstrap.interval(reps - bootstrap.replicates(bn, bd, counts))
                        rows.append(MetricValue(name, sd.split.name, f"{scores.scorer} - {baseline.scorer}", metric,
                                                value - bvalue, dlo, dhi, n, f"{scores.spec} - {baseline.spec}", cov))
            if sd.split.candidate_lists and sd.split.ratings is not None:
                for metric, (value, nq) in ranking_metrics(sd.split.ratings, scores.draws[0]).items():
                    v = None if value != value else value  # NaN: no query had a relevant candidate
                    rows.append(MetricValue(name, sd.split.name, scores.scorer, metric, v, None, None, nq, **extra))
        if len(self._splits) > 1:
            for metric, values in split_values.items():
                if values:
                    rows.append(MetricValue(name, SPLIT_AVERAGE, scores.scorer, metric, float(np.mean(values)), None, None,
                                            len(values), scores.spec, None, scores.source_sha256))
        return rows


def cross_benchmark_average(rows: list[MetricValue]) -> list[MetricValue]:
    """Per scorer, the mean loss and accuracy over every split of every benchmark it was
    evaluated on (the papers' "average" column across LR paper-centric, LR reviewer-centric and
    the gold standard); only for scorers seen on more than one benchmark."""
    out = []
    scorers = {r.scorer for r in rows if " - " not in r.scorer}
    for scorer in sorted(scorers):
        for metric in AVERAGED:
            vals = [r for r in rows if r.scorer == scorer and r.metric == metric and r.split != SPLIT_AVERAGE and r.value is not None]
            if len({r.benchmark for r in vals}) > 1:
                out.append(MetricValue("all", SPLIT_AVERAGE, scorer, metric, float(np.mean([r.value for r in vals])), None, None,
                                       len(vals), vals[0].spec))
    return out
