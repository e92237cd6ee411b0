"""OpenAlex: every real sample (vcrpy cassettes with gzip+base64 bodies, R ``vcr`` cassettes, plain
JSON) through the real client and its parsers. Each recorded answer is read by the replay server's
cassette reader and served with its recorded status at the path our client calls, with ``mailto``
required on every request; what comes back is compared with an independent reading of each file
(``expected/openalex.json``) and with the raw JSON itself: nothing lost, pages followed to the end."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from revbench.clients.openalex import OpenAlexClient
from revbench.clients.openalex_graph import author_rows, authorship_rows, citation_rows, institution_row, topic_rows, work_ids
from revbench.replay.cassettes import RecordedRoute, load_cassette
from revbench.retry import PermanentError
from revbench.schemas.graph import AUTHOR_AFFILIATIONS, CITATIONS, INSTITUTIONS, PAPER_TOPICS, SOURCE_CITATION_COLUMNS
from revbench.schemas.model import Table
from revbench.settings import Settings
from tests.support.conformance import REAL, expected, needs_samples

pytestmark = needs_samples

OA = REAL / "openalex"
EXPECTED = expected("openalex")["files"]
MAILTO = "conformance@revbench.test"
END_PAGE = "openalexPro__keypaper_results_page_2.json"
"""The real answer after a cursor's last page (results [], next_cursor null): what follows every recorded cursor page."""
PAPER = "2401.00001"
JSON = {"content-type": "application/json"}


def _client(base: str) -> OpenAlexClient:
    s = Settings().with_overrides(openalex={"base_url": f"{base}/openalex", "delay_seconds": 0, "mailto": MAILTO},
                                  http={"max_attempts": 1, "timeout_seconds": 5})
    return OpenAlexClient(s.openalex, s.http)


def _route(path: str, body: bytes, status: int = 200, headers: dict[str, str] | None = None,
           **query: str) -> dict[str, Any]:
    """A route that answers only requests carrying our ``mailto``: a call without it finds none."""
    return {"method": "GET", "path": f"/openalex{path}", "query": {**query, "mailto": MAILTO}, "status": status,
            "headers": headers or JSON, "body": body}


def _recorded(name: str) -> list[RecordedRoute]:
    """The cassette's OpenAlex exchanges as the replay server reads them, in recorded order."""
    return [r for r in load_cassette(OA / name) if r.path.startswith("/openalex/")]


def _bare(url: str) -> str:
    return url.rstrip("/").rpartition("/")[2]


def _fits(table: Table, rows: list[dict[str, Any]]) -> None:
    """Every row has exactly the table's columns and passes its checks; the natural key is unique."""
    names = SOURCE_CITATION_COLUMNS if table is CITATIONS else tuple(table.names)  # match_keys is the resolution's
    for row in rows:
        assert tuple(row) == names, (table.name, list(row))
        for col in (c for c in table.columns if c.name in names):
            v = row[col.name]
            if v is None:
                assert col.nullable, (table.name, col.name, row)
                continue
            assert col.pattern is None or re.match(col.pattern, v), (table.name, col.name, v)
            assert col.allowed is None or v in col.allowed, (table.name, col.name, v)
            assert col.min_value is None or v >= col.min_value, (table.name, col.name, v)
            assert col.max_value is None or v <= col.max_value, (table.name, col.name, v)
    keys = [tuple(r[k] for k in table.primary_key) for r in rows]
    assert len(keys) == len(set(keys)), table.name


def _check_work(work: dict[str, Any], want: dict[str, Any]) -> None:
    """A work parsed whole: every reference in order, every topic, every ROR, every identified author."""
    ids = work_ids(work)
    assert (ids["openalex_id"], ids["doi"]) == (want["id"], want["doi"])
    cites = citation_rows(PAPER, work)
    assert len(cites) == want["referenced_works"]
    assert [c["cited_openalex_id"] for c in cites] == [_bare(u) for u in work.get("referenced_works") or []]
    assert [c["ordinal"] for c in cites] == list(range(len(cites)))
    topics = topic_rows(PAPER, work)
    assert len(topics) == want["topics"]
    assert all(t["label"] and t["domain"] and t["field"] and t["subfield"] for t in topics)
    institutions, affiliations = authorship_rows(PAPER, work)
    assert sorted(i["ror"] for i in institutions if i["ror"]) == want["rors"]
    with_place = {_bare(a["author"]["id"]) for a in work.get("authorships") or []
                  if (a.get("author") or {}).get("id") and (a.get("institutions") or a.get("affiliations"))}
    assert {a["person_key"].removeprefix("openalex:") for a in affiliations} == with_place
    assert all(a["first_year"] == a["last_year"] == work.get("publication_year") for a in affiliations)
    _fits(CITATIONS, cites)
    _fits(PAPER_TOPICS, topics)
    _fits(INSTITUTIONS, institutions)
    _fits(AUTHOR_AFFILIATIONS, affiliations)


