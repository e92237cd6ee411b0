"""The rebuild's comparison with the original, read from the rebuild's warehouse, the world's
truth and the original's files, and written as ``rebuild.json``, ``rebuild.md`` and ``rebuild.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.evaluation.model import Benchmark
from revbench.files import write_atomic
from revbench.settings import Settings
from revbench.tasks import rebuild as rb

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


def similarities(s: Settings, corpus: pl.DataFrame, mentions: pl.DataFrame, persons: list[str],
                 queries: list[str]) -> pl.DataFrame:
    """For every person and query paper, the highest cosine between the query and any other
    corpus paper of the person, with the pools' model (the vectors come from the cache the pools
    filled): ``person_id, arxiv_id, similarity`` (null for a person with no other paper)."""
    from revbench.ml.embeddings import settings_cache
    from revbench.tasks.pools import paper_texts

    vectors = settings_cache(s, s.pools.model).embed(paper_texts(corpus, s.pools.model))
    row = {a: i for i, a in enumerate(corpus["arxiv_id"].to_list())}
    papers_of: dict[str, list[int]] = {}
    for a, person in mentions.select("arxiv_id", "person_id").unique().sort("person_id", "arxiv_id").iter_rows():
        if a in row:
            papers_of.setdefault(person, []).append(row[a])
    qs = [q for q in dict.fromkeys(queries) if q in row]
    qi = np.array([row[q] for q in qs], dtype=np.int64)
    out: dict[str, list[Any]] = {"person_id": [], "arxiv_id": [], "similarity": []}
    for person in dict.fromkeys(persons):
        mine = np.array(papers_of.get(person, []), dtype=np.int64)
        if mine.size == 0 or qi.size == 0:
            sims = [None] * len(qs)
        else:
            m = vectors[mine] @ vectors[qi].T
            m[mine[:, None] == qi[None, :]] = -np.inf  # a person's own query paper is no evidence for it
            best = m.max(axis=0)
            sims = [None if not np.isfinite(x) else float(x) for x in best]
        out["person_id"] += [person] * len(qs)
        out["arxiv_id"] += qs
        out["similarity"] += sims
    return pl.DataFrame(out, schema={"person_id": pl.Utf8, "arxiv_id": pl.Utf8, "similarity": pl.Float64})


def _held_similarity(s: Settings, corpus: pl.DataFrame, mentions: pl.DataFrame, held: pl.DataFrame) -> pl.DataFrame:
    """:func:`similarities` of the held pairs alone."""
    pairs = held.select("person_id", "arxiv_id").drop_nulls().unique()
    sims = similarities(s, corpus, mentions, pairs["person_id"].unique().sort().to_list(),
                        pairs["arxiv_id"].unique().sort().to_list())
    return pairs.join(sims, on=["person_id", "arxiv_id"], how="left")


def fit_from_world(s: Settings, world_dir: Path) -> rb.PoolFit:
    """The pool settings fitted to the original's rated pairs (:func:`tasks.rebuild.fit_pools`),
    from the world's truth and the warehouse's corpus, with the pools' model."""
    from revbench.synth.truth import load_truth
    from revbench.tasks.pools import first_recent_year
    from revbench.warehouse import Warehouse

    held = pl.read_parquet(world_dir / "truth" / "benchmark_ratings.parquet")
    reviewers = pl.read_parquet(world_dir / "truth" / "reviewers.parquet")["person_id"].unique().sort().to_list()
    mentions = load_truth(world_dir).mentions
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        corpus = wh.ingest.corpus_papers()
    queries = held["arxiv_id"].drop_nulls().unique().sort().to_list()
    sims = similarities(s, corpus, mentions, reviewers, queries)
    since = first_recent_year(corpus, s.pools.recent_years)
    recent_papers = corpus.filter(pl.col("year") >= since).select("arxiv_id")
    recent = dict(mentions.join(recent_papers, on="arxiv_id").select("person_id", "arxiv_id").unique()
                  .group_by("person_id").len().iter_rows())
    return rb.fit_pools(sims, held.drop_nulls("arxiv_id"), recent, s.pools.min_recent_papers)


