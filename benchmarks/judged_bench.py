"""Each scorer judged by the assignment it yields and by what colluders can make it do, on the
calibrated SYNTHETIC world across seeds, and what the two judgements cost.

For each seed (the graph-worth points at link 1, the world calibrated to real data; a missing one
is made by ``benchmarks.graph_worth``'s demo run):

1. ``revbench evaluate -b warehouse`` with the scorers below, plain, then with ``--assignment
   --attack``, then plain again: the judged run's wall time against the plain runs' mean (the
   issue's goal is at most 3x);
2. from the judged run: each scorer's assignment quality over the rated candidates and over the
   pool (the settings' defaults: 3 reviewers per paper, load 6, objective sum), with paired
   differences to ``embedding:pooling=mean``; and the attack's success at the assignment's k by
   starting rank and minimum profile size.

Seeds are pooled as :mod:`benchmarks.graph_worth` pools them (inverse variance of each seed's
paired difference) and attack successes by pairs (every seed's attacked pairs together). Then
``--assignment`` on the gold standard and LR-bench samples of ``../shared/external``, timed
against the plain evaluation the same way.

    .venv/bin/python -m benchmarks.judged_bench               # seeds 7 11 13 (about 6 min with the demos made)
    .venv/bin/python -m benchmarks.judged_bench --seeds 7     # one seed

Resumable: each seed's numbers are kept in its point folder (``judged.json``); the results go to
``benchmarks/results/judged.json`` after every seed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import graph_worth as gw

RESULTS = gw.RESULTS
BASELINE = "embedding:pooling=mean"
SCORERS = ("trivial", "tpms", "bm25", BASELINE, "embedding", "embedding:pooling=topk_mean:3",
           "embedding:pooling=clustering", "cof", "citation")
"""The issue's scorers (``tpms``, ``bm25``, ``embedding`` by mean, max (its default, so its label is
``embedding``) and top-k, ``cof``), OpenReview's
self-attention clustering as the robust aggregation, and two immune by construction."""
REFERENCE_SCORERS = ("trivial", "tpms", "bm25", BASELINE)
SHARED = gw.ROOT.parent / "shared" / "external"
REFERENCES = {"goldstandard": SHARED / "goldstandard-sample", "lrbench": SHARED / "lrbench-sample"}
FORMAT = 2


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "REVBENCH_DATA_DIR": str(folder / "data"), "PREFECT_HOME": str(folder / "prefect"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    return env


def _evaluate(bench: str, scorers: tuple[str, ...], flags: list[str], env: dict[str, str], out: Path) -> float:
    rb = [sys.executable, "-m", "revbench", "evaluate", "-b", bench, *[a for s in scorers for a in ("-s", s)],
          "--baseline", BASELINE, "--json-out", str(out), "--report", str(out.with_suffix("")), "--no-plot", "--no-track"]
    return gw.run([*rb, *flags], env, out.with_suffix(".log"))


def timed(bench: str, scorers: tuple[str, ...], flags: list[str], env: dict[str, str], folder: Path) -> dict[str, Any]:
    """A warm-up (the embeddings cached, as after any first run), then plain, judged, plain again:
    the seconds of each and the judged run's ratio to the plain mean."""
    folder.mkdir(parents=True, exist_ok=True)
    _evaluate(bench, scorers, [], env, folder / "warmup.json")
    first = _evaluate(bench, scorers, [], env, folder / "plain.json")
    judged = _evaluate(bench, scorers, flags, env, folder / "judged.json")
    second = _evaluate(bench, scorers, [], env, folder / "plain2.json")
    plain = (first + second) / 2
    return {"plain_seconds": round(plain, 1), "judged_seconds": round(judged, 1), "ratio": round(judged / plain, 2),
            "rows": json.loads((folder / "judged.json").read_text())}


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def digest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The judged rows as ``assignment[instance][scorer][metric]`` and ``attack[min_profile][scorer][start]``."""
    assignment: dict[str, Any] = {}
    attack: dict[str, Any] = {}
    immune: dict[str, str] = {}
    for r in rows:
        split = r["split"]
        if split.startswith("assignment:"):
            assignment.setdefault(split.removeprefix("assignment:"), {}).setdefault(r["scorer"], {})[r["metric"]] = {
                "value": _r(r["value"]), "lo": _r(r["ci_low"]), "hi": _r(r["ci_high"]), "n": r["n"]}
        elif split == "attack":
            immune[r["scorer"]] = str(r["basis"]).removeprefix("immune: ")
        elif split.startswith("attack:"):
            # keyed by the paper's starting rank: each seed's pool scales it to its own size
            parts = dict(p.split("=") for p in split.split(":")[1:])
            paper = str(r["basis"]).split("the paper's ")[1].split(" ")[0]
            cell = attack.setdefault(parts["min_profile"], {}).setdefault(r["scorer"], {}).setdefault(paper, {})
            cell[r["metric"]] = r["value"]
            cell["n"], cell["basis"], cell["start"] = r["n"], r["basis"], int(parts["start"])
    return {"assignment": assignment, "attack": attack, "immune": immune}


def measure_seed(seed: int, work: Path, fresh: bool) -> dict[str, Any]:
    """One seed's judged evaluation, timed (its demo made first when missing)."""
    folder = work / gw.point_name(seed, 1.0)
    done = folder / "judged-point.json"
    if done.exists() and not fresh and json.loads(done.read_text()).get("format") == FORMAT:
        return json.loads(done.read_text())
    gw.measure_point(seed, 1.0, work, False)
    print(f"{gw.point_name(seed, 1.0)}: evaluate plain, judged, plain ...", flush=True)
    t = timed("warehouse", SCORERS, ["--assignment", "--attack"], _env(folder), folder / "judged")
    out = {"format": FORMAT, "seed": seed, "plain_seconds": t["plain_seconds"], "judged_seconds": t["judged_seconds"],
           "ratio": t["ratio"], **digest(t["rows"])}
    done.write_text(json.dumps(out, indent=1))
    return out


