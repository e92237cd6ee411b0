"""Pool-like pairs of a SYNTHETIC world, from its files and truth alone: what the pools stage would
invite, without running it, so the world's realism can be measured in a second (a test does).

The pools recall, for each query paper, the authors of the papers whose text is nearest it; so does
this, with a TF-IDF encoder standing in for the sentence encoder: for every good paper of the corpus,
its candidates are the authors of the other papers ranked by cosine, less the conflicts the pools
remove (its authors, their co-authors, anyone sharing an institution) and anyone with fewer than
three papers in the last two years (the pools' screening), the ``per_query`` nearest kept.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

PER_QUERY = 10
"""Candidates per query (the pools' ``candidates_per_query``)."""
MIN_RECENT = 3
"""Papers in the last two years a candidate needs (the pools' screening)."""
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_WORD = re.compile(r"[a-z0-9][a-z0-9-]+")


def paper_texts(world_dir: Path) -> dict[str, str]:
    """arXiv id -> title and abstract of its latest version, as arXiv shows them."""
    out = {}
    for arxiv_id, versions in pl.read_parquet(world_dir / "arxiv.parquet").select("arxiv_id", "versions").iter_rows():
        entry = max(versions, key=lambda v: v["version"])["entry"]
        title, summary = _TITLE.search(entry), _SUMMARY.search(entry)
        out[arxiv_id] = html.unescape(f"{title.group(1) if title else ''}. {summary.group(1) if summary else ''}")
    return out


def tfidf(texts: list[str]) -> np.ndarray:
    """Unit TF-IDF vectors (sublinear term frequency) of ``texts``, one row each."""
    docs = [_WORD.findall(t.lower()) for t in texts]
    vocab = {w: i for i, w in enumerate(sorted({w for d in docs for w in d}))}
    x = np.zeros((len(docs), len(vocab)))
    for i, d in enumerate(docs):
        for w in d:
            x[i, vocab[w]] += 1
    x = np.where(x > 0, 1 + np.log(np.maximum(x, 1)), 0)
    idf = np.log((1 + len(docs)) / (1 + (x > 0).sum(axis=0))) + 1
    x *= idf
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def pool_like_pairs(world_dir: Path, per_query: int = PER_QUERY) -> pl.DataFrame:
    """``query_id, person_id, similarity``: each good paper's nearest eligible candidates (see the module)."""
    truth = world_dir / "truth"
    mentions = pl.read_parquet(truth / "mentions.parquet").select("arxiv_id", "person_id")
    works = pl.read_parquet(truth / "works.parquet")
    persons = pl.read_parquet(truth / "persons.parquet").select("person_id", "institutions")
    bad = set(pl.read_parquet(truth / "bad_records.parquet")["arxiv_id"].to_list())
    texts = paper_texts(world_dir)
    ids = sorted(texts)
    vectors = tfidf([texts[a] for a in ids])
    sims = vectors @ vectors.T
    team: dict[str, set[str]] = defaultdict(set)
    for a, p in mentions.iter_rows():
        team[a].add(p)
    coauthors: dict[str, set[str]] = defaultdict(set)
    for members in team.values():
        for m in members:
            coauthors[m] |= members
    newest = int(works.filter(pl.col("arxiv_id").is_not_null())["year"].max())
    recent: dict[str, int] = defaultdict(int)
    for year, authors in works.select("year", "authors").iter_rows():
        if year >= newest - 1:
            for m in authors:
                recent[m] += 1
    insts = {p: set(i or []) for p, i in persons.iter_rows()}
    rows = []
    for qi, q in enumerate(ids):
        if q in bad or not team.get(q):
            continue
        conflicted = set().union(*(coauthors[m] for m in team[q]))
        theirs = set().union(*(insts.get(m, set()) for m in team[q]))
        best: dict[str, float] = {}
        for ni in np.argsort(-sims[qi], kind="stable").tolist():
            n = ids[ni]
            if n == q or n in bad:
                continue
            for m in sorted(team.get(n, ())):
                if m in best or m in conflicted or insts.get(m, set()) & theirs or recent[m] < MIN_RECENT:
                    continue
                best[m] = float(sims[qi, ni])
            if len(best) >= per_query:
                break
        rows += [{"query_id": q, "person_id": m, "similarity": s} for m, s in list(best.items())[:per_query]]
    return pl.DataFrame(rows, schema={"query_id": pl.Utf8, "person_id": pl.Utf8, "similarity": pl.Float64})
