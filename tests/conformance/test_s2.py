"""Semantic Scholar: every real sample (VCR cassettes and stored objects) through the real client and
our parsing. Each recorded body is served with its recorded status at the path our client calls."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.retry import PermanentError
from revbench.settings import Settings
from revbench.tasks import enrich
from tests.support.conformance import REAL, expected, needs_samples

pytestmark = needs_samples

S2 = REAL / "s2"
EXPECTED = expected("s2")["files"]
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = "/s2/graph/v1/paper/batch"


def _interactions(name: str) -> list[tuple[str, str, int, bytes]]:
    """(method, uri, status, body bytes) of each exchange; cassettes come in two VCR layouts."""
    out = []
    for it in yaml.safe_load((S2 / name).read_text(encoding="utf-8"))["interactions"]:
        resp = it["response"]
        body = resp["content"] if "content" in resp else resp["body"]["string"]
        status = resp["status_code"] if "status_code" in resp else resp["status"]["code"]
        out.append((it["request"]["method"], it["request"]["uri"], int(status), body.encode("utf-8")))
    return out


def _client(base: str) -> SemanticScholarClient:
    s = Settings().with_overrides(
        s2={"base_url": f"{base}/s2/graph/v1", "delay_seconds": 0, "keyless_delay_seconds": 0},
        http={"max_attempts": 1, "timeout_seconds": 5},
    )
    return SemanticScholarClient(s.s2, s.http)


def _batch(serve: Any, status: int, body: bytes, n: int) -> list[dict[str, Any] | None]:
    with serve([{"method": "POST", "path": BATCH, "status": status, "body": body,
                 "headers": {"content-type": "application/json"}}]) as base:
        return _client(base).paper_batch([f"2401.{i:05d}" for i in range(n)])


def _as_expected(frame_rows: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    return [
        None if not r["found"] else {"paperId": r["s2_paper_id"], "authors": [[a["author_id"], a["name"]] for a in r["authors"]]}
        for r in frame_rows
    ]


def test_every_sample_file_is_accounted_for() -> None:
    assert {p.name for p in S2.iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", ["test_get_papers.yaml", "test_get_papers_return_not_found.yaml"])
def test_paper_batch_keeps_nulls_and_authors_in_order(serve, name: str) -> None:
    want = EXPECTED[name]
    [(method, _uri, status, body)] = _interactions(name)
    assert (method, status) == ("POST", want["status"])
    ids = [f"2401.{i:05d}" for i in range(want["ids_sent"])]
    answers = _batch(serve, status, body, len(ids))
    frame = enrich.s2_frame(ids, answers, WHEN)
    assert _as_expected(frame.to_dicts()) == want["papers"]
    assert frame["arxiv_id"].to_list() == ids  # aligned with the ids sent, the null included


def test_author_papers_follow_next_over_every_page(serve) -> None:
    want = EXPECTED["test_get_author_papers.yaml"]
    pages = _interactions("test_get_author_papers.yaml")
    offsets = [int(uri.split("offset=")[1].split("&")[0]) for _m, uri, _s, _b in pages]
    assert offsets == want["page_offsets"]
    routes = [{"method": "GET", "path": f"/s2/graph/v1/author/{want['author_id']}/papers", "query": {"offset": str(o)},
               "status": s, "body": b, "headers": {"content-type": "application/json"}}
              for o, (_m, _u, s, b) in zip(offsets, pages, strict=True)]
    with serve(routes) as base:
        client = _client(base)
        papers = client.author_papers(want["author_id"], fields="title", limit=100)
    assert client.requests_made == len(offsets)  # stopped on the page without next
    ids = [p["paperId"] for p in papers]
    assert len(ids) == want["n_papers"] and len(set(ids)) == want["n_unique"]
    assert (ids[0], ids[-1]) == (want["first"], want["last"])
    rows = enrich.history_rows(want["author_id"], papers, WHEN)
    assert len(rows) == want["n_papers"] + 1 and rows[0]["paper_key"] == ""
    assert {r["arxiv_id"] for r in rows} == {None} and {r["year"] for r in rows} == {None}  # fields=title only


def test_an_empty_page_without_data_is_no_papers(serve) -> None:
    want = EXPECTED["test_empty_paginated_results.yaml"]
    [(_m, _u, status, body)] = _interactions("test_empty_paginated_results.yaml")
    with serve([{"method": "GET", "path": "/s2/graph/v1/author/1/papers", "status": status, "body": body}]) as base:
        assert len(_client(base).author_papers("1")) == want["n_papers"]


def test_a_400_carries_the_services_error_text(serve) -> None:
    want = EXPECTED["test_bad_query_parameters.yaml"]
    [(_m, _u, status, body)] = _interactions("test_bad_query_parameters.yaml")
    assert status == want["status"]
    with pytest.raises(PermanentError) as exc:
        _batch(serve, status, body, 1)
    assert f"HTTP {status}" in str(exc.value) and want["error"] in str(exc.value)
    assert "\n" not in str(exc.value)


def test_404s_carry_the_services_error_text(serve) -> None:
    want = EXPECTED["test_not_found.yaml"]
    (_m1, _u1, s1, paper), (_m2, _u2, s2, author) = _interactions("test_not_found.yaml")
    assert s1 == s2 == want["status"]
    with pytest.raises(PermanentError) as exc:
        _batch(serve, s1, paper, 1)
    assert exc.value.kind == "not_found" and want["errors"][0] in str(exc.value)
    with serve([{"method": "GET", "path": "/s2/graph/v1/author/0/papers", "status": s2, "body": author}]) as base:
        with pytest.raises(PermanentError) as exc:
            _client(base).author_papers("0")
    assert exc.value.kind == "not_found" and want["errors"][1] in str(exc.value)


@pytest.mark.parametrize("name", [n for n, w in EXPECTED.items() if n.endswith(".yaml") and w["called_as"] is None])
def test_endpoints_we_do_not_call_are_what_the_expected_file_says(name: str) -> None:
    want = EXPECTED[name]
    [(_m, _u, status, body)] = _interactions(name)
    assert status == want["status"]
    parsed = json.loads(body)
    fact = want["fact"]
    if "authorIds" in fact:
        items = parsed["data"] if isinstance(parsed, dict) else parsed
        assert [None if a is None else a["authorId"] for a in items] == fact["authorIds"]
    else:
        assert {k: parsed[k] for k in fact} == fact


def _paper_json() -> dict[str, Any]:
    return json.loads((S2 / "Paper.json").read_text(encoding="utf-8"))


def test_paper_object_and_its_citations_parse_with_null_author_ids(serve) -> None:
    want = EXPECTED["Paper.json"]
    paper = _paper_json()
    cites = paper["citations"]
    assert paper["paperId"] == want["paperId"] and len(cites) == want["citations"]
    ids = [f"2401.{i:05d}" for i in range(len(cites))]
    # The citations as batch answers of at most 500 (S2's limit), through the real client.
    answers = [a for half in (cites[:500], cites[500:])
               for a in _batch(serve, 200, json.dumps(half, ensure_ascii=False).encode("utf-8"), len(half))]
    rows = enrich.s2_frame(ids, answers, WHEN).to_dicts()
    assert all(r["found"] for r in rows)
    assert sum(len(r["authors"]) for r in rows) == want["citation_authors"]
    nulls = [{"citation": i, "paperId": r["s2_paper_id"], "position": j, "name": a["name"], "n_authors": len(r["authors"])}
             for i, r in enumerate(rows) for j, a in enumerate(r["authors"]) if a["author_id"] is None]
    assert nulls == want["null_author_ids"]
    # The citations as a publication list: arXiv ids from externalIds.ArXiv, with their years.
    hist = enrich.history_rows("x", cites, WHEN)[1:]
    with_arxiv = [(h["paper_key"], h["arxiv_id"], h["year"]) for h in hist if h["arxiv_id"]]
    assert len(hist) == want["citations"] and len(with_arxiv) == want["citations_with_arxiv"]
    assert list(with_arxiv[0]) == want["first_with_arxiv"] and list(with_arxiv[-1]) == want["last_with_arxiv"]
    [own] = enrich.s2_frame(["1950.00001"], [paper], WHEN).to_dicts()
    assert [[a["author_id"], a["name"]] for a in own["authors"]] == want["authors"]


def test_author_object_papers_parse_as_a_publication_list() -> None:
    want = EXPECTED["Author.json"]
    author = json.loads((S2 / "Author.json").read_text(encoding="utf-8"))
    assert (author["authorId"], author["name"]) == (want["authorId"], want["name"])
    hist = enrich.history_rows(author["authorId"], author["papers"], WHEN)[1:]
    assert len(hist) == want["papers"]
    assert sum(h["arxiv_id"] is not None for h in hist) == want["papers_with_arxiv"]
    assert sum(h["year"] is None for h in hist) == want["papers_without_year"]
    assert [[h["paper_key"], h["year"]] for h in hist[:2]] == [want["first"], want["second"]]


def test_authors_null_is_a_found_paper_without_authors(serve) -> None:
    want = EXPECTED["PaperWithNullValues.json"]
    raw = (S2 / "PaperWithNullValues.json").read_bytes()
    answers = _batch(serve, 200, b"[" + raw + b"]", 1)
    [row] = enrich.s2_frame(["2401.00000"], answers, WHEN).to_dicts()
    assert row["found"] and row["s2_paper_id"] == want["paperId"] and row["authors"] == want["authors"]
