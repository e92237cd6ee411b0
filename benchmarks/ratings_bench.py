"""The ratings steps at scale: de-duplication, every flag rule and the tuples over a SYNTHETIC
survey many times LR-bench's (1,069 ratings from 407 respondents).

Baseline in the same run: a straightforward Python implementation of the same de-duplication
(latest event per reviewer and paper) and tuple construction (every differing pair within a paper
and within a reviewer) with dicts and loops; both must give the same ratings and tuples.

    .venv/bin/python -m benchmarks.ratings_bench [--respondents 40000] [--papers 8000]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from datetime import UTC, datetime, timedelta
from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl

from revbench.settings import RatingsSettings
from revbench.tasks import rating_stats
from revbench.tasks import ratings as tasks

RESULTS = Path(__file__).resolve().parent / "results"


def world(respondents: int, papers: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Invitations of up to six papers each, answered with some changes and skips: (events,
    invitations, similarity)."""
    rng = np.random.default_rng(seed)
    inv_rows, ev_rows, sim_rows = [], [], []
    t0 = datetime(2026, 9, 1, tzinfo=UTC)
    event_id = 0
    for i in range(respondents):
        inv, reviewer = f"inv_{i:020x}", f"author_{i:012x}"
        ids = [f"p{x}" for x in rng.choice(papers, int(rng.integers(1, 7)), replace=False)]
        inv_rows.append({"invitation_id": inv, "reviewer_id": reviewer, "round": 1 + i % 3, "paper_ids": ids})
        t = float(rng.uniform(0, 86400 * 30))
        for p in ids:
            sim_rows.append({"reviewer_id": reviewer, "paper_id": p, "similarity": float(rng.uniform(0.6, 0.95))})
            for _ in range(1 + int(rng.random() < 0.1)):  # one answer in ten is changed later
                event_id += 1
                t += float(rng.exponential(8))
                skip = rng.random() < 0.05
                ev_rows.append({"event_id": event_id, "invitation_id": inv, "paper_id": p,
                                "rating": None if skip else int(rng.integers(1, 6)), "skipped": skip,
                                "source": "click", "created_at": t0 + timedelta(seconds=t)})
    events = pl.DataFrame(ev_rows, schema={"event_id": pl.Int64, "invitation_id": pl.Utf8, "paper_id": pl.Utf8,
                                           "rating": pl.Int64, "skipped": pl.Boolean, "source": pl.Utf8,
                                           "created_at": pl.Datetime("us", "UTC")})
    return events, pl.DataFrame(inv_rows), pl.DataFrame(sim_rows)


def baseline(events: pl.DataFrame, invitations: pl.DataFrame) -> tuple[dict[tuple[str, str], int], set[tuple]]:
    """Dicts and loops: the latest answer per reviewer and paper, then every differing pair."""
    reviewer_of = dict(invitations.select("invitation_id", "reviewer_id").iter_rows())
    latest: dict[tuple[str, str], tuple[int, int | None]] = {}
    for e, inv, p, r, skipped in events.select("event_id", "invitation_id", "paper_id", "rating", "skipped").iter_rows():
        key = (reviewer_of[inv], p)
        if key not in latest or e > latest[key][0]:
            latest[key] = (e, None if skipped else r)
    ratings = {k: v for k, (_, v) in latest.items() if v is not None}
    by_paper: dict[str, list[tuple[str, int]]] = {}
    by_reviewer: dict[str, list[tuple[str, int]]] = {}
    for (rv, p), v in ratings.items():
        by_paper.setdefault(p, []).append((rv, v))
        by_reviewer.setdefault(rv, []).append((p, v))
    out = set()
    for kind, groups in (("paper_centric", by_paper), ("reviewer_centric", by_reviewer)):
        for anchor, items in groups.items():
            for (a, va), (b, vb) in combinations(items, 2):
                if va != vb:
                    (hi, vh), (lo, vl) = ((a, va), (b, vb)) if va > vb else ((b, vb), (a, va))
                    out.add((kind, anchor, hi, lo, vh, vl, vh - vl))
    return ratings, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--respondents", type=int, default=40000)
    ap.add_argument("--papers", type=int, default=8000)
    args = ap.parse_args()
    events, invitations, similarity = world(args.respondents, args.papers)
    categories = pl.DataFrame({"paper_id": [f"p{i}" for i in range(args.papers)],
                               "category": [("cs.AI", "cs.CL", "cs.CV", "cs.IR", "cs.LG")[i % 5] for i in range(args.papers)]})
    cfg = RatingsSettings()
    times = {}
    t = time.perf_counter()
    resolved = tasks.resolve_events(events, invitations)
    ratings = tasks.latest_ratings(resolved, invitations, categories)
    times["dedupe"] = time.perf_counter() - t
    t = time.perf_counter()
    flags = tasks.find_flags(ratings, resolved, similarity, cfg)
    times["flags"] = time.perf_counter() - t
    t = time.perf_counter()
    final = tasks.apply_decisions(ratings, flags, pl.DataFrame(schema={"flag_id": pl.Utf8, "evidence_hash": pl.Utf8,
                                                                       "decision": pl.Utf8}))
    kept = final.with_columns(pl.lit("kept").alias("status"))
    pairs = tasks.tuples(kept)
    times["decisions+tuples"] = time.perf_counter() - t
    t = time.perf_counter()
    stats = rating_stats.statistics(kept)
    times["statistics"] = time.perf_counter() - t
    ours = sum(times[k] for k in ("dedupe", "decisions+tuples"))
    t = time.perf_counter()
    base_ratings, base_tuples = baseline(events, invitations)
    base = time.perf_counter() - t
    same = (base_ratings == {(r, p): v for r, p, v in ratings.select("reviewer_id", "paper_id", "rating").iter_rows()}
            and base_tuples == set(pairs.iter_rows()))
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "respondents": args.respondents, "papers": args.papers,
        "events": events.height, "ratings": ratings.height, "flags": flags.height, "tuples": pairs.height,
        "alpha": stats.alpha, "seconds": {k: round(v, 3) for k, v in times.items()},
        "ours_dedupe_and_tuples_s": round(ours, 3), "baseline_loops_s": round(base, 3),
        "speedup": round(base / ours, 2), "identical": same,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ratings.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    if not same:
        raise SystemExit("the ratings or tuples differ from the baseline")


if __name__ == "__main__":
    main()