def test_every_sample_file_is_accounted_for() -> None:
    assert {p.name for p in OA.iterdir()} - {"PROVENANCE.md"} == set(EXPECTED)
    assert {w["kind"] for w in EXPECTED.values()} == {"work", "author", "institution", "topic", "page", "cassette"}


@pytest.mark.parametrize("name", [n for n, w in EXPECTED.items() if w["kind"] == "work"])
def test_a_work_by_doi_parses_whole(serve, name: str) -> None:
    want = EXPECTED[name]
    with serve([_route(f"/works/doi:{want['doi']}", (OA / name).read_bytes())]) as base:
        work = _client(base).work_by_doi(f"https://doi.org/{want['doi']}")
    assert work is not None
    _check_work(work, want)


@pytest.mark.parametrize("name", [n for n, w in EXPECTED.items() if w["kind"] == "author"])
def test_an_author_gives_its_affiliations_with_years(serve, name: str) -> None:
    want = EXPECTED[name]
    with serve([_route(f"/authors/{want['id']}", (OA / name).read_bytes())]) as base:
        author = _client(base).author(f"https://openalex.org/{want['id']}")
    institutions, affiliations = author_rows(author)
    assert {a["institution_key"].removeprefix("ror:"): [a["first_year"], a["last_year"]] for a in affiliations} \
        == want["affiliations"]
    assert {a["person_key"] for a in affiliations} <= {f"openalex:{want['id']}"}
    assert {a["orcid"] for a in affiliations} <= {want["orcid"]}
    assert {a["arxiv_id"] for a in affiliations} <= {None} and len(institutions) == len(want["affiliations"])
    _fits(INSTITUTIONS, institutions)
    _fits(AUTHOR_AFFILIATIONS, affiliations)


def test_an_institution_is_known_by_its_ror(serve) -> None:
    [(name, want)] = [(n, w) for n, w in EXPECTED.items() if w["kind"] == "institution"]
    with serve([_route(f"/institutions/{want['id']}", (OA / name).read_bytes())]) as base:
        inst = institution_row(_client(base).institution(want["id"]))
    keys = ("institution_key", "ror", "name", "country", "type", "openalex_id")
    assert {k: inst[k] for k in keys} == {"institution_key": f"ror:{want['ror']}", "ror": want["ror"], "name": want["name"],
                                          "country": want["country"], "type": want["type"], "openalex_id": want["id"]}
    # the identity evidence conflicts read: other spellings, parents, and related institutions
    assert {"UMich", "UM"} <= set(inst["aliases"]) and inst["lineage"] == []
    assert {r["relationship"] for r in inst["related"]} == {"child"}
    _fits(INSTITUTIONS, [inst])


def test_a_topic_carries_its_domain_field_and_subfield(serve) -> None:
    [(name, want)] = [(n, w) for n, w in EXPECTED.items() if w["kind"] == "topic"]
    with serve([_route(f"/topics/{want['id']}", (OA / name).read_bytes())]) as base:
        topic = _client(base).topic(want["id"])
    [row] = topic_rows(PAPER, {"primary_topic": topic})  # a topic entity reads as a work's topic reads
    assert {k: row[k] for k in ("topic", "label", "domain", "field", "subfield")} == {
        "topic": want["id"], "label": want["label"], "domain": want["domain"], "field": want["field"],
        "subfield": want["subfield"]}
    assert row["score"] is None


