"""The rebuild's comparison with the original, read from the rebuild's warehouse, the world's
truth, the original's files and the predictions its evaluation exported: pool recall and the
pooling bias under both pool configurations, the tuples, and each scorer's loss on both sides
(``rebuild.json``'s content; ``revbench.rebuild.report`` writes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.importers.registry import load_benchmark
from revbench.evaluation.model import Benchmark, MetricValue, Scores, Split, is_difference_row
from revbench.flows.evaluate import predictions_path
from revbench.rebuild.pools import PoolsChoice, held_similarity, identities, pool_fates
from revbench.schemas.tables import AUTHOR_LINKS, RATING_TUPLES, RATINGS
from revbench.settings import Settings
from revbench.synth.truth import load_truth
from revbench.tasks import rebuild as rb
from revbench.tasks.release import release_id
from revbench.warehouse import Warehouse

SPLIT_COUNTERPART = {"lr_paper_centric": "paper_centric", "lr_reviewer_centric": "reviewer_centric",
                     "goldstandard": "reviewer_centric"}
"""The rebuilt release's split that each original split is compared with, which is also the kind
of tuple the original split holds."""


def original_tuples(bench: Benchmark) -> pl.DataFrame:
    """The original's tuples (:data:`tasks.rebuild.TUPLE_SCHEMA`, benchmark ids): LR-bench's as
    published, the gold standard's as its metric forms them (two papers one participant rated
    differently)."""
    parts = []
    for s in bench.splits:
        kind = SPLIT_COUNTERPART.get(s.name)
        if kind is None:
            continue
        if s.tuples is not None and s.tuples.height:
            t = s.tuples
            if kind == "paper_centric":
                parts.append(t.select(pl.lit(kind).alias("kind"), pl.col("paper_pos").alias("anchor"),
                                      pl.col("reviewer_pos").alias("positive"), pl.col("reviewer_neg").alias("negative"),
                                      "rating_pos", "rating_neg"))
            else:
                parts.append(t.select(pl.lit(kind).alias("kind"), pl.col("reviewer_pos").alias("anchor"),
                                      pl.col("paper_pos").alias("positive"), pl.col("paper_neg").alias("negative"),
                                      "rating_pos", "rating_neg"))
        elif s.ratings is not None and s.ratings.height:
            parts.append(rb.tuples_of_ratings(s.ratings, kind))
    return pl.concat(parts).cast(rb.TUPLE_SCHEMA) if parts else pl.DataFrame(schema=rb.TUPLE_SCHEMA)


def _back_to_benchmark(ratings: pl.DataFrame, tuples: pl.DataFrame, reviewer_of: dict[str, str],
                       paper_of: dict[str, str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rebuild's kept ratings and tuples in the benchmark's ids (what maps to no benchmark
    reviewer or paper is left out: the panel answers nothing else)."""
    r = ratings.select(pl.col("reviewer_id").replace_strict(reviewer_of, default=None),
                       pl.col("paper_id").replace_strict(paper_of, default=None),
                       pl.col("rating").cast(pl.Float64)).drop_nulls()
    pc = tuples.filter(pl.col("kind") == "paper_centric").select(
        "kind", pl.col("anchor_id").replace_strict(paper_of, default=None).alias("anchor"),
        pl.col("positive_id").replace_strict(reviewer_of, default=None).alias("positive"),
        pl.col("negative_id").replace_strict(reviewer_of, default=None).alias("negative"), "rating_pos", "rating_neg")
    rc = tuples.filter(pl.col("kind") == "reviewer_centric").select(
        "kind", pl.col("anchor_id").replace_strict(reviewer_of, default=None).alias("anchor"),
        pl.col("positive_id").replace_strict(paper_of, default=None).alias("positive"),
        pl.col("negative_id").replace_strict(paper_of, default=None).alias("negative"), "rating_pos", "rating_neg")
    return r, pl.concat([pc, rc]).cast(rb.TUPLE_SCHEMA).drop_nulls()


