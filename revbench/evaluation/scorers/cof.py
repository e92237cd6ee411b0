"""UniPR's combination of factors (``cof``): the semantic, topic and citation factors, each a
scorer of its own pooled over the reviewer's papers alike, fused by reciprocal rank or by weights
fit with cross-validation over the benchmark's papers.

The factors are the registered scorers themselves (``semantic`` any text scorer spec with a
pooling, ``topic``, ``citation``), composed, not copied: ``cof`` is exactly its factors' scores
fused, and it hands them back beside its own (:attr:`Scores.companions`) with each factor left
out, so the report has a row for each factor alone and each ablation.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field, field_validator, model_validator

from revbench.evaluation.model import SCORES_SCHEMA, Benchmark, Scores
from revbench.evaluation.scorers.base import (
    REGISTRY, SCORER_MODULES, Context, Params, Pooling, Scorer, make_scorer, parse_spec,
)
from revbench.evaluation.scorers.graph import UNIPR_POOLING, GraphScorer

log = logging.getLogger("revbench.evaluate")

FACTORS = ("semantic", "topic", "citation")
GRID_STEPS = 10
"""Weights fusion searches the simplex in steps of 1/GRID_STEPS (66 points for three factors)."""


def _check_semantic(spec: str) -> str:
    import importlib

    name, raw = parse_spec(spec.replace(";", ","))
    if name not in SCORER_MODULES:
        raise ValueError(f"unknown scorer {name!r}; expected a text scorer such as embedding or bm25")
    importlib.import_module(SCORER_MODULES[name])
    cls = REGISTRY[name]
    if issubclass(cls, GraphScorer) or "pooling" not in cls.params_model.model_fields:
        raise ValueError(f"{name} is not a text scorer pooled over the reviewer's papers (embedding or bm25)")
    if "pooling" in raw:
        raise ValueError("set pooling on cof (it pools every factor alike), not inside semantic")
    return spec


class CofParams(Params):
    semantic: str = "embedding"
    """The semantic factor's scorer spec, its own parameters separated by ``;``
    (``semantic=embedding:model=NAME``)."""
    pooling: Pooling = UNIPR_POOLING
    fusion: Literal["rrf", "weights"] = "rrf"
    folds: int = Field(5, ge=2)
    encoder: str = ""
    """A factor-aware encoder (``revbench train --objective factors``, or any model): every factor
    is then this encoder's cosine with the submission after the factor's instruction
    (``embedding:model=ENCODER,instruction=FACTOR``), and no graph is read."""

    @model_validator(mode="after")
    def _encoder_or_semantic(self) -> CofParams:
        if self.encoder and self.semantic != "embedding":
            raise ValueError("give encoder= (one encoder for every factor) or semantic= (the graph's topic and citation "
                             "factors beside it), not both")
        return self

    @field_validator("semantic")
    @classmethod
    def _semantic(cls, v: str) -> str:
        return _check_semantic(v)


class Cof(GraphScorer):
    """UniPR's combination of factors.

    Each factor k scores every needed (reviewer, paper) pair with its own scorer, pooled over the
    reviewer's papers by ``pooling`` (default the mean of the top 3). ``rank_k(p, r)`` is r's rank
    among paper p's candidates (the reviewers the benchmark needs scored against p) by factor k,
    1 the best; tied candidates share the best rank of their tie (1, 1, 3), so fusion never
    breaks a tie by order. A pair factor k left unscored has no rank and adds 0 (as if ranked
    after every candidate); a pair no factor scored stays unscored.

    ``fusion=rrf`` (default, UniPR): f(p, r) = sum over factors of 1 / rank_k(p, r).

    ``fusion=weights``: f(p, r) = sum over factors of w_k / rank_k(p, r), with w on the simplex
    (steps of 1/10) fit by cross-validation over papers: the rated papers are ordered by the
    sha256 of their id and dealt round robin into ``folds`` folds; each fold's papers are scored
    with the weights that best order the candidates of the other folds' papers (the share of
    candidate pairs of one paper with different ratings that f orders like the ratings, ties
    half), so no paper is scored with weights fit on its own ratings. Ties between weights go to
    the one closest to equal weights, then to the first in grid order; a fold whose other folds
    hold no such pair keeps equal weights (RRF divided by the number of factors). Papers without
    ratings are scored with the weights fit on every rated paper."""

    name = "cof"
    params_model = CofParams

    def __init__(self, params: Params, context: Context):
        super().__init__(params, context)
        p = self.params
        assert isinstance(p, CofParams)
        sem = p.semantic.replace(";", ",")
        specs = {"semantic": f"{sem}{',' if ':' in sem else ':'}pooling={p.pooling}",
                 "topic": f"topic:pooling={p.pooling}", "citation": f"citation:pooling={p.pooling}"}
        if p.encoder:
            specs = {f: f"embedding:model={p.encoder},instruction={f},pooling={p.pooling}" for f in FACTORS}
        self.factors: dict[str, Scorer] = {k: make_scorer(v, context) for k, v in specs.items()}

    def services(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for f in self.factors.values() for s in f.services()))

    def score(self, benchmark: Benchmark) -> Scores:
        """The fused scores, with each factor alone (as its own scorer) and each factor left out
        (``cof[-topic]``) as companions."""
        if not self.params.encoder:  # type: ignore[attr-defined]
            self.refuse_graphless(benchmark)  # before the semantic factor spends its time
        by_factor = {k: f.score(benchmark) for k, f in self.factors.items()}
        needed = benchmark.pairs_needed()
        ratings = rated_pairs(benchmark) if self.params.fusion == "weights" else None  # type: ignore[attr-defined]

        # a factor's ranks do not depend on the factors fused with it: rank each once per draw,
        # then every fusion (all factors and each one left out) only picks its columns
        ranks = [factor_ranks({k: s.draws[d] for k, s in by_factor.items()}, needed) for d in range(len(benchmark.draws))]

        def fused(names: tuple[str, ...]) -> list[pl.DataFrame]:
            return [self._fuse(scored_ranks(r, names), ratings) for r in ranks]

        companions = [*by_factor.values()]
        for left_out in FACTORS:
            rest = tuple(k for k in FACTORS if k != left_out)
            companions.append(Scores(f"{self.label}[-{left_out}]", fused(rest), f"{self.spec} without {left_out}"))
        return Scores(self.label, fused(FACTORS), self.spec, companions=companions)

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        """One draw of :meth:`score` (which scores the factors over every draw at once)."""
        return self.score(benchmark).draws[draw]

    def _fuse(self, rr: pl.DataFrame, ratings: pl.DataFrame | None) -> pl.DataFrame:
        if ratings is None:
            return fuse(rr, {k: 1.0 for k in rr.columns[2:]})
        return fuse_cross_validated(rr, ratings, self.params.folds, self.label)  # type: ignore[attr-defined]


def reciprocal_ranks(factors: dict[str, pl.DataFrame], needed: pl.DataFrame) -> pl.DataFrame:
    """``reviewer_id, paper_id`` and one column per factor: 1 / its rank among the paper's
    candidates (ties share their best rank), 0 where it left the pair unscored; only the pairs
    some factor scored."""
    return scored_ranks(factor_ranks(factors, needed), tuple(factors))


def factor_ranks(factors: dict[str, pl.DataFrame], needed: pl.DataFrame) -> pl.DataFrame:
    """Every ``needed`` pair with one column per factor: 1 / its rank among the paper's
    candidates (ties share their best rank), null where the factor left the pair unscored."""
    out = needed.select("reviewer_id", "paper_id")
    for k, s in factors.items():
        s = s.filter(pl.col("score").is_not_null() & pl.col("score").is_finite())
        ranks = s.select("reviewer_id", "paper_id",
                         (1.0 / pl.col("score").rank("min", descending=True).over("paper_id")).alias(k))
        out = out.join(ranks, on=["reviewer_id", "paper_id"], how="left", maintain_order="left")
    return out


def scored_ranks(ranks: pl.DataFrame, names: tuple[str, ...]) -> pl.DataFrame:
    """The columns ``names`` of :func:`factor_ranks`, on the pairs one of them scored, 0 where
    another left the pair unscored."""
    scored = pl.any_horizontal(pl.col(k).is_not_null() for k in names) if names else pl.lit(False)
    return ranks.filter(scored).select("reviewer_id", "paper_id", *(pl.col(k).fill_null(0.0) for k in names))


def fuse(rr: pl.DataFrame, weights: dict[str, float]) -> pl.DataFrame:
    """``reviewer_id, paper_id, score`` = sum over factors of weight x reciprocal rank."""
    total = pl.sum_horizontal([pl.col(k) * w for k, w in weights.items()]) if weights else pl.lit(0.0)
    return rr.select("reviewer_id", "paper_id", total.cast(pl.Float64).alias("score")).sort("reviewer_id", "paper_id")


def rated_pairs(benchmark: Benchmark) -> pl.DataFrame:
    """``reviewer_id, paper_id, rating`` of every rated pair of every split (tuples' sides too),
    the mean where several splits rate it."""
    parts = []
    for s in benchmark.splits:
        if s.ratings is not None:
            parts.append(s.ratings.select("reviewer_id", "paper_id", "rating"))
        if s.tuples is not None:
            for side in ("pos", "neg"):
                parts.append(s.tuples.select(pl.col(f"reviewer_{side}").alias("reviewer_id"),
                                             pl.col(f"paper_{side}").alias("paper_id"), pl.col(f"rating_{side}").alias("rating")))
    if not parts:
        return pl.DataFrame(schema={"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Float64})
    return pl.concat(parts).group_by("reviewer_id", "paper_id").agg(pl.col("rating").cast(pl.Float64).mean())


def paper_folds(papers: list[str], folds: int) -> dict[str, int]:
    """Each paper's fold: ordered by the sha256 of its id, dealt round robin (the same papers,
    the same folds, in any order)."""
    order = sorted(set(papers), key=lambda p: (hashlib.sha256(p.encode()).hexdigest(), p))
    return {p: i % folds for i, p in enumerate(order)}


def simplex_grid(n: int, steps: int = GRID_STEPS) -> np.ndarray:
    """Every weight vector of ``n`` non-negative multiples of 1/steps that sum to 1."""
    points = [c for c in itertools.product(range(steps + 1), repeat=n) if sum(c) == steps]
    return np.array(points, dtype=float) / steps


def fit_weights(rr: pl.DataFrame, ratings: pl.DataFrame, factors: list[str]) -> np.ndarray | None:
    """The simplex weights whose fusion orders the most candidate pairs of one paper like their
    ratings (ties half); None where ``ratings`` hold no two candidates of a paper rated apart."""
    j = rr.join(ratings, on=["reviewer_id", "paper_id"]).select("paper_id", "rating", *factors)
    pairs = j.join(j, on="paper_id", suffix="_b").filter(pl.col("rating") > pl.col("rating_b"))
    if pairs.height == 0:
        return None
    diff = (pairs.select(factors).to_numpy() - pairs.select([f"{k}_b" for k in factors]).to_numpy())
    grid = simplex_grid(len(factors))
    d = diff @ grid.T
    agree = ((d > 0) + 0.5 * (d == 0)).mean(axis=0)
    dist = np.linalg.norm(grid - 1.0 / len(factors), axis=1)
    best = max(range(len(grid)), key=lambda g: (round(float(agree[g]), 12), -round(float(dist[g]), 12), -g))
    return grid[best]


def fuse_cross_validated(rr: pl.DataFrame, ratings: pl.DataFrame, folds: int, label: str = "cof") -> pl.DataFrame:
    """Weighted fusion with weights fit by cross-validation over papers (see :class:`Cof`)."""
    factors = [c for c in rr.columns if c not in ("reviewer_id", "paper_id")]
    ratings = ratings.join(rr.select("reviewer_id", "paper_id"), on=["reviewer_id", "paper_id"])
    fold_of = paper_folds(ratings["paper_id"].to_list(), folds)
    equal = np.full(len(factors), 1.0 / len(factors)) if factors else np.zeros(0)
    fold = rr["paper_id"].replace_strict(fold_of, default=-1, return_dtype=pl.Int64)
    parts = []
    for f in sorted(set(fold.to_list())):
        train = ratings.filter(pl.col("paper_id").replace_strict(fold_of, return_dtype=pl.Int64) != f)
        w = fit_weights(rr, train, factors) if factors else None
        w = equal if w is None else w
        log.info("%s: fold %s weights %s", label, "unrated" if f < 0 else f,
                 ", ".join(f"{k}={x:.1f}" for k, x in zip(factors, w, strict=True)))
        parts.append(fuse(rr.filter(fold == f), dict(zip(factors, w.tolist(), strict=True))))
    if not parts:
        return pl.DataFrame(schema=SCORES_SCHEMA)
    return pl.concat(parts).sort("reviewer_id", "paper_id")