def test_saved_cursor_pages_are_followed_to_the_empty_one(serve) -> None:
    first = EXPECTED["openalexPro__keypaper_results_page_1.json"]
    end = EXPECTED[END_PAGE]
    assert first["next_cursor"] and (end["results"], end["next_cursor"]) == (0, None)
    routes = [_route("/works", (OA / "openalexPro__keypaper_results_page_1.json").read_bytes(), cursor="*"),
              _route("/works", (OA / END_PAGE).read_bytes(), cursor=first["next_cursor"])]
    with serve(routes) as base:
        client = _client(base)
        works = client.works("cites:W2741809807")
    # count 2 < per_page 200, and still a next_cursor: only the empty page ends it.
    assert client.requests_made == 2 and len(works) == first["count"] == first["results"]
    for work, want in zip(works, first["works"], strict=True):
        _check_work(work, want)


def _list_routes(rec: RecordedRoute, want: dict[str, Any]) -> list[dict[str, Any]]:
    """A recorded list answer served where the client asks it: a one-result count at per-page=1, a
    cursor page at cursor=* (followed by the real end page at its next_cursor), a page-based list
    (no cursor in its meta) at cursor=*, where it ends the list by having no next cursor."""
    filt = want["query"]["filter"]
    if want["query"].get("per-page") == "1":
        return [_route("/works", rec.body, rec.status, **{"filter": filt, "per-page": "1"})]
    routes = [_route("/works", rec.body, rec.status, filter=filt, cursor="*")]
    if want["next_cursor"]:
        routes.append(_route("/works", (OA / END_PAGE).read_bytes(), filter=filt, cursor=want["next_cursor"]))
    return routes


@pytest.mark.parametrize("name", [n for n, w in EXPECTED.items() if w["kind"] == "cassette"])
def test_every_openalex_exchange_of_a_cassette_goes_through_the_client(serve, name: str) -> None:
    exchanges = EXPECTED[name]["exchanges"]
    ours = [e for e in exchanges if "not_ours" not in e]
    assert {e["not_ours"] for e in exchanges if "not_ours" in e} <= {
        "api.semanticscholar.org", "api.unpaywall.org", "api.crossref.org"}
    recorded = _recorded(name)
    assert [(r.path, r.status) for r in recorded] == [(f"/openalex{e['path']}", e["status"]) for e in ours]
    for rec, want in zip(recorded, ours, strict=True):
        if "works" in want:
            _check_list(serve, rec, want)
        elif "work" in want:
            _check_one_work(serve, rec, want)
        elif "error" in want:
            _check_error(serve, rec, want)
        else:
            _check_not_found(serve, rec, want)


def _check_list(serve: Any, rec: RecordedRoute, want: dict[str, Any]) -> None:
    with serve(_list_routes(rec, want)) as base:
        client = _client(base)
        if want["query"].get("per-page") == "1":
            assert client.count_works(want["query"]["filter"]) == want["count"]
            return
        works = client.works(want["query"]["filter"])
    assert client.requests_made == 1 + bool(want["next_cursor"])
    assert len(works) == want["results"] == want["count"]  # every work the filter matches, none twice
    for work, facts in zip(works, want["works"], strict=True):
        _check_work(work, facts)


def _check_one_work(serve: Any, rec: RecordedRoute, want: dict[str, Any]) -> None:
    facts = want["work"]
    path, key = (f"/works/doi:{facts['doi']}", f"doi:{facts['doi']}") if want["path"].startswith("/works/https:") \
        else (f"/works/{facts['id']}", facts["id"])
    with serve([_route(path, rec.body, rec.status)]) as base:
        work = _client(base).work(key)
    _check_work(work, facts)


def _check_error(serve: Any, rec: RecordedRoute, want: dict[str, Any]) -> None:
    select = want["query"]["select"]
    wid = want["path"].rpartition("/")[2]
    with serve([_route(want["path"], rec.body, rec.status, select=select)]) as base, \
            pytest.raises(PermanentError) as exc:
        _client(base).work(wid, select=[select])
    line = str(exc.value)
    assert f"HTTP {want['status']}" in line and want["message"] in line and want["error"] in line
    assert "\n" not in line and len(line) < 400 and exc.value.kind == f"http_{want['status']}"


def _check_not_found(serve: Any, rec: RecordedRoute, want: dict[str, Any]) -> None:
    doi = want["path"].removeprefix("/works/https://doi.org/")
    assert rec.body.startswith(b"<!doctype html>") and "html" in want
    routes = [_route(f"/works/doi:{doi}", rec.body, rec.status, headers={"content-type": "text/html; charset=utf-8"})]
    with serve(routes) as base:
        client = _client(base)
        assert client.work_by_doi(doi) is None
        with pytest.raises(PermanentError) as exc:
            client.work(f"doi:{doi}")
    line = str(exc.value)
    assert exc.value.kind == "not_found" and doi.lower() in line and "HTTP 404" in line
    assert "\n" not in line and "<" not in line and "Not Found" not in line