def comparison(s: Settings, world_dir: Path, bench: Benchmark, kind: str, source: Path, release_dir: Path,
               rows: list[dict[str, Any]], pools: PoolsChoice, release_key: str, evaluation_dir: Path) -> dict[str, Any]:
    """``rebuild.json``'s content: ``pool_recall`` (of the fitted pools the comparison uses),
    ``tuples``, ``scorers``, ``kendall_tau``, the same for the product's settings under
    ``defaults``, ``pools`` (both configurations and why the comparison uses which) and what they
    were computed from. ``pools``: the rebuild's two pool configurations."""
    held = pl.read_parquet(world_dir / "truth" / "benchmark_ratings.parquet")
    mentions = load_truth(world_dir).mentions
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        links, corpus = wh.read(AUTHOR_LINKS), wh.ingest.corpus_papers()
        ratings = wh.read(RATINGS).filter(pl.col("status") == "kept")
        tuples = wh.read(RATING_TUPLES)
    linked, shared = identities(links, mentions)
    similarity = held_similarity(s, corpus, mentions, held)
    fates = pool_fates(s.warehouse_path, mentions, held, similarity)
    fates_defaults = pool_fates(pools.defaults_warehouse, mentions, held, similarity)
    person_to_reviewer = dict(pl.read_parquet(world_dir / "truth" / "reviewers.parquet").select("person_id", "reviewer_id").iter_rows())
    reviewer_of = {a: person_to_reviewer[p] for p, a in linked.sort("person_id").iter_rows() if p in person_to_reviewer}
    paper_of = dict(held.drop_nulls("arxiv_id").select("arxiv_id", "paper_id").unique().iter_rows())
    rebuilt_ratings, rebuilt_tuples = _back_to_benchmark(ratings, tuples, reviewer_of, paper_of)
    mapped = rebuilt_ratings.height
    # Two authors of one split reviewer rating one paper: one rating per (reviewer, paper) is compared.
    rebuilt_ratings = rebuilt_ratings.unique(["reviewer_id", "paper_id"], keep="first").sort("reviewer_id", "paper_id")
    original = original_tuples(bench)
    kinds = list(dict.fromkeys(original["kind"].to_list()))
    main = next(sp.name for sp in bench.splits if sp.name in SPLIT_COUNTERPART)
    scorers = rb.scorer_rows(rows, (bench.name, main), ("release", SPLIT_COUNTERPART[main]))
    # The product's settings: the rebuilt ratings of the pairs its pools invited (the panel answers
    # a pair the same whichever pools invited it), their tuples, and the scorers on those tuples.
    invited = fates_defaults.filter(pl.col("recalled")).select("reviewer_id", "paper_id")
    ratings_d = rebuilt_ratings.join(invited, on=["reviewer_id", "paper_id"], how="semi")
    tuples_d = pl.concat([rb.tuples_of_ratings(ratings_d, k) for k in kinds]).cast(rb.TUPLE_SCHEMA) if kinds else rebuilt_tuples.clear()
    scorers_d = [dict(r) for r in scorers]
    subset_rows = _subset_losses(s, release_dir, release_key, evaluation_dir, SPLIT_COUNTERPART[main], invited,
                                 reviewer_of, paper_of, [r["name"] for r in scorers])
    for r in scorers_d:
        got = subset_rows.get(r["name"], {})
        r.update({"rebuilt_loss": got.get("value"), "rebuilt_ci": [got.get("ci_low"), got.get("ci_high")],
                  "rebuilt_n": got.get("n")})
    fit = pools.fit
    return {
        "benchmark": {"kind": kind, "source": str(source), "version": bench.version, "split": main,
                      "compared_with": SPLIT_COUNTERPART[main]},
        "release": str(release_dir),
        "pools": {
            "used": "fitted",
            "why": ("the comparison uses the pools fitted to the original's rated pairs, so that what it misses is "
                    "the pipeline's (ingest, identities, conflicts, screening), not the settings'; the product's "
                    "settings are measured beside it under 'defaults'"),
            "fitted": pools.fitted, "defaults": pools.defaults,
            "fit": {"coverage": fit.coverage, "rated_pairs_with_similarity": fit.pairs, "below_tau": fit.below_tau,
                    "covered": fit.covered, "invitations": fit.invitations,
                    "tau": f"with candidates_per_query, the cheapest pools (fewest query-candidate pairs) that reach "
                           f"{fit.coverage:.0%} of the original's rated pairs by similarity alone",
                    "candidates_per_query": "the depth of each query's candidates, by similarity, those pools reach",
                    "max_queries_per_candidate": "the most queries a candidate is among the first candidates_per_query "
                                                 "of at tau, so the cap chooses none",
                    "min_recent_papers": "the fewest recent papers a rated reviewer has (at most the product's setting)"},
        },
        "pool_recall": rb.recall_summary(fates, fit.tau),
        "tuples": _tuple_summary(original, rebuilt_tuples, rebuilt_ratings, kinds, held, mapped, len(shared)),
        "scorers": scorers,
        "kendall_tau": rb.kendall_tau(scorers),
        "defaults": {
            "pool_recall": rb.recall_summary(fates_defaults, pools.defaults["tau"]),
            "tuples": _tuple_summary(original, tuples_d, ratings_d, kinds, held, ratings_d.height, len(shared)),
            "scorers": scorers_d,
            "kendall_tau": rb.kendall_tau(scorers_d),
        },
        "pooling_bias": pooling_bias(fates, fates_defaults, scorers, scorers_d),
    }


