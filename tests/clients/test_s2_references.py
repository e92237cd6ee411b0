"""Semantic Scholar references: faulty answers (a 429 then success, a 500, a body cut off or
unreadable) are retried through to the same references; an unknown paper or a bad request ends
in one line carrying S2's own text; and the replay server answers ``/paper/{id}/references`` for
the SYNTHETIC world (known papers: their references from the world's graph, paged; unknown: S2's 404)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import polars as pl
import pytest

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.replay.s2 import page
from revbench.retry import PermanentError, TransientError
from revbench.synth.graph_files import read_graph
from tests.support.common import on_replay

PAPER = "ARXIV:2401.00001"
PATH = f"/s2/graph/v1/paper/{PAPER}/references"
PAGES = {0: {"offset": 0, "next": 2, "data": [{"citedPaper": {"paperId": "a1", "title": "One"}, "contexts": ["c"]},
                                               {"citedPaper": {"paperId": None, "title": "Two"}}]},
         2: {"offset": 2, "data": [{"citedPaper": {"paperId": "a3", "title": "Three"}, "isInfluential": True}]}}
ALL = [*PAGES[0]["data"], *PAGES[2]["data"]]


def _recorded(tmp: Path) -> Path:
    """A routes.json directory of two recorded reference pages of ``PAPER``."""
    routes = []
    for offset, body in PAGES.items():
        (tmp / f"p{offset}.json").write_text(json.dumps(body))
        routes.append({"method": "GET", "path": PATH, "query": {"offset": str(offset)},
                       "headers": {"content-type": "application/json"}, "body_file": f"p{offset}.json"})
    (tmp / "routes.json").write_text(json.dumps(routes))
    return tmp


@pytest.mark.parametrize("kind", ["429", "500", "truncated", "malformed"])
def test_a_faulty_answer_is_retried_through_to_every_reference(tmp_path: Path, replay, settings, kind: str) -> None:
    app = replay(fixtures=_recorded(tmp_path), fault_rate=1.0, max_consecutive_faults=1, fault_kinds={"s2": (kind,)})
    s = on_replay(settings, app)
    client = SemanticScholarClient(s.s2, s.http)
    assert client.references(PAPER) == ALL
    assert app.faults.stats()["injected"][f"s2:{kind}"] == 2  # one fault on each page, each got through
    # Two requests, each sent again once: a retry (or a 429's wait) is not counted as a request.
    assert (client.requests_made, client.retries) == (2, 2) and client.breaker.failures == 0


def test_a_429_waits_its_retry_after(tmp_path: Path, replay, settings) -> None:
    app = replay(fixtures=_recorded(tmp_path), fault_rate=1.0, max_consecutive_faults=1, fault_kinds={"s2": ("429",)},
                 retry_after_seconds=1)
    # A bare 429's own back-off is held to 0.1 s, so only the Retry-After explains the wait.
    s = on_replay(settings, app).with_overrides(s2={"throttle_max_delay_seconds": 0.1})
    client = SemanticScholarClient(s.s2, s.http)
    t0 = time.monotonic()
    assert client.references(PAPER) == ALL
    assert time.monotonic() - t0 >= 2.0  # once per page
    assert client.throttled == 2


def test_a_fault_outlasting_the_retries_is_one_line(tmp_path: Path, replay, settings) -> None:
    app = replay(fixtures=_recorded(tmp_path), fault_rate=1.0, max_consecutive_faults=5, fault_kinds={"s2": ("500",)})
    s = on_replay(settings, app).with_overrides(http={"max_attempts": 2})
    with pytest.raises(TransientError) as exc:
        SemanticScholarClient(s.s2, s.http).references(PAPER)
    assert str(exc.value) == f"S2 /paper/{PAPER}/references: HTTP 500"


def test_an_unknown_paper_is_one_line_with_s2s_text(replay, settings, small_world: Path) -> None:
    s = on_replay(settings, replay(world=small_world))
    client = SemanticScholarClient(s.s2, s.http)
    with pytest.raises(PermanentError) as exc:
        client.references("ARXIV:0000.00000")
    assert str(exc.value) == "S2 /paper/ARXIV:0000.00000/references: HTTP 404 (Paper with id ARXIV:0000.00000 not found)"
    assert exc.value.kind == "not_found" and client.requests_made == 1 and client.breaker.failures == 0


def test_a_bad_request_is_one_line_with_s2s_text(replay, settings, small_world: Path) -> None:
    s = on_replay(settings, replay(world=small_world))
    known, _raw = _world_paper(small_world)
    client = SemanticScholarClient(s.s2, s.http)
    with pytest.raises(PermanentError) as exc:
        client.references(f"ARXIV:{known}", limit=5000)
    assert str(exc.value) == (f"S2 /paper/ARXIV:{known}/references: HTTP 400 "
                              "(offset must be >= 0 and limit between 1 and 1000)")
    assert client.requests_made == 1


def _world_paper(world: Path) -> tuple[str, str]:
    """(arXiv id, S2 record as JSON text) of one paper S2 knows in the world."""
    return pl.read_parquet(world / "s2_papers.parquet").row(0)


def test_the_world_answers_known_papers_with_their_references(replay, settings, small_world: Path) -> None:
    app = replay(world=small_world)
    s = on_replay(settings, app)
    arxiv_id, raw = _world_paper(small_world)
    n = len(read_graph(small_world)["references"][arxiv_id])
    client = SemanticScholarClient(s.s2, s.http)
    refs = client.references(f"ARXIV:{arxiv_id}", limit=4)
    assert len(refs) == n >= 10 and client.references(json.loads(raw)["paperId"]) == refs  # by its S2 id too
    assert client.requests_made == -(-n // 4) + 1
    r = httpx.get(f"{app.base}/s2/graph/v1/paper/ARXIV:{arxiv_id}/references", params={"offset": 0, "limit": 10})
    assert r.status_code == 200 and r.json()["next"] == 10 and len(r.json()["data"]) == 10
    r = httpx.get(f"{app.base}/s2/graph/v1/paper/10.1000/none/references")  # a DOI's slash stays in the id
    assert r.status_code == 404 and r.json() == {"error": "Paper with id 10.1000/none not found"}


def test_the_replay_pages_as_s2_does() -> None:
    items = list(range(5))
    assert page(items, 0, 2) == {"offset": 0, "next": 2, "data": [0, 1]}
    assert page(items, 4, 2) == {"offset": 4, "data": [4]}
    assert page(items, 3, 2) == {"offset": 3, "data": [3, 4]}
    assert page([], 0, 100) == {"offset": 0, "data": []}


def test_an_empty_page_ends_the_list_even_with_a_next(tmp_path: Path, replay, settings) -> None:
    (tmp_path / "p0.json").write_text(json.dumps({"offset": 0, "next": 100, "data": []}))
    (tmp_path / "p100.json").write_text(json.dumps({"offset": 100, "data": [{"citedPaper": {"title": "never asked"}}]}))
    (tmp_path / "routes.json").write_text(json.dumps([
        {"method": "GET", "path": PATH, "query": {"offset": str(o)}, "headers": {"content-type": "application/json"},
         "body_file": f"p{o}.json"} for o in (0, 100)]))
    s = on_replay(settings, replay(fixtures=tmp_path))
    client = SemanticScholarClient(s.s2, s.http)
    assert client.references(PAPER) == [] and client.requests_made == 1
