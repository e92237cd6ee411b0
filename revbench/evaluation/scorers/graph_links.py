"""Bibliographic coupling and co-citation: expertise from the works two papers cite alike, and
from the papers that cite them alike, pooled over the reviewer's papers like ``citation`` and
``topic`` (:mod:`revbench.evaluation.scorers.graph`).

Both read ``BenchmarkGraph.references`` (each paper's reference list, to any work, keyed stably:
see :class:`~revbench.evaluation.model.BenchmarkGraph`) and Salton's cosine of two sets, so a
paper with a long reference list (or a much-cited one) does not outweigh the others by length.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark
from revbench.evaluation.scorers.base import Params, Pooling, pair_entries, pool_entries, submissions_of
from revbench.evaluation.scorers.graph import UNIPR_POOLING, GraphScorer, reviewer_papers

CHUNK = 200_000
"""Entries compared at once: each chunk's row copies hold every entry's set, so memory stays bounded."""
LISTS_HINT = ("the warehouse benchmark carries them once `revbench graph` has run on it, and the gold standard with "
              "--graph-from s2; a release or a weak benchmark carries none (evaluate the warehouse instead)")


class LinkParams(Params):
    pooling: Pooling = UNIPR_POOLING


def salton_scores(benchmark: Benchmark, draw: int, needed: pl.DataFrame, sets: pl.DataFrame, pooling: str) -> pl.DataFrame:
    """``reviewer_id, paper_id, score``: for each needed pair, Salton's cosine
    ``|S(p) & S(q)| / sqrt(|S(p)| * |S(q)|)`` of the submission p's and each reviewer paper q's
    sets (``sets``: ``paper_id, item``), pooled over q. A paper with an empty set has no value
    (0/0): such a reviewer paper stays out of the pooling, and a submission without one, or a
    reviewer with none, leaves the pair unscored."""
    sets = sets.unique()
    has = sets["paper_id"].unique().implode()
    mine = reviewer_papers(benchmark, draw).filter(pl.col("paper_id").is_in(has))
    subs = submissions_of(benchmark, needed).filter(pl.col("paper_id").is_in(has))
    if mine.height == 0 or subs.height == 0:
        return pl.DataFrame(schema=SCORES_SCHEMA)
    entries = pair_entries(mine, subs["paper_id"].to_list(), needed)
    sets = sets.filter(pl.col("paper_id").is_in(pl.concat([mine["paper_id"], subs["paper_id"]]).unique().implode()))
    index = sets.select("item").unique(maintain_order=True).with_row_index("k")
    sets = sets.join(index, on="item")
    a, b = _unit_rows(mine["paper_id"], sets, index.height), _unit_rows(subs["paper_id"], sets, index.height)
    sim = np.zeros(len(entries.rows))
    for at in range(0, len(sim), CHUNK):
        rows, cols = entries.rows[at:at + CHUNK], entries.cols[at:at + CHUNK]
        sim[at:at + CHUNK] = np.asarray(a[rows].multiply(b[cols]).sum(axis=1)).ravel()
    return pool_entries(entries, sim, pooling)


def _unit_rows(papers: pl.Series, sets: pl.DataFrame, width: int) -> Any:
    """One row per paper of ``papers``: 1/sqrt(|S|) at each of its items (``sets``: ``paper_id, k``)."""
    from scipy import sparse

    rows = pl.DataFrame({"paper_id": papers}).with_row_index("row").join(sets, on="paper_id")
    m = sparse.csr_matrix((np.ones(rows.height), (rows["row"].to_numpy(), rows["k"].to_numpy())),
                          shape=(len(papers), width))
    sizes = np.asarray(m.sum(axis=1)).ravel()
    return (sparse.diags(np.divide(1.0, np.sqrt(sizes), out=np.zeros_like(sizes), where=sizes > 0)) @ m).tocsr()


class Coupling(GraphScorer):
    """Bibliographic coupling: how many works the submission and the reviewer's paper both cite.

        R(x)    = the works x cites (its reference list, to any work, in or out of the benchmark)
        f(p, q) = |R(p) & R(q)| / sqrt(|R(p)| * |R(q)|)      (Salton's cosine; 1: the same list)

    A cited work is one key whichever source listed it (the benchmark paper it resolved to, else
    its DOI, arXiv id, normalised title, S2 or OpenAlex id: ``BenchmarkGraph.references``). A
    paper without a reference list has no value: a reviewer's such paper stays out of the pooling,
    a submission without one is left unscored. q ranges over the reviewer's profile and history
    papers; f(p, q) are pooled (``pooling``, default the mean of the top 3). A benchmark that
    carries no reference lists is refused, never scored zero."""

    name = "coupling"
    params_model = LinkParams

    def missing(self, benchmark: Benchmark) -> str | None:
        refs = self.graph(benchmark).references
        if refs is None:
            return f"no reference lists: the coupling scorer reads every reference of each paper, to any work; {LISTS_HINT}"
        if refs.height == 0:
            return ("no reference of any of its papers: the coupling scorer reads every reference of each paper; run "
                    "`revbench graph` (Semantic Scholar's references) and evaluate the warehouse again")
        return None

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        refs = self.graph(benchmark).references
        assert refs is not None  # missing() refused a benchmark without reference lists
        return salton_scores(benchmark, draw, needed, refs.select(pl.col("citing_id").alias("paper_id"),
                                                                  pl.col("cited_key").alias("item")),
                             self.params.pooling)  # type: ignore[attr-defined]


class Cocitation(GraphScorer):
    """Co-citation: how many papers cite both the submission and the reviewer's paper.

        C(x)    = the papers that cite x (every paper of the warehouse whose reference list names x)
        f(p, q) = |C(p) & C(q)| / sqrt(|C(p)| * |C(q)|)      (Salton's cosine)

    A paper no one cites has no value (0/0): a reviewer's such paper stays out of the pooling, a
    submission no one cites is left unscored (recent submissions often are: the report's coverage
    says how many). q ranges over the reviewer's profile and history papers; f(p, q) are pooled
    (``pooling``, default the mean of the top 3). A benchmark that carries no reference lists, or
    none of whose papers any paper cites, is refused, never scored zero."""

    name = "cocitation"
    params_model = LinkParams

    def missing(self, benchmark: Benchmark) -> str | None:
        refs = self.graph(benchmark).references
        if refs is None:
            return f"no reference lists: the cocitation scorer reads which papers cite each of its papers; {LISTS_HINT}"
        if _cited(refs, benchmark).height == 0:
            return ("no paper citing any of its papers: the cocitation scorer reads which papers cite both the "
                    "submission and the reviewer's paper; run `revbench graph` over a corpus whose papers cite them "
                    "(Semantic Scholar's references) and evaluate the warehouse again")
        return None

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        refs = self.graph(benchmark).references
        assert refs is not None  # missing() refused a benchmark without reference lists
        return salton_scores(benchmark, draw, needed, _cited(refs, benchmark), self.params.pooling)  # type: ignore[attr-defined]


def _cited(refs: pl.DataFrame, benchmark: Benchmark) -> pl.DataFrame:
    """``paper_id, item``: each of the benchmark's papers with each paper that cites it."""
    ids = [benchmark.submissions["paper_id"], *(d["paper_id"] for d in benchmark.draws)]
    if benchmark.graph is not None and benchmark.graph.history is not None:
        ids.append(benchmark.graph.history["paper_id"])
    ours = pl.concat([i.cast(pl.Utf8) for i in ids]).unique().implode()
    return refs.filter(pl.col("cited_key").is_in(ours)).select(pl.col("cited_key").alias("paper_id"),
                                                               pl.col("citing_id").alias("item"))
