"""UniPR's combination of factors (``cof``): the semantic, topic and citation factors, each a
scorer of its own pooled over the reviewer's papers alike, fused within the unit each split
compares (a paper's candidates, a reviewer's papers) by reciprocal rank, by rescaled score or by
weights fit with cross-validation; UniPR's own per-paper ranks stay available as ``fusion=unipr``.

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

from revbench.evaluation.model import SCORES_SCHEMA, UNIT_ALL, UNIT_PAPER, UNIT_REVIEWER, Benchmark, Scores
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


FUSIONS = ("rrf", "score", "unipr", "weights")
GROUP_OF = {UNIT_PAPER: "paper_id", UNIT_REVIEWER: "reviewer_id", UNIT_ALL: None}
"""The column whose value a comparison unit holds fixed (None: every scored pair is one unit)."""
UNIT_WORDS = {UNIT_PAPER: "each paper's candidates", UNIT_REVIEWER: "each reviewer's papers", UNIT_ALL: "all scored pairs"}


class CofParams(Params):
    semantic: str = "embedding"
    """The semantic factor's scorer spec, its own parameters separated by ``;``
    (``semantic=embedding:model=NAME``)."""
    pooling: Pooling = UNIPR_POOLING
    fusion: Literal["rrf", "score", "unipr", "weights"] = "rrf"
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
    """UniPR's combination of factors, fused within the unit each split compares.

    Each factor k scores every needed (reviewer, paper) pair with its own scorer, pooled over the
    reviewer's papers by ``pooling`` (default the mean of the top 3). A split orders pairs that
    share a unit (:data:`revbench.evaluation.model.UNITS`): two candidates of one paper
    (paper-centric), or two papers of one reviewer (pointwise, reviewer-centric). A factor's
    value is made comparable within that unit only, so cof's fused scores are made once per unit
    the benchmark's splits compare (:attr:`Scores.by_unit`; ``draws`` holds the paper unit's, what
    ranking a paper's candidates and the predictions files read):

    - ``rank_k(u, x)``: pair x's rank within its unit u by factor k, 1 the best; tied pairs share
      the best rank of their tie (1, 1, 3), so fusion never breaks a tie by order. A pair factor k
      left unscored has no rank and adds 0 (as if ranked after every pair of its unit); a pair no
      factor scored stays unscored.
    - ``fusion=rrf`` (default): f(x) = sum over factors of 1 / rank_k(u, x).
    - ``fusion=score``: f(x) = sum over factors of (s_k(x) - min_u s_k) / (max_u s_k - min_u s_k),
      each factor's own score rescaled to [0, 1] within the unit (a unit where the factor scores
      every pair alike gives 0); unscored adds 0.
    - ``fusion=unipr``: UniPR's reciprocal ranks among each paper's candidates, for every split:
      a split comparing one reviewer's papers then compares ranks taken among different papers'
      candidates (rank 1 of 3 against rank 1 of 40), which says nothing about expertise. Kept by
      name for paper-centric rankings and for comparison; the report's basis says so.
    - ``fusion=weights``: f(x) = sum over factors of w_k / rank_k(u, x), w on the simplex (steps of
      1/10) fit by cross-validation over units: the rated units (papers, or reviewers) are
      ordered by the sha256 of their id and dealt round robin into ``folds`` folds; each fold's
      units are scored with the weights that best order the rated pairs of the other folds' units
      (the share of two pairs of one unit with different ratings that f orders like the ratings,
      ties half), so no unit is scored with weights fit on its own ratings. Ties between weights
      go to the one closest to equal weights, then to the first in grid order; a fold whose other
      folds hold no such pair keeps equal weights. Units without ratings are scored with the
      weights fit on every rated unit.

    Fusing a single factor within a unit orders that unit's pairs as the factor does (ranks and
    min-max are monotone there), so on every split it scores exactly the factor's loss."""

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

    @property
    def spec(self) -> str:
        """Every parameter, and what its factors' specs say of the models they read (their files'
        digest, a stand-in): new weights under the semantic factor are a new cof."""
        stamps = [part for f in self.factors.values() for part in f.spec.partition(":")[2].split(",")
                  if part.startswith(("model_digest=", "stand_in="))]
        return super().spec + "".join(f",{p}" for p in dict.fromkeys(stamps))

    def services(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for f in self.factors.values() for s in f.services()))

    def check(self, benchmark: Benchmark) -> None:
        """A graph factor's refusal is cof's: it fuses nothing it cannot stand on (an encoder's
        factors read no graph)."""
        if not self.params.encoder:  # type: ignore[attr-defined]
            self.refuse_graphless(benchmark)
        for f in self.factors.values():
            f.check(benchmark)

    def missing(self, benchmark: Benchmark) -> str | None:
        """The first thing a graph factor reads that ``benchmark`` lacks."""
        return next((m for f in self.factors.values() if isinstance(f, GraphScorer) and (m := f.missing(benchmark))), None)

    def score(self, benchmark: Benchmark) -> Scores:
        """The fused scores per unit, with each factor alone (as its own scorer) and each factor
        left out (``cof[-topic]``) as companions."""
        p = self.params
        assert isinstance(p, CofParams)
        self.check(benchmark)  # before the semantic factor spends its time
        by_factor = {k: f.score(benchmark) for k, f in self.factors.items()}
        needed = benchmark.pairs_needed()
        ratings = rated_pairs(benchmark) if p.fusion == "weights" else None
        units = [UNIT_PAPER] if p.fusion == "unipr" else benchmark_units(benchmark)
        # a factor's columns do not depend on the factors fused with it: make them once per unit
        # and draw, then every fusion (all factors and each one left out) only picks its columns
        columns = {u: [factor_columns({k: s.draws[d] for k, s in by_factor.items()}, needed, GROUP_OF[u],
                                      "score" if p.fusion == "score" else "rank")
                       for d in range(len(benchmark.draws))] for u in units}
        basis = fusion_basis(p.fusion, units)

        def fused(label: str, names: tuple[str, ...], spec: str) -> Scores:
            by_unit = {u: [self._fuse(scored_columns(c, names), ratings, u) for c in columns[u]] for u in units}
            return Scores(label, by_unit[UNIT_PAPER], spec, by_unit=by_unit, basis=basis)

        companions = [*by_factor.values()]
        for left_out in FACTORS:
            rest = tuple(k for k in FACTORS if k != left_out)
            companions.append(fused(f"{self.label}[-{left_out}]", rest, f"{self.spec} without {left_out}"))
        out = fused(self.label, FACTORS, self.spec)
        out.companions = companions
        return out

    def score_draw(self, benchmark: Benchmark, draw: int, needed: pl.DataFrame) -> pl.DataFrame:
        """One draw of :meth:`score` (which scores the factors over every draw at once)."""
        return self.score(benchmark).draws[draw]

    def _fuse(self, rr: pl.DataFrame, ratings: pl.DataFrame | None, unit: str) -> pl.DataFrame:
        if ratings is None:
            return fuse(rr, {k: 1.0 for k in rr.columns[2:]})
        return fuse_cross_validated(rr, ratings, self.params.folds, self.label,  # type: ignore[attr-defined]
                                    GROUP_OF[unit] or "paper_id")


