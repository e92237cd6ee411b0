"""The OpenAlex client against the replay server's stand-in (the SYNTHETIC world's papers as works)
and against hand-made answers: works by arXiv DOI, cursor paging to the empty page, ``mailto`` on
every call, 429s waited out as Retry-After says, answers capped, errors in one line; the parsers on
answers with every key missing or null; the doctor's probe."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from revbench.app.doctor import run_probes
from revbench.clients.openalex import OpenAlexClient, arxiv_doi, bare_doi
from revbench.clients.openalex_graph import (author_rows, authorship_rows, bare_orcid, bare_ror, citation_rows,
                                             institution_row, topic_rows)
from revbench.replay.openalex import NOT_FOUND_HTML
from revbench.replay.server import free_port
from revbench.retry import PermanentError, ResponseTooLarge, TransientError
from revbench.settings import Settings
from tests.clients.test_response_limits import Endless
from tests.support.common import on_replay


def _client(settings: Settings, **openalex: Any) -> OpenAlexClient:
    return OpenAlexClient(settings.openalex.model_copy(update=openalex), settings.http)


def _world_ids(app: Any, n: int) -> list[str]:
    return sorted({e[1] for entries in app.need_world().by_category.values() for e in entries})[:n]


def _routes(tmp: Path, replay, routes: list[dict[str, Any]]):
    """A replay server answering ``routes`` (``body`` as bytes or JSON) and nothing else of OpenAlex."""
    index = []
    for i, r in enumerate(routes):
        body = r.pop("body")
        (tmp / f"b{i}").write_bytes(body if isinstance(body, bytes) else json.dumps(body).encode())
        index.append({"method": "GET", "headers": {"content-type": "application/json"}, **r, "body_file": f"b{i}"})
    (tmp / "routes.json").write_text(json.dumps(index))
    return replay(fixtures=tmp)


def test_dois_and_ids_are_read_the_way_openalex_writes_them() -> None:
    assert arxiv_doi("2401.01234v3") == "10.48550/arxiv.2401.01234" == arxiv_doi("2401.01234")
    assert arxiv_doi("hep-th/9901001v2") == "10.48550/arxiv.hep-th/9901001"
    assert bare_doi("https://doi.org/10.7717/PeerJ.4375") == "10.7717/peerj.4375" == bare_doi("doi:10.7717/peerj.4375")
    assert bare_ror("https://ror.org/https://ror.org/01ppj9r51") == "01ppj9r51"  # OpenAlex has written it so
    assert bare_ror("https://ror.org/05ppvf150/") == "05ppvf150" and bare_ror("not a ror") is None
    assert bare_orcid("https://orcid.org/0000-0002-1825-009x") == "0000-0002-1825-009X" and bare_orcid(None) is None


def test_a_world_paper_is_a_work_by_its_arxiv_doi(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world)
    client = _client(on_replay(settings, app))
    [arxiv_id] = _world_ids(app, 1)
    work = client.work_by_arxiv(f"{arxiv_id}v2")
    assert work is not None and work["doi"] == f"https://doi.org/10.48550/arxiv.{arxiv_id}"
    assert work["referenced_works"] and work["topics"] and work["authorships"]  # from the world's graph
    assert client.work(work["id"])["id"] == work["id"]  # by its W id too
    assert len(citation_rows(arxiv_id, work)) == len(work["referenced_works"]) and topic_rows(arxiv_id, work)
    institutions, people = authorship_rows(arxiv_id, work)
    assert all(i["ror"] for i in institutions) and len({p["person_key"] for p in people}) == len(work["authorships"])
    assert client.work_by_arxiv("2401.99999") is None  # OpenAlex's HTML 404: no such work


def test_an_unknown_doi_is_one_line_naming_it_not_the_html_page(small_world: Path, replay, settings: Settings) -> None:
    client = _client(on_replay(settings, replay(world=small_world)))
    with pytest.raises(PermanentError) as exc:
        client.work("doi:10.1234/Nowhere.5")
    said = str(exc.value)
    assert said == "OpenAlex has no work with DOI 10.1234/nowhere.5 (HTTP 404 at /works/doi:10.1234/nowhere.5)"
    assert exc.value.kind == "not_found" and client.breaker.failures == 0
    with pytest.raises(PermanentError, match=r"^OpenAlex has no author A123 \(HTTP 404"):
        client.author("https://openalex.org/A123")


def test_a_filter_is_paged_by_cursor_until_the_empty_page(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world)
    client = _client(on_replay(settings, app), per_page=2)
    ids = _world_ids(app, 5)
    works = client.works("doi:" + "|".join(arxiv_doi(i) for i in [*ids, "2401.99999"]))
    assert [w["doi"].removeprefix("https://doi.org/10.48550/arxiv.") for w in works] == ids
    assert client.requests_made == 4  # pages of 2, 2 and 1, then the empty one with next_cursor null
    assert client.count_works("doi:" + arxiv_doi(ids[0])) == 1


def test_a_cursor_that_comes_back_stops_in_one_line(tmp_path: Path, replay, settings: Settings) -> None:
    page = {"meta": {"count": 3, "next_cursor": "AAA"}, "results": [{"id": "https://openalex.org/W1"}]}
    app = _routes(tmp_path, replay, [{"path": "/openalex/works", "query": {"cursor": "*"}, "body": page},
                                     {"path": "/openalex/works", "query": {"cursor": "AAA"}, "body": page}])
    client = _client(on_replay(settings, app))
    with pytest.raises(TransientError) as exc:
        client.works("cites:W9")
    assert exc.value.kind == "paging_stuck" and "\n" not in str(exc.value)
    assert str(exc.value) == ("OpenAlex /works?filter=cites:W9: next_cursor 'AAA' was asked already; "
                              "stopped paging after 2 works")
    assert client.requests_made == 2 and client.breaker.failures == 0


def test_an_empty_page_ends_the_list_whatever_its_next_cursor_says(tmp_path: Path, replay, settings: Settings) -> None:
    app = _routes(tmp_path, replay, [
        {"path": "/openalex/works", "query": {"cursor": "*"},
         "body": {"meta": {"next_cursor": "B"}, "results": [{"id": "https://openalex.org/W1"}]}},
        {"path": "/openalex/works", "query": {"cursor": "B"}, "body": {"meta": {"next_cursor": "C"}, "results": []}},
        {"path": "/openalex/works", "query": {"cursor": "C"}, "body": {"meta": {"next_cursor": None},
                                                                        "results": [{"id": "https://openalex.org/W2"}]}}])
    client = _client(on_replay(settings, app))
    assert [w["id"] for w in client.works("cites:W9")] == ["https://openalex.org/W1"]
    assert client.requests_made == 2


def test_mailto_goes_with_every_request(tmp_path: Path, replay, settings: Settings) -> None:
    """The recorded answers require mailto: without it the request falls through to OpenAlex's 404."""
    mailto = "curator@lab.org"
    app = _routes(tmp_path, replay, [
        {"path": "/openalex/works", "query": {"mailto": mailto, "cursor": "*"},
         "body": {"meta": {"count": 1, "next_cursor": "B"}, "results": [{"id": "https://openalex.org/W1"}]}},
        {"path": "/openalex/works", "query": {"mailto": mailto, "cursor": "B"},
         "body": {"meta": {"count": 1, "next_cursor": None}, "results": []}},
        {"path": "/openalex/works/W1", "query": {"mailto": mailto}, "body": {"id": "https://openalex.org/W1"}}])
    s = on_replay(settings, app)
    polite = _client(s, mailto=mailto)
    assert [w["id"] for w in polite.works("cites:W9")] == ["https://openalex.org/W1"]
    assert polite.work_by_doi("10.1/x") is None and polite.work("W1")["id"].endswith("W1")
    assert _client(s).work_by_doi("10.1/x") is None
    with pytest.raises(PermanentError, match="no work W1"):
        _client(s).work("W1")


