"""Does the "more tuples needed" estimate of the report hold? A simulation on the demo world.

The demo warehouse's rated tuples are the population (the SYNTHETIC world's truth as far as this
check is concerned). For each split and each two scorers:

1. the estimate from the full set and from pilots: ``--pilots`` subsamples of a ``--fraction`` of
   its clusters (anchors, reviewers: the unit the bootstrap resamples), each predicting the tuples
   needed (``revbench.evaluation.separation``);
2. the check: ``--repeats`` benchmarks of the pilots' median predicted size (and of 2.04 times it),
   drawn from the population's clusters with replacement (copies of a cluster count as distinct
   clusters), each evaluated as ``revbench evaluate`` would; the share whose interval excludes
   zero should be about 50% at the predicted size (the estimate is where the expected interval
   just clears zero) and about 80% at 2.04 times it;
   the same at the full set's own prediction (its difference being the population's, the share
   should be about 50% there too);
3. the observed curve: the share separated at 0.25, 0.5, 1, 2, 4 and 8 times the population's
   size, with the size where half of them are (interpolated; the smallest size when already
   there), to read beside the prediction.

    .venv/bin/python -m benchmarks.power_bench --warehouse /tmp/demo/warehouse.duckdb
    .venv/bin/python -m benchmarks.power_bench --papers 300     # runs the demo first (about 3 minutes)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from revbench.evaluation.evaluate import Evaluator
from revbench.evaluation.importers.warehouse import load_warehouse
from revbench.evaluation.model import TUPLES_SCHEMA, Benchmark, Scores, Split
from revbench.evaluation.pairs import split_pairs
from revbench.evaluation.scorers import Context, make_scorer
from revbench.evaluation.separation import POWER_80, Separation, split_separations, tuples_needed
from revbench.settings import Settings

RESULTS = Path(__file__).resolve().parent / "results"
CURVE = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def demo_warehouse(papers: int) -> Path:
    """A demo run's warehouse under ``data/bench/`` (reused when there; the run's later stages may
    fail: its ratings are what counts)."""
    data = Path(f"data/bench/power-demo-{papers}").resolve()
    if not (data / "warehouse.duckdb").exists():
        data.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "REVBENCH_DATA_DIR": str(data)}
        subprocess.run([sys.executable, "-m", "revbench", "demo", "--papers", str(papers), "--no-track"], env=env,
                       check=False, capture_output=True)
    return data / "warehouse.duckdb"


class Population:
    """One split's ordered pairs, resampled by cluster into benchmarks of any size."""

    def __init__(self, name: str, split: Split):
        self.name = name
        self.pairs = split_pairs(split).with_row_index("_row")
        self.clusters = sorted(self.pairs["cluster"].unique().to_list())
        rows = self.pairs.group_by("cluster").agg(pl.col("_row"))
        self.rows = {c: np.array(r, dtype=np.int64) for c, r in rows.iter_rows()}

    def benchmark(self, picked: list[str]) -> Benchmark:
        """The clusters ``picked`` (with repeats, each copy its own cluster) as a tuples split."""
        idx = np.concatenate([self.rows[c] for c in picked])
        labels = np.repeat([f"{c}#{i}" for i, c in enumerate(picked)], [len(self.rows[c]) for c in picked])
        t = self.pairs[idx].select(
            pl.col("reviewer_a").alias("reviewer_pos"), pl.col("paper_a").alias("paper_pos"),
            pl.col("reviewer_b").alias("reviewer_neg"), pl.col("paper_b").alias("paper_neg"),
            pl.col("rating_a").alias("rating_pos"), pl.col("rating_b").alias("rating_neg"),
        ).with_columns(pl.Series("cluster", labels))
        return Benchmark("sim", "1", pl.DataFrame(), [pl.DataFrame()], [Split(self.name, tuples=t.cast(TUPLES_SCHEMA))])


def evaluate(bench: Benchmark, runs: list[Scores], bootstrap: int, seed: int) -> dict[tuple[str, str], Separation]:
    """Every two scorers' separation, keyed by the unordered pair."""
    return {tuple(sorted((s.scorer_a, s.scorer_b))): s  # type: ignore[misc]
            for s in split_separations(Evaluator(bench, bootstrap, seed), runs)}


def shares(pop: Population, runs: list[Scores], k: int, repeats: int, bootstrap: int, rng: np.random.Generator,
           ) -> dict[tuple[str, str], float]:
    """Share of ``repeats`` benchmarks of ``k`` clusters drawn with replacement that separate each pair."""
    hits: dict[tuple[str, str], int] = {}
    for r in range(repeats):
        picked = list(rng.choice(pop.clusters, size=k, replace=True))
        for key, s in evaluate(pop.benchmark(picked), runs, bootstrap, r).items():
            hits[key] = hits.get(key, 0) + int(s.separated)
    return {key: n / repeats for key, n in hits.items()}


def half_point(curve: list[tuple[int, float]]) -> float | None:
    """Clusters at which the share separated first reaches 50% (linear between grid points)."""
    for (k0, s0), (k1, s1) in zip(curve, curve[1:], strict=False):
        if s0 >= 0.5:
            return float(k0)
        if s1 >= 0.5:
            return k0 + (0.5 - s0) * (k1 - k0) / (s1 - s0)
    return None


