"""What the citation graph is worth, measured on the calibrated SYNTHETIC world across seeds.

For each point (a seed, and the strength of the world's citation-expertise link, ``revbench demo
--citation-link``; 1 is the world calibrated to real data), the demo runs end to end in its own data
folder, then:

1. ``revbench evaluate`` on its warehouse benchmark: the text scorers, each graph scorer
   (``citation``, ``coupling``, ``cocitation``, ``topic``) and ``cof`` (as shipped, with mean
   pooling, and with cross-validated weights, each with its ablations), every loss beside its
   paired bootstrap difference to ``embedding:pooling=mean`` on the pairs both cover;
2. the recall paths: the survey's kept ratings of the invitees each path found (semantic: a paper
   of theirs is near the query's text; citation: the query cites one; both), with a bootstrap
   interval (resampling queries) of the citation-only path's mean against the semantic-only one's;
3. three oracles from the world's truth, evaluated as predictions in the same run (``ORACLES``: the
   true affinity, and whether the paper cites the person at all or in the corpus), so each scorer
   reads against the ceiling and against the best a citation signal of this strength allows;
4. the flags against the panel's planted low-effort respondents (precision, recall), and the
   citation weak labels (exHarmony-style, the demo's 3 experts per paper) against the survey;
5. what the world's truth says of its citations (``revbench.synth.realism``): the chance a paper
   cites a person by true level, and bibliographic coupling's Kendall tau against the true level,
   so a link strength reads as something one could measure on real data.

Seeds are pooled by inverse-variance weighting of each seed's paired difference (its interval's
half-width / 1.96 as the standard error): a fixed-effect summary, stated as such.

    .venv/bin/python -m benchmarks.graph_worth                          # seeds 7 11 13, links 0 1 2 4 (about 25 min)
    .venv/bin/python -m benchmarks.graph_worth --seeds 7 --links 1      # one point (about 2 min)

Resumable: each point's numbers are kept under ``--work`` and reused (``--fresh`` to redo them);
the results go to ``benchmarks/results/graph_worth.json`` after every point.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BASELINE = "embedding:pooling=mean"
SCORERS = ("trivial", "tpms", "bm25:pooling=mean", BASELINE, "citation", "coupling", "cocitation", "topic",
           "cof", "cof:pooling=mean", "cof:fusion=weights,pooling=mean")
"""``cof`` as shipped (UniPR's pooling, reciprocal-rank fusion), and with mean pooling, whose semantic
factor is the baseline itself: what the graph's factors add to it is then the difference."""
SPLITS = ("pointwise", "paper_centric")
"""``reviewer_centric`` is the pointwise split's pairs again (one within-reviewer pair set)."""
PAPERS = 300
EXPERTS = 3


def point_name(seed: int, link: float) -> str:
    return f"p{PAPERS}-s{seed}-link{link:g}"


def run(cmd: list[str], env: dict[str, str], log: Path) -> float:
    """Run a revbench command, its output to ``log``; its wall time (a failure stops the benchmark
    with the log's last lines)."""
    t0 = time.monotonic()
    with log.open("w") as f:
        done = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        tail = log.read_text().splitlines()[-8:]
        raise SystemExit(f"{' '.join(cmd[2:5])} failed (exit {done.returncode}); {log}:\n" + "\n".join(tail))
    return time.monotonic() - t0


def losses(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """split -> scorer -> loss with its interval, ties and count; differences under ``A - baseline``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["metric"] == "loss" and r["split"] in SPLITS and r["value"] is not None:
            out.setdefault(r["split"], {})[r["scorer"]] = {
                "value": round(r["value"], 4), "lo": _r(r["ci_low"]), "hi": _r(r["ci_high"]), "n": r["n"],
                "ties": _r(r.get("ties"))}
    return out


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def recall_paths(assignments: pl.DataFrame, ratings: pl.DataFrame, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Kept ratings of the invitees each recall path found: per path the invitations, ratings, mean
    and share rated 4 or more; and the citation-only path's mean minus the semantic-only one's with
    a 95% bootstrap interval over queries (both groups resampled together)."""
    joined = assignments.select("query_id", "author_id", "path").join(
        ratings.select(pl.col("reviewer_id").alias("author_id"), pl.col("paper_id").alias("query_id"), "rating"),
        on=["query_id", "author_id"], how="left")
    out: dict[str, Any] = {"paths": {}}
    for path in ("semantic", "both", "citation"):
        g = joined.filter(pl.col("path") == path)
        rated = g.filter(pl.col("rating").is_not_null())["rating"].to_numpy()
        out["paths"][path] = {"invitations": g.height, "rated": int(len(rated)),
                              "mean": _r(rated.mean()) if len(rated) else None,
                              "share_4_plus": _r((rated >= 4).mean()) if len(rated) else None}
    rated = joined.filter(pl.col("rating").is_not_null() & pl.col("path").is_in(["semantic", "citation"]))
    queries = rated["query_id"].unique().sort().to_list()
    if not queries or rated.filter(pl.col("path") == "citation").height < 2 or rated.filter(pl.col("path") == "semantic").height < 2:
        out["citation_minus_semantic"] = None
        return out
    by_q = {q: (g.filter(pl.col("path") == "citation")["rating"].to_numpy(), g.filter(pl.col("path") == "semantic")["rating"].to_numpy())
            for (q,), g in rated.group_by("query_id")}

    def diff(sample: list[str]) -> float | None:
        c = np.concatenate([by_q[q][0] for q in sample])
        s = np.concatenate([by_q[q][1] for q in sample])
        return float(c.mean() - s.mean()) if len(c) and len(s) else None

    rng = np.random.default_rng(seed)
    draws = [d for _ in range(resamples) if (d := diff([queries[i] for i in rng.integers(0, len(queries), len(queries))])) is not None]
    est = diff(queries)
    out["citation_minus_semantic"] = {"value": _r(est), "lo": _r(float(np.percentile(draws, 2.5))),
                                      "hi": _r(float(np.percentile(draws, 97.5))), "queries": len(queries)}
    return out


ORACLES = {
    "truth-affinity": "the person's true affinity for the paper (revbench.synth.expertise): the ceiling any "
                      "scorer can reach; what it loses is the survey's noise (leniency, one self-assessment)",
    "truth-cites": "1 where the paper cites any work of the person (corpus or older), else 0: a scorer that "
                   "knows every citation and nothing else",
    "truth-cites-corpus": "1 where the paper cites a corpus paper of the person: what a citation scorer over "
                          "the corpus could see at best",
}


def write_oracles(world: Path, ratings: pl.DataFrame, links: pl.DataFrame, out: Path) -> dict[str, Path]:
    """Predictions files (``{reviewer: {paper: score}}``) of :data:`ORACLES` for the rated pairs,
    each warehouse author read as the true person most of their mentions belong to."""
    from collections import Counter, defaultdict

    from revbench.synth.expertise import Expertise
    from revbench.synth.truth import load_truth, person_of_mention

    truth = load_truth(world)
    expertise = Expertise.from_works(truth.works)
    of_mention = person_of_mention(truth)
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for a, p, author in links.select("arxiv_id", "position", "author_id").iter_rows():
        if f"{a}:{p}" in of_mention:
            votes[author][of_mention[f"{a}:{p}"]] += 1
    person = {a: c.most_common(1)[0][0] for a, c in votes.items()}
    refs = pl.read_parquet(world / "graph" / "references.parquet").filter(pl.col("in_world"))
    by_work = {w: (authors, aid) for w, authors, aid in truth.works.select("work_id", "authors", "arxiv_id").iter_rows()}
    any_work: dict[str, set[str]] = defaultdict(set)
    corpus: dict[str, set[str]] = defaultdict(set)
    for citing, work in refs.select("citing", pl.coalesce("arxiv_id", "s2_id")).iter_rows():
        authors, aid = by_work.get(work, ([], None))
        for m in authors:
            any_work[citing].add(m)
            if aid:
                corpus[citing].add(m)
    scores: dict[str, dict[str, dict[str, float]]] = {k: defaultdict(dict) for k in ORACLES}
    for r, q in ratings.select("reviewer_id", "paper_id").iter_rows():
        if r not in person:
            continue
        m = person[r]
        scores["truth-affinity"][r][q] = expertise.affinity(m, q)
        scores["truth-cites"][r][q] = float(m in any_work[q])
        scores["truth-cites-corpus"][r][q] = float(m in corpus[q])
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, table in scores.items():
        files[name] = out / f"{name}.json"
        files[name].write_text(json.dumps(table))
    return files


POINT_FORMAT = 2
"""A point's numbers are redone (the demo kept) when their format is older."""


def measure_point(seed: int, link: float, work: Path, fresh: bool) -> dict[str, Any]:
    """Run (or reuse) one point and return its numbers: a finished demo is kept, and only the
    measurements after it are redone when the point's format changed."""
    folder = work / point_name(seed, link)
    done = folder / "point.json"
    if done.exists() and not fresh and json.loads(done.read_text()).get("format") == POINT_FORMAT:
        return json.loads(done.read_text())
    data = folder / "data"
    env = {**os.environ, "REVBENCH_DATA_DIR": str(data), "PREFECT_HOME": str(folder / "prefect"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
           # the citation path is measured, so it runs whatever the product's default
           "REVBENCH_POOLS__CITATION_RECALL": "true"}
    env.pop("PREFECT_API_URL", None)
    rb = [sys.executable, "-m", "revbench"]
    log = folder / "demo.log"
    finished = log.exists() and "demo finished in" in log.read_text(errors="replace")[-2000:]
    if fresh or not finished:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        print(f"{point_name(seed, link)}: demo ...", flush=True)
        run([*rb, "demo", "--papers", str(PAPERS), "--seed", str(seed), "--citation-link", f"{link:g}", "--no-track"],
            env, log)
    demo_s = float(log.read_text(errors="replace").rsplit("demo finished in ", 1)[1].split(" s")[0])
    from revbench.flows.labels import write_labels
    from revbench.schemas.tables import ASSIGNMENTS, AUTHOR_LINKS
    from revbench.settings import Settings
    from revbench.synth.realism import world_measures
    from revbench.warehouse import Warehouse

    settings = Settings(data_dir=data)
    with Warehouse.open(settings.warehouse_path, read_only=True) as wh:
        frames = wh.ratings.benchmark_frames(settings.ratings.profile_max_papers)
        assignments = wh.pools.read_round(ASSIGNMENTS, 1)
        links = wh.read(AUTHOR_LINKS)
    world = next(p for p in (data / "worlds").iterdir() if p.name.startswith(f"demo-{PAPERS}-{seed}"))
    oracles = write_oracles(world, frames["ratings"], links, folder / "oracles")
    evaluated = folder / "evaluate.json"
    eval_s = run([*rb, "evaluate", "-b", "warehouse", *[a for s in SCORERS for a in ("-s", s)],
                  *[a for name, path in oracles.items() for a in ("-p", f"{name}={path}")], "--allow-partial",
                  "--baseline", BASELINE, "--json-out", str(evaluated), "--no-track"], env, folder / "evaluate.log")
    weak = write_labels(settings, "citations", folder / "weak", experts=EXPERTS).agreement
    truth = world_measures(world)
    out = {
        "format": POINT_FORMAT, "seed": seed, "link": link, "papers": PAPERS, "world": json.loads((world / "world.json").read_text())["spec_key"],
        "demo_seconds": demo_s, "evaluate_seconds": round(eval_s, 1),
        "kept_ratings": frames["ratings"].height,
        "losses": losses(json.loads(evaluated.read_text())),
        "recall": recall_paths(assignments, frames["ratings"]),
        "weak": {"pairs": weak.n_pairs, "positives": weak.n_positive, "kendall_tau": _r(weak.kendall_tau), "auc": _r(weak.auc)},
        "flags": _json(data / "reports" / "ratings" / "flag_quality.json"),
        "truth": {"cites_by_level": truth.get("graph.cites_by_level"), "coupling_tau": truth.get("graph.coupling_tau"),
                  "same_field_share": truth.get("graph.same_field_share")},
    }
    done.write_text(json.dumps(out, indent=1))
    return out


def pooled(points: list[dict[str, Any]], split: str, scorer: str) -> dict[str, Any] | None:
    """The seeds' paired differences ``scorer - baseline`` on ``split``, pooled by inverse variance."""
    return inverse_variance([p["losses"].get(split, {}).get(f"{scorer} - {BASELINE}") for p in points])


def inverse_variance(diffs: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Seeds' differences (``value, lo, hi``; None or intervals of no width left out) pooled by
    inverse variance, each interval's half-width / 1.96 its standard error."""
    kept = [d for d in diffs if d and d["lo"] is not None and d["hi"] is not None and d["hi"] > d["lo"]]
    if not kept:
        return None
    w = np.array([(1.96 / ((d["hi"] - d["lo"]) / 2)) ** 2 for d in kept])
    v = np.array([d["value"] for d in kept])
    est, se = float((w * v).sum() / w.sum()), float(1 / math.sqrt(w.sum()))
    return {"value": _r(est), "lo": _r(est - 1.96 * se), "hi": _r(est + 1.96 * se), "seeds": len(kept),
            "seeds_better": sum(d["hi"] < 0 for d in kept), "seeds_worse": sum(d["lo"] > 0 for d in kept)}


def summarize(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per link strength: the pooled differences to the baseline of every scorer evaluated (the
    factors and ablations ``cof`` hands back included), per split."""
    out: dict[str, Any] = {}
    for link in sorted({p["link"] for p in points}):
        at = [p for p in points if p["link"] == link]
        splits: dict[str, Any] = {}
        for split in SPLITS:
            names = dict.fromkeys(k.removesuffix(f" - {BASELINE}") for p in at for k in p["losses"].get(split, {})
                                  if k.endswith(f" - {BASELINE}"))
            splits[split] = {s: pooled(at, split, s) for s in names}
        out[f"{link:g}"] = {"seeds": [p["seed"] for p in at], "splits": splits}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 11, 13])
    ap.add_argument("--links", type=float, nargs="+", default=[0.0, 1.0, 2.0, 4.0],
                    help="citation-link strengths (1: calibrated; each at every seed)")
    ap.add_argument("--work", type=Path, default=ROOT / "data" / "bench" / "graph-worth")
    ap.add_argument("--out", type=Path, default=RESULTS / "graph_worth.json")
    ap.add_argument("--fresh", action="store_true", help="redo points already measured")
    args = ap.parse_args(argv)
    bad = [x for x in args.links if not 0 <= x <= 8]
    if bad:
        ap.error(f"--links {bad[0]:g}: expected a strength from 0 to 8")
    points = []
    for link in args.links:
        for seed in args.seeds:
            points.append(measure_point(seed, link, args.work.resolve(), args.fresh))
            p = points[-1]
            d = p["losses"].get("pointwise", {}).get(f"cof - {BASELINE}")
            print(f"{point_name(seed, link)}: demo {p['demo_seconds']} s; cof - embedding on pointwise "
                  f"{d['value'] if d else '-'}", flush=True)
            args.out.write_text(json.dumps({
                "when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores, {platform.machine()}",
                "command": "python -m benchmarks.graph_worth " + " ".join(argv if argv is not None else sys.argv[1:]),
                "baseline": BASELINE, "scorers": list(SCORERS), "oracles": ORACLES, "points": points, "pooled": summarize(points)}, indent=1))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