def test_429s_are_waited_out_as_retry_after_says(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world, fault_rate=1.0, max_consecutive_faults=2, retry_after_seconds=1,
                 fault_kinds={"openalex": ("429",)})
    client = _client(on_replay(settings, app))
    [arxiv_id] = _world_ids(app, 1)
    t0 = time.monotonic()
    work = client.work_by_arxiv(arxiv_id)
    assert work is not None and client.throttled == 2 and client.requests_made == 3
    assert time.monotonic() - t0 >= 1.9  # two Retry-After: 1 waits, not an immediate retry
    assert app.faults.stats()["injected"] == {"openalex:429": 2}


def test_server_errors_are_retried_and_bodies_capped(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world, fault_rate=1.0, max_consecutive_faults=2, fault_kinds={"openalex": ("500", "malformed")})
    s = on_replay(settings, app)
    [arxiv_id] = _world_ids(app, 1)
    assert _client(s).work_by_arxiv(arxiv_id) is not None  # two faults, then the answer
    small = OpenAlexClient(s.openalex, s.http.model_copy(update={"max_response_bytes": 1024}))
    app.faults.rate = 0.0
    with pytest.raises(ResponseTooLarge) as exc:
        small.works("doi:" + "|".join(arxiv_doi(i) for i in _world_ids(app, 20)))
    assert str(exc.value).startswith("OpenAlex http://127.0.0.1:") and str(exc.value).endswith("answered more than 1024 bytes")