def benchmark_units(benchmark: Benchmark) -> list[str]:
    """The units the benchmark's splits compare within, the paper's first (ranking a paper's
    candidates and the predictions files read it whatever the splits are)."""
    from revbench.evaluation.pairs import pairs_unit, split_pairs

    found = {pairs_unit(split_pairs(s)) for s in benchmark.splits}
    return [UNIT_PAPER, *(u for u in (UNIT_REVIEWER, UNIT_ALL) if u in found)]


def fusion_basis(fusion: str, units: list[str]) -> dict[str, str]:
    """Per unit, one phrase saying how the fused scores a split of that unit reads were made."""
    if fusion == "unipr":
        across = "UniPR's reciprocal ranks among each paper's candidates, here compared across papers"
        return {UNIT_PAPER: "UniPR's reciprocal ranks among each paper's candidates",
                UNIT_REVIEWER: across, UNIT_ALL: across}
    how = {"rrf": "reciprocal ranks", "score": "min-max scores",
           "weights": "cross-validated weights on reciprocal ranks"}[fusion]
    return {u: f"fused: {how} within {UNIT_WORDS[u]}" for u in units}


def reciprocal_ranks(factors: dict[str, pl.DataFrame], needed: pl.DataFrame, group: str | None = "paper_id") -> pl.DataFrame:
    """``reviewer_id, paper_id`` and one column per factor: 1 / its rank within ``group`` (a
    paper's candidates by default; ties share their best rank), 0 where it left the pair
    unscored; only the pairs some factor scored."""
    return scored_columns(factor_columns(factors, needed, group), tuple(factors))


