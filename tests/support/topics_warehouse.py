"""A hand-made warehouse where reviewers write on two topics each and unrated papers cite the
reviewers' papers of their own topic: the citation weak labels say which of a reviewer's papers a
submission should attend to. Query papers are rated, so training must leave them out."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl

from revbench.schemas.graph import CITATIONS, PAPER_TOPICS
from revbench.schemas.tables import AUTHOR_LINKS, PAPERS, QUERY_SAMPLES, RATINGS
from revbench.settings import Settings
from revbench.warehouse import Warehouse

TOPICS = {
    "retrieval": "dense retrieval ranking queries documents passages index",
    "molecules": "molecules graph message passing chemistry atoms bonds",
    "speech": "speech audio recognition acoustic phonemes spoken",
    "robots": "robots reinforcement control policy manipulation grasping",
    "vision": "images segmentation pixels convolution detection objects",
    "economics": "causal inference economics markets prices treatment",
}


def topics_warehouse(settings: Settings, reviewers: int = 12, citing: int = 60, queries: int = 6, seed: int = 3) -> dict[str, list[str]]:
    """Write the warehouse; returns the query papers (``queries``) and the citing papers (``citing``)."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    now = datetime(2026, 9, 20, tzinfo=UTC)
    papers, links, cites, topics = [], [], [], []
    by_topic: dict[str, list[str]] = {t: [] for t in names}
    n = 0

    def paper(topic: str, authors: list[str], year: int = 2025) -> str:
        nonlocal n
        n += 1
        pid = f"2609.{n:05d}"
        words = TOPICS[topic].split()
        text = " ".join(rng.choice(words, 8))
        papers.append(dict(arxiv_id=pid, version=1, title=f"On {text[:30]}", abstract=f"We study {text}.",
                           primary_category="cs.LG", categories=["cs.LG"], updated=now, year=year, pdf_sha256="0" * 64,
                           title_similarity=1.0, n_authors=len(authors), input_hash="h", loaded_at=now))
        links.extend(dict(arxiv_id=pid, position=i, author_id=a, method="singleton", block_key="k") for i, a in enumerate(authors))
        topics.append(dict(arxiv_id=pid, scheme="openalex-topic", topic=topic, origin="openalex", score=0.9))
        return pid

    for r in range(reviewers):
        who = f"author_{r:012x}"
        main, second = names[r % len(names)], names[(r + 1 + r // len(names)) % len(names)]
        for _ in range(3):
            by_topic[main].append(paper(main, [who]))
        by_topic[second].append(paper(second, [who]))
    out: dict[str, list[str]] = {"citing": [], "queries": []}
    for i in range(citing):
        topic = names[i % len(names)]
        pid = paper(topic, [f"author_{1000 + i:012x}"], 2026)
        for k, cited in enumerate(rng.choice(by_topic[topic], 2, replace=False)):
            cites.append(dict(citing_arxiv_id=pid, source="s2", ordinal=k, cited_arxiv_id=str(cited)))
        out["citing"].append(pid)
    for i in range(queries):
        topic = names[i % len(names)]
        pid = paper(topic, [f"author_{2000 + i:012x}"], 2026)
        cites.append(dict(citing_arxiv_id=pid, source="s2", ordinal=0, cited_arxiv_id=by_topic[topic][0]))
        out["queries"].append(pid)
    ratings = [dict(reviewer_id=f"author_{r:012x}", paper_id=q, rating=5.0 if names[r % len(names)] == names[i % len(names)] else 1.0,
                    invitation_id=f"inv_{r}", round=1, category="cs.LG", event_id=100 * i + r, epoch="e1", rated_at=now,
                    n_events=1, status="kept", flags=[])
               for i, q in enumerate(out["queries"]) for r in range(reviewers)]
    samples = [dict(arxiv_id=q, round=1, revision=1, seed=0, category="cs.LG", sampled_at=now) for q in out["queries"]]
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with Warehouse.open(settings.warehouse_path) as wh:
        wh.upsert(PAPERS, pl.DataFrame(papers))
        wh.upsert(AUTHOR_LINKS, pl.DataFrame(links))
        wh.upsert(QUERY_SAMPLES, pl.DataFrame(samples))
        wh.upsert(CITATIONS, pl.DataFrame(cites))
        wh.upsert(PAPER_TOPICS, pl.DataFrame(topics))
        wh.upsert(RATINGS, pl.DataFrame(ratings, schema=RATINGS.polars_schema))
    return out
