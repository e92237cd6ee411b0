"""A rebuilt benchmark against its original: which of the original's rated pairs the pools
invited (and why the others were not), whether the rebuilt tuples carry the original's labels,
and whether the scorers rank the same way on both. Pure functions over frames; every number
is computed from the frames given (the original's files and the rebuild's warehouse), none is
carried over from the world that was built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from revbench.evaluation.model import is_difference_row

STRATA = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
"""Edges of the similarity strata recall is reported by (the highest cosine between the query
paper and any of the reviewer's papers, with the pools' model)."""
COI_REASONS = ("query_author", "coauthor", "same_affiliation")
SCREENING_REASONS = ("screening", "unreachable")
MISS_REASONS = ("not_ingested", "not_linked", "not_sampled", "coi", "screening", "cap", "below_tau")
"""Why an original rated pair was not invited, in the order they are tested: its query paper is
not in the corpus; none of the reviewer's mentions was linked to an author of theirs alone; its
query paper was not drawn as a query; then, among the query's candidates: a conflict of interest,
screening (too few recent papers, no usable email), the per-query or per-candidate cap; and, for
a reviewer who was never a candidate of the query, no paper of theirs reached tau."""
TUPLE_SCHEMA = {"kind": pl.Utf8, "anchor": pl.Utf8, "positive": pl.Utf8, "negative": pl.Utf8,
                "rating_pos": pl.Float64, "rating_neg": pl.Float64}
HELD_SCHEMA = {"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "rating": pl.Float64}


def pair_fates(held: pl.DataFrame, identities: pl.DataFrame, corpus_ids: set[str], queries: set[str],
               evidence: pl.DataFrame, exclusions: pl.DataFrame, assignments: pl.DataFrame,
               similarity: pl.DataFrame) -> pl.DataFrame:
    """One row per original rated pair (``held``: ``reviewer_id, paper_id, rating, person_id,
    arxiv_id``) with ``recalled`` and, when it was not, ``reason`` (one of :data:`MISS_REASONS`)
    and ``detail``; ``similarity`` (``person_id, arxiv_id, similarity``) adds each pair's cosine.
    ``identities`` maps the world's people to the warehouse's authors (``person_id, author_id``),
    each author to one person only (an author merged from two people's mentions is left out)."""
    authors: dict[str, set[str]] = {}
    for person, author in identities.select("person_id", "author_id").iter_rows():
        authors.setdefault(person, set()).add(author)
    invited = set(assignments.select("query_id", "author_id").iter_rows())
    recalled_pairs = set(evidence.select("query_id", "author_id").iter_rows())
    excluded: dict[tuple[str, str], tuple[str, str]] = {}
    for q, a, reason, detail in exclusions.select("query_id", "author_id", "reason", "detail").iter_rows():
        excluded.setdefault((q, a), (reason, detail or ""))
    sim = {(p, a): s for p, a, s in similarity.select("person_id", "arxiv_id", "similarity").iter_rows()}
    rows = []
    for r, paper, rating, person, arxiv_id in held.select("reviewer_id", "paper_id", "rating", "person_id", "arxiv_id").iter_rows():
        ids = authors.get(person, set())
        pairs = [(arxiv_id, a) for a in sorted(ids)]
        reason = detail = None
        if arxiv_id is None or arxiv_id not in corpus_ids:
            reason, detail = "not_ingested", "the query paper is not in the corpus"
        elif not ids:
            reason, detail = "not_linked", "no mention of the reviewer was linked to an author of theirs alone"
        elif arxiv_id not in queries:
            reason, detail = "not_sampled", "the paper was not drawn as a query"
        elif any(p in invited for p in pairs):
            pass
        elif hit := next((excluded[p] for p in pairs if p in excluded and excluded[p][0] in COI_REASONS), None):
            reason, detail = "coi", f"{hit[0]}: {hit[1]}"
        elif hit := next((excluded[p] for p in pairs if p in excluded and excluded[p][0] in SCREENING_REASONS), None):
            reason, detail = "screening", f"{hit[0]}: {hit[1]}"
        elif any(p in recalled_pairs for p in pairs):
            reason, detail = "cap", "a candidate, but the query or the candidate had its invitations"
        else:
            reason, detail = "below_tau", "no paper of the reviewer reached tau"
        if reason in ("below_tau", "screening", "cap") and len(ids) > 1:
            detail += f"; disambiguation split the reviewer over {len(ids)} authors"
        rows.append({"reviewer_id": r, "paper_id": paper, "rating": rating, "similarity": sim.get((person, arxiv_id)),
                     "recalled": reason is None, "reason": reason, "detail": detail})
    return pl.DataFrame(rows, schema={**HELD_SCHEMA, "similarity": pl.Float64, "recalled": pl.Boolean,
                                      "reason": pl.Utf8, "detail": pl.Utf8})


def _recall_rows(fates: pl.DataFrame, by: str, labels: list[Any]) -> list[dict[str, Any]]:
    out = []
    for label in labels:
        part = fates.filter(pl.col(by) == label)
        n = part.height
        k = int(part["recalled"].sum()) if n else 0
        out.append({by: label, "pairs": n, "recalled": k, "recall": k / n if n else None})
    return out


def recall_summary(fates: pl.DataFrame, tau: float) -> dict[str, Any]:
    """``pool_recall``: overall, by similarity stratum, by original rating, the misses by reason
    and every missed pair with its reason."""
    n = fates.height
    k = int(fates["recalled"].sum()) if n else 0
    edges = list(STRATA)
    labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(edges, edges[1:], strict=False)]
    strat = fates.with_columns(pl.col("similarity").fill_null(-1.0).cut(edges[1:-1], labels=labels, left_closed=True)
                               .cast(pl.Utf8).alias("stratum"))
    strat = strat.with_columns(pl.when(pl.col("similarity").is_null()).then(pl.lit("no paper"))
                               .otherwise(pl.col("stratum")).alias("stratum"))
    present = [s for s in [*labels, "no paper"] if strat.filter(pl.col("stratum") == s).height]
    missed = fates.filter(~pl.col("recalled"))
    return {
        "pairs": n, "recalled": k, "recall": k / n if n else None, "tau": tau,
        "by_stratum": [{**r, "below_tau": r["stratum"] != "no paper" and float(r["stratum"].split("-")[1]) <= tau}
                       for r in _recall_rows(strat, "stratum", present)],
        "by_rating": _recall_rows(fates, "rating", sorted(set(fates["rating"].to_list()))),
        "missed_by_reason": {r: missed.filter(pl.col("reason") == r).height for r in MISS_REASONS},
        "missed": missed.sort("reason", "paper_id", "reviewer_id").to_dicts(),
    }


