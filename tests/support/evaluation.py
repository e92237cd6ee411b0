"""A small hand-made benchmark and an OpenReview-layout dataset on disk."""

from __future__ import annotations

import json
from pathlib import Path

from revbench.evaluation.model import PAPERS_SCHEMA, PROFILE_SCHEMA, RATINGS_SCHEMA, Benchmark, Split, frame


def bench() -> Benchmark:
    subs = frame([
        dict(paper_id="s1", title="Dense retrieval for reviewer assignment", abstract="Matching submissions to reviewers with dense retrieval."),
        dict(paper_id="s2", title="Graph neural networks for molecules", abstract="Message passing predicts molecular properties."),
    ], PAPERS_SCHEMA)
    profile = frame([
        dict(reviewer_id="ir", paper_id="a", title="Learning to rank for expert finding", abstract="Reviewer assignment via retrieval of experts."),
        dict(reviewer_id="ir", paper_id="b", title="Dense passage retrieval", abstract="Dual encoders for retrieval."),
        dict(reviewer_id="gnn", paper_id="c", title="Message passing neural networks", abstract="Graph networks for molecular property prediction."),
    ], PROFILE_SCHEMA)
    ratings = frame([dict(reviewer_id=r, paper_id=p, rating=x) for r, p, x in
                     [("ir", "s1", 5.0), ("ir", "s2", 1.0), ("gnn", "s1", 1.0), ("gnn", "s2", 5.0)]], RATINGS_SCHEMA)
    return Benchmark("hand", "1", subs, [profile], [Split("pointwise", ratings=ratings, candidate_lists=True)])


def write_openreview(d: Path) -> Path:
    b = bench()
    (d / "archives").mkdir(parents=True)
    (d / "submissions.json").write_text(json.dumps(
        {p: {"id": p, "content": {"title": t, "abstract": a}} for p, t, a in b.submissions.select("paper_id", "title", "abstract").iter_rows()}
    ))
    for (r,), g in b.draws[0].group_by("reviewer_id"):
        (d / "archives" / f"~{r}.jsonl").write_text("\n".join(
            json.dumps({"id": p, "content": {"title": t, "abstract": a, "year": 2024}})
            for p, t, a in g.select("paper_id", "title", "abstract").iter_rows()) + "\n")
    b.splits[0].ratings.rename({"reviewer_id": "reviewer", "paper_id": "paper"}).write_csv(d / "ratings.csv")
    return d