def factor_columns(factors: dict[str, pl.DataFrame], needed: pl.DataFrame, group: str | None = "paper_id",
                   kind: Literal["rank", "score"] = "rank") -> pl.DataFrame:
    """Every ``needed`` pair with one column per factor, within each value of ``group`` (every
    scored pair when None): ``rank``, 1 / its rank (ties share their best rank); ``score``, its
    score rescaled to [0, 1] by the smallest and largest there (0 where all are equal). Null
    where the factor left the pair unscored."""
    out = needed.select("reviewer_id", "paper_id")
    for k, s in factors.items():
        s = s.filter(pl.col("score").is_not_null() & pl.col("score").is_finite())
        x = pl.col("score")
        if kind == "rank":
            r = x.rank("min", descending=True)
            value = 1.0 / (r.over(group) if group else r)
        else:
            lo, hi = (x.min().over(group), x.max().over(group)) if group else (x.min(), x.max())
            value = pl.when(hi > lo).then((x - lo) / (hi - lo)).otherwise(0.0)
        out = out.join(s.select("reviewer_id", "paper_id", value.cast(pl.Float64).alias(k)),
                       on=["reviewer_id", "paper_id"], how="left", maintain_order="left")
    return out


def scored_columns(columns: pl.DataFrame, names: tuple[str, ...]) -> pl.DataFrame:
    """The columns ``names`` of :func:`factor_columns`, on the pairs one of them scored, 0 where
    another left the pair unscored."""
    scored = pl.any_horizontal(pl.col(k).is_not_null() for k in names) if names else pl.lit(False)
    return columns.filter(scored).select("reviewer_id", "paper_id", *(pl.col(k).fill_null(0.0) for k in names))


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
    """Each unit's fold (papers, or reviewers): ordered by the sha256 of its id, dealt round robin
    (the same ids, the same folds, in any order)."""
    order = sorted(set(papers), key=lambda p: (hashlib.sha256(p.encode()).hexdigest(), p))
    return {p: i % folds for i, p in enumerate(order)}


def simplex_grid(n: int, steps: int = GRID_STEPS) -> np.ndarray:
    """Every weight vector of ``n`` non-negative multiples of 1/steps that sum to 1."""
    points = [c for c in itertools.product(range(steps + 1), repeat=n) if sum(c) == steps]
    return np.array(points, dtype=float) / steps


def fit_weights(rr: pl.DataFrame, ratings: pl.DataFrame, factors: list[str], group: str = "paper_id") -> np.ndarray | None:
    """The simplex weights whose fusion orders the most rated pairs of one unit (``group``: a
    paper's candidates, or a reviewer's papers) like their ratings (ties half); None where
    ``ratings`` hold no two pairs of a unit rated apart."""
    j = rr.join(ratings, on=["reviewer_id", "paper_id"]).select(group, "rating", *factors)
    pairs = j.join(j, on=group, suffix="_b").filter(pl.col("rating") > pl.col("rating_b"))
    if pairs.height == 0:
        return None
    diff = (pairs.select(factors).to_numpy() - pairs.select([f"{k}_b" for k in factors]).to_numpy())
    grid = simplex_grid(len(factors))
    d = diff @ grid.T
    agree = ((d > 0) + 0.5 * (d == 0)).mean(axis=0)
    dist = np.linalg.norm(grid - 1.0 / len(factors), axis=1)
    best = max(range(len(grid)), key=lambda g: (round(float(agree[g]), 12), -round(float(dist[g]), 12), -g))
    return grid[best]


def fuse_cross_validated(rr: pl.DataFrame, ratings: pl.DataFrame, folds: int, label: str = "cof",
                         group: str = "paper_id") -> pl.DataFrame:
    """Weighted fusion with weights fit by cross-validation over the units of ``group`` (see
    :class:`Cof`)."""
    factors = [c for c in rr.columns if c not in ("reviewer_id", "paper_id")]
    ratings = ratings.join(rr.select("reviewer_id", "paper_id"), on=["reviewer_id", "paper_id"])
    fold_of = paper_folds(ratings[group].to_list(), folds)
    equal = np.full(len(factors), 1.0 / len(factors)) if factors else np.zeros(0)
    fold = rr[group].replace_strict(fold_of, default=-1, return_dtype=pl.Int64)
    parts = []
    for f in sorted(set(fold.to_list())):
        train = ratings.filter(pl.col(group).replace_strict(fold_of, return_dtype=pl.Int64) != f)
        w = fit_weights(rr, train, factors, group) if factors else None
        w = equal if w is None else w
        log.info("%s: %s fold %s weights %s", label, group.removesuffix("_id"), "unrated" if f < 0 else f,
                 ", ".join(f"{k}={x:.1f}" for k, x in zip(factors, w, strict=True)))
        parts.append(fuse(rr.filter(fold == f), dict(zip(factors, w.tolist(), strict=True))))
    if not parts:
        return pl.DataFrame(schema=SCORES_SCHEMA)
    return pl.concat(parts).sort("reviewer_id", "paper_id")
