"""TPMS plus metrics, vectorised (ours) against a straightforward per-reviewer loop, same run.

The dataset has the gold standard's shape at ``--scale`` times its size: reviewers with
20-paper profiles in ``--draws`` profile draws, about 8 rated papers each, ratings 1-5 from
topical match plus noise (SYNTHETIC). Both sides share the tokenizer, so the comparison is the
scoring (full reviewer x submission similarities, as exported) and the metrics (loss, accuracy
and a 1,000-resample reviewer bootstrap).

    .venv/bin/python -m benchmarks.eval_bench --scale 10
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import time
from collections import Counter
from pathlib import Path

import numpy as np

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.model import PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, Benchmark, Split, frame
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.scorers.tpms import tokens
from revbench.settings import Settings
from revbench.synth.draw import Generator, WorldSpec

RESULTS = Path(__file__).resolve().parent / "results"


def make_dataset(scale: int, draws: int, seed: int = 5) -> Benchmark:
    g = Generator(WorldSpec(seed=seed))
    n_rev = 58 * scale
    reviewers = [f"r{i}" for i in range(n_rev)]
    expertise = {r: g.choice(g.topic_ids) for r in reviewers}
    subs, ratings = [], []
    for r in reviewers:
        for _ in range(8):
            topic = expertise[r] if g.rng.random() < 0.5 else g.choice(g.topic_ids)
            pid = f"p{len(subs)}"
            title = g.title(topic)
            subs.append({"paper_id": pid, "title": title, "abstract": g.abstract(topic, title)})
            same = topic == expertise[r]
            near = topic.split("/")[0] == expertise[r].split("/")[0]
            base = 5 if same else 3 if near else 1
            ratings.append({"reviewer_id": r, "paper_id": pid, "rating": float(min(5, max(1, base + int(g.rng.integers(-1, 2)))))})
    profiles = []
    for _d in range(draws):
        rows = []
        for r in reviewers:
            for k in range(20):
                topic = expertise[r] if g.rng.random() < 0.8 else g.choice(g.topic_ids)
                title = g.title(topic)
                rows.append({"reviewer_id": r, "paper_id": f"{r}-{k}", "title": title, "abstract": g.abstract(topic, title)})
        profiles.append(frame(rows, PROFILE_SCHEMA))
    return Benchmark("gold-shaped", "synthetic", frame(subs, PAPERS_SCHEMA), profiles,
                     [Split("goldstandard", ratings=frame(ratings, RATINGS_SCHEMA))])


def naive(bench: Benchmark, n_resamples: int, seed: int) -> dict[str, float]:
    """The recipe written the obvious way: dicts per document, a loop per reviewer and paper."""
    paps = {p: Counter(tokens(f"{t} {a}")) for p, t, a in bench.submissions.select("paper_id", "title", "abstract").iter_rows()}
    by_reviewer: dict[str, list[tuple[str, float]]] = {}
    for r, p, x in bench.splits[0].ratings.iter_rows():
        by_reviewer.setdefault(r, []).append((p, x))
    losses, accs = [], []
    for profile in bench.draws:
        revs: dict[str, Counter] = {}
        for r, t, a in profile.select("reviewer_id", "title", "abstract").iter_rows():
            revs.setdefault(r, Counter()).update(tokens(f"{t} {a}"))
        df: Counter = Counter()
        for d in [*revs.values(), *paps.values()]:
            df.update(d.keys())
        n = len(revs) + len(paps)
        idf = {w: math.log(n / c) for w, c in df.items()}

        def vec(c: Counter) -> tuple[dict[str, float], float]:
            top = max(c.values())
            v = {w: (0.5 + 0.5 * k / top) * idf[w] for w, k in c.items()}
            return v, math.sqrt(sum(x * x for x in v.values()))

        pvec = {p: vec(c) for p, c in paps.items()}
        sims: dict[str, dict[str, float]] = {}
        for r, c in revs.items():
            rv, rn = vec(c)
            sims[r] = {}
            for p, (pv, pn) in pvec.items():
                small, big = (pv, rv) if len(pv) < len(rv) else (rv, pv)
                sims[r][p] = sum(x * big[w] for w, x in small.items() if w in big) / (rn * pn)
        cost, weight, correct, count = {}, {}, {}, {}
        for r, items in by_reviewer.items():
            c = w_ = ok = m = 0.0
            for i in range(len(items)):
                for j in range(len(items)):
                    (pa, ra), (pb, rb) = items[i], items[j]
                    if ra > rb:
                        d = sims[r][pa] - sims[r][pb]
                        c += (ra - rb) * ((d < 0) + 0.5 * (d == 0))
                        w_ += ra - rb
                        ok += d > 0
                        m += 1
            cost[r], weight[r], correct[r], count[r] = c, w_, ok, m
        losses.append(sum(cost.values()) / sum(weight.values()))
        accs.append(sum(correct.values()) / sum(count.values()))
        rng = random.Random(seed)
        names = list(by_reviewer)
        for _ in range(n_resamples):
            pick = [rng.choice(names) for _ in names]
            sum(cost[r] for r in pick) / sum(weight[r] for r in pick)
    return {"loss": float(np.mean(losses)), "accuracy": float(np.mean(accs))}


def ours(bench: Benchmark, n_resamples: int, seed: int, cache: Path) -> dict[str, float]:
    scores = make_scorer("tpms", Context(Settings(data_dir=cache))).score(bench)
    rows = Evaluator(bench, n_resamples=n_resamples, seed=seed).evaluate(scores)
    return {r.metric: r.value for r in rows if r.metric in ("loss", "accuracy")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scale", type=int, default=10)
    p.add_argument("--draws", type=int, default=2)
    p.add_argument("--bootstrap", type=int, default=1000)
    a = p.parse_args()
    bench = make_dataset(a.scale, a.draws)
    tokens("warm up the stemmer cache")
    t0 = time.perf_counter()
    mine = ours(bench, a.bootstrap, 0, Path("data/bench/cache"))
    t_ours = time.perf_counter() - t0
    # The stemmer cache is warm for the naive side too: both pay tokenisation, neither pays it twice.
    t1 = time.perf_counter()
    ref = naive(bench, a.bootstrap, 0)
    t_naive = time.perf_counter() - t1
    result = {
        "dataset": f"gold-standard shape x{a.scale}: {bench.splits[0].ratings['reviewer_id'].n_unique()} reviewers, "
                   f"{bench.submissions.height} submissions, {bench.splits[0].ratings.height} ratings, {a.draws} draws of 20-paper profiles",
        "bootstrap": a.bootstrap,
        "ours_s": round(t_ours, 2),
        "naive_s": round(t_naive, 2),
        "speedup": round(t_naive / t_ours, 1),
        "loss_ours": round(mine["loss"], 6),
        "loss_naive": round(ref["loss"], 6),
        "accuracy_ours": round(mine["accuracy"], 6),
        "accuracy_naive": round(ref["accuracy"], 6),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "eval_tpms.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
