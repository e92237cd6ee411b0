"""A lone surrogate (``"\\ud800"``, valid JSON) in one string of an answer costs one character, not
a run: each client replaces it by U+FFFD as it parses the answer and counts it, the frame builds,
the record is kept, and the count reaches the stage's notes. The cases of the issue: an S2
reference title, an S2 author name, an OpenAlex title and institution name; and the LLM's answer,
a benchmark file, and a row no client cleaned (``storable``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from revbench.clients import openalex_graph, s2_graph
from revbench.clients.llm import LlmClient, prompt_hash
from revbench.clients.openalex import OpenAlexClient
from revbench.clients.semantic_scholar import PAPER_FIELDS, SemanticScholarClient
from revbench.evaluation.importers.checks import parse_json as parse_benchmark_json
from revbench.flows.graph import graph_flow, hostile_notes
from revbench.flows.ingest import ingest_flow
from revbench.schemas.graph import CITATIONS
from revbench.schemas.tables import S2_PAPERS
from revbench.settings import Settings
from revbench.tasks import enrich
from revbench.tasks.graph_fetch import Fetched, citations_frame, openalex_piece, storable
from revbench.text_clean import clean_text, clean_value, parse_json
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.worlds import END, START, week_world

BAD = "\\ud800"
"""A lone high surrogate as JSON writes it: what a producer that cut a string inside a pair sends."""
FFFD = "\ufffd"
AID = "2401.00001"


def _routes(tmp: Path, replay, routes: list[dict[str, Any]], world: Path | None = None):  # type: ignore[no-untyped-def]
    """A replay server answering ``routes`` (``body``: the raw JSON text) before anything else."""
    index = []
    for i, r in enumerate(routes):
        (tmp / f"b{i}.json").write_bytes(r.pop("body").encode("ascii"))
        index.append({"method": "GET", "headers": {"content-type": "application/json"}, **r, "body_file": f"b{i}.json"})
    (tmp / "routes.json").write_text(json.dumps(index))
    return replay(world=world, fixtures=tmp)


def test_a_lone_surrogate_becomes_one_replacement_and_a_pair_is_kept() -> None:
    assert clean_text("a\ud800b") == (f"a{FFFD}b", 1)
    assert clean_text("\ud83d\ude00 \udfff\ud800") == (f"\U0001F600 {FFFD}{FFFD}", 2)  # a pair split in two is joined
    assert clean_text(f"plain {FFFD}") == (f"plain {FFFD}", 0)  # a replacement already there is not counted
    assert clean_value({"k\udc00": ["x\ud800", 3, None, {"y": "\ud800\ud800"}]}) == (
        {f"k{FFFD}": [f"x{FFFD}", 3, None, {"y": FFFD * 2}]}, 4)
    # Escaped, encoded (as json.loads decodes bytes: surrogatepass), and bytes that are not UTF-8 at all.
    assert parse_json(b'{"t": "a\\ud800b", "e": "\\ud83d\\ude00"}') == ({"t": f"a{FFFD}b", "e": "\U0001F600"}, 1)
    assert parse_json(b'["\xed\xa0\x80z"]') == ([f"{FFFD}z"], 1)
    assert parse_json(b'["\xffz"]') == ([f"{FFFD}z"], 1)
    assert parse_json(b'["\\\\ud800"]') == (["\\ud800"], 0)  # an escaped backslash, not a surrogate
    with pytest.raises(json.JSONDecodeError):
        parse_json(b"<html>")


def test_an_s2_reference_title_is_cleaned_counted_and_its_row_kept(tmp_path: Path, replay, settings: Settings) -> None:
    page = (f'{{"offset": 0, "data": [{{"citedPaper": {{"paperId": "a1", "title": "Cut {BAD} here"}}, "contexts": []}}, '
            f'{{"citedPaper": {{"paperId": "a2", "title": "Whole"}}}}]}}')
    # What the issue saw: the answer as json reads it does not make a frame.
    with pytest.raises(UnicodeEncodeError):
        citations_frame(s2_graph.reference_rows(AID, json.loads(page)["data"]))
    app = _routes(tmp_path, replay, [{"path": f"/s2/graph/v1/paper/ARXIV:{AID}/references", "body": page}])
    s = on_replay(settings, app)
    client = SemanticScholarClient(s.s2, s.http)
    items = client.references(f"ARXIV:{AID}")
    assert client.cleaned == 1
    frame = citations_frame(s2_graph.reference_rows(AID, items))
    assert frame["cited_title"].to_list() == [f"Cut {FFFD} here", "Whole"]


def test_an_s2_author_name_is_cleaned_counted_and_the_paper_kept(tmp_path: Path, replay, settings: Settings) -> None:
    batch = (f'[{{"paperId": "p1", "externalIds": {{"ArXiv": "{AID}"}}, "title": "T", "year": 2024, '
             f'"authors": [{{"authorId": "1", "name": "Ann {BAD}Lee"}}, {{"authorId": "2", "name": "Bo Li"}}]}}]')
    app = _routes(tmp_path, replay, [{"method": "POST", "path": "/s2/graph/v1/paper/batch", "body": batch}])
    s = on_replay(settings, app)
    client = SemanticScholarClient(s.s2, s.http)
    answers = client.paper_batch([AID], PAPER_FIELDS)
    assert client.cleaned == 1
    frame = enrich.s2_frame([AID], answers, datetime(2026, 1, 1, tzinfo=UTC))
    assert frame["found"].to_list() == [True]
    assert [a["name"] for a in frame["authors"][0]] == [f"Ann {FFFD}Lee", "Bo Li"]


def _work(doi: str) -> str:
    inst = (f'{{"id": "https://openalex.org/I1", "display_name": "Univ{BAD}ersity of Ulm", "ror": "https://ror.org/032000t02", '
            f'"country_code": "DE", "type": "education"}}')
    return (f'{{"id": "https://openalex.org/W1", "doi": "https://doi.org/{doi}", "title": "A {BAD}title", '
            f'"display_name": "A {BAD}title", "publication_year": 2024, "referenced_works": ["https://openalex.org/W9"], '
            f'"topics": [{{"id": "https://openalex.org/T1", "display_name": "Topic {BAD}", "score": 0.9}}], '
            f'"authorships": [{{"author": {{"id": "https://openalex.org/A1", "display_name": "Cy {BAD}Ng"}}, '
            f'"raw_author_name": "Cy {BAD}Ng", "institutions": [{inst}], "affiliations": []}}]}}')


def test_an_openalex_title_and_institution_name_are_cleaned_counted_and_kept(tmp_path: Path, replay,
                                                                             settings: Settings) -> None:
    doi = f"10.48550/arxiv.{AID}"
    author = (f'{{"id": "https://openalex.org/A1", "display_name": "Cy Ng", "affiliations": [{{"institution": '
              f'{{"id": "https://openalex.org/I2", "display_name": "Inst{BAD}itute X", "country_code": "FR"}}, '
              f'"years": [2023, 2024]}}]}}')
    app = _routes(tmp_path, replay, [
        {"path": "/openalex/works", "body": f'{{"meta": {{"next_cursor": null}}, "results": [{_work(doi)}]}}'},
        {"path": "/openalex/authors", "body": f'{{"meta": {{"next_cursor": null}}, "results": [{author}]}}'}])
    s = on_replay(settings, app).with_overrides(openalex={"enabled": True})
    client = OpenAlexClient(s.openalex, s.http)
    work = client.works_by_dois([doi])[doi]
    assert work["title"] == f"A {FFFD}title" and client.cleaned == 6  # title, display_name, topic, two names, institution
    got = openalex_piece(s, [AID])
    assert got.failures == [] and got.cleaned == 7  # the work's six, and the author's institution
    names = pl.DataFrame(got.institutions)["name"].to_list()
    assert sorted(names) == [f"Inst{FFFD}itute X", f"Univ{FFFD}ersity of Ulm"]
    assert pl.DataFrame(got.authorships)["name"].to_list() == [f"Cy {FFFD}Ng"]
    assert pl.DataFrame(got.topics)["label"].to_list() == [f"Topic {FFFD}"]
    assert storable(got).height == 1 and got.cleaned == 7  # nothing left for the second line to clean
    assert hostile_notes("openalex", {"text_cleaned": got.cleaned})[0].startswith("openalex: 7 characters UTF-8 cannot hold")
    assert openalex_graph.citation_rows(AID, work)[0]["cited_openalex_id"] == "W9"


def test_a_row_no_client_cleaned_is_cleaned_and_one_that_cannot_be_stored_is_rejected_by_name() -> None:
    def row(aid: str, ordinal: Any, title: str) -> dict[str, Any]:
        return {**dict.fromkeys(CITATIONS.names), "citing_arxiv_id": aid, "source": "s2", "ordinal": ordinal,
                "cited_title": title, "intents": []}

    got = Fetched("s2", citations=[row("1", 0, "x\ud800"), row("1", 1, "ok")],
                  topics=[{"arxiv_id": "1", "label": "\udfff"}])
    assert storable(got)["cited_title"].to_list() == [f"x{FFFD}", "ok"] and got.cleaned == 2
    assert got.topics == [{"arxiv_id": "1", "label": FFFD}]

    # A row that still cannot be a frame (an ordinal that is no number) costs its paper alone, by name.
    got = Fetched("s2", citations=[row("1", 0, "a"), row("2", "first", "b")])
    got.fetched("1", "references", True, 1)
    got.fetched("2", "references", True, 1)
    frame = storable(got)
    assert frame["citing_arxiv_id"].to_list() == ["1"]
    assert [(f["arxiv_id"], f["error"].split(":")[0]) for f in got.failures] == [("2", "unstorable")]
    assert [f["arxiv_id"] for f in got.fetches] == ["1"]  # asked again next run


def test_the_llm_answer_is_cleaned_before_it_is_cached(tmp_path: Path, replay, settings: Settings) -> None:
    answer = ('{"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
              f'"finish_reason": "stop", "message": {{"role": "assistant", "content": "same {BAD}person"}}}}]}}')
    app = _routes(tmp_path, replay, [{"method": "POST", "path": "/llm/v1/chat/completions", "body": answer}])
    s = on_replay(settings, app)
    client = LlmClient(s.llm, s.http, cache_dir=tmp_path / "cache")
    assert client.complete("same?") == f"same {FFFD}person" and client.cleaned == 1
    assert client.cache is not None and client.cache.get(prompt_hash(s.llm.model, "same?")) == f"same {FFFD}person"


def test_a_benchmark_file_with_a_lone_surrogate_is_read(tmp_path: Path) -> None:
    assert parse_benchmark_json(f'[{{"title": "x{BAD}"}}]', "f.json") == [{"title": f"x{FFFD}"}]


def test_ingest_and_graph_keep_a_day_with_a_lone_surrogate(tmp_path: Path, replay, settings: Settings) -> None:
    """The issue's run: one S2 author name and one S2 reference title hold a lone surrogate. Both
    flows complete, store the records with U+FFFD, and say how many characters they replaced."""
    import httpx

    world = tmp_path / "world"
    week_world(world, n_papers=12, seed=5)
    plain = replay(world=world)
    ids = sorted({e[1] for entries in plain.need_world().by_category.values() for e in entries})
    base = f"{plain.base}/s2/graph/v1"
    refs = {a: httpx.get(f"{base}/paper/ARXIV:{a}/references", params={"offset": 0, "limit": 1000}) for a in ids}
    aid = next(a for a, r in refs.items() if r.status_code == 200 and r.json()["data"])
    page = refs[aid].json()
    page["data"][0]["citedPaper"]["title"] += "\ud800"
    batch = httpx.post(f"{base}/paper/batch", params={"fields": PAPER_FIELDS}, json={"ids": [f"ARXIV:{aid}"]}).json()
    batch[0]["authors"][0]["name"] += "\ud800"
    # json.dumps writes a lone surrogate as its escape, as the hostile producer did.
    folder = tmp_path / "routes"
    folder.mkdir()
    app = _routes(folder, replay, [
        {"path": f"/s2/graph/v1/paper/ARXIV:{aid}/references", "query": {"offset": "0"}, "body": json.dumps(page)},
        {"method": "POST", "path": "/s2/graph/v1/paper/batch", "body_contains": f'"ARXIV:{aid}"',
         "body": json.dumps(batch)}], world=world)
    # One id a batch, so the recorded answer is the one paper's.
    s = on_replay(settings, app).with_overrides(s2={"batch_size": 1})

    ingested = ingest_flow.fn(s, START, END, synthetic=True)
    assert ingested.notes["enrich"]["text_cleaned"] == 1 and ingested.totals["papers"] > 0
    graphed = graph_flow.fn(s)
    assert graphed.failed == 0
    # The reference title, and the author name again: the graph's fields-of-study batch gets the same recorded answer.
    assert any(n.startswith("s2: 2 characters UTF-8 cannot hold") for n in graphed.notes), graphed.notes
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        cites = wh.read(CITATIONS).filter(pl.col("citing_arxiv_id") == aid)
        s2 = wh.read(S2_PAPERS).filter(pl.col("arxiv_id") == aid)
    assert cites.sort("ordinal")["cited_title"][0].endswith(FFFD)
    assert s2["authors"][0][0]["name"].endswith(FFFD)
