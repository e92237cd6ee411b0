"""A graph run's match rates computed the slow way, for tests to hold the flow's to: every
reference of the papers the run asked a source about, read back from the warehouse and resolved
again against today's papers (what the flow did for every source before it took a settled
source's counts from when its references were saved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from revbench.tasks.graph import REFERENCE_KEYS, index_papers
from revbench.tasks.graph_fetch import match_rates
from revbench.warehouse import Warehouse


def rates_resolved_again(warehouse: Path, run_id: str, grobid_papers: list[str] | None = None) -> list[dict[str, Any]]:
    """The run's rates per source, every reference of its papers resolved again (GROBID's of
    ``grobid_papers``)."""
    with Warehouse.open(warehouse, read_only=True) as wh:
        asked = wh._frame("SELECT DISTINCT source, arxiv_id FROM graph_fetches WHERE run_id = ? AND kind = 'references'",
                          [run_id])
        keys = ("citing_arxiv_id", *REFERENCE_KEYS)
        refs = {src: wh.graph.references_of(sorted(asked.filter(asked["source"] == src)["arxiv_id"]), src, keys)
                for src in set(asked["source"])}
        if grobid_papers:
            refs["grobid"] = wh.graph.references_of(grobid_papers, "grobid", keys)
        return match_rates(refs, index_papers(wh.graph.paper_identifiers()))
