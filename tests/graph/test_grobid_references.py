"""GROBID's reference lists, read by the ingest from the PDFs it extracts when ``grobid.fulltext`` is
on (one full-text request per PDF, the header parsed from the same TEI), stored as ``citations`` of
source grobid with the documents, and resolved by the graph stage with the one rule; with full text
off the ingest asks for headers only and stores no reference."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from revbench.flows.graph import GROBID_NONE_YET, graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.schemas.graph import CITATIONS, GRAPH_FETCHES
from revbench.schemas.tables import DOCUMENTS, PAPERS
from revbench.synth.graph_files import read_graph
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.worlds import END, START, week_world


@pytest.fixture
def world(tmp_path: Path) -> Path:
    out = tmp_path / "world"
    week_world(out, n_papers=30, seed=11)
    return out


def _tables(path: Path) -> dict[str, pl.DataFrame]:
    with Warehouse.open(path, read_only=True) as wh:
        return {t.name: wh.read(t) for t in (CITATIONS, GRAPH_FETCHES, DOCUMENTS, PAPERS)}


def test_full_text_on_stores_each_pdfs_references_and_the_graph_resolves_them(settings, replay, world: Path) -> None:
    s = on_replay(settings, replay(world=world, fault_rate=0.0)).with_overrides(
        grobid={"fulltext": True}, ingest={"commit_every": 7})
    ingested = ingest_flow.fn(s, START, END, synthetic=True)
    t = _tables(s.warehouse_path)
    ok = set(t["documents"].filter(pl.col("status") == "ok")["arxiv_id"])
    extract = ingested.notes["extract"]
    # One request per PDF: the full text replaces the header request, it does not come on top of it.
    pdfs = t["documents"]["pdf_sha256"].is_not_null().sum()
    assert ok and extract["grobid_requests"] == pdfs and extract["reference_lists"] == len(ok)
    truth = read_graph(world)["references"]
    grobid = t["citations"].filter(pl.col("source") == "grobid")
    assert grobid.height == sum(len(truth[p]) for p in ok) > 0
    assert grobid["cited_arxiv_id"].is_null().all(), "the ingest stores references unresolved"
    fetches = t["graph_fetches"]
    assert fetches.select("source", "kind").unique().rows() == [("grobid", "references")]
    assert sorted(fetches["arxiv_id"]) == sorted(ok) and (fetches["run_id"] == ingested.run_id).all()
    assert dict(fetches.select("arxiv_id", "n_rows").iter_rows()) == {p: len(truth[p]) for p in ok}

    # Read again (a run that died after the GROBID calls, before its status was final): the same
    # rows by (citing paper, source, ordinal), none twice.
    with Warehouse.open(s.warehouse_path) as wh:
        wh._exec("UPDATE documents SET status = 'fetch_failed'")
    ingest_flow.fn(s, START, END, synthetic=True)
    again = _tables(s.warehouse_path)["citations"]
    assert again.sort("citing_arxiv_id", "ordinal").equals(t["citations"].sort("citing_arxiv_id", "ordinal"))

    out = graph_flow.fn(s)
    ours = set(_tables(s.warehouse_path)["papers"]["arxiv_id"])
    cites = _tables(s.warehouse_path)["citations"].filter(pl.col("source") == "grobid")
    got = {(c["citing_arxiv_id"], c["ordinal"]): c["cited_arxiv_id"] for c in cites.to_dicts()}
    want = {(p, i): r["arxiv_id"] for p in ok for i, r in enumerate(truth[p])}
    to_ours = [k for k, a in want.items() if a in ours and k[0] in ours]
    # What GROBID read of a reference to one of our papers (a DOI, an arXiv id, a title and year)
    # names it, short of the few entries GROBID left bare; none resolves to the wrong paper.
    assert to_ours and sum(got[k] == want[k] for k in to_ours) >= 0.9 * len(to_ours)
    assert [k for k, a in got.items() if a is not None and a != want[k]] == []
    rate = {r["source"]: r for r in out.match_rates}["grobid"]
    counted = cites.filter(pl.col("citing_arxiv_id").is_in(list(ours)))
    assert rate["references"] == counted.height and rate["resolved"] == counted["cited_arxiv_id"].is_not_null().sum()
    assert rate["match_rate"] == round(rate["resolved"] / rate["references"], 4) and GROBID_NONE_YET not in out.notes
    assert {c["source"]: c for c in out.coverage["sources"]}["grobid"]["resolved"] >= rate["resolved"]


def test_full_text_off_asks_for_headers_only_and_stores_no_reference(settings, replay, world: Path) -> None:
    s = on_replay(settings, replay(world=world, fault_rate=0.0))
    ingested = ingest_flow.fn(s, START, END, synthetic=True)
    t = _tables(s.warehouse_path)
    assert t["citations"].is_empty() and t["graph_fetches"].is_empty()
    assert "reference_lists" not in ingested.notes["extract"]
    out = graph_flow.fn(s)
    assert "grobid" not in {r["source"] for r in out.match_rates} and out.notes == []
    # Switched on later, with every PDF already read: the run says why GROBID gave nothing.
    assert GROBID_NONE_YET in graph_flow.fn(s.with_overrides(grobid={"fulltext": True})).notes
