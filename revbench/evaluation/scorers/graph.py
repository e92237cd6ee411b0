"""Expertise from the scholarly graph (UniPR's citation and topic factors): a per-paper score
f(p, q) between the submission p and each paper q of the reviewer's (their profile and, where the
benchmark carries it, their whole history: :func:`reviewer_papers`), pooled over the reviewer's
papers like the embedding scorers (default the mean of the top 3, as UniPR found best;
``pooling=max``, ``mean``, ``sum`` or any other pooling spec selectable). Bibliographic coupling
and co-citation are in :mod:`revbench.evaluation.scorers.graph_links`.

All read ``Benchmark.graph``; a benchmark without one, or without the part a scorer reads, is
refused in one line, never scored zero.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import Field

from revbench.errors import InputError
from revbench.evaluation.model import SCORES_SCHEMA, Benchmark, BenchmarkGraph, Scores
from revbench.evaluation.scorers.base import Params, Pooling, Scorer, pair_entries, pool_entries, submissions_of
from revbench.schemas.graph import TOPIC_SCHEMES

UNIPR_POOLING = "topk_mean:3"


GRAPH_HINT = ("the warehouse benchmark carries one once `revbench graph` has run on it, and so does a release built after "
              "that (its data/graph_*.parquet files), a weak benchmark `revbench labels` wrote from such a warehouse, "
              "and the gold standard with --graph-from s2")


class GraphScorer(Scorer):
    """A scorer that reads the benchmark's graph: refuses a benchmark without one, or without the
    part of it the scorer reads (:meth:`missing`)."""

    def score(self, benchmark: Benchmark) -> Scores:
        self.refuse_graphless(benchmark)
        return super().score(benchmark)

    def check(self, benchmark: Benchmark) -> None:
        self.refuse_graphless(benchmark)

    def refuse_graphless(self, benchmark: Benchmark) -> None:
        """One line naming the benchmark and this scorer when ``benchmark`` carries no graph, or
        lacks what this scorer reads: never a score of zero for want of input."""
        if benchmark.graph is None:
            raise InputError(
                f"{benchmark.name} carries no citation graph: the {self.name} scorer reads its citations and topics; "
                f"{GRAPH_HINT} (pick another --scorer for this benchmark)")
        lacking = self.missing(benchmark)
        if lacking:
            raise InputError(f"{benchmark.name} carries {lacking} (pick another --scorer for this benchmark)")

    def missing(self, benchmark: Benchmark) -> str | None:
        """What this scorer reads that ``benchmark``'s graph lacks, as ``no ...: the NAME scorer
        reads ...; how to get it``; None when it has it."""
        return None

    def graph(self, benchmark: Benchmark) -> BenchmarkGraph:
        assert benchmark.graph is not None  # score() refused a graph-less benchmark
        return benchmark.graph


def reviewer_papers(benchmark: Benchmark, draw: int) -> pl.DataFrame:
    """``reviewer_id, paper_id, year``: each reviewer's papers as the graph scorers see them, the
    profile draw's papers and then the graph's ``history`` (each paper once per reviewer): the
    profile's cap is for text, the graph knows the whole history where the benchmark carries it."""
    cols = ["reviewer_id", "paper_id", "year"]
    profile = benchmark.draws[draw].select(cols)
    history = benchmark.graph.history if benchmark.graph is not None else None
    if history is None or history.height == 0:
        return profile
    return (pl.concat([profile, history.select(cols).cast(profile.schema)])
            .unique(["reviewer_id", "paper_id"], keep="first", maintain_order=True))


class CitationParams(Params):
    pooling: Pooling = UNIPR_POOLING
    influential: float = Field(2.0, ge=1)
    half_life: float = Field(5.0, gt=0)
    direction: Literal["forward", "backward", "both"] = "both"


