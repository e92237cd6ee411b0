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
from collections.abc import Callable, Iterable, Iterator
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


CORPUS_ID_HEX = 12
"""Hex digits of an S2 id a corpus id is made of: 48 bits, so a 160k world's 1.2 million papers
share one with odds of about 1 in 400 (at 40 bits, two of them did), and a citation's id (its
citing paper's times 10,000 plus its position) still fits a signed 64-bit integer."""


class CorpusIdClash(ValueError):
    """Two of the world's S2 papers would share a corpus id: S2AG would make them one paper."""


def corpus_id(s2_id: str) -> int:
    """The stable corpus id of the world's paper ``s2_id`` (a 40-hex S2 id)."""
    return int(s2_id[:CORPUS_ID_HEX], 16)


class Shards:
    """A dataset's rows dealt to ``parts`` gzipped JSON Lines files as they come (row i to
    ``part{i % parts}``), so a release of millions of rows is never held whole; the files hold
    what ``rows[i::parts]`` would."""

    def __init__(self, folder: Path, parts: int = 1) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.files = [gzip.open(folder / f"part{i}.jsonl.gz", "wt", encoding="utf-8") for i in range(max(1, parts))]
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        """Write ``row`` to its shard."""
        self.files[self.count % len(self.files)].write(json.dumps(row, ensure_ascii=False) + "\n")
        self.count += 1

    def close(self) -> int:
        """Close every shard; how many rows were written."""
        for f in self.files:
            f.close()
        return self.count


def iter_s2ag(world_dir: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The world's papers, the S2 papers they cite, and their citations, as ``(dataset, row)`` in
    release order: each corpus paper's row and its citations' as its references are read (the
    graph's millions of references are never held), then the cited papers outside the corpus."""
    records = {aid: json.loads(text) for aid, text in
               pl.read_parquet(world_dir / "s2_papers.parquet").select("arxiv_id", "json").iter_rows()}
    graph = GraphStore.open(world_dir)
    cited: dict[str, tuple[Any, ...]] = {}
    seen: set[str] = set()
    ids: dict[int, str] = {}

    def unique(sid: str) -> int:
        cid = corpus_id(sid)
        if ids.setdefault(cid, sid) != sid:  # refused, not merged: a merged pair silently rewires the graph
            raise CorpusIdClash(f"S2 papers {ids[cid]} and {sid} share corpus id {cid} (the first "
                                f"{CORPUS_ID_HEX} hex digits of their ids): the world cannot be written as S2AG")
        return cid

    for aid, rec in sorted(records.items()):
        sid = rec.get("paperId")
        if not sid:
            continue
        seen.add(sid)
        topics = graph.topics(aid) if graph else None
        cid = unique(sid)
        yield "papers", {"corpusid": cid, "externalids": {**(rec.get("externalIds") or {}), "CorpusId": str(cid)},
                         "url": S2_URL + sid, "title": rec.get("title"), "year": rec.get("year"),
                         "s2fieldsofstudy": topics["s2"] if topics else None, "publicationtypes": ["JournalArticle"]}
        for k, r in enumerate(graph.references(aid) if graph else []):
            if r["s2_id"]:
                cited[r["s2_id"]] = (r["arxiv"], r["doi"], r["title"], r["year"])
            contexts = [f"SYNTHETIC context {c + 1} citing [{k + 1}] in {aid}." for c in range(r["n_contexts"])]
            yield "citations", {"citationid": cid * 10_000 + k, "citingcorpusid": cid,
                                "citedcorpusid": corpus_id(r["s2_id"]) if r["s2_id"] else None,
                                "isinfluential": r["is_influential"], "contexts": contexts,
                                "intents": [list(r["intents"]) for _ in contexts]}
    for sid, (arxiv, doi, title, year) in sorted(cited.items()):
        if sid in seen:
            continue
        ext: dict[str, Any] = {"CorpusId": str(unique(sid))}
        if arxiv:
            ext["ArXiv"] = arxiv
        if doi and not doi.startswith("10.48550/"):
            ext["DOI"] = doi
        yield "papers", {"corpusid": corpus_id(sid), "externalids": ext, "url": S2_URL + sid, "title": title,
                         "year": year, "s2fieldsofstudy": None, "publicationtypes": None}


def s2ag_rows(world_dir: Path) -> Rows:
    """The world's papers, the S2 papers they cite, and their citations, as S2AG rows."""
    rows: Rows = {"papers": [], "citations": []}
    for dataset, row in iter_s2ag(world_dir):
        rows[dataset].append(row)
    return rows


def revision(corpus: list[tuple[str, int]], every: int = 31) -> Callable[[str, dict[str, Any]], dict[str, Any] | None]:
    """S2's corrections of a later release (SYNTHETIC) as a function of one ``(dataset, row)``: the
    row as the later release holds it, or None where it is gone. Chosen by key so that they hold as
    the world grows: each cited paper whose corpus id is a multiple of ``every`` retitled; of the
    corpus papers in arXiv order (``corpus``: ``(arXiv id, corpus id)`` of every paper with a
    publication type), the first's fields of study changed and its first citation's influence
    flipped, the second deleted (its citations with it), the third's second citation dropped."""
    first, gone, third = ([cid for _, cid in sorted(corpus)] + [None, None, None])[:3]

    def revised(dataset: str, row: dict[str, Any]) -> dict[str, Any] | None:
        if dataset == "papers":
            if row["corpusid"] == gone:
                return None
            if not row["publicationtypes"] and row["corpusid"] % every == 0:
                return {**row, "title": f"{row['title']} (SYNTHETIC revised title)"}
            if row["corpusid"] == first:
                return {**row, "s2fieldsofstudy": [{"category": "Mathematics", "source": "s2-fos-model"}]}
            return row
        if row["citingcorpusid"] == gone or row["citationid"] == (third or 0) * 10_000 + 1:
            return None
        return {**row, "isinfluential": not row["isinfluential"]} if row["citationid"] == (first or 0) * 10_000 else row

    return revised


def corpus_of(papers: Iterable[dict[str, Any]]) -> list[tuple[str, int]]:
    """``(arXiv id, corpus id)`` of the corpus papers (those with a publication type) among ``papers``."""
    return [(p["externalids"].get("ArXiv") or "", p["corpusid"]) for p in papers if p["publicationtypes"]]


def revise(rows: Rows, every: int = 31) -> Rows:
    """``rows`` with S2's corrections of a later release (:func:`revision`)."""
    revised = revision(corpus_of(rows["papers"]), every)
    return {dataset: [r for row in items if (r := revised(dataset, row)) is not None] for dataset, items in rows.items()}


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
    home = out if release is None else out / release
    if not revised and since is None:  # streamed: a year of arXiv's references never held at once
        shards = {dataset: Shards(home / dataset, parts) for dataset in KEYS}
        for dataset, row in iter_s2ag(world_dir):
            shards[dataset].add(row)
        return {dataset: w.close() for dataset, w in shards.items()}
    rows = s2ag_rows(world_dir)
    if revised:
        rows = revise(rows)
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