def pooled_assignment(points: list[dict[str, Any]], instance: str, scorer: str, metric: str) -> dict[str, Any] | None:
    """The seeds' paired differences ``scorer - baseline`` of ``metric``, pooled by inverse variance."""
    return gw.inverse_variance([p["assignment"].get(instance, {}).get(f"{scorer} - {BASELINE}", {}).get(metric)
                                for p in points])


def summarize(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled over seeds: each scorer's assignment numbers (mean of seeds) and differences, the
    attack's success by starting rank (pairs pooled), the cost."""
    out: dict[str, Any] = {"assignment": {}, "attack": {}, "immune": {}}
    for instance in ("candidates", "pool"):
        for scorer in SCORERS:
            means = {}
            for metric in ("assigned_rating", "papers_with_expert", "worst_paper_best", "known_share"):
                vals = [p["assignment"].get(instance, {}).get(scorer, {}).get(metric, {}).get("value") for p in points]
                vals = [v for v in vals if v is not None]
                means[metric] = _r(float(np.mean(vals))) if vals else None
            if scorer != BASELINE:
                means["diff_rating"] = pooled_assignment(points, instance, scorer, "assigned_rating")
                means["diff_expert"] = pooled_assignment(points, instance, scorer, "papers_with_expert")
            out["assignment"].setdefault(instance, {})[scorer] = means
    for p in points:
        out["immune"].update(p["immune"])
        for mp, scorers in p["attack"].items():
            for scorer, starts in scorers.items():
                for start, cell in starts.items():
                    agg = out["attack"].setdefault(mp, {}).setdefault(scorer, {}).setdefault(start, {
                        "pairs": 0, "reached_k": 0.0, "reached_10": 0.0, "median_after": [], "starts": []})
                    n = cell["n"]
                    agg["starts"] = sorted({*agg["starts"], cell["start"]})
                    agg["pairs"] += n
                    agg["reached_k"] += (cell.get("success_at_k") or 0) * n
                    agg["reached_10"] += (cell.get("success_at_10") or 0) * n
                    agg["median_after"].append(cell.get("median_rank_after"))
    for scorers in out["attack"].values():
        for starts in scorers.values():
            for agg in starts.values():
                n = agg["pairs"] or 1
                agg["success_at_k"] = _r(agg.pop("reached_k") / n)
                agg["success_at_10"] = _r(agg.pop("reached_10") / n)
                meds = [m for m in agg.pop("median_after") if m is not None]
                agg["median_rank_after"] = _r(float(np.median(meds))) if meds else None
    ratios = [p["ratio"] for p in points]
    out["cost"] = {"plain_seconds": _r(float(np.mean([p["plain_seconds"] for p in points]))),
                   "judged_seconds": _r(float(np.mean([p["judged_seconds"] for p in points]))),
                   "ratio": _r(float(np.mean(ratios))), "ratio_max": _r(max(ratios))}
    return out


def references(work: Path, fresh: bool) -> dict[str, Any]:
    """``--assignment`` on the real samples, timed against the plain evaluation."""
    out = {}
    for kind, path in REFERENCES.items():
        if not path.exists():
            continue
        folder = work / f"reference-{kind}"
        done = folder / "reference.json"
        if done.exists() and not fresh and json.loads(done.read_text()).get("format") == FORMAT:
            out[kind] = json.loads(done.read_text())
            continue
        print(f"{kind}: evaluate plain, --assignment, plain ...", flush=True)
        t = timed(f"{kind}={path}", REFERENCE_SCORERS, ["--assignment"], _env(folder), folder / "judged")
        d = digest(t["rows"])
        forced = any("forced:" in str(r.get("basis")) for r in t["rows"] if str(r["split"]).startswith("assignment:"))
        out[kind] = {"format": FORMAT, "plain_seconds": t["plain_seconds"], "judged_seconds": t["judged_seconds"],
                     "ratio": t["ratio"], "forced": forced, "assignment": d["assignment"]}
        done.write_text(json.dumps(out[kind], indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[7, 11, 13])
    ap.add_argument("--work", type=Path, default=gw.ROOT / "data" / "bench" / "graph-worth")
    ap.add_argument("--fresh", action="store_true", help="redo every measurement (the demos are kept)")
    args = ap.parse_args(argv)
    points = []
    for seed in args.seeds:
        points.append(measure_seed(seed, args.work, args.fresh))
        result = {"generated": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "machine": platform.platform(),
                  "cpus": os.cpu_count(), "seeds": [p["seed"] for p in points], "scorers": list(SCORERS),
                  "baseline": BASELINE, "points": points, "summary": summarize(points)}
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "judged.json").write_text(json.dumps(result, indent=1) + "\n")
    result["references"] = references(args.work.parent / "judged", args.fresh)
    (RESULTS / "judged.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {RESULTS / 'judged.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
