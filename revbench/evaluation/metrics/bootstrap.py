"""Cluster bootstrap for ratio metrics.

Every pairwise metric is a ratio of sums, ``value = sum(num) / sum(den)`` (loss: cost over
weight; accuracy: correct over counted pairs). Pairs are grouped by cluster (the reviewer for
the gold standard, the anchor for LR-bench tuples); a replicate draws clusters with replacement,
``c_k ~ Multinomial(K, 1/K)``, and recomputes::

    value* = mean over draws d of  (sum_k c_k num_dk) / (sum_k c_k den_dk)

The 95% interval is the 2.5th and 97.5th percentiles of ``value*`` over the replicates. The
same ``c`` serve every scorer with the same seed, so ``value*_scorer - value*_baseline`` gives a
paired interval for the difference.
"""

from __future__ import annotations

import warnings

import numpy as np


def cluster_sums(values: np.ndarray, cluster: np.ndarray, n_clusters: int) -> np.ndarray:
    """Sum of ``values`` per cluster code."""
    return np.bincount(cluster, weights=values, minlength=n_clusters).astype(float)


def replicate_counts(n_clusters: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each cluster is drawn in each replicate (``n_resamples x n_clusters``)."""
    if n_clusters == 0 or n_resamples == 0:
        # Nothing to draw: no generator either (numpy.random is a load of its own that a run
        # with --bootstrap 0 does not need).
        return np.zeros((n_resamples, n_clusters))
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_resamples).astype(float)


def replicates(nums: np.ndarray, dens: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Replicate values, averaged over draws: ``nums`` and ``dens`` are ``draws x clusters``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        per_draw = (counts @ nums.T) / (counts @ dens.T)  # replicates x draws
    if not per_draw.size:
        return np.full(counts.shape[0], np.nan)
    with warnings.catch_warnings():
        # A replicate that drew no counted pair is undefined; interval() drops it.
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(per_draw, axis=1)


def interval(values: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval, ignoring replicates where the metric was undefined."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None, None
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(v, [tail, 100 - tail])
    return float(lo), float(hi)
