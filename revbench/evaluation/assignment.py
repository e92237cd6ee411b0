"""The assignment a program chair would get from a scorer's affinities, solved exactly.

Given candidate pairs ``(reviewer, paper)`` with an affinity each, every paper ``p`` asks for
``d_p = min(k, |candidates of p|)`` reviewers and every reviewer takes at most ``L`` papers. With
``x_rp`` in {0, 1}:

1. ``C* = max sum x`` (as many assigned pairs as the loads allow; a full assignment where one
   exists), subject to ``sum_r x_rp <= d_p`` and ``sum_p x_rp <= L``;
2. objective ``sum`` (TPMS's linear program, OpenReview's default matcher):
   ``max sum a'_rp x_rp`` subject to ``sum x = C*``;
   objective ``fair`` (max-min, after PeerReview4All): first ``t* = max t`` subject to
   ``sum_r a'_rp x_rp / d_p >= t`` for every paper, then ``max sum a'_rp x_rp`` subject to
   that ``t*`` too: the worst-off paper's mean affinity is as high as it can be, and the rest
   as in ``sum``. PeerReview4All repeats the max-min step paper by paper (lexicographically);
   one step and the utilitarian tie-break is the common approximation, and what is solved here.

``a'`` is the scorer's affinity rescaled to [0, 1] over the instance (an increasing affine map:
it changes neither objective's optimum, and keeps the solver's numbers well scaled). A pair
the scorer left unscored gets 0, the lowest affinity.

Solved with HiGHS through :func:`scipy.optimize.milp` (scipy is already a dependency; HiGHS
solves both objectives as mixed-integer programs, where OR-Tools' min-cost flow would need a
search around it for the max-min one). The ``sum`` program is a bipartite b-matching, whose
relaxation is integral; the ``fair`` one is not, so integrality is asked for in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

Objective = Literal["sum", "fair"]
OBJECTIVES: tuple[str, ...] = ("sum", "fair")
ASSIGNED_SCHEMA = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "affinity": pl.Float64}


class AssignmentError(RuntimeError):
    """The solver failed on an instance (never expected: every instance here is feasible)."""


@dataclass(frozen=True)
class Instance:
    """Candidate pairs in a fixed order, with each paper's and reviewer's index."""

    pairs: pl.DataFrame
    """``reviewer_id, paper_id, affinity`` (affinity null where the scorer left the pair unscored)."""
    paper: np.ndarray
    reviewer: np.ndarray
    demand: np.ndarray
    """``d_p`` per paper index."""
    papers: list[str]
    reviewers: list[str]


def instance(candidates: pl.DataFrame, per_paper: int) -> Instance:
    """The pairs of ``candidates`` (``reviewer_id, paper_id, affinity``) as a solver instance;
    duplicates are one pair."""
    pairs = (candidates.select("reviewer_id", "paper_id", pl.col("affinity").cast(pl.Float64))
             .unique(["reviewer_id", "paper_id"], keep="first").sort("paper_id", "reviewer_id"))
    papers = pairs["paper_id"].unique().sort().to_list()
    reviewers = pairs["reviewer_id"].unique().sort().to_list()
    p_of = {p: i for i, p in enumerate(papers)}
    r_of = {r: i for i, r in enumerate(reviewers)}
    paper = np.array([p_of[p] for p in pairs["paper_id"].to_list()], dtype=np.int64)
    reviewer = np.array([r_of[r] for r in pairs["reviewer_id"].to_list()], dtype=np.int64)
    counts = np.bincount(paper, minlength=len(papers))
    return Instance(pairs, paper, reviewer, np.minimum(counts, per_paper), papers, reviewers)


def rescaled(affinity: np.ndarray) -> np.ndarray:
    """Affinities mapped to [0, 1] by the instance's lowest and highest; unscored (NaN) -> 0;
    all equal -> all 1 (every assignment is then as good)."""
    a = np.asarray(affinity, dtype=float)
    finite = np.isfinite(a)
    if not finite.any():
        return np.ones_like(a)
    lo, hi = float(a[finite].min()), float(a[finite].max())
    out = np.ones_like(a) if hi == lo else (a - lo) / (hi - lo)
    return np.where(finite, out, 0.0)


def _milp(c: np.ndarray, rows: list[tuple[np.ndarray, float, float]], n: int, integral: np.ndarray) -> np.ndarray:
    """``min c x`` over ``0 <= x <= 1`` (x integral where ``integral``) and ``lo <= A x <= hi``."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import vstack

    lo = np.zeros(len(c))
    hi = np.ones(len(c))
    constraints = [LinearConstraint(vstack([r[0] for r in rows]).tocsr(), [r[1] for r in rows], [r[2] for r in rows])]
    res = milp(c, constraints=constraints, integrality=integral, bounds=Bounds(lo, hi),
               options={"disp": False, "mip_rel_gap": 0.0})
    if res.x is None:
        raise AssignmentError(f"HiGHS found no assignment ({res.message})")
    return np.asarray(res.x)


