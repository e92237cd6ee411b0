"""Co-author-cluster diversity@k of a ranked reviewer list (exHarmony's diversity, by circle).

The clusters are the connected components of the co-author graph among the benchmark's
reviewers (an edge: two of them wrote a paper together); a reviewer in no co-author pair is a
cluster of its own. For a paper q, with T_k(q) the scorer's top min(k, n_q) scored candidates
of q (n_q: how many of q's rated candidates it scored; tied scores broken by reviewer id)::

    CoauthorDiversity@k(q) = |{ cluster(r) : r in T_k(q) }| / |T_k(q)|

and the metric is the mean over the papers with at least one scored candidate (their count is
``n``). A list shorter than k is divided by its own length, not by k: the value measures how
varied the recommended reviewers are, not how many there were (the ranking metrics tell that).
Every reviewer has a cluster, so no one is left out of the denominator.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

NAME = "CoauthorDiversity"


def coauthor_clusters(reviewers: Iterable[str], coauthors: pl.DataFrame) -> dict[str, str]:
    """Each of ``reviewers`` -> its cluster, named by the smallest reviewer id in it; edges of
    ``coauthors`` (``reviewer_id, other_id``) with an end outside ``reviewers`` are ignored."""
    parent = {r: r for r in reviewers}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in coauthors.select("reviewer_id", "other_id").iter_rows():
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            if ra != rb:
                # The smaller id becomes the root, so a cluster's name never depends on edge order.
                parent[max(ra, rb)] = min(ra, rb)
    return {r: root(r) for r in parent}


def coauthor_diversity(ranked: dict[str, list[str]], clusters: dict[str, str],
                       cutoffs: tuple[int, ...]) -> dict[str, tuple[float | None, int]]:
    """``{CoauthorDiversity@k: (mean over papers, n papers)}`` for each paper's ranked
    candidates ``ranked`` (best first) and the reviewers' ``clusters`` (a reviewer missing from
    them is a cluster of its own)."""
    out: dict[str, tuple[float | None, int]] = {}
    for k in cutoffs:
        values = [len({clusters.get(r, r) for r in lst[:k]}) / len(lst[:k]) for lst in ranked.values() if lst]
        out[f"{NAME}@{k}"] = (sum(values) / len(values) if values else None, len(values))
    return out