def tuples_of_ratings(ratings: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Tuples from pointwise ratings (``reviewer_id, paper_id, rating``): ``reviewer_centric``,
    two papers rated differently by one reviewer, or ``paper_centric``, two reviewers rating one
    paper differently; the higher rating is the positive (the ratings stage's own pairing,
    :func:`revbench.tasks.ratings.rating_pairs`, on the benchmark's scale)."""
    from revbench.tasks.ratings import rating_pairs

    pairs = rating_pairs(ratings.with_columns(pl.col("rating").cast(pl.Float64)), kind)
    return pairs.select("kind", pl.col("anchor_id").alias("anchor"), pl.col("positive_id").alias("positive"),
                        pl.col("negative_id").alias("negative"), "rating_pos", "rating_neg").sort("anchor", "positive", "negative")


@dataclass(frozen=True)
class TupleComparison:
    """The rebuilt tuples of one kind against the original's, on the pairs both rated."""

    kind: str
    original: int
    recalled: int
    """Original tuples whose two rated pairs were both rated in the rebuild."""
    rebuilt: int
    matched: int
    """Recalled original tuples the rebuild holds with the same positive and negative."""
    reversed: int
    """Recalled original tuples the rebuild holds the other way round (a label that differs)."""
    tied: int
    """Recalled original tuples whose two ratings the rebuild's 1-5 scale makes equal (no tuple)."""
    unpaired: int
    """Recalled original tuples rated differently that the rebuild never paired (its two ratings
    are under two authors of one reviewer, a disambiguation split)."""
    extra: int
    """Rebuilt tuples the original does not have (pairs it rated but never paired)."""
    labels_identical: bool | None
    """No recalled tuple reversed; None when no tuple was recalled (nothing was compared)."""
    disagreements: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready fields."""
        return dict(self.__dict__)


def compare_tuples(original: pl.DataFrame, rebuilt: pl.DataFrame, rebuilt_ratings: pl.DataFrame, kind: str) -> TupleComparison:
    """``original`` and ``rebuilt`` tuples (:data:`TUPLE_SCHEMA`, benchmark ids) of ``kind``;
    ``rebuilt_ratings`` (``reviewer_id, paper_id, rating``) says which pairs the rebuild rated.
    A recalled original tuple's label is identical when the rebuild holds it with the same
    positive; it differs when the rebuild holds it reversed (a tie is counted apart: the survey's
    five levels cannot tell the gold standard's quarter steps apart)."""
    o, b = original.filter(pl.col("kind") == kind), rebuilt.filter(pl.col("kind") == kind)
    rated = {(r, p): y for r, p, y in rebuilt_ratings.select("reviewer_id", "paper_id", "rating").iter_rows()}

    def pair(anchor: str, item: str) -> tuple[str, str]:
        return (anchor, item) if kind == "reviewer_centric" else (item, anchor)

    same = set(b.select("anchor", "positive", "negative").iter_rows())
    recalled = matched = rev = tied = unpaired = 0
    disagreements = []
    for anchor, pos, neg, rp, rn in o.select("anchor", "positive", "negative", "rating_pos", "rating_neg").iter_rows():
        a, c = pair(anchor, pos), pair(anchor, neg)
        if a not in rated or c not in rated:
            continue
        recalled += 1
        if (anchor, pos, neg) in same:
            matched += 1
        elif (anchor, neg, pos) in same:
            rev += 1
            disagreements.append({"anchor": anchor, "positive": pos, "negative": neg, "original": [rp, rn],
                                  "rebuilt": [rated[a], rated[c]]})
        elif rated[a] == rated[c]:
            tied += 1
        else:
            unpaired += 1
    either_way = set(o.select("anchor", "positive", "negative").iter_rows())
    either_way |= {(x, n, p) for x, p, n in either_way}
    extra = sum(1 for t in same if t not in either_way)
    return TupleComparison(kind, o.height, recalled, len(same), matched, rev, tied, unpaired, extra,
                           rev == 0 if recalled else None, disagreements)


def scorer_rows(rows: list[dict[str, Any]], original: tuple[str, str], rebuilt: tuple[str, str]) -> list[dict[str, Any]]:
    """Per scorer, its loss with the 95% interval and the pairs it rests on, on the original's
    split and on the rebuild's (``(benchmark, split)`` each), from evaluation result rows (paired
    differences left out: :func:`revbench.evaluation.model.is_difference_row`)."""
    def get(bench: str, split: str) -> dict[str, dict[str, Any]]:
        return {r["scorer"]: r for r in rows if r["benchmark"] == bench and r["split"] == split and r["metric"] == "loss"
                and not is_difference_row(r)}
    o, b = get(*original), get(*rebuilt)
    out = []
    for name in sorted(set(o) | set(b)):
        x, y = o.get(name, {}), b.get(name, {})
        out.append({"name": name, "original_loss": x.get("value"), "original_ci": [x.get("ci_low"), x.get("ci_high")],
                    "original_n": x.get("n"), "rebuilt_loss": y.get("value"), "rebuilt_ci": [y.get("ci_low"), y.get("ci_high")],
                    "rebuilt_n": y.get("n")})
    return out


def kendall_tau(scorers: list[dict[str, Any]]) -> float | None:
    """Kendall's tau-b between the scorers' orderings by loss on the original and on the rebuild
    (None with fewer than two scorers having both, or when one side is all ties)."""
    from scipy.stats import kendalltau

    both = [(s["original_loss"], s["rebuilt_loss"]) for s in scorers
            if s["original_loss"] is not None and s["rebuilt_loss"] is not None]
    if len(both) < 2:
        return None
    tau = kendalltau([x for x, _ in both], [y for _, y in both]).statistic
    return None if tau is None or np.isnan(tau) else float(tau)


@dataclass(frozen=True)
class PoolFit:
    """Pool settings fitted to reproduce an original's candidate sets, with what each rests on."""

    tau: float
    """The threshold (to 0.01) of the cheapest pools that invite ``coverage`` of the original's rated pairs."""
    candidates_per_query: int
    """With it, the depth of the query's candidates (by similarity) those pools reach."""
    max_queries_per_candidate: int
    """The most queries a candidate is among the first ``candidates_per_query`` of, at ``tau``: so the cap chooses none."""
    min_recent_papers: int
    """The fewest recent papers a rated reviewer has (at most the product's setting)."""
    coverage: float
    pairs: int
    """Rated pairs with a similarity (a reviewer with a paper in the corpus)."""
    below_tau: int
    covered: int
    """Rated pairs the fitted pools reach (at or above tau, within the depth)."""
    invitations: int
    """(query, candidate) pairs the fitted pools hold before conflicts and screening."""

    def settings(self) -> dict[str, Any]:
        """The pools settings this fit stands for."""
        return {"tau": self.tau, "candidates_per_query": self.candidates_per_query,
                "max_queries_per_candidate": self.max_queries_per_candidate, "min_recent_papers": self.min_recent_papers}


def fit_pools(similarity: pl.DataFrame, held: pl.DataFrame, recent: dict[str, int], product_min_recent: int,
              coverage: float = 0.9) -> PoolFit:
    """The cheapest pool settings under which ``coverage`` of the original's rated pairs would be
    invited: ``similarity`` (``person_id, arxiv_id, similarity``: every reviewer against every
    query paper, the highest cosine of any paper of theirs), ``held`` (``person_id, arxiv_id``: the
    rated pairs), ``recent`` (each reviewer's recent papers). Over every threshold a rated pair
    sets (to 0.01, down to the one keeping all of them), the depth of candidates per query that
    reaches ``coverage`` of the pairs, and of those the pair with the fewest (query, candidate)
    pairs: the survey the original would have needed with our similarity. The per-candidate cap
    never chooses; screening keeps every rated reviewer."""
    rated = held.select("person_id", "arxiv_id").unique().join(similarity, on=["person_id", "arxiv_id"], how="inner")
    sims = np.sort(rated["similarity"].drop_nulls().to_numpy())
    if sims.size == 0:
        raise ValueError("no rated pair has a similarity: nothing to fit the pools to")
    need = int(np.ceil(round(coverage * sims.size, 9)))
    # Rounded before the floor: 0.15 * 100 is 15.000000000000002 in floating point, 0.29 * 100 28.999999999999996.
    taus = sorted({max(0.01, float(np.floor(round(x * 100, 6)) / 100)) for x in sims[: sims.size - need + 1]})
    best: tuple[int, float, int, pl.DataFrame] | None = None
    for tau in taus:
        above = similarity.filter(pl.col("similarity") >= tau).with_columns(
            pl.col("similarity").rank("ordinal", descending=True).over("arxiv_id").alias("q_rank"))
        ranks = np.sort(rated.join(above.select("person_id", "arxiv_id", "q_rank"), on=["person_id", "arxiv_id"],
                                   how="inner")["q_rank"].to_numpy())
        if ranks.size < need:
            continue
        depth = int(ranks[need - 1])
        invitations = int(above.filter(pl.col("q_rank") <= depth).height)
        if best is None or invitations <= best[0]:  # on a tie the higher threshold: the tighter pools
            best = (invitations, tau, depth, above)
    assert best is not None  # the lowest tau keeps every rated pair with a similarity
    invitations, tau, depth, above = best
    load = above.filter(pl.col("q_rank") <= depth).group_by("person_id").len()
    covered = rated.join(above.filter(pl.col("q_rank") <= depth), on=["person_id", "arxiv_id"], how="semi").height
    raters = rated["person_id"].unique().to_list()
    fewest = min((recent.get(p, 0) for p in raters), default=product_min_recent)
    return PoolFit(tau, depth, int(load["len"].max() or 1), max(0, min(product_min_recent, fewest)), coverage,
                   int(sims.size), int((sims < tau).sum()), covered, invitations)
