"""Semantic Scholar's graph: every real sample of ``s2-graph`` (cassettes in both VCR dialects, stored
objects, the bulk dataset's sample) through the real client and the parsers of
``revbench.clients.s2_graph``. Cassettes are served as they are by the replay server (its cassette
loader moves each recorded URL onto its mount point); stored objects are served as the answer
their endpoint gives. Every count is checked against the raw JSON as well: nothing is lost."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from revbench.clients import s2_graph
from revbench.clients.semantic_scholar import GRAPH_PAPER_FIELDS, SemanticScholarClient
from revbench.replay.server import ReplayApp
from revbench.settings import Settings
from tests.support.common import on_replay
from tests.support.conformance import REAL, expected, needs_samples

pytestmark = needs_samples

GRAPH = REAL / "s2-graph"
EXPECTED = expected("s2-graph")["files"]
JSON = {"content-type": "application/json"}


def _bodies(name: str) -> list[Any]:
    """The parsed body of each recorded exchange, whichever VCR dialect the cassette speaks."""
    out = []
    for it in yaml.safe_load((GRAPH / name).read_text(encoding="utf-8"))["interactions"]:
        resp = it["response"]
        out.append(json.loads(resp["content"] if "content" in resp else resp["body"]["string"]))
    return out


def _cassette(tmp: Path, replay: Any, settings: Settings, name: str) -> tuple[ReplayApp, SemanticScholarClient]:
    d = tmp / name.replace("@", "-")
    d.mkdir()
    shutil.copy(GRAPH / name, d / "cassette.yaml")
    app = replay(fixtures=d)
    s = on_replay(settings, app).with_overrides(http={"max_attempts": 1})
    return app, SemanticScholarClient(s.s2, s.http)


def _client(base: str, settings: Settings) -> SemanticScholarClient:
    s = settings.with_overrides(s2={"base_url": f"{base}/s2/graph/v1", "delay_seconds": 0, "keyless_delay_seconds": 0},
                                http={"max_attempts": 1})
    return SemanticScholarClient(s.s2, s.http)


def _pairs(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [[r["topic"], r["origin"]] for r in rows]


def test_every_sample_file_is_accounted_for() -> None:
    assert {p.name for p in GRAPH.iterdir()} - {"PROVENANCE.md"} == set(EXPECTED)


@pytest.mark.parametrize("name", [n for n, w in EXPECTED.items() if w["called_as"] == "references"])
def test_references_follow_every_page_and_keep_null_ids_by_title(tmp_path, replay, settings, name: str) -> None:
    want = EXPECTED[name]
    pages = _bodies(name)
    assert [[p["offset"], p.get("next"), len(p["data"])] for p in pages] == want["pages"]
    raw = [item for p in pages for item in p["data"]]
    _app, client = _cassette(tmp_path, replay, settings, name)
    items = client.references(want["paper_id"], with_intent_contexts=True)
    assert client.requests_made == len(pages)  # the page without next ended it
    assert items == raw and len(items) == want["references"]
    rows = s2_graph.reference_rows("2401.00001", items)
    assert [r["ordinal"] for r in rows] == list(range(want["references"]))
    assert all(tuple(r) == s2_graph.CITATION_COLUMNS and r["source"] == "s2" for r in rows)
    nulls = [r for r in rows if r["cited_s2_id"] is None]
    assert len(nulls) == want["null_paper_ids"] == sum(i["citedPaper"]["paperId"] is None for i in raw)
    assert all(r["cited_title"] for r in nulls)  # kept by their titles
    assert [nulls[0]["ordinal"], nulls[0]["cited_title"]] == want["first_null"]
    assert [nulls[-1]["ordinal"], nulls[-1]["cited_title"]] == want["last_null"]
    assert [rows[0]["cited_s2_id"], rows[0]["cited_title"]] == want["first"]
    if "contexts" not in want:  # fields=title: no edge fields were asked, none are made up
        assert {r["n_contexts"] for r in rows} == {None} and {r["is_influential"] for r in rows} == {None}
        return
    assert sum(r["n_contexts"] for r in rows) == want["contexts"] == sum(len(i["contexts"]) for i in raw)
    assert sum(bool(r["is_influential"]) for r in rows) == want["influential"]
    assert sum(r["cited_arxiv"] is not None for r in rows) == want["with_arxiv"]
    assert sum(r["cited_doi"] is not None for r in rows) == want["with_doi"]
    assert sum(r["external_ids"] is None for r in rows) == want["without_external_ids"]
    assert sorted({i for r in rows for i in r["intents"]}) == want["intents"]
    assert rows[0]["cited_arxiv"] == want["first_arxiv"]
    assert all(r["cited_doi"] == r["cited_doi"].lower() for r in rows if r["cited_doi"])
    for r, item in zip(rows, raw, strict=True):
        assert json.loads(r["external_ids"] or "{}") == {k: v for k, v in (item["citedPaper"].get("externalIds") or {}).items()
                                                         if v is not None}
    # Two contexts that differ only in Unicode normalisation (NFD and NFC) count as S2 gave them.
    dup = want["unicode_duplicate"]
    assert rows[dup["ordinal"]]["n_contexts"] == dup["n_contexts"]


def test_citations_follow_all_nineteen_pages(tmp_path, replay, settings) -> None:
    name = "semanticscholar__test_get_paper_citations.yaml"
    want = EXPECTED[name]
    pages = _bodies(name)
    last = pages[-1]
    assert len(pages) == want["pages"] and [last["offset"], last.get("next"), len(last["data"])] == want["last_page"]
    _app, client = _cassette(tmp_path, replay, settings, name)
    items = client.citations(want["paper_id"])
    assert client.requests_made == want["pages"]
    assert items == [i for p in pages for i in p["data"]] and len(items) == want["citations"]
    assert sum(i["citingPaper"]["paperId"] is None for i in items) == want["null_paper_ids"]
    assert (items[0]["citingPaper"]["paperId"], items[-1]["citingPaper"]["paperId"]) == (want["first"], want["last"])


def test_batch_null_for_an_unknown_id_is_one_named_miss(tmp_path, replay, settings) -> None:
    name = "semanticscholar__test_get_papers_not_found_warning.yaml"
    want = EXPECTED[name]
    [raw] = _bodies(name)
    _app, client = _cassette(tmp_path, replay, settings, name)
    ids = [f"2401.{i:05d}" for i in range(want["answers"])]
    answers = client.paper_batch(ids, fields=GRAPH_PAPER_FIELDS)
    assert answers == raw
    rows, misses = s2_graph.batch_topics(ids, answers)
    assert misses == [ids[i] for i in want["misses"]]
    assert _pairs(rows) == want["topics"]
    assert len(rows) == sum(len(p["s2FieldsOfStudy"]) for p in raw if p)  # no (topic, origin) repeats within a paper
    facts = [None if a is None else s2_graph.paper_facts(a) for a in answers]
    assert [f and f["doi"] for f in facts] == want["dois"]
    assert [f and f["publication_types"] for f in facts] == want["publication_types"]


def test_an_answer_without_data_ends_the_references(serve, settings) -> None:
    name = "semanticscholar__test_empty_paginated_results.yaml"
    want = EXPECTED[name]
    [raw] = _bodies(name)
    assert "data" not in raw
    body = json.dumps(raw).encode()
    with serve([{"method": "GET", "path": "/s2/graph/v1/paper/ARXIV:2401.00001/references", "status": 200,
                 "body": body, "headers": JSON}]) as base:
        client = _client(base, settings)
        assert len(client.references("ARXIV:2401.00001")) == want["items"]
    assert client.requests_made == want["requests"]


def _one_item_page(serve: Any, settings: Settings, noun: str, item: bytes) -> list[Any]:
    body = b'{"offset": 0, "data": [' + item + b"]}"
    with serve([{"method": "GET", "path": f"/s2/graph/v1/paper/CorpusId:1/{noun}", "status": 200, "body": body,
                 "headers": JSON}]) as base:
        client = _client(base, settings)
        return client.references("CorpusId:1") if noun == "references" else client.citations("CorpusId:1")


def test_a_stored_reference_parses_with_its_edge_and_ids(serve, settings) -> None:
    want = EXPECTED["semanticscholar__Reference.json"]["row"]
    raw = (GRAPH / "semanticscholar__Reference.json").read_bytes()
    [item] = _one_item_page(serve, settings, "references", raw)
    assert item == json.loads(raw)
    [row] = s2_graph.reference_rows("2401.00001", [item])
    got = {**row, "external_ids": json.loads(row["external_ids"])}
    assert {k: got[k] for k in want} == want
    assert row["ordinal"] == 0 and row["cited_arxiv_id"] is None and row["cited_openalex_id"] is None


def test_a_stored_citation_gives_its_edge_and_the_citing_papers_topics(serve, settings) -> None:
    want = EXPECTED["semanticscholar__Citation.json"]
    raw = (GRAPH / "semanticscholar__Citation.json").read_bytes()
    [item] = _one_item_page(serve, settings, "citations", raw)
    assert item == json.loads(raw)
    assert (len(item["contexts"]), s2_graph.unique(item["intents"]), item["isInfluential"]) == (
        want["contexts"], want["intents"], want["isInfluential"])
    facts = s2_graph.paper_facts(item["citingPaper"])
    assert {k: facts[k] for k in want["citing"]} == want["citing"]
    assert _pairs(s2_graph.topic_rows("2401.00001", item["citingPaper"])) == want["topics"]


@pytest.mark.parametrize("name", ["semanticscholar__Paper.json", "semanticscholar__PaperWithNullValues.json"])
def test_a_stored_paper_through_the_batch(serve, settings, name: str) -> None:
    want = EXPECTED[name]
    raw = (GRAPH / name).read_bytes()
    with serve([{"method": "POST", "path": "/s2/graph/v1/paper/batch", "status": 200, "body": b"[" + raw + b"]",
                 "headers": JSON}]) as base:
        [paper] = _client(base, settings).paper_batch(["2401.00001"], fields=GRAPH_PAPER_FIELDS)
    assert paper == json.loads(raw) and paper["paperId"] == want["paperId"]
    refs = s2_graph.reference_rows("2401.00001", paper["references"])  # a paper's own list: bare papers, or null
    assert len(refs) == want["references"] == len(paper["references"] or [])
    rows, misses = s2_graph.batch_topics(["2401.00001"], [paper])
    assert misses == []
    if name == "semanticscholar__PaperWithNullValues.json":
        assert rows == [] and want["topics"] == 0
        return
    nulls = [r for r in refs if r["cited_s2_id"] is None]
    assert len(nulls) == want["null_paper_ids"] and nulls[0]["cited_title"] == want["first_null_title"]
    assert all(r["cited_title"] for r in nulls) and {r["n_contexts"] for r in refs} == {None}
    assert sum(r["cited_doi"] is not None for r in refs) == want["with_doi"]
    assert _pairs(rows) == want["topics"]
    facts = s2_graph.paper_facts(paper)
    assert (facts["doi"], facts["publication_types"]) == (want["doi"], want["publication_types"])


def test_the_bulk_dataset_sample_parses_with_its_lower_case_keys() -> None:
    want = EXPECTED["s2ag-datasets-sample__papers-sample.jsonl"]
    lines = (GRAPH / "s2ag-datasets-sample__papers-sample.jsonl").read_text(encoding="utf-8").splitlines()
    raw = [json.loads(line) for line in lines if line.strip()]
    assert len(raw) == want["papers"]
    papers = [s2_graph.from_bulk(r) for r in raw]
    rows = [row for p in papers for row in s2_graph.topic_rows(str(p["corpusId"]), p)]
    assert len(rows) == want["fos_entries"] == sum(len(r["s2fieldsofstudy"] or []) for r in raw)
    assert len({r["arxiv_id"] for r in rows}) == want["papers_with_fos"]
    assert Counter(r["origin"] for r in rows) == want["by_origin"]
    facts = [s2_graph.paper_facts(p) for p in papers]
    assert sum(f["doi"] is not None for f in facts) == want["with_doi"]
    assert sum(f["arxiv"] is not None for f in facts) == want["with_arxiv"]
    assert sum(bool(f["publication_types"]) for f in facts) == want["with_publication_types"]
    assert all(f["doi"] == f["doi"].lower() for f in facts if f["doi"])