def test_the_recorded_bodies_are_decoded_as_recorded(tmp_path: Path) -> None:
    """Each dialect's bodies come out as the JSON the service meant (vcrpy's still gzipped)."""
    for name in ("paper-qa__test_doi_search[paper_attributes0].yaml", "openalexPro__api_call_200.yml"):
        [rec] = [r for r in _recorded(name) if r.status == 200]
        assert json.loads(rec.body)["id"].startswith("https://openalex.org/W")
        assert "content-encoding" not in rec.headers


def test_the_probe_reads_a_real_list_and_a_real_error_in_one_line(serve) -> None:
    from revbench.app.doctor import run_probes

    [page] = _recorded("paper-qa__test_title_search[paper_attributes1].yaml")
    [_work, error] = _recorded("openalexPro__pro_request_single_identifier.yml")
    assert len(page.body) < 64 * 1024  # what a probe reads at most
    for answer, status in ((page, "ok"), (error, "warn")):
        with serve([_route("/works", answer.body, answer.status, filter="doi:10.48550/arxiv.1706.03762")]) as base:
            s = Settings().with_overrides(openalex={"enabled": True, "base_url": f"{base}/openalex", "mailto": MAILTO})
            [probe] = run_probes(s, None, {"openalex"}, 5.0)
        assert probe.status == status and "\n" not in probe.detail + probe.fix, probe
    assert "HTTP 400 (Invalid query parameters error. DOESNTEXIST is not a valid select field." in probe.detail
    assert probe.fix.startswith("set REVBENCH_OPENALEX__BASE_URL")


def test_a_real_list_page_is_matched_back_by_doi_and_followed_to_its_end(serve) -> None:
    first = EXPECTED["openalexPro__keypaper_results_page_1.json"]
    page, end = (OA / "openalexPro__keypaper_results_page_1.json").read_bytes(), (OA / END_PAGE).read_bytes()
    dois = [w["doi"] for w in first["works"]]
    asked = [dois[0].upper(), f"https://doi.org/{dois[1]}", "10.48550/arXiv.2401.99999"]
    filt = "doi:" + "|".join([*dois, "10.48550/arxiv.2401.99999"])
    with serve([_route("/works", page, filter=filt, cursor="*"),
                _route("/works", end, filter=filt, cursor=first["next_cursor"])]) as base:
        client = _client(base)
        works = client.works_by_dois(asked)
    # A DOI the page lacks is not in OpenAlex: only the real empty page (next_cursor null) says so.
    assert client.requests_made == 2 and list(works) == asked[:2]
    for doi, want in zip(asked, first["works"], strict=False):
        _check_work(works[doi], want)
    with serve([_route("/works", page, filter="doi:" + "|".join(dois), cursor="*")]) as base:
        client = _client(base)
        assert list(client.works_by_dois(dois)) == dois
    assert client.requests_made == 1  # every DOI found on the first page: nothing further to ask


def test_real_authors_in_a_list_are_matched_back_by_id(serve) -> None:
    names = [n for n, w in EXPECTED.items() if w["kind"] == "author"]
    records = [json.loads((OA / n).read_bytes()) for n in names]
    listed = json.dumps({"meta": {"count": len(records), "next_cursor": "NEXT"}, "results": records}).encode()
    ids = [EXPECTED[n]["id"] for n in names]
    filt = "openalex:" + "|".join([*ids, "A0000000001"])
    with serve([_route("/authors", listed, filter=filt, cursor="*"),
                _route("/authors", (OA / END_PAGE).read_bytes(), filter=filt, cursor="NEXT")]) as base:
        client = _client(base)
        authors = client.authors_by_ids([f"https://openalex.org/{ids[0]}", ids[1].lower(), "A0000000001"])
    assert client.requests_made == 2
    assert [a["id"] for a in authors.values()] == [f"https://openalex.org/{i}" for i in ids]
    for name, author in zip(names, authors.values(), strict=True):
        _institutions, affiliations = author_rows(author)
        assert {a["institution_key"].removeprefix("ror:"): [a["first_year"], a["last_year"]] for a in affiliations} \
            == EXPECTED[name]["affiliations"]
