"""A SYNTHETIC world written as Semantic Scholar's bulk datasets (S2AG ``papers`` and
``citations``, gzipped JSON Lines in the published shape), from the same records and graph the
replay serves over HTTP, so the graph stage's bulk path runs offline on the world it is tested on.

What S2AG itself cannot carry is not carried: a reference S2 could not place has a null
``citedcorpusid`` and no title (the API's answer keeps the title), so such rows differ between
the two paths by their title alone.

Ids are stable across releases, as S2's are: a paper's corpus id comes from its S2 id (the
first ten hex digits), a citation's from its citing paper's corpus id and its position, so a
world written again after it grew, as a later release, changes only what changed, and the
increment between two releases (``diffs/<from>_<to>/``: the rows added or changed as
``updates``, the keys of those gone as ``deletes``, as the Datasets API's diffs list them) is
computed from the two. ``revised`` stands for S2's own corrections between releases: a few
cited papers retitled, one corpus paper's fields of study changed, one citation's influence
flipped, one dropped, and one corpus paper deleted (all SYNTHETIC, chosen by key).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl

from revbench.synth.graph_files import GraphStore

S2_URL = "https://www.semanticscholar.org/paper/"
Rows = dict[str, list[dict[str, Any]]]
"""``papers`` and ``citations`` rows of one release."""
KEYS = {"papers": "corpusid", "citations": "citationid"}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()))


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines() if line.strip()]


def corpus_id(s2_id: str) -> int:
    """The stable corpus id of the world's paper ``s2_id`` (a 40-hex S2 id)."""
    return int(s2_id[:10], 16)


def s2ag_rows(world_dir: Path) -> Rows:
    """The world's papers, the S2 papers they cite, and their citations, as S2AG rows."""
    records = {aid: json.loads(text) for aid, text in
               pl.read_parquet(world_dir / "s2_papers.parquet").select("arxiv_id", "json").iter_rows()}
    graph = GraphStore.open(world_dir)
    refs = {aid: graph.references(aid) if graph else [] for aid in records}
    cited = {r["s2_id"]: r for rs in refs.values() for r in rs if r["s2_id"]}
    papers, seen = [], set()
    for aid, rec in sorted(records.items()):
        sid = rec.get("paperId")
        if not sid:
            continue
        topics = graph.topics(aid) if graph else None
        cid = corpus_id(sid)
        papers.append({"corpusid": cid, "externalids": {**(rec.get("externalIds") or {}), "CorpusId": str(cid)},
                       "url": S2_URL + sid, "title": rec.get("title"), "year": rec.get("year"),
                       "s2fieldsofstudy": topics["s2"] if topics else None, "publicationtypes": ["JournalArticle"]})
        seen.add(sid)
    for sid, r in sorted(cited.items()):
        if sid in seen:
            continue
        ext: dict[str, Any] = {"CorpusId": str(corpus_id(sid))}
        if r["arxiv"]:
            ext["ArXiv"] = r["arxiv"]
        if r["doi"] and not r["doi"].startswith("10.48550/"):
            ext["DOI"] = r["doi"]
        papers.append({"corpusid": corpus_id(sid), "externalids": ext, "url": S2_URL + sid, "title": r["title"],
                       "year": r["year"], "s2fieldsofstudy": None, "publicationtypes": None})
    citations = []
    for aid, rec in sorted(records.items()):
        sid = rec.get("paperId")
        for k, r in enumerate(refs[aid] if sid else []):
            contexts = [f"SYNTHETIC context {c + 1} citing [{k + 1}] in {aid}." for c in range(r["n_contexts"])]
            citations.append({"citationid": corpus_id(sid) * 10_000 + k, "citingcorpusid": corpus_id(sid),
                              "citedcorpusid": corpus_id(r["s2_id"]) if r["s2_id"] else None,
                              "isinfluential": r["is_influential"], "contexts": contexts,
                              "intents": [list(r["intents"]) for _ in contexts]})
    return {"papers": papers, "citations": citations}


def revise(rows: Rows, every: int = 31) -> Rows:
    """``rows`` with S2's corrections of a later release (SYNTHETIC), chosen by key so that they
    hold as the world grows: each cited paper whose corpus id is a multiple of ``every``
    retitled; of the corpus papers in arXiv order, the first's fields of study changed and its
    first citation's influence flipped, the second deleted (its citations with it), the third's
    second citation dropped."""
    corpus = sorted((p["externalids"].get("ArXiv") or "", p["corpusid"]) for p in rows["papers"] if p["publicationtypes"])
    first, gone, third = ([cid for _, cid in corpus] + [None, None, None])[:3]
    papers = []
    for p in rows["papers"]:
        if p["corpusid"] == gone:
            continue
        if not p["publicationtypes"] and p["corpusid"] % every == 0:
            p = {**p, "title": f"{p['title']} (SYNTHETIC revised title)"}
        elif p["corpusid"] == first:
            p = {**p, "s2fieldsofstudy": [{"category": "Mathematics", "source": "s2-fos-model"}]}
        papers.append(p)
    citations = []
    for c in rows["citations"]:
        if c["citingcorpusid"] == gone or c["citationid"] == (third or 0) * 10_000 + 1:
            continue
        citations.append({**c, "isinfluential": not c["isinfluential"]} if c["citationid"] == (first or 0) * 10_000 else c)
    return {"papers": papers, "citations": citations}


def diff_rows(before: Rows, after: Rows) -> dict[str, Rows]:
    """The increment from ``before`` to ``after``: per dataset, ``updates`` (rows added or
    changed) and ``deletes`` (the keys of rows gone)."""
    out: dict[str, Rows] = {}
    for dataset, key in KEYS.items():
        old = {r[key]: r for r in before[dataset]}
        new = {r[key]: r for r in after[dataset]}
        out[dataset] = {"updates": [r for k, r in new.items() if old.get(k) != r],
                        "deletes": [{key: k} for k in old if k not in new]}
    return out


def write_s2ag(world_dir: Path, out: Path, release: str | None = None, since: str | None = None,
               revised: bool = False, parts: int = 1) -> dict[str, int]:
    """The world as one S2AG release under ``out/papers/`` and ``out/citations/`` (``release``
    None) or ``out/<release>/...``, each dataset in ``parts`` shards, ``revised`` with
    :func:`revise`; with ``since`` (a release written here before) also the increment from it
    under ``out/diffs/<since>_<release>/``. Returns how many rows of each were written (and, with
    ``since``, in the increment)."""
    rows = s2ag_rows(world_dir)
    if revised:
        rows = revise(rows)
    home = out if release is None else out / release
    for dataset, items in rows.items():
        for i in range(max(1, parts)):
            _write(home / dataset / f"part{i}.jsonl.gz", items[i::max(1, parts)])
    counts = {dataset: len(items) for dataset, items in rows.items()}
    if since is not None and release is not None:
        before = {dataset: [r for f in sorted((out / since / dataset).glob("part*.jsonl.gz")) for r in _read(f)]
                  for dataset in KEYS}
        for dataset, kinds in diff_rows(before, rows).items():
            for kind, items in kinds.items():
                _write(out / "diffs" / f"{since}_{release}" / dataset / kind / "part0.jsonl.gz", items)
                counts[f"{dataset}_{kind}"] = len(items)
    return counts