def test_a_400_is_its_message_in_one_line(tmp_path: Path, replay, settings: Settings) -> None:
    body = {"error": "Invalid query parameters error.", "message": "x is not a valid select field.\nValid fields: " + "a, " * 200}
    app = _routes(tmp_path, replay, [{"path": "/openalex/works/W5", "status": 400, "body": body}])
    with pytest.raises(PermanentError) as exc:
        _client(on_replay(settings, app)).work("W5", select=["x"])
    said = str(exc.value)
    assert said.startswith("OpenAlex /works/W5: HTTP 400 (Invalid query parameters error. x is not a valid select field.")
    assert "\n" not in said and len(said) < 400 and exc.value.kind == "http_400"


def test_every_key_may_be_missing_or_null() -> None:
    nothing: dict[str, Any] = {"id": "https://openalex.org/W1", "referenced_works": None, "topics": None,
                               "primary_topic": None, "authorships": None, "abstract_inverted_index": None}
    assert citation_rows("2401.00001", nothing) == [] and topic_rows("2401.00001", nothing) == []
    assert authorship_rows("2401.00001", nothing) == ([], []) == authorship_rows("2401.00001", {})
    assert author_rows({"id": "https://openalex.org/A1", "orcid": None}) == ([], [])  # a deleted author
    work = {"publication_year": 2024, "a_key_from_next_year": {"x": 1}, "referenced_works": ["https://openalex.org/W7", None],
            "topics": [{"id": "https://openalex.org/T1", "score": 1.7, "domain": None}],
            "primary_topic": {"id": "https://openalex.org/T2", "display_name": "Two", "score": 0.5},
            "authorships": [
                {"author": {"id": None, "display_name": "Nobody"}, "institutions": [{"display_name": "Univ. of Nowhere"}]},
                {"author": {"id": "https://openalex.org/A9", "orcid": "https://orcid.org/0000-0001-2345-6789"},
                 "institutions": [{"id": "https://openalex.org/I3", "ror": "https://ror.org/00abcde12", "country_code": "gb",
                                   "display_name": "Somewhere"}, None, {"display_name": None}],
                 "affiliations": [{"raw_affiliation_string": "Dept. of X, The Institute of Y", "institution_ids": [None]}]}]}
    [cite] = citation_rows("2401.00001", work)
    assert (cite["ordinal"], cite["cited_openalex_id"], cite["external_ids"]) == (0, "W7", '{"openalex": "W7"}')
    assert [(t["topic"], t["score"], t["label"]) for t in topic_rows("2401.00001", work)] == [("T1", None, None),
                                                                                              ("T2", 0.5, "Two")]
    institutions, affiliations = authorship_rows("2401.00001", work)
    assert [i["institution_key"] for i in institutions] == ["name:university of nowhere", "ror:00abcde12",
                                                            "name:institute of y"]
    assert institutions[1]["country"] == "GB" and institutions[1]["openalex_id"] == "I3"
    assert [(a["person_key"], a["orcid"], a["institution_key"], a["first_year"]) for a in affiliations] == [
        ("openalex:A9", "0000-0001-2345-6789", "ror:00abcde12", 2024), ("openalex:A9", "0000-0001-2345-6789",
                                                                        "name:institute of y", 2024)]
    assert institution_row({"ror": None, "display_name": "  "}) is None


