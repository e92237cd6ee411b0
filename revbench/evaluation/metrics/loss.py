"""Weighted Kendall-tau loss.

Over ordered pairs ``(a, b)`` with ratings ``r_a > r_b`` and predicted scores ``s_a, s_b``::

    w_ab   = r_a - r_b
    cost   = w_ab * ( [s_a < s_b] + 1/2 [s_a = s_b] )
    loss   = sum(cost) / sum(w)

An inverted pair costs its weight, a predicted tie half of it; 0 is perfect, 0.5 is a constant
scorer, 1 is the reverse order. Pairs are those rated by the same reviewer (gold standard) or
the tuples of LR-bench. An empty set of pairs has no loss (None).
"""

from __future__ import annotations

import numpy as np

NAME = "loss"


def costs(weight: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """Per-pair cost ``w * ([diff < 0] + 0.5 [diff == 0])``."""
    return weight * ((diff < 0) + 0.5 * (diff == 0))


def loss(weight: np.ndarray, diff: np.ndarray) -> float | None:
    """The weighted loss of scored pairs (None when the total weight is zero)."""
    total = float(weight.sum())
    if total <= 0:
        return None
    return float(costs(weight, diff).sum()) / total