def _tuple_summary(original: pl.DataFrame, rebuilt_tuples: pl.DataFrame, rebuilt_ratings: pl.DataFrame, kinds: list[str],
                   held: pl.DataFrame, mapped: int, shared: int) -> dict[str, Any]:
    by_kind = [rb.compare_tuples(original, rebuilt_tuples, rebuilt_ratings, k) for k in kinds]
    levels = held.select("reviewer_id", "paper_id", "level").join(rebuilt_ratings, on=["reviewer_id", "paper_id"])
    return {
        "original": sum(c.original for c in by_kind), "rebuilt": sum(c.rebuilt for c in by_kind),
        "recalled": sum(c.recalled for c in by_kind), "matched": sum(c.matched for c in by_kind),
        "reversed": sum(c.reversed for c in by_kind), "tied": sum(c.tied for c in by_kind),
        "unpaired": sum(c.unpaired for c in by_kind), "extra": sum(c.extra for c in by_kind),
        # None, not True, when nothing was compared: an empty rebuild must not read "identical".
        "labels_identical": None if not any(c.recalled for c in by_kind) else all(c.labels_identical is not False
                                                                                 for c in by_kind),
        "ratings_identical": bool((levels["level"] == levels["rating"]).all()) if levels.height else None,
        "ratings_compared": levels.height, "ratings_repeated": mapped - rebuilt_ratings.height,
        "authors_of_two_reviewers": shared, "by_kind": [c.as_dict() for c in by_kind],
    }


def _subset_losses(s: Settings, release_dir: Path, key: str, evaluation_dir: Path, split: str, invited: pl.DataFrame,
                   reviewer_of: dict[str, str], paper_of: dict[str, str], scorers: list[str]) -> dict[str, dict[str, Any]]:
    """Each scorer's loss (with its interval) on the release's ``split`` tuples whose two pairs
    the product's pools invited (``invited``: benchmark ids), from the predictions the evaluation
    exported (no scorer runs again)."""
    k = key.encode()
    rel_reviewer = {release_id(k, "reviewer", a): r for a, r in reviewer_of.items()}
    rel_paper = {release_id(k, "paper", a): p for a, p in paper_of.items()}
    pairs = set(invited.select("reviewer_id", "paper_id").iter_rows())
    bench = load_benchmark("release", release_dir)
    sp = next(x for x in bench.splits if x.name == split)

    def inside(r: str, p: str) -> bool:
        return (rel_reviewer.get(r), rel_paper.get(p)) in pairs

    keep = [inside(a, b) and inside(c, d) for a, b, c, d in
            sp.tuples.select("reviewer_pos", "paper_pos", "reviewer_neg", "paper_neg").iter_rows()]
    sub = Split(split, tuples=sp.tuples.filter(pl.Series(keep, dtype=pl.Boolean)))
    subset = Benchmark(bench.name, bench.version, bench.submissions, bench.draws, [sub], scale=bench.scale)
    runs = []
    for name in scorers:
        path = predictions_path(evaluation_dir, bench.name, name)
        if path.exists():
            data = json.loads(path.read_text())
            runs.append(Scores(name, [pl.DataFrame([(r, p, float(v)) for r, ps in data.items() for p, v in ps.items()],
                                                   schema={"reviewer_id": pl.Utf8, "paper_id": pl.Utf8, "score": pl.Float64},
                                                   orient="row")]))
    if not runs or sub.tuples.height == 0:
        return {}
    return own_losses(Evaluator(subset, n_resamples=s.ratings.bootstrap, seed=0).evaluate_all(runs), split)


def own_losses(values: list[MetricValue], split: str) -> dict[str, dict[str, Any]]:
    """Each scorer's own loss on ``split`` by scorer, as a dict of its row; paired differences
    (rows with a baseline) left out, whatever their names."""
    return {v.scorer: v.__dict__ for v in values if v.metric == "loss" and v.split == split and not is_difference_row(v)}


def pooling_bias(fates: pl.DataFrame, fates_defaults: pl.DataFrame, scorers: list[dict[str, Any]],
                 scorers_d: list[dict[str, Any]]) -> dict[str, Any]:
    """What the product's pools do to the benchmark, against pools fitted to the original: recall
    by original rating and by similarity stratum under each, and each scorer's loss on the tuples
    each keeps (pooling by similarity keeps the pairs a similarity scorer already finds similar)."""
    def by(f: pl.DataFrame, col: str) -> dict[str, Any]:
        g = f.group_by(col).agg(pl.len().alias("pairs"), pl.col("recalled").sum().alias("recalled")).sort(col)
        return {str(k): {"pairs": int(n), "recalled": int(r), "recall": r / n if n else None} for k, n, r in g.iter_rows()}

    def stratum(f: pl.DataFrame) -> pl.DataFrame:
        edges = list(rb.STRATA)
        labels = [f"{lo:.1f}-{hi:.1f}" for lo, hi in zip(edges, edges[1:], strict=False)]
        return f.with_columns(pl.when(pl.col("similarity").is_null()).then(pl.lit("no paper")).otherwise(
            pl.col("similarity").cut(edges[1:-1], labels=labels, left_closed=True).cast(pl.Utf8)).alias("stratum"))

    d = {x["name"]: x for x in scorers_d}
    return {
        "recall_by_rating": {"fitted": by(fates, "rating"), "defaults": by(fates_defaults, "rating")},
        "recall_by_stratum": {"fitted": by(stratum(fates), "stratum"), "defaults": by(stratum(fates_defaults), "stratum")},
        "loss_change": [{"name": x["name"], "fitted": x["rebuilt_loss"], "defaults": d.get(x["name"], {}).get("rebuilt_loss"),
                         "fitted_n": x["rebuilt_n"], "defaults_n": d.get(x["name"], {}).get("rebuilt_n")} for x in scorers],
    }