def test_an_authors_years_become_first_and_last() -> None:
    inst = {"id": "https://openalex.org/I1", "ror": "https://ror.org/00abcde12", "display_name": "U"}
    author = {"id": "https://openalex.org/A1", "orcid": "https://orcid.org/0000-0001-2345-6789",
              "affiliations": [{"institution": inst, "years": [2015]},
                               {"institution": inst, "years": [2023, 2019, "2021", None]},
                               {"institution": None, "years": [2020]}]}
    institutions, [row] = author_rows(author)
    assert [i["institution_key"] for i in institutions] == ["ror:00abcde12"]
    assert (row["first_year"], row["last_year"], row["arxiv_id"], row["source"]) == (2015, 2023, None, "openalex")


def test_the_probe_is_skipped_until_enabled_then_asks_one_list(small_world: Path, replay, settings: Settings) -> None:
    s = on_replay(settings, replay(world=small_world))
    [off] = run_probes(s, None, {"openalex"}, 5.0)
    assert (off.status, off.label) == ("skipped", "OpenAlex") and "REVBENCH_OPENALEX__ENABLED" in off.detail
    [ok] = run_probes(s.with_overrides(openalex={"enabled": True, "mailto": "a@lab.org"}), None, {"openalex"}, 5.0)
    assert ok.status == "ok" and ok.detail.startswith("polite pool (mailto set)"), ok
    [common] = run_probes(s.with_overrides(openalex={"enabled": True}), None, {"openalex"}, 5.0)
    assert common.status == "ok" and "REVBENCH_OPENALEX__MAILTO" in common.detail
    # Named by --only while no stage needs it: a failure is a warning, in one line naming the setting.
    down = s.with_overrides(openalex={"enabled": True, "base_url": f"http://127.0.0.1:{free_port()}"})
    [dead] = run_probes(down, None, {"openalex"}, 2.0)
    assert dead.status == "warn" and "REVBENCH_OPENALEX__BASE_URL" in dead.fix and "\n" not in dead.detail + dead.fix
    elsewhere = s.with_overrides(openalex={"enabled": True, "base_url": s.s2.base_url})
    [wrong] = run_probes(elsewhere, None, {"openalex"}, 5.0)
    assert wrong.status == "warn" and "not a list of works" in wrong.detail


