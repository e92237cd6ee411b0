"""Clustering quality of an entity resolution (author disambiguation) against the truth.

Over mention keys with a predicted cluster ``C(k)`` and a true entity ``T(k)``:

    pairwise precision = |pairs together in both| / |pairs together in C|
    pairwise recall    = |pairs together in both| / |pairs together in T|
    B-cubed precision  = mean over k of |C(k) ∩ T(k)| / |C(k)|
    B-cubed recall     = mean over k of |C(k) ∩ T(k)| / |T(k)|

F1 is the harmonic mean of each precision and recall. With no pair together on a side, the
pairwise ratio on that side is 1 (nothing to get wrong).
"""

from __future__ import annotations

from collections import Counter


def pairwise_scores(pred: dict[str, str], truth: dict[str, str]) -> dict[str, float]:
    """Pairwise and B-cubed precision, recall and F1 of ``pred`` (key -> cluster) against
    ``truth`` (key -> true entity), over the keys both hold."""
    keys = [k for k in pred if k in truth]
    cells = Counter((pred[k], truth[k]) for k in keys)
    psize = Counter(pred[k] for k in keys)
    tsize = Counter(truth[k] for k in keys)
    def pairs(n: int) -> int:
        return n * (n - 1) // 2
    tp = sum(pairs(n) for n in cells.values())
    pp = sum(pairs(n) for n in psize.values())
    tt = sum(pairs(n) for n in tsize.values())
    p = tp / pp if pp else 1.0
    r = tp / tt if tt else 1.0
    bp = sum(cells[(pred[k], truth[k])] / psize[pred[k]] for k in keys) / max(len(keys), 1)
    br = sum(cells[(pred[k], truth[k])] / tsize[truth[k]] for k in keys) / max(len(keys), 1)
    return {
        "pairwise_precision": p, "pairwise_recall": r, "pairwise_f1": 2 * p * r / (p + r) if p + r else 0.0,
        "bcubed_precision": bp, "bcubed_recall": br, "bcubed_f1": 2 * bp * br / (bp + br) if bp + br else 0.0,
        "mentions": len(keys), "predicted_authors": len(psize), "true_authors": len(tsize),
    }
