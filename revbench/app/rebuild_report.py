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


def _similarity(s: Settings, corpus: pl.DataFrame, mentions: pl.DataFrame, held: pl.DataFrame) -> pl.DataFrame:
    """For every held pair, the highest cosine between its query paper and any other corpus paper
    of the reviewer, with the pools' model (the vectors come from the cache the pools filled)."""
    from revbench.ml.embeddings import settings_cache
    from revbench.tasks.pools import paper_texts

    vectors = settings_cache(s, s.pools.model).embed(paper_texts(corpus))
    row = {a: i for i, a in enumerate(corpus["arxiv_id"].to_list())}
    papers_of: dict[str, list[int]] = {}
    for a, person in mentions.select("arxiv_id", "person_id").iter_rows():
        if a in row:
            papers_of.setdefault(person, []).append(row[a])
    out = []
    for person, q in held.select("person_id", "arxiv_id").unique().iter_rows():
        mine = [i for i in papers_of.get(person, []) if q in row and i != row[q]]
        sim = float(np.max(vectors[mine] @ vectors[row[q]])) if mine else None
        out.append({"person_id": person, "arxiv_id": q, "similarity": sim})
    return pl.DataFrame(out, schema={"person_id": pl.Utf8, "arxiv_id": pl.Utf8, "similarity": pl.Float64})


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
               rows: list[dict[str, Any]], tau: float) -> dict[str, Any]:
    """``rebuild.json``'s content: ``pool_recall``, ``tuples``, ``scorers``, ``kendall_tau`` and
    what they were computed from."""
    from revbench.schemas.tables import (
        ASSIGNMENTS,
        AUTHOR_LINKS,
        POOL_EVIDENCE,
        POOL_EXCLUSIONS,
        QUERY_SAMPLES,
        RATING_TUPLES,
        RATINGS,
    )
    from revbench.synth.truth import load_truth
    from revbench.warehouse import Warehouse

    held = pl.read_parquet(world_dir / "truth" / "benchmark_ratings.parquet")
    mentions = load_truth(world_dir).mentions
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        links, corpus = wh.read(AUTHOR_LINKS), wh.corpus_papers()
        queries = set(wh.read_round(QUERY_SAMPLES, 1)["arxiv_id"].to_list())
        evidence, exclusions = wh.read_round(POOL_EVIDENCE, 1), wh.read_round(POOL_EXCLUSIONS, 1)
        assignments = wh.read_round(ASSIGNMENTS, 1)
        ratings = wh.read(RATINGS).filter(pl.col("status") == "kept")
        tuples = wh.read(RATING_TUPLES)
    linked = links.join(mentions, on=["arxiv_id", "position"]).select("person_id", "author_id").unique()
    # An author merged from two people's mentions is credited to neither: the panel answered for
    # one of them, and crediting the other would put a rating on the wrong reviewer.
    shared = linked.group_by("author_id").len().filter(pl.col("len") > 1)["author_id"].to_list()
    identities = linked.filter(~pl.col("author_id").is_in(shared))
    fates = rb.pair_fates(held, identities, set(corpus["arxiv_id"].to_list()), queries, evidence, exclusions, assignments,
                          _similarity(s, corpus, mentions, held))
    person_to_reviewer = dict(pl.read_parquet(world_dir / "truth" / "reviewers.parquet").select("person_id", "reviewer_id").iter_rows())
    reviewer_of = {a: person_to_reviewer[p] for p, a in identities.sort("person_id").iter_rows() if p in person_to_reviewer}
    paper_of = dict(held.drop_nulls("arxiv_id").select("arxiv_id", "paper_id").unique().iter_rows())
    rebuilt_ratings, rebuilt_tuples = _back_to_benchmark(ratings, tuples, reviewer_of, paper_of)
    mapped = rebuilt_ratings.height
    # Two authors of one split reviewer rating one paper: one rating per (reviewer, paper) is compared.
    rebuilt_ratings = rebuilt_ratings.unique(["reviewer_id", "paper_id"], keep="first").sort("reviewer_id", "paper_id")
    original = original_tuples(bench)
    kinds = list(dict.fromkeys(original["kind"].to_list()))
    by_kind = [rb.compare_tuples(original, rebuilt_tuples, rebuilt_ratings, k) for k in kinds]
    levels = held.select("reviewer_id", "paper_id", "level").join(rebuilt_ratings, on=["reviewer_id", "paper_id"])
    main = next(sp.name for sp in bench.splits if sp.name in SPLIT_COUNTERPART)
    scorers = rb.scorer_rows(rows, (bench.name, main), ("release", SPLIT_COUNTERPART[main]))
    return {
        "benchmark": {"kind": kind, "source": str(source), "version": bench.version, "split": main,
                      "compared_with": SPLIT_COUNTERPART[main]},
        "release": str(release_dir),
        "pool_recall": rb.recall_summary(fates, tau),
        "tuples": {
            "original": sum(c.original for c in by_kind), "rebuilt": sum(c.rebuilt for c in by_kind),
            "recalled": sum(c.recalled for c in by_kind), "matched": sum(c.matched for c in by_kind),
            "reversed": sum(c.reversed for c in by_kind), "tied": sum(c.tied for c in by_kind),
            "unpaired": sum(c.unpaired for c in by_kind), "extra": sum(c.extra for c in by_kind),
            # None, not True, when nothing was compared: an empty rebuild must not read "identical".
            "labels_identical": None if not any(c.recalled for c in by_kind) else all(c.labels_identical is not False
                                                                                     for c in by_kind),
            "ratings_identical": bool((levels["level"] == levels["rating"]).all()) if levels.height else None,
            "ratings_compared": levels.height, "ratings_repeated": mapped - rebuilt_ratings.height,
            "authors_of_two_reviewers": len(shared), "by_kind": [c.as_dict() for c in by_kind],
        },
        "scorers": scorers,
        "kendall_tau": rb.kendall_tau(scorers),
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
    return "\n".join(lines)


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
