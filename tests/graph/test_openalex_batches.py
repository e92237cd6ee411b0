"""OpenAlex asked in batches (``/works?filter=doi:A|B|...``, ``/authors?filter=openalex:A1|A2|...``):
a piece gives exactly the rows the one-by-one requests gave (``/works/doi:<doi>`` per paper,
``/authors/<id>`` per person), in a small fraction of the requests; a batch that fails names each
of its papers, which get no fetch record and are asked again next run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from revbench.clients import openalex_graph
from revbench.clients.openalex import OpenAlexClient
from revbench.retry import PermanentError, TransientError
from revbench.settings import Settings
from revbench.tasks.graph_fetch import OPENALEX_KINDS, Fetched, add_work, openalex_piece
from tests.support.common import on_replay


def _one_by_one(settings: Settings, arxiv_ids: list[str]) -> Fetched:
    """The piece as it was asked before batching, request by request: the reference it must equal."""
    out = Fetched("openalex")
    client = OpenAlexClient(settings.openalex, settings.http)
    authors: dict[str, str] = {}
    for aid in arxiv_ids:  # one request per paper; the rows are built as the batched piece builds them
        add_work(out, aid, client.work_by_arxiv(aid), authors)
    for author_id in authors:
        try:
            insts, affs = openalex_graph.author_rows(client.author(author_id))
        except (TransientError, PermanentError):
            continue
        out.institutions += insts
        out.affiliations += affs
    out.requests = client.requests_made
    client.close()
    return out


def _content(got: Fetched) -> dict[str, Any]:
    return {k: getattr(got, k) for k in ("citations", "topics", "institutions", "affiliations", "authorships",
                                         "fetches", "failures", "work_ids")}


def test_a_batched_piece_saves_what_the_one_by_one_requests_saved(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world)
    s = on_replay(settings, app).with_overrides(openalex={"batch_size": 7, "per_page": 5})
    ours = sorted({e[1] for entries in app.need_world().by_category.values() for e in entries})
    # Papers OpenAlex does not have are recorded as not found, by either way of asking.
    for piece in (ours[:30] + ["2401.99998"], ours[30:61] + ["2401.99999"]):
        batched, reference = openalex_piece(s, piece), _one_by_one(s, piece)
        assert _content(batched) == _content(reference)
        assert batched.affiliations and batched.work_ids and batched.down is None
        assert [f for f in batched.fetches if not f["found"]] == [
            {"arxiv_id": piece[-1], "source": "openalex", "kind": k, "found": False, "n_rows": 0,
             "source_paper_id": None} for k in OPENALEX_KINDS]
        # 31 papers in batches of 7, pages of 5 (and the empty page where a batch misses one);
        # each person of the piece once, 7 a request, where one by one asked each.
        assert batched.requests * 3 < reference.requests, (batched.requests, reference.requests)


def test_a_failed_batch_names_each_of_its_papers_to_be_asked_again(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world, fault_rate=1.0, max_consecutive_faults=10**6, fault_kinds={"openalex": ("500",)})
    s = on_replay(settings, app).with_overrides(openalex={"batch_size": 4}, http={"max_attempts": 1,
                                                                                  "breaker_failures": 1000})
    piece = sorted({e[1] for entries in app.need_world().by_category.values() for e in entries})[:6]
    got = openalex_piece(s, piece)
    assert got.fetches == [] and [f["arxiv_id"] for f in got.failures] == piece
    assert {f["kind"] for f in got.failures} == {"references"} and got.requests == 2
    assert all("HTTP 500" in f["error"] and "\n" not in f["error"] for f in got.failures), got.failures


def test_a_failed_batch_of_authors_leaves_their_papers_to_be_asked_again(small_world: Path, replay,
                                                                         settings: Settings) -> None:
    """The works answer, the authors' list does not (HTTP 500 from the far side): the papers keep
    their rows, but not their fetch record of affiliations, so the next run asks them again."""
    import httpx

    app = replay(world=small_world)
    s = on_replay(settings, app).with_overrides(openalex={"batch_size": 50}, http={"max_attempts": 1,
                                                                                   "breaker_failures": 1000})
    upstream = httpx.Client(base_url=s.openalex.base_url.rstrip("/"))

    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/authors"):
            return httpx.Response(500, text="upstream error")
        answer = upstream.send(upstream.build_request(request.method, str(request.url)))
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    client = OpenAlexClient(s.openalex, s.http, client=httpx.Client(base_url=s.openalex.base_url.rstrip("/"),
                                                                    transport=httpx.MockTransport(serve)))
    piece = sorted({e[1] for entries in app.need_world().by_category.values() for e in entries})[:3]
    got = openalex_piece(s, piece, client=client)
    upstream.close()
    kinds = {(f["arxiv_id"], f["kind"]) for f in got.fetches}
    named = {f["arxiv_id"] for f in got.failures if f["kind"] == "affiliations"}
    assert got.citations and named and all("HTTP 500" in f["error"] for f in got.failures)
    assert all((a, "references") in kinds for a in piece)
    assert not any((a, "affiliations") in kinds for a in named), got.fetches
