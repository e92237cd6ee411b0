"""The replay server answers the SYNTHETIC world's graph through Semantic Scholar's references,
OpenAlex's works and authors and GROBID's full text, in the shapes the real services write: the
real clients and parsers read them, and the three sources give the same edges."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import polars as pl

from revbench.clients.grobid import GrobidHeaderClient
from revbench.clients.openalex import OpenAlexClient
from revbench.clients.openalex_graph import author_rows, authorship_rows, citation_rows, topic_rows
from revbench.clients.s2_graph import reference_rows
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.replay.openalex import work_id
from revbench.synth.graph_files import GRAPH_DIR, LEGACY_FILE, read_graph
from revbench.synth.truth import load_truth
from tests.support.common import on_replay


def _papers(world: Path, n: int) -> list[tuple[str, bytes]]:
    """(arXiv id, latest PDF) of n world papers that S2 knows and that have a PDF, bad ones left out."""
    bad = set(pl.read_parquet(world / "truth" / "bad_records.parquet")["arxiv_id"].to_list())
    known = set(pl.read_parquet(world / "s2_papers.parquet")["arxiv_id"].to_list())
    docs = pl.read_parquet(world / "documents.parquet").sort("arxiv_id", "version")
    latest = {a: pdf for a, pdf in docs.select("arxiv_id", "pdf").iter_rows() if a in known and a not in bad}
    return sorted(latest.items())[:n]


def test_the_three_sources_give_the_graphs_edges(small_world: Path, replay, settings) -> None:
    graph = read_graph(small_world)
    s = on_replay(settings, replay(world=small_world, fault_rate=0.0)).with_overrides(grobid={"fulltext": True})
    s2, grobid = SemanticScholarClient(s.s2, s.http), GrobidHeaderClient(s.grobid, s.http)
    openalex = OpenAlexClient(s.openalex.model_copy(update={"enabled": True}), s.http)
    seen: dict[str, int] = {"null_s2": 0, "typed_doi": 0, "arxiv_untyped": 0, "no_title": 0, "no_year": 0, "intents": 0}
    for aid, pdf in _papers(small_world, 12):
        refs = graph["references"][aid]
        rows = reference_rows(aid, s2.references(f"ARXIV:{aid}", with_intent_contexts=True))
        assert [r["cited_title"] for r in rows] == [r["title"] for r in refs]  # a null S2 id is kept by its title
        assert [(r["cited_s2_id"], r["cited_arxiv"], r["n_contexts"], r["is_influential"]) for r in rows] == [
            (r["s2_id"], r["arxiv"], r["n_contexts"], r["is_influential"]) for r in refs]
        seen["null_s2"] += sum(r["cited_s2_id"] is None for r in rows)
        seen["intents"] += sum(bool(r["intents"]) for r in rows)

        work = openalex.work_by_arxiv(aid)
        assert work is not None
        cited = [r["cited_openalex_id"] for r in citation_rows(aid, work)]
        in_world = [r for r in refs if r["in_world"]]
        assert len(cited) == len(in_world) > 0
        for wid, ref in zip(cited, in_world, strict=True):
            if ref["arxiv_id"]:  # a cited world paper is a work OpenAlex answers by that id
                assert wid == work_id(ref["arxiv_id"]) and openalex.work(wid)["doi"].endswith(ref["arxiv_id"])
        topics = topic_rows(aid, work)
        assert topics and all(t["domain"] and t["field"] and t["subfield"] for t in topics)
        institutions, affiliations = authorship_rows(aid, work)
        assert institutions and all(i["ror"] and i["institution_key"] == f"ror:{i['ror']}" for i in institutions)
        assert affiliations and all(a["person_key"].startswith("openalex:A") for a in affiliations)

        tei_refs, _tei = grobid.references(pdf, name=f"{aid}.pdf")
        assert len(tei_refs) == len(rows)
        for t, r in zip(tei_refs, rows, strict=True):
            assert t.title in (None, r["cited_title"]) and t.year in (None, r["cited_year"])
            assert t.arxiv in (None, r["cited_arxiv"]) and t.contexts == r["n_contexts"]
            assert t.doi in (None, json.loads(r["external_ids"] or "{}").get("DOI", "").lower() or None,
                             f"10.48550/arxiv.{r['cited_arxiv']}")
        seen["typed_doi"] += sum("DOI" in t.idnos for t in tei_refs)
        seen["arxiv_untyped"] += sum(t.arxiv is not None and "DOI" not in t.idnos for t in tei_refs)
        seen["no_title"] += sum(t.title is None for t in tei_refs)
        seen["no_year"] += sum(t.year is None for t in tei_refs)
    assert all(seen.values()), seen


def _author_of(work: dict[str, Any], name: str) -> str:
    return next(a["author"]["id"] for a in work["authorships"] if a["author"]["display_name"] == name)


def test_openalex_shows_the_planted_former_colleagues_under_one_ror(small_world: Path, replay, settings) -> None:
    truth = load_truth(small_world)
    [conflict] = truth.graph_conflicts.to_dicts()
    s = on_replay(settings, replay(world=small_world))
    openalex = OpenAlexClient(s.openalex.model_copy(update={"enabled": True}), s.http)
    names = dict(truth.persons.select("person_id", "name").iter_rows())
    found: dict[str, list[dict[str, Any]]] = {}
    for pid in (conflict["person_id"], conflict["author_id"]):
        aid = truth.mentions.filter(pl.col("person_id") == pid)["arxiv_id"][0]
        work = openalex.work_by_arxiv(aid)
        assert work is not None
        found[pid] = author_rows(openalex.author(_author_of(work, names[pid])))[1]
    key = f"ror:{conflict['ror']}"
    theirs = next(a for a in found[conflict["author_id"]] if a["institution_key"] == key)
    mine = next(a for a in found[conflict["person_id"]] if a["institution_key"] == key)
    assert mine["last_year"] == conflict["last_year"] and theirs["last_year"] >= mine["last_year"] >= theirs["first_year"] - 3


def _graph_answers(base: str, world: Path) -> list[tuple[str, int, bytes]]:
    """Every answer the replay at ``base`` gives about the world's graph: each paper's references,
    fields of study, OpenAlex work and its authors, and each PDF's full text."""
    papers = sorted(pl.read_parquet(world / "s2_papers.parquet")["arxiv_id"].to_list())
    out = []
    with httpx.Client(base_url=base, timeout=30) as http:
        def keep(r: httpx.Response) -> httpx.Response:
            out.append((r.request.url.raw_path.decode(), r.status_code, r.content))
            return r

        keep(http.post("/s2/graph/v1/paper/batch", params={"fields": "paperId,s2FieldsOfStudy,fieldsOfStudy"},
                       json={"ids": [f"ARXIV:{a}" for a in papers]}))
        for aid in papers:
            keep(http.get(f"/s2/graph/v1/paper/ARXIV:{aid}/references", params={"limit": 1000}))
            work = keep(http.get(f"/openalex/works/https://doi.org/10.48550/arXiv.{aid}")).json()
            for authorship in work["authorships"]:
                keep(http.get(f"/openalex/authors/{authorship['author']['id']}"))
        for pdf in pl.read_parquet(world / "documents.parquet")["pdf"].to_list():
            keep(http.post("/grobid/api/processFulltextDocument", files={"input": ("p.pdf", pdf, "application/pdf")}))
    return out


def test_a_world_with_graph_json_answers_as_its_graph_tables(small_world: Path, tmp_path: Path, replay) -> None:
    """A world written before the graph's tables (format 5, one ``graph.json``) is still served,
    byte for byte as the same graph in tables."""
    old = tmp_path / "old"
    shutil.copytree(small_world, old)
    shutil.rmtree(old / GRAPH_DIR)
    (old / LEGACY_FILE).write_text(json.dumps(read_graph(small_world), ensure_ascii=False))
    tables = _graph_answers(replay(world=small_world, fault_rate=0.0).base, small_world)
    legacy = _graph_answers(replay(world=old, fault_rate=0.0).base, old)
    assert len(tables) > 300 and all(status == 200 for _, status, _ in tables)
    assert sum(b'"paperId": null' in body for _, _, body in tables) > 0  # the graph was answered, not left out
    assert legacy == tables
