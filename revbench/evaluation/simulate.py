"""A SYNTHETIC rating panel over the ingested corpus, from the world's hidden truth.

Stands in for the survey until real ratings exist: panelists are the world's people with at
least two loaded papers; each query paper is rated by a handful of them, half chosen among
people whose expertise touches its topic. A rating follows the truth (5 or 4 for the paper's
own topic, 3 for its category, 1 or 2 otherwise) with seeded noise. The panel is written in
the OpenReview layout (``submissions.json``, ``archives/~<id>.jsonl``, ``ratings.csv``) so the
ordinary importer reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl


def simulate_panel(papers: pl.DataFrame, world_dir: Path, out_dir: Path, n_queries: int = 60, per_query: int = 8,
                   seed: int = 7) -> dict[str, int]:
    """Write a simulated panel for loaded ``papers`` (``arxiv_id, title, abstract, year``)."""
    rng = np.random.default_rng(seed)
    truth = world_dir / "truth"
    mentions = pl.read_parquet(truth / "mentions.parquet")
    persons = pl.read_parquet(truth / "persons.parquet").select("person_id", "expertise")
    topics = dict(pl.read_parquet(truth / "paper_topics.parquet").iter_rows())
    loaded = set(papers["arxiv_id"].to_list())
    authored = mentions.filter(pl.col("arxiv_id").is_in(list(loaded))).unique(["arxiv_id", "person_id"])
    by_person = authored.group_by("person_id").agg(pl.col("arxiv_id")).filter(pl.col("arxiv_id").list.len() >= 2)
    panel = dict(by_person.iter_rows())
    expertise = {p: e for p, e in persons.iter_rows() if p in panel}
    authors_of = {a: set(g) for a, g in authored.group_by("arxiv_id").agg(pl.col("person_id")).iter_rows()}
    text = {r["arxiv_id"]: r for r in papers.iter_rows(named=True)}

    queries = sorted(loaded)
    queries = [queries[i] for i in rng.permutation(len(queries))[:n_queries]]
    ratings = []
    members = sorted(panel)
    for q in queries:
        topic = topics[q]
        category = topic.split("/")[0]
        eligible = [m for m in members if m not in authors_of.get(q, set())]
        near = [m for m in eligible if any(t.split("/")[0] == category for t in expertise[m])]
        picks = list(rng.permutation(near)[: per_query // 2]) if near else []
        rest = [m for m in eligible if m not in picks]
        picks += list(rng.permutation(rest)[: per_query - len(picks)])
        for m in picks:
            exp = expertise[m]
            base = (5 if rng.random() < 0.6 else 4) if topic in exp else 3 if any(t.split("/")[0] == category for t in exp) else (2 if rng.random() < 0.5 else 1)
            if rng.random() < 0.2:
                base += int(rng.choice([-1, 1]))
            ratings.append({"reviewer": str(m), "paper": q, "rating": float(min(5, max(1, base)))})

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "archives").mkdir(exist_ok=True)
    def note(aid: str) -> dict:
        r = text[aid]
        return {"id": aid, "content": {"title": r["title"], "abstract": r["abstract"], "year": r["year"]}}
    (out_dir / "submissions.json").write_text(json.dumps({q: note(q) for q in queries}))
    raters = sorted({r["reviewer"] for r in ratings})
    query_set = set(queries)
    for m in raters:
        lines = [json.dumps(note(a)) for a in sorted(panel[m]) if a not in query_set]
        (out_dir / "archives" / f"~{m}.jsonl").write_text("\n".join(lines) + "\n")
    pl.DataFrame(ratings).write_csv(out_dir / "ratings.csv")
    (out_dir / "README.md").write_text(
        "SYNTHETIC rating panel simulated by revbench from a synthetic world's hidden truth; not real ratings.\n"
    )
    return {"queries": len(queries), "panelists": len(raters), "ratings": len(ratings)}
