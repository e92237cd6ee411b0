"""A SYNTHETIC world indexed for the queries the replay server answers."""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from revbench.synth.graph_files import GraphStore


class WorldStore:
    """The world's arXiv entries by category and date, S2 records, PDFs, TEI headers and graph."""

    def __init__(self, world_dir: Path, as_of: datetime | None = None):
        self.dir = world_dir
        self.manifest = json.loads((world_dir / "world.json").read_text())
        arxiv = pl.read_parquet(world_dir / "arxiv.parquet")
        self.by_category: dict[str, list[tuple[datetime, str, str]]] = {}
        for row in arxiv.iter_rows(named=True):
            visible = [v for v in row["versions"] if as_of is None or v["date"] <= as_of]
            if not visible:
                continue
            latest = visible[-1]
            for cat in row["categories"]:
                self.by_category.setdefault(cat, []).append((latest["date"], row["arxiv_id"], latest["entry"]))
        for entries in self.by_category.values():
            entries.sort(key=lambda e: (e[0], e[1]))
        self._dates: dict[str, list[datetime]] = {}
        s2 = pl.read_parquet(world_dir / "s2_papers.parquet")
        self.s2_papers = dict(zip(s2["arxiv_id"].to_list(), s2["json"].to_list(), strict=True))
        authors = pl.read_parquet(world_dir / "s2_authors.parquet")
        self.s2_authors = dict(zip(authors["author_id"].to_list(), authors["json"].to_list(), strict=True))
        self.pdfs: dict[str, bytes] = {}
        self.teis: dict[str, bytes] = {}
        self.arxiv_of_sha: dict[str, str] = {}
        docs_path = world_dir / "documents.parquet"
        if docs_path.exists():
            docs = pl.read_parquet(docs_path)
            for row in docs.iter_rows(named=True):
                self.pdfs[f"{row['arxiv_id']}v{row['version']}"] = row["pdf"]
                self.teis[row["pdf_sha256"]] = row["tei"]
                self.arxiv_of_sha[row["pdf_sha256"]] = row["arxiv_id"]
        # The scholarly graph (revbench.synth.graph), read table by table as first asked for;
        # worlds written before it have none.
        self.graph = GraphStore.open(world_dir)

    def query(self, category: str, lo: datetime, hi: datetime) -> list[str]:
        """Atom entries of ``category`` last revised in ``[lo, hi]`` (minutes, inclusive)."""
        entries = self.by_category.get(category, [])
        dates = self._dates.setdefault(category, [e[0] for e in entries])
        # hi is a whole minute; every timestamp inside that minute belongs to the window.
        return [e[2] for e in entries[bisect_left(dates, lo) : bisect_right(dates, hi + timedelta(seconds=59.999999))]]