def pool_fates(warehouse: Path, mentions: pl.DataFrame, held: pl.DataFrame, similarity: pl.DataFrame) -> pl.DataFrame:
    """:func:`tasks.rebuild.pair_fates` of round 1 of the pools in ``warehouse`` (``mentions``:
    the world's truth, whose person each mention is)."""
    from revbench.schemas.tables import ASSIGNMENTS, AUTHOR_LINKS, POOL_EVIDENCE, POOL_EXCLUSIONS, QUERY_SAMPLES
    from revbench.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        links, corpus = wh.read(AUTHOR_LINKS), wh.ingest.corpus_papers()
        queries = set(wh.pools.read_round(QUERY_SAMPLES, 1)["arxiv_id"].to_list())
        evidence, exclusions = wh.pools.read_round(POOL_EVIDENCE, 1), wh.pools.read_round(POOL_EXCLUSIONS, 1)
        assignments = wh.pools.read_round(ASSIGNMENTS, 1)
    identities, _shared = _identities(links, mentions)
    return rb.pair_fates(held, identities, set(corpus["arxiv_id"].to_list()), queries, evidence, exclusions, assignments,
                         similarity)


def _identities(links: pl.DataFrame, mentions: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The world's people to the warehouse's authors, and the authors merged from two people."""
    linked = links.join(mentions, on=["arxiv_id", "position"]).select("person_id", "author_id").unique()
    # An author merged from two people's mentions is credited to neither: the panel answered for
    # one of them, and crediting the other would put a rating on the wrong reviewer.
    shared = linked.group_by("author_id").len().filter(pl.col("len") > 1)["author_id"].to_list()
    return linked.filter(~pl.col("author_id").is_in(shared)), shared


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
               rows: list[dict[str, Any]], pools: Any, release_key: str, evaluation_dir: Path) -> dict[str, Any]:
    """``rebuild.json``'s content: ``pool_recall`` (of the fitted pools the comparison uses),
    ``tuples``, ``scorers``, ``kendall_tau``, the same for the product's settings under
    ``defaults``, ``pools`` (both configurations and why the comparison uses which) and what they
    were computed from. ``pools`` is the rebuild's ``PoolsChoice``."""
    from revbench.schemas.tables import AUTHOR_LINKS, RATING_TUPLES, RATINGS
    from revbench.synth.truth import load_truth
    from revbench.warehouse import Warehouse

    held = pl.read_parquet(world_dir / "truth" / "benchmark_ratings.parquet")
    mentions = load_truth(world_dir).mentions
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        links, corpus = wh.read(AUTHOR_LINKS), wh.ingest.corpus_papers()
        ratings = wh.read(RATINGS).filter(pl.col("status") == "kept")
        tuples = wh.read(RATING_TUPLES)
    identities, shared = _identities(links, mentions)
    similarity = _held_similarity(s, corpus, mentions, held)
    fates = pool_fates(s.warehouse_path, mentions, held, similarity)
    fates_defaults = pool_fates(pools.defaults_warehouse, mentions, held, similarity)
    person_to_reviewer = dict(pl.read_parquet(world_dir / "truth" / "reviewers.parquet").select("person_id", "reviewer_id").iter_rows())
    reviewer_of = {a: person_to_reviewer[p] for p, a in identities.sort("person_id").iter_rows() if p in person_to_reviewer}
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
    from revbench.evaluation.evaluate import Evaluator
    from revbench.evaluation.importers.registry import load_benchmark
    from revbench.evaluation.model import Scores, Split
    from revbench.flows.evaluate import predictions_path
    from revbench.tasks.release import release_id

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
    values = Evaluator(subset, n_resamples=s.ratings.bootstrap, seed=0).evaluate_all(runs)
    return {v.scorer: v.__dict__ for v in values if v.metric == "loss" and v.split == split and " - " not in v.scorer}


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


def _yes(x: bool | None) -> str:
    return "n/a (nothing compared)" if x is None else str(x)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _markdown(r: dict[str, Any]) -> str:
    p, t = r["pool_recall"], r["tuples"]
    b = r["benchmark"]
    lines = [f"# Rebuild of {b['kind']} ({b['source']}, version {b['version']})", "",
             f"Pool recall of the original's rated pairs at tau {p['tau']}: **{p['recalled']}/{p['pairs']}**"
             + (f" ({p['recall']:.1%})" if p["recall"] is not None else ""), "",
             "| similarity stratum | pairs | recalled | recall |", "|---|---|---|---|"]
    lines += [f"| {x['stratum']}{' (below tau)' if x['below_tau'] else ''} | {x['pairs']} | {x['recalled']} | "
              f"{_share(x['recall'])} |" for x in p["by_stratum"]]
    lines += ["", "| original rating | pairs | recalled |", "|---|---|---|"]
    lines += [f"| {x['rating']:g} | {x['pairs']} | {x['recalled']} |" for x in p["by_rating"]]
    lines += ["", "Missed, by reason: " + (", ".join(f"{k} {n}" for k, n in p["missed_by_reason"].items() if n) or "none"), ""]
    if p["missed"]:
        lines += ["| reviewer | paper | rating | similarity | reason | detail |", "|---|---|---|---|---|---|"]
        lines += [f"| {m['reviewer_id']} | {m['paper_id']} | {m['rating']:g} | "
                  f"{'-' if m['similarity'] is None else format(m['similarity'], '.2f')} | {m['reason']} | {m['detail']} |"
                  for m in p["missed"]]
    lines += ["", f"## Tuples ({b['split']} against the release's {b['compared_with']})", "",
              f"Original {t['original']}, rebuilt {t['rebuilt']}. Of the {t['recalled']} original tuples whose two pairs "
              f"the rebuild rated: {t['matched']} with the same label, {t['reversed']} reversed, {t['tied']} tied by the "
              f"survey's 1-5 scale, {t['unpaired']} never paired (a reviewer split over two authors); "
              f"{t['extra']} rebuilt tuples pair ratings the original never paired. "
              f"Labels identical: **{_yes(t['labels_identical'])}**; every rebuilt rating equals the original's level: "
              f"**{_yes(t['ratings_identical'])}** ({t['ratings_compared']} ratings).", "",
              "## Scorers", "", "| scorer | loss on the original (95% CI) | pairs | loss on the rebuild (95% CI) | pairs |",
              "|---|---|---|---|---|"]

    def cell(x: Any, ci: list[Any]) -> str:
        return "-" if x is None else f"{x:.3f} ({ci[0]:.3f}-{ci[1]:.3f})" if ci[0] is not None else f"{x:.3f}"
    lines += [f"| {s['name']} | {cell(s['original_loss'], s['original_ci'])} | {s['original_n']} | "
              f"{cell(s['rebuilt_loss'], s['rebuilt_ci'])} | {s['rebuilt_n']} |" for s in r["scorers"]]
    tau = r["kendall_tau"]
    lines += ["", f"Kendall tau between the scorers' orderings: **{'-' if tau is None else f'{tau:.2f}'}** "
              "(the two columns rest on different numbers of pairs: see the pairs columns).", ""]
    if "defaults" in r:
        lines += _defaults_markdown(r, cell)
    return "\n".join(lines)


def _defaults_markdown(r: dict[str, Any], cell: Any) -> list[str]:
    """The pools section: which settings the comparison uses and why, the product's settings
    beside them, and the pooling bias the difference measures."""
    pools, d, bias = r["pools"], r["defaults"], r["pooling_bias"]
    f, p = pools["fitted"], pools["defaults"]
    dp, dt = d["pool_recall"], d["tuples"]
    lines = ["## Our pipeline or our settings", "", f"The comparison above uses the **{pools['used']}** pools: {pools['why']}.",
             "", "| setting | product (as configured) | fitted to the original | fitted how |", "|---|---|---|---|"]
    lines += [f"| {k} | {p[k]} | {f[k]} | {pools['fit'][k]} |" for k in ("tau", "candidates_per_query",
                                                                       "max_queries_per_candidate", "min_recent_papers")]
    lines += ["", f"With the product's settings the pools recall **{dp['recalled']}/{dp['pairs']}**"
              + (f" ({dp['recall']:.1%})" if dp["recall"] is not None else "") + " of the original's rated pairs; missed: "
              + (", ".join(f"{k} {n}" for k, n in dp["missed_by_reason"].items() if n) or "none") + ".",
              "", f"Tuples with the product's settings: {dt['rebuilt']} rebuilt; of the {dt['recalled']} original tuples "
              f"whose pairs were both rated, {dt['matched']} with the same label, {dt['reversed']} reversed, {dt['tied']} tied.",
              "", "### Pooling bias", "", "Recall of the original's rated pairs by its rating and by the similarity of the "
              "reviewer's closest paper, with each configuration:", "",
              "| original rating | pairs | fitted | product |", "|---|---|---|---|"]
    fr, pr = bias["recall_by_rating"]["fitted"], bias["recall_by_rating"]["defaults"]
    lines += [f"| {k} | {fr[k]['pairs']} | {_share(fr[k]['recall'])} | {_share(pr.get(k, {}).get('recall'))} |" for k in fr]
    lines += ["", "| similarity stratum | pairs | fitted | product |", "|---|---|---|---|"]
    fs, ps = bias["recall_by_stratum"]["fitted"], bias["recall_by_stratum"]["defaults"]
    lines += [f"| {k} | {fs[k]['pairs']} | {_share(fs[k]['recall'])} | {_share(ps.get(k, {}).get('recall'))} |" for k in fs]
    lines += ["", "Each scorer's loss on the rebuilt tuples each configuration keeps (the product's: the tuples whose two "
              "pairs its pools invited; fewer pairs, so compare with the pairs columns):", "",
              "| scorer | loss, fitted pools (95% CI) | pairs | loss, product's pools (95% CI) | pairs |", "|---|---|---|---|---|"]
    dd = {x["name"]: x for x in d["scorers"]}
    lines += [f"| {x['name']} | {cell(x['rebuilt_loss'], x['rebuilt_ci'])} | {x['rebuilt_n']} | "
              f"{cell(dd[x['name']]['rebuilt_loss'], dd[x['name']]['rebuilt_ci'])} | {dd[x['name']]['rebuilt_n']} |"
              for x in r["scorers"]]
    tau = d["kendall_tau"]
    lines += ["", f"Kendall tau between the original's ordering and the product's pools' ordering: "
              f"**{'-' if tau is None else f'{tau:.2f}'}**.", ""]
    return lines


def _figure(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    strata = r["pool_recall"]["by_stratum"]
    names = [x["stratum"] for x in strata]
    a.bar(names, [x["pairs"] for x in strata], color=["#f4c7c3" if x["below_tau"] else "#d0d7de" for x in strata],
          label="rated pairs (red: below tau)")
    a.bar(names, [x["recalled"] for x in strata], color="#2f81f7", label="invited")
    a.set_xlabel("similarity of the reviewer's closest paper to the query")
    a.set_ylabel("original rated pairs")
    a.set_title(f"Pool recall {r['pool_recall']['recalled']}/{r['pool_recall']['pairs']} (tau {r['pool_recall']['tau']})")
    a.tick_params(axis="x", rotation=30)
    a.legend()
    sc = [s for s in r["scorers"] if s["original_loss"] is not None and s["rebuilt_loss"] is not None]
    for s in sc:
        xo, yo = s["original_loss"], s["rebuilt_loss"]
        xe = [[xo - s["original_ci"][0]], [s["original_ci"][1] - xo]] if s["original_ci"][0] is not None else None
        ye = [[yo - s["rebuilt_ci"][0]], [s["rebuilt_ci"][1] - yo]] if s["rebuilt_ci"][0] is not None else None
        b.errorbar([xo], [yo], xerr=xe, yerr=ye, fmt="o", capsize=3, label=s["name"])
    lo = min([0.0, *[min(s["original_loss"], s["rebuilt_loss"]) for s in sc]])
    b.plot([lo, 0.75], [lo, 0.75], ls="--", color="grey", lw=1)
    b.set_xlabel("loss on the original")
    b.set_ylabel("loss on the rebuild")
    tau = r["kendall_tau"]
    b.set_title(f"Scorers (Kendall tau {'-' if tau is None else f'{tau:.2f}'})")
    if sc:
        b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result: dict[str, Any], out: Path) -> list[Path]:
    """``rebuild.json``, ``rebuild.md`` and ``rebuild.png`` in ``out``, each written whole."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "rebuild.json", out / "rebuild.md", out / "rebuild.png"]
    write_atomic(paths[0], json.dumps(result, indent=1, default=str) + "\n")
    write_atomic(paths[1], _markdown(result))
    _figure(result, out / "rebuild.png.tmp.png")
    (out / "rebuild.png.tmp.png").replace(paths[2])
    return paths