def solve(candidates: pl.DataFrame, per_paper: int, max_load: int, objective: Objective = "sum") -> pl.DataFrame:
    """The assigned pairs (``reviewer_id, paper_id, affinity``) of ``candidates`` under
    ``per_paper`` reviewers per paper and ``max_load`` papers per reviewer (module docstring)."""
    if per_paper < 1 or max_load < 1:
        raise ValueError(f"reviewers per paper ({per_paper}) and maximum load ({max_load}) must be at least 1")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown assignment objective {objective!r}; expected sum or fair")
    inst = instance(candidates, per_paper)
    n = inst.pairs.height
    if n == 0:
        return pl.DataFrame(schema=ASSIGNED_SCHEMA)
    from scipy.sparse import csr_matrix

    a = rescaled(inst.pairs["affinity"].fill_null(float("nan")).to_numpy())
    cols = np.arange(n)
    by_paper = csr_matrix((np.ones(n), (inst.paper, cols)), shape=(len(inst.papers), n))
    by_reviewer = csr_matrix((np.ones(n), (inst.reviewer, cols)), shape=(len(inst.reviewers), n))
    every = csr_matrix(np.ones((1, n)))
    base = [(by_paper[i], 0.0, float(inst.demand[i])) for i in range(len(inst.papers))]
    base += [(by_reviewer[j], 0.0, float(max_load)) for j in range(len(inst.reviewers))]
    integral = np.ones(n)
    best = round(float(_milp(-np.ones(n), base, n, integral).sum()))
    rows = [*base, (every, best, best)]
    if objective == "fair":
        # t is one more (continuous) variable: maximise it under every paper's mean affinity >= t
        from scipy.sparse import hstack

        fair_rows = [(hstack([r, csr_matrix((r.shape[0], 1))]).tocsr(), lo, hi) for r, lo, hi in rows]
        for i in range(len(inst.papers)):
            mean_row = by_paper[i].multiply(a).tocsr() / float(inst.demand[i])
            fair_rows.append((hstack([mean_row, csr_matrix(np.array([[-1.0]]))]).tocsr(), 0.0, np.inf))
        c = np.zeros(n + 1)
        c[-1] = -1.0
        x_t = _milp(c, fair_rows, n + 1, np.append(integral, 0.0))
        t_star = float(x_t[-1])
        # the worst-off paper keeps t*, up to HiGHS's feasibility tolerance
        for i in range(len(inst.papers)):
            mean_row = by_paper[i].multiply(a).tocsr() / float(inst.demand[i])
            rows.append((mean_row, t_star - 1e-7, np.inf))
    x = _milp(-a, rows, n, integral)
    chosen = np.flatnonzero(x > 0.5)
    return inst.pairs[chosen.tolist()].select(list(ASSIGNED_SCHEMA))
