"""A SYNTHETIC world's hidden truth, and every check of the pipeline against it.

``load_truth`` is the one reader of ``<world>/truth/``. The checks take what the pipeline
produced as frames (the caller reads them from the warehouse) and judge it by the truth, never
by the pipeline's own view: disambiguation quality, the conflict-of-interest audit of
invitations, and a simulated rating panel that stands in for the survey in the demo.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.evaluation.metrics.clustering import pairwise_scores


@dataclass(frozen=True)
class WorldTruth:
    """What the generator knows and the services never show."""

    mentions: pl.DataFrame
    """``arxiv_id, position, person_id``: who each author mention really is."""
    persons: pl.DataFrame
    """``person_id, name, institution, emails, s2_author_ids, expertise``."""
    paper_topics: dict[str, str]
    """arXiv id -> ``category/subtopic``."""
    bad_records: pl.DataFrame
    """``arxiv_id, kind, expected_reason``: planted bad records and the reject each must become."""


def load_truth(world_dir: Path) -> WorldTruth:
    """Read a world's ``truth/`` folder."""
    d = world_dir / "truth"
    if not d.is_dir():
        raise FileNotFoundError(f"{world_dir} has no truth/ folder: not a revbench SYNTHETIC world")
    return WorldTruth(
        mentions=pl.read_parquet(d / "mentions.parquet"),
        persons=pl.read_parquet(d / "persons.parquet"),
        paper_topics=dict(pl.read_parquet(d / "paper_topics.parquet").iter_rows()),
        bad_records=pl.read_parquet(d / "bad_records.parquet"),
    )


def person_of_mention(truth: WorldTruth) -> dict[str, str]:
    """``"<arxiv_id>:<position>"`` -> true person id (the key disambiguation uses)."""
    return {f"{a}:{p}": t for a, p, t in truth.mentions.select("arxiv_id", "position", "person_id").iter_rows()}


def disambiguation_quality(truth: WorldTruth, links: pl.DataFrame) -> dict[str, float]:
    """Pairwise and B-cubed scores of ``author_links`` (``arxiv_id, position, author_id``)."""
    pred = {f"{a}:{p}": c for a, p, c in links.select("arxiv_id", "position", "author_id").iter_rows()}
    return pairwise_scores(pred, person_of_mention(truth))


def coi_violations(truth: WorldTruth, assignments: pl.DataFrame, links: pl.DataFrame) -> int:
    """Invitations (``query_id, author_id``) whose real person wrote the query paper or co-wrote
    any paper with one of its real authors; ``links`` maps mentions to our author ids."""
    person_of_author = links.join(truth.mentions, on=["arxiv_id", "position"]).select("author_id", "person_id").unique()
    writers = truth.mentions.select("arxiv_id", "person_id")
    coauthors = writers.join(writers, on="arxiv_id").select(pl.col("person_id").alias("a"), pl.col("person_id_right").alias("b")).unique()
    invited = assignments.join(person_of_author, on="author_id").select("query_id", "person_id")
    pairs = invited.join(writers.rename({"arxiv_id": "query_id", "person_id": "qp"}), on="query_id")
    bad = pairs.join(coauthors, left_on=["person_id", "qp"], right_on=["a", "b"], how="semi")
    return bad.select("query_id", "person_id").unique().height


def simulate_panel(truth: WorldTruth, papers: pl.DataFrame, out_dir: Path, n_queries: int = 60, per_query: int = 8,
                   seed: int = 7) -> dict[str, int]:
    """Write a SYNTHETIC rating panel over loaded ``papers`` (``arxiv_id, title, abstract, year``)
    in the OpenReview layout (``submissions.json``, ``archives/~<id>.jsonl``, ``ratings.csv``).

    Panelists are the world's people with at least two loaded papers; each query paper is rated
    by ``per_query`` of them, half chosen among people whose expertise touches its category. A
    rating follows the truth (5 or 4 for the paper's own topic, 3 for its category, 1 or 2
    otherwise) with seeded noise."""
    rng = np.random.default_rng(seed)
    loaded = set(papers["arxiv_id"].to_list())
    authored = truth.mentions.filter(pl.col("arxiv_id").is_in(list(loaded))).unique(["arxiv_id", "person_id"])
    by_person = authored.group_by("person_id").agg(pl.col("arxiv_id")).filter(pl.col("arxiv_id").list.len() >= 2)
    panel = dict(by_person.iter_rows())
    expertise = {p: e for p, e in truth.persons.select("person_id", "expertise").iter_rows() if p in panel}
    authors_of = {a: set(g) for a, g in authored.group_by("arxiv_id").agg(pl.col("person_id")).iter_rows()}
    text = {r["arxiv_id"]: r for r in papers.iter_rows(named=True)}

    queries = sorted(loaded)
    queries = [queries[i] for i in rng.permutation(len(queries))[:n_queries]]
    ratings = []
    members = sorted(panel)
    for q in queries:
        topic = truth.paper_topics[q]
        category = topic.split("/")[0]
        eligible = [m for m in members if m not in authors_of.get(q, set())]
        near = [m for m in eligible if any(t.split("/")[0] == category for t in expertise[m])]
        picks = list(rng.permutation(near)[: per_query // 2]) if near else []
        rest = [m for m in eligible if m not in picks]
        picks += list(rng.permutation(rest)[: per_query - len(picks)])
        for m in picks:
            ratings.append({"reviewer": str(m), "paper": q, "rating": float(true_rating(rng, topic, expertise[m]))})

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "archives").mkdir(exist_ok=True)

    def note(aid: str) -> dict[str, Any]:
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


def true_rating(rng: np.random.Generator, topic: str, expertise: list[str]) -> int:
    """A rating by true topical expertise, with seeded noise: 5 or 4 for the paper's own topic,
    3 for its category, 1 or 2 otherwise, one level off a fifth of the time."""
    category = topic.split("/")[0]
    if topic in expertise:
        base = 5 if rng.random() < 0.6 else 4
    elif any(t.split("/")[0] == category for t in expertise):
        base = 3
    else:
        base = 2 if rng.random() < 0.5 else 1
    if rng.random() < 0.2:
        base += int(rng.choice([-1, 1]))
    return min(5, max(1, base))
