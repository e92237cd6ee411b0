"""Align author lists from different sources (arXiv, the PDF, Semantic Scholar) by name."""

from __future__ import annotations

import numpy as np
from rapidfuzz import fuzz
from scipy.optimize import linear_sum_assignment

from revbench.keys import fold


def name_similarity(a: str, b: str) -> float:
    """Similarity in [0, 1] of two person names, tolerant to order and initials."""
    fa, fb = fold(a), fold(b)
    if not fa or not fb:
        return 0.0
    score = fuzz.token_sort_ratio(fa, fb) / 100.0
    ta, tb = fa.split(), fb.split()
    # "J. Smith" vs "John Smith": same surname and compatible first initial.
    if ta[-1] == tb[-1] and ta[0][0] == tb[0][0]:
        score = max(score, 0.9)
    return score


def align(left: list[str], right: list[str], threshold: float) -> dict[int, tuple[int, float]]:
    """Best one-to-one matching of ``left`` to ``right`` names; ``{i: (j, score)}`` for pairs at
    or above ``threshold``. Positions break ties, since lists mostly share their order."""
    if not left or not right:
        return {}
    sim = np.array([[name_similarity(a, b) for b in right] for a in left])
    bias = np.array([[0.001 if i == j else 0.0 for j in range(len(right))] for i in range(len(left))])
    rows, cols = linear_sum_assignment(-(sim + bias))
    return {int(i): (int(j), float(sim[i, j])) for i, j in zip(rows, cols, strict=True) if sim[i, j] >= threshold}