def test_the_probe_reads_no_more_than_its_cap_of_an_endless_answer(settings: Settings) -> None:
    server = Endless(declared=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        s = settings.with_overrides(openalex={"enabled": True, "base_url": server.base})
        t0 = time.monotonic()
        [probe] = run_probes(s, None, {"openalex"}, 5.0)
    finally:
        server.stopping = True
        server.shutdown()
        server.server_close()
    assert probe.detail.startswith("/works answered more than 65536 bytes") and time.monotonic() - t0 < 5
    assert probe.status == "warn" and "\n" not in probe.detail  # asked by name, needed by no stage: a warning


def test_the_stand_in_answers_an_unknown_work_with_openalexs_404_page(small_world: Path, replay) -> None:
    import httpx

    app = replay(world=small_world)
    r = httpx.get(f"{app.base}/openalex/works/doi:10.1234/nope")
    assert (r.status_code, r.content, r.headers["content-type"]) == (404, NOT_FOUND_HTML, "text/html; charset=utf-8")
    bad = httpx.get(f"{app.base}/openalex/works", params={"filter": "cites:W1"})
    assert bad.status_code == 400 and bad.json()["error"] == "Invalid query parameters error."


def test_works_and_authors_are_asked_in_batches_and_matched_back(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world)
    client = _client(on_replay(settings, app), batch_size=3, per_page=2)
    ids = _world_ids(app, 5)
    asked = [f"10.48550/arXiv.{ids[0]}", f"https://doi.org/10.48550/ARXIV.{ids[1]}", *(arxiv_doi(i) for i in ids[2:]),
             arxiv_doi("2401.99999"), arxiv_doi(ids[0])]
    works = client.works_by_dois(asked)
    # Keys as asked; the unknown DOI is simply absent (not in OpenAlex), never an error.
    assert set(works) == set(asked) - {arxiv_doi("2401.99999")}
    assert all(bare_doi(w["doi"]) == bare_doi(d) for d, w in works.items())
    # Batches of 3 distinct DOIs: [0, 1, 2] on pages of 2 and 1 (all found: no empty page asked),
    # then [3, 4, unknown] on pages of 2 and the empty one that ends it.
    assert client.requests_made == 4
    people = {a["author"]["id"] for w in works.values() for a in w["authorships"]}
    wanted = [*sorted(people)[:4], "A0000000001"]
    before = client.requests_made
    authors = client.authors_by_ids([*wanted, wanted[0].rpartition("/")[2].lower()])
    assert set(authors) == {*wanted[:4], wanted[0].rpartition("/")[2].lower()}
    # Five distinct ids: [0, 1, 2] on two pages, all found; [3, unknown] on a page and the empty one.
    assert client.requests_made - before == 4
    assert all(authors[i]["id"].upper().endswith(i.rpartition("/")[2].upper()) for i in authors)
    assert all(authors[i] == client.author(i) for i in wanted[:4])  # as the one-by-one route answers


def test_a_batch_ignores_results_nothing_asked_for_and_asks_a_doi_with_a_pipe_alone(tmp_path: Path, replay,
                                                                                  settings: Settings) -> None:
    other = {"id": "https://openalex.org/W7", "doi": "https://doi.org/10.1/other"}
    app = _routes(tmp_path, replay, [
        {"path": "/openalex/works", "query": {"filter": "doi:10.1/a|10.1/b", "cursor": "*"},
         "body": {"meta": {"count": 2, "next_cursor": "N"},
                  "results": [other, {"id": "https://openalex.org/W1", "doi": "https://doi.org/10.1/A"}, {"id": "x"}]}},
        {"path": "/openalex/works", "query": {"filter": "doi:10.1/a|10.1/b", "cursor": "N"},
         "body": {"meta": {"count": 2, "next_cursor": None}, "results": []}},
        {"path": "/openalex/works/doi:10.1/c|d", "body": {"id": "https://openalex.org/W3", "doi": None}}])
    client = _client(on_replay(settings, app))
    got = client.works_by_dois(["10.1/A", "10.1/b", "10.1/c|d"])
    assert {d: w["id"] for d, w in got.items()} == {"10.1/A": "https://openalex.org/W1", "10.1/c|d": "https://openalex.org/W3"}
    assert client.requests_made == 3


def test_the_stand_in_lists_by_or_filters_and_refuses_what_openalex_refuses(small_world: Path, replay,
                                                                            settings: Settings) -> None:
    app = replay(world=small_world)
    client = _client(on_replay(settings, app), batch_size=100)
    with pytest.raises(PermanentError) as exc:
        client.authors("display_name:someone")
    said = str(exc.value)
    assert said.startswith("OpenAlex /authors?filter=display_name:someone: HTTP 400 (Invalid query parameters error. "
                           "display_name is not a valid field") and "\n" not in said and exc.value.kind == "http_400"
    with pytest.raises(PermanentError, match=r"^OpenAlex /works\?filter=doi:10\.1/0\|\.\.\. \(101 values\): HTTP 400 "
                                             r"\(Invalid query parameters error\. filter doi takes 1 to 100 values"):
        client.works("doi:" + "|".join(f"10.1/{i}" for i in range(101)))
    [one] = _world_ids(app, 1)
    work = client.work_by_arxiv(one)
    assert work is not None and [w["id"] for w in client.works(f"openalex:{work['id']}|W1")] == [work["id"]]


def test_a_batch_rides_out_the_stand_ins_faults(small_world: Path, replay, settings: Settings) -> None:
    app = replay(world=small_world, fault_rate=0.5, max_consecutive_faults=2,
                 fault_kinds={"openalex": ("500", "timeout", "truncated", "malformed")})
    ids = _world_ids(app, 12)
    got = _client(on_replay(settings, app), batch_size=5).works_by_dois([arxiv_doi(i) for i in ids])
    assert sorted(got) == sorted(arxiv_doi(i) for i in ids) and app.faults.stats()["injected"]