def check_split(pop: Population, runs: list[Scores], args: argparse.Namespace) -> list[dict]:
    rng = np.random.default_rng(args.seed)
    k_pop, n_pop = len(pop.clusters), pop.pairs.height
    full = evaluate(pop.benchmark(pop.clusters), runs, args.bootstrap, args.seed)
    pilot_k = max(2, round(args.fraction * k_pop))
    predicted: dict[tuple[str, str], list[float]] = {key: [] for key in full}
    for p in range(args.pilots):
        picked = list(rng.choice(pop.clusters, size=pilot_k, replace=False))
        for key, s in evaluate(pop.benchmark(picked), runs, args.bootstrap, p).items():
            needed = _needed(s)
            if key in predicted and needed is not None:
                # In clusters: tuples per cluster stay those of the pilot at its mix.
                predicted[key].append(pilot_k * needed / max(s.n, 1))
    curve_k = [max(2, round(f * k_pop)) for f in CURVE]
    curve = {k: shares(pop, runs, k, args.repeats, args.bootstrap, rng) for k in curve_k}
    out = []
    for key, s in full.items():
        preds = predicted[key]
        row: dict = {"split": pop.name, "scorer_a": s.scorer_a, "scorer_b": s.scorer_b, "clusters": k_pop,
                     "tuples": n_pop, "diff_full": round(s.diff, 4), "ci_full": [_r(s.ci_low), _r(s.ci_high)],
                     "separated_full": s.separated, "predicted_clusters_full": _pred_k(s, k_pop),
                     "pilot_clusters": pilot_k, "pilots_predicting": len(preds)}
        curve_row = [(k, curve[k].get(key, 0.0)) for k in curve_k]
        row["observed_share_by_clusters"] = {str(k): v for k, v in curve_row}
        row["observed_half_clusters"] = _r(half_point(curve_row), 1)
        if preds:
            med = float(np.median(preds))
            row["predicted_clusters_pilots"] = {"median": round(med, 1), "q25": round(float(np.quantile(preds, 0.25)), 1),
                                                "q75": round(float(np.quantile(preds, 0.75)), 1)}
            row["predicted_tuples_pilots_median"] = round(med * n_pop / k_pop)
            checks = [("at_predicted", med), ("at_predicted_x2.04", med * POWER_80)]
            if row["predicted_clusters_full"] is not None:
                checks.append(("at_full_prediction", row["predicted_clusters_full"]))
            for label, k in checks:
                kk = max(2, math.ceil(k))
                if kk <= args.max_clusters:
                    row[f"share_separated_{label}"] = shares(pop, runs, kk, args.repeats, args.bootstrap, rng).get(key)
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _needed(s: Separation) -> float | None:
    """The report's ``n_needed``, also for a pair already separated (then below ``n``): the size
    at which its interval would just clear zero."""
    if s.ci_low is None or s.ci_high is None or s.diff == 0:
        return None
    return tuples_needed(s.n, s.diff, s.diff - s.ci_low if s.diff > 0 else s.ci_high - s.diff)


def _pred_k(s: Separation, k: int) -> float | None:
    needed = _needed(s)
    return None if needed is None else round(k * needed / max(s.n, 1), 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--warehouse", type=Path, help="a demo run's warehouse.duckdb (default: run the demo first)")
    p.add_argument("--papers", type=int, default=300, help="papers of the demo run when no --warehouse is given")
    p.add_argument("--scorers", default="trivial,tpms,bm25:pooling=mean,embedding:pooling=mean",
                   help="the demo's evaluated scorers by default")
    p.add_argument("--fraction", type=float, default=0.3, help="share of the clusters each pilot keeps")
    p.add_argument("--pilots", type=int, default=20)
    p.add_argument("--repeats", type=int, default=100, help="simulated benchmarks per size")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--max-clusters", type=int, default=4000, help="largest simulated benchmark, in clusters")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "power.json")
    args = p.parse_args()
    t0 = time.perf_counter()
    wh = args.warehouse or demo_warehouse(args.papers)
    bench = load_warehouse(wh)
    settings = Settings(data_dir=wh.parent)
    runs = [make_scorer(spec, Context(settings)).score(bench) for spec in args.scorers.split(",")]
    pops = {sd.name: Population(sd.name, sd) for sd in bench.splits}
    # Splits that hold the same pairs (pointwise and reviewer-centric) are checked once.
    seen: set[int] = set()
    rows = []
    for name, pop in pops.items():
        if pop.pairs.height == 0 or hash(pop.pairs.drop("_row").sort(pl.all()).write_csv()) in seen:
            continue
        seen.add(hash(pop.pairs.drop("_row").sort(pl.all()).write_csv()))
        rows += check_split(pop, runs, args)
    result = {"warehouse": str(wh), "splits": {n: {"clusters": len(p.clusters), "tuples": p.pairs.height}
                                               for n, p in pops.items()},
              "scorers": args.scorers.split(","), "fraction": args.fraction, "pilots": args.pilots,
              "repeats": args.repeats, "bootstrap": args.bootstrap, "seed": args.seed, "pairs": rows,
              "seconds": round(time.perf_counter() - t0, 1), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"-> {args.out} ({result['seconds']} s)")


if __name__ == "__main__":
    main()
