"""Every list a service can grow is read up to its cap: a paper that lists 200,000 references (S2's
``next`` advancing page after page) is read to ``s2.max_references_per_paper`` and no further, in
bounded memory, and the cut is named; an author's papers, a paper's authors and OpenAlex's
references, authorships, topics and institutions alike; the piece carries the cuts to the stage."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import httpx

from revbench.clients import openalex_graph
from revbench.clients.bounded import Cut
from revbench.clients.openalex import OpenAlexClient
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.flows.graph import hostile_notes
from revbench.settings import Settings
from revbench.tasks.graph_fetch import s2_piece
from tests.support.common import on_replay

HUGE = 200_000
"""References of the hostile paper: far past any real one."""


class Listing:
    """A stand-in S2 that lists ``total`` items for any paper or author, each page as asked
    (``offset``, ``limit``) with ``next`` while more are left; it records the pages asked."""

    def __init__(self, total: int):
        self.total = total
        self.asked: list[tuple[int, int]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        offset, limit = int(request.url.params["offset"]), int(request.url.params["limit"])
        self.asked.append((offset, limit))
        end = min(offset + limit, self.total)
        data = [{"citedPaper": {"paperId": f"p{i:06d}", "title": f"A cited work number {i}", "year": 2020,
                                "externalIds": {"DOI": f"10.1000/{i}"}}, "paperId": f"p{i:06d}",
                 "contexts": [], "intents": [], "isInfluential": False} for i in range(offset, end)]
        body: dict[str, Any] = {"offset": offset, "data": data}
        if end < self.total:
            body["next"] = end
        return httpx.Response(200, json=body)


def _s2(settings: Settings, handler: Any, **s2: Any) -> SemanticScholarClient:
    s = settings.with_overrides(s2={"keyless_delay_seconds": 0, "delay_seconds": 0, **s2})
    transport = httpx.MockTransport(handler)
    return SemanticScholarClient(s.s2, s.http, client=httpx.Client(base_url="http://s2.test", transport=transport))


def _peak(fn: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        got = fn()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_paper_with_200000_references_is_read_to_the_cap_in_bounded_memory(settings: Settings) -> None:
    stub = Listing(HUGE)
    client = _s2(settings, stub)
    refs, peak = _peak(lambda: client.references("ARXIV:2401.00001"))
    cap = settings.s2.max_references_per_paper
    assert cap == 10_000 and len(refs) == cap and refs[-1]["paperId"] == f"p{cap - 1:06d}"
    assert stub.asked == [(o, 1000) for o in range(0, cap, 1000)]  # nothing past the cap was asked for
    assert client.truncated == [Cut("s2", "references of ARXIV:2401.00001", cap, None)]
    normal, normal_peak = _peak(lambda: _s2(settings, Listing(50)).references("ARXIV:2401.00002"))
    assert len(normal) == 50
    # The whole list held about 1 GB in the issue; the cap holds it to a small multiple of a normal paper's.
    assert peak < 50_000_000 and peak < normal_peak + 50_000_000, (peak, normal_peak)


def test_the_last_page_asks_only_what_the_cap_leaves(settings: Settings) -> None:
    stub = Listing(5000)
    client = _s2(settings, stub, max_references_per_paper=2500)
    assert len(client.references("ARXIV:2401.00001")) == 2500
    assert stub.asked == [(0, 1000), (1000, 1000), (2000, 500)]
    assert [c.line() for c in client.truncated] == ["s2 references of ARXIV:2401.00001: kept the first 2500, more left "
                                                     "out at the cap"]
    # A list exactly as long as the cap is whole: nothing is named.
    whole = _s2(settings, Listing(2500), max_references_per_paper=2500)
    assert len(whole.references("ARXIV:2401.00003")) == 2500 and whole.truncated == []


def test_an_authors_papers_and_a_papers_authors_stop_at_their_caps(settings: Settings) -> None:
    stub = Listing(HUGE)
    client = _s2(settings, stub, max_papers_per_author=3000)
    assert len(client.author_papers("42")) == 3000 and len(stub.asked) == 3
    assert client.truncated == [Cut("s2", "papers of author 42", 3000, None)]

    def batch(request: httpx.Request) -> httpx.Response:
        authors = [{"authorId": str(i), "name": f"Person {i}"} for i in range(30_000)]
        return httpx.Response(200, json=[{"paperId": "big", "authors": authors}, None])

    client = _s2(settings, batch)
    [paper, missing] = client.paper_batch(["2401.00001", "2401.00002"])
    assert len(paper["authors"]) == settings.s2.max_authors_per_paper == 20_000 and missing is None
    assert client.truncated == [Cut("s2", "authors of big", 20_000, 10_000)]


def test_the_piece_carries_each_cut_to_the_stage(tmp_path: Path, replay, settings: Settings) -> None:
    pages = {0: {"offset": 0, "next": 2, "data": [{"citedPaper": {"paperId": "a1", "title": "One"}},
                                                  {"citedPaper": {"paperId": "a2", "title": "Two"}}]},
             2: {"offset": 2, "data": [{"citedPaper": {"paperId": "a3", "title": "Three"}}]}}
    routes = []
    for offset, body in pages.items():
        (tmp_path / f"p{offset}.json").write_text(json.dumps(body))
        routes.append({"method": "GET", "path": "/s2/graph/v1/paper/ARXIV:2401.00001/references",
                       "query": {"offset": str(offset)}, "headers": {"content-type": "application/json"},
                       "body_file": f"p{offset}.json"})
    (tmp_path / "routes.json").write_text(json.dumps(routes))
    app = replay(fixtures=tmp_path)
    s = on_replay(settings, app).with_overrides(s2={"max_references_per_paper": 2})
    got = s2_piece(s, [], ["2401.00001"])
    assert [r["cited_title"] for r in got.citations] == ["One", "Two"] and got.failures == []
    assert got.truncated == [{"source": "s2", "of": "references of ARXIV:2401.00001", "kept": 2, "dropped": None}]
    assert app.faults.stats()["served"]["s2"] == 1  # the page past the cap was never asked
    [line] = hostile_notes("s2", {"truncated": got.truncated})
    assert line == "s2: 1 lists cut at their cap: references of ARXIV:2401.00001 (kept 2)"


def test_openalex_lists_stop_at_their_caps(settings: Settings) -> None:
    work = {"id": "https://openalex.org/W1", "doi": "https://doi.org/10.48550/arxiv.2401.00001",
            "referenced_works": [f"https://openalex.org/W{i}" for i in range(100, 150)],
            "topics": [{"id": f"https://openalex.org/T{i}"} for i in range(20)],
            "authorships": [{"author": {"id": f"https://openalex.org/A{i}"},
                             "institutions": [{"display_name": f"Inst {j}"} for j in range(12)]} for i in range(8)]}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"meta": {"next_cursor": None}, "results": [work]})

    s = settings.with_overrides(openalex={"delay_seconds": 0, "max_references_per_paper": 10, "max_authors_per_paper": 5,
                                          "max_topics_per_paper": 3, "max_institutions_per_author": 4})
    client = OpenAlexClient(s.openalex, s.http, client=httpx.Client(base_url="http://oa.test",
                                                                    transport=httpx.MockTransport(answer)))
    got = client.works_by_dois(["10.48550/arxiv.2401.00001"])["10.48550/arxiv.2401.00001"]
    assert len(openalex_graph.citation_rows("2401.00001", got)) == 10
    assert len(openalex_graph.topic_rows("2401.00001", got)) == 3
    insts, affs = openalex_graph.authorship_rows("2401.00001", got)
    assert len(got["authorships"]) == 5 and len(insts) == 4 and len(affs) == 20
    named = {c.of: (c.kept, c.dropped) for c in client.truncated}
    assert named == {"referenced_works of W1 (10.48550/arxiv.2401.00001)": (10, 40),
                     "authorships of W1 (10.48550/arxiv.2401.00001)": (5, 3),
                     "topics of W1 (10.48550/arxiv.2401.00001)": (3, 17),
                     **{f"institutions of authorship {i} of W1 (10.48550/arxiv.2401.00001)": (4, 8) for i in range(5)}}