class Citation(GraphScorer):
    """Citations between the submission p and the reviewer's papers q, either way.

    Each citation edge weighs ``w_infl * 2 ** (-age / half_life)``, where ``w_infl`` is
    ``influential`` (default 2) when any source marks the citation influential (Semantic Scholar's
    isInfluential) and 1 otherwise (false or unknown), and ``age = max(0, year(p) - year(q))`` is
    the reviewer's paper's age at the submission's year (0 when either year is unknown): a paper
    as new as the submission weighs fully, one ``half_life`` years older (default 5) half as much.
    Each citation counts once whichever sources gave it. Then

        direction=forward   f(p, q) = w(p -> q)                  p cites q (UniPR's citation factor)
        direction=backward  f(p, q) = w(q -> p)                  q cites p
        direction=both      f(p, q) = w(p -> q) + w(q -> p)      (default)

    with w = 0 where there is no such edge: the sum, so a pair citing each other weighs more than
    one citing the other only. q ranges over the reviewer's profile and history papers
    (:func:`reviewer_papers`); the reviewer's f(p, q) are pooled (``pooling``). A benchmark whose
    graph holds no citation at all is refused (``missing``), never scored zero."""

    name = "citation"
    params_model = CitationParams

    def missing(self, benchmark: Benchmark) -> str | None:
        if self.graph(benchmark).citations.height:
            return None
        return ("no citation between its papers: the citation scorer reads who cites whom among the submissions and "
                "the reviewers' papers; run `revbench graph` (Semantic Scholar's references; OpenAlex's too with "
                "REVBENCH_OPENALEX__ENABLED=true) and evaluate the warehouse again, or ask S2 with --graph-from s2 "
                "for the gold standard")

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        p = self.params
        assert isinstance(p, CitationParams)
        mine = reviewer_papers(benchmark, draw)
        subs = submissions_of(benchmark, needed)
        if mine.height == 0 or subs.height == 0:
            return pl.DataFrame(schema=SCORES_SCHEMA)  # nothing to compare: every needed pair stays unscored
        cols = subs.select(pl.col("paper_id").alias("p"), pl.col("year").alias("year_p")).with_row_index("col")
        rows = mine.select(pl.col("paper_id").alias("q"), pl.col("year").alias("year_q")).with_row_index("row")
        # one edge per ordered pair, the last given (a hand-made frame may repeat one)
        edges = self.graph(benchmark).citations.unique(["citing_id", "cited_id"], keep="last", maintain_order=True)
        ways = {"forward": [("citing_id", "cited_id")], "backward": [("cited_id", "citing_id")]}
        ways["both"] = ways["forward"] + ways["backward"]
        age = (pl.col("year_p") - pl.col("year_q")).clip(lower_bound=0).fill_null(0).cast(pl.Float64)
        infl = pl.when(pl.col("is_influential").fill_null(False)).then(pl.lit(p.influential)).otherwise(pl.lit(1.0))
        w = pl.concat([edges.select(pl.col(sub).alias("p"), pl.col(rev).alias("q"), "is_influential")
                       .join(cols, on="p").join(rows, on="q")
                       .select("row", "col", (infl * (2.0 ** (-age / p.half_life))).alias("w"))
                       for sub, rev in ways[p.direction]]).group_by("row", "col").agg(pl.col("w").sum())
        entries = pair_entries(mine, subs["paper_id"].to_list(), needed)
        # f(p, q) only where a needed pair compares them: the cited entries take their edges'
        # weight, every other entry is 0 (a dense profile x submission matrix would be quadratic)
        cited = w["row"].to_numpy().astype(np.int64) * subs.height + w["col"].to_numpy().astype(np.int64)
        order = np.argsort(cited, kind="stable")
        cited, weight = cited[order], w["w"].to_numpy()[order]
        wanted = entries.rows * subs.height + entries.cols
        at = np.searchsorted(cited, wanted)
        hit = np.zeros(len(wanted), dtype=bool)
        if len(cited):
            hit = (at < len(cited)) & (cited[np.minimum(at, len(cited) - 1)] == wanted)
        sim = np.zeros(len(wanted))
        sim[hit] = weight[at[hit]]
        return pool_entries(entries, sim, p.pooling)


class TopicParams(Params):
    pooling: Pooling = UNIPR_POOLING
    scheme: Literal["all", *TOPIC_SCHEMES] = "all"  # type: ignore[valid-type]


