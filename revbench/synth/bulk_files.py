"""A SYNTHETIC world written as Semantic Scholar's bulk datasets (S2AG ``papers`` and
``citations``, gzipped JSON Lines in the published shape), from the same records and graph the
replay serves over HTTP, so the graph stage's bulk path runs offline on the world it is tested on.

What S2AG itself cannot carry is not carried: a reference S2 could not place has a null
``citedcorpusid`` and no title (the API's answer keeps the title), so such rows differ between
the two paths by their title alone. Corpus ids are assigned in the order of the sorted S2 ids.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl

from revbench.synth.graph_files import GraphStore

S2_URL = "https://www.semanticscholar.org/paper/"


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()))


def write_s2ag(world_dir: Path, out: Path) -> dict[str, int]:
    """The world's papers, the S2 papers they cite, and their citations under ``out/papers/`` and
    ``out/citations/``; returns how many rows of each were written."""
    records = {aid: json.loads(text) for aid, text in
               pl.read_parquet(world_dir / "s2_papers.parquet").select("arxiv_id", "json").iter_rows()}
    graph = GraphStore.open(world_dir)
    refs = {aid: graph.references(aid) if graph else [] for aid in records}
    cited = {r["s2_id"]: r for rs in refs.values() for r in rs if r["s2_id"]}
    ids = sorted({rec.get("paperId") for rec in records.values() if rec.get("paperId")} | set(cited))
    corpus = {sid: 100_000 + i for i, sid in enumerate(ids)}
    papers, seen = [], set()
    for aid, rec in sorted(records.items()):
        sid = rec.get("paperId")
        if not sid:
            continue
        topics = graph.topics(aid) if graph else None
        papers.append({"corpusid": corpus[sid], "externalids": {**(rec.get("externalIds") or {}), "CorpusId": str(corpus[sid])},
                       "url": S2_URL + sid, "title": rec.get("title"), "year": rec.get("year"),
                       "s2fieldsofstudy": topics["s2"] if topics else None, "publicationtypes": ["JournalArticle"]})
        seen.add(sid)
    for sid, r in sorted(cited.items()):
        if sid in seen:
            continue
        ext: dict[str, Any] = {"CorpusId": str(corpus[sid])}
        if r["arxiv"]:
            ext["ArXiv"] = r["arxiv"]
        if r["doi"] and not r["doi"].startswith("10.48550/"):
            ext["DOI"] = r["doi"]
        papers.append({"corpusid": corpus[sid], "externalids": ext, "url": S2_URL + sid, "title": r["title"],
                       "year": r["year"], "s2fieldsofstudy": None, "publicationtypes": None})
    citations, n = [], 0
    for aid, rec in sorted(records.items()):
        sid = rec.get("paperId")
        for k, r in enumerate(refs[aid] if sid else []):
            n += 1
            contexts = [f"SYNTHETIC context {c + 1} citing [{k + 1}] in {aid}." for c in range(r["n_contexts"])]
            citations.append({"citationid": n, "citingcorpusid": corpus[sid],
                              "citedcorpusid": corpus.get(r["s2_id"]) if r["s2_id"] else None,
                              "isinfluential": r["is_influential"], "contexts": contexts,
                              "intents": [list(r["intents"]) for _ in contexts]})
    _write(out / "papers" / "part0.jsonl.gz", papers)
    _write(out / "citations" / "part0.jsonl.gz", citations)
    return {"papers": len(papers), "citations": len(citations)}
