"""OpenReview's self-attention clustering of a reviewer's papers (``embedding:pooling=clustering``).

For a reviewer with paper vectors ``p_1..p_n`` and a submission ``q`` (openreview-expertise's
``specter2_scincl/attention_clustering.py``, restated):

- self-attention: ``s_i = sum_j cos(p_i, p_j)`` (the paper's summed similarity to the reviewer's
  papers, itself included), weights ``w = softmax(s)``; with ``top_k`` (``clustering:K``) only
  the ``K`` largest weights are kept and renormalised. The reviewer is ``v = sum_i w_i p_i`` and
  the score ``cos(v, q)``. A reviewer of one paper is that paper.
- cross-attention (``clustering_cross``, OpenReview's ``cross_attention=True``), a product of
  experts: ``c_i = cos(p_i, q)``, weights ``softmax(c_i * s_i)`` (then ``top_k`` as above) and the
  score ``sum_i w_i c_i``.

A paper close to the reviewer's other papers weighs more, so a profile pruned to one paper near
a target (the collusion attack of :mod:`revbench.evaluation.attack`) is scored on that paper
alone, as ``max`` would be; a profile kept whole pulls the vector to its centre.
"""

from __future__ import annotations

import numpy as np

KINDS = ("clustering", "clustering_cross")


def parse(how: str) -> tuple[bool, int | None] | None:
    """``(cross, top_k)`` for a clustering pooling spec, None for any other pooling; a bad ``K`` raises."""
    kind, _, arg = how.partition(":")
    if kind not in KINDS:
        return None
    k = int(arg) if arg else None
    if k is not None and k < 1:
        raise ValueError(f"pooling {how!r}: K must be at least 1")
    return kind == "clustering_cross", k


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _keep_top(w: np.ndarray, k: int | None) -> np.ndarray:
    if k is None or k >= len(w):
        return w
    keep = np.zeros_like(w)
    top = np.argsort(-w, kind="stable")[:k]
    keep[top] = w[top]
    return keep / keep.sum()


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1.0, n)


def score(papers: np.ndarray, query: np.ndarray, cross: bool = False, top_k: int | None = None) -> float:
    """One reviewer (``papers``: n x d) against one submission (``query``: d), as above."""
    p, q = _unit(np.asarray(papers, dtype=np.float64)), _unit(np.asarray(query, dtype=np.float64))
    if len(p) == 1:
        return float(p[0] @ q)
    s = (p @ p.T).sum(axis=1)
    if cross:
        c = p @ q
        w = _keep_top(_softmax(c * s), top_k)
        return float(w @ c)
    w = _keep_top(_softmax(s), top_k)
    return float(_unit(w @ np.asarray(papers, dtype=np.float64)) @ q)


def scores(profile_vecs: np.ndarray, sub_vecs: np.ndarray, rows: list[np.ndarray], cols: np.ndarray,
           cross: bool = False, top_k: int | None = None) -> np.ndarray:
    """:func:`score` of each pair ``i``: reviewer rows ``rows[i]`` of ``profile_vecs`` against
    submission ``cols[i]`` of ``sub_vecs``."""
    return np.array([score(profile_vecs[r], sub_vecs[c], cross, top_k) for r, c in zip(rows, cols.tolist(), strict=True)],
                    dtype=np.float64)