def _topics(graph: BenchmarkGraph, scheme: str) -> pl.DataFrame:
    return graph.topics if scheme == "all" else graph.topics.filter(pl.col("scheme") == scheme)


class Topic(GraphScorer):
    """Overlap of the submission's and the reviewer's topics.

    Per scheme s (arXiv categories, S2 fields of study, OpenAlex topics), a paper is the vector
    topic -> score (1 where the source gives no score); f_s(p, q) is the cosine of the two
    vectors, and f(p, q) the mean of f_s over the schemes both papers have topics in (0 when they
    share none). Cosine rather than weighted Jaccard: it does not depend on how many topics a
    source lists or on its score scale (OpenAlex scores three topics, arXiv lists unscored
    categories), only on where the weight lies; averaging over schemes lets a coarse and a fine
    scheme count alike. ``scheme`` keeps one scheme only. A reviewer's papers without any topic
    are left out of the pooling (missing, not disjoint); a submission without topics, or a
    reviewer with no paper that has one, is left unscored. The reviewer's papers are the profile's
    and the history's (:func:`reviewer_papers`). A benchmark without any topic (of ``scheme``) is
    refused, never scored zero."""

    name = "topic"
    params_model = TopicParams

    def missing(self, benchmark: Benchmark) -> str | None:
        scheme = self.params.scheme  # type: ignore[attr-defined]
        if _topics(self.graph(benchmark), scheme).height:
            return None
        which = "" if scheme == "all" else f" of scheme {scheme}"
        return (f"no paper topics{which}: the topic scorer reads the papers' topics (arXiv categories, Semantic "
                "Scholar's fields of study, OpenAlex topics); run `revbench graph` (OpenAlex's topics need "
                "REVBENCH_OPENALEX__ENABLED=true) and evaluate the warehouse again, or ask S2 with --graph-from s2 "
                "for the gold standard" + ("" if scheme == "all" else ", or pick another scheme"))

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        p = self.params
        assert isinstance(p, TopicParams)
        topics = _topics(self.graph(benchmark), p.scheme)
        has = topics["paper_id"].unique().implode()
        profile = reviewer_papers(benchmark, draw).filter(pl.col("paper_id").is_in(has))
        subs = submissions_of(benchmark, needed).filter(pl.col("paper_id").is_in(has))
        if profile.height == 0 or subs.height == 0:
            return pl.DataFrame(schema=SCORES_SCHEMA)  # no topics on one side: those pairs stay unscored
        # f(p, q) only where a needed pair compares them, not profile x submissions (quadratic)
        entries = pair_entries(profile, subs["paper_id"].to_list(), needed)
        total = np.zeros(len(entries.rows))
        shared = np.zeros(len(entries.rows))
        for _, t in topics.group_by("scheme", maintain_order=True):
            vocab = {k: i for i, k in enumerate(t["topic"].unique().sort().to_list())}
            (a, has_a), (b, has_b) = (_unit_rows(side["paper_id"], t, vocab) for side in (profile, subs))
            total += np.asarray(a[entries.rows].multiply(b[entries.cols]).sum(axis=1)).ravel()
            shared += has_a[entries.rows] & has_b[entries.cols]
        sim = np.divide(total, shared, out=np.zeros_like(total), where=shared > 0)
        return pool_entries(entries, sim, p.pooling)


def _unit_rows(papers: pl.Series, topics: pl.DataFrame, vocab: dict[str, int]) -> tuple[Any, np.ndarray]:
    """One unit-length row of topic -> score per paper of ``papers``, and which rows have a topic
    (a paper whose topics all score 0 has none: it stays out of the scheme's mean)."""
    from scipy import sparse

    rows = (pl.DataFrame({"paper_id": papers}).with_row_index("row")
            .join(topics.select("paper_id", "topic", pl.col("score").fill_null(1.0)), on="paper_id"))
    m = sparse.csr_matrix((rows["score"].to_numpy(), (rows["row"].to_numpy(), [vocab[t] for t in rows["topic"]])),
                          shape=(len(papers), len(vocab)))
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    return (sparse.diags(np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)) @ m).tocsr(), norms > 0
