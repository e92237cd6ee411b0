"""Pairwise accuracy and its easy and hard variants.

Over ordered pairs with ``r_a > r_b``::

    accuracy      = |{ s_a > s_b }| / |pairs|                    (a predicted tie counts as wrong)
    easy_accuracy = the same over pairs with r_a >= 4 and r_b <= 2
    hard_accuracy = the same over pairs with r_b >= 4            (both high, still different)

An empty set of pairs has no accuracy (None); the count ``n`` is reported beside each value.
"""

from __future__ import annotations

import numpy as np

NAMES = ("accuracy", "easy_accuracy", "hard_accuracy")


def mask(name: str, rating_a: np.ndarray, rating_b: np.ndarray) -> np.ndarray:
    """Which pairs a variant counts."""
    if name == "accuracy":
        return np.ones(rating_a.shape, dtype=bool)
    if name == "easy_accuracy":
        return (rating_a >= 4) & (rating_b <= 2)
    if name == "hard_accuracy":
        return (rating_b >= 4) & (rating_a > rating_b)
    raise KeyError(name)


def accuracy(diff: np.ndarray) -> float | None:
    """Share of pairs the scorer orders strictly right."""
    if diff.size == 0:
        return None
    return float((diff > 0).mean())
