"""The replay server's cassette reader in each dialect real recordings come in (hand-made here, so
they run without ../shared): vcrpy's with ``!!binary`` bodies still gzipped as sent, R ``vcr``'s
``http_interactions`` with a bare status and the body already decoded under a gzip header; and
OpenAlex's URLs, percent-escapes and all, landing on the ``/openalex`` mount."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import httpx
import pytest

from revbench.errors import InputError
from revbench.replay.cassettes import load_cassette, mount_path
from revbench.replay.server import ReplayApp, ReplayServer
from revbench.settings import ReplaySettings

WORK = {"id": "https://openalex.org/W1", "title": "Ünïcode"}


def _vcrpy(body: bytes) -> str:
    encoded = base64.encodebytes(body).decode()
    return ("interactions:\n- request:\n    body: null\n    method: GET\n"
            "    uri: https://api.openalex.org/works/https://doi.org/10.1016%2Fj.x.2025.1\n"
            "  response:\n    body:\n      string: !!binary |\n"
            + "".join(f"        {line}\n" for line in encoded.splitlines())
            + "    headers:\n      Content-Encoding:\n      - gzip\n      Content-Type:\n      - application/json\n"
            "    status:\n      code: 200\n      message: OK\nversion: 1\n")


R_VCR = """http_interactions:
- request:
    method: GET
    uri: https://api.openalex.org/works?filter=cites%3AW1&per-page=200&cursor=%2A&mailto=a%40b.org
  response:
    status: 200
    headers:
      content-type: application/json
      content-encoding: gzip
    body:
      encoding: ''
      string: |
        {"meta":{"count":0,"next_cursor":null},"results":[]}
  recorded_at: 2025-11-17 17:13:33
- request:
    method: GET
    uri: https://api.openalex.org/works/W2?select=NOPE
  response:
    status:
      status_code: '400'
      message: Bad Request
    headers:
      content-type: application/json
    body:
      string: '{"error":"Invalid query parameters error."}'
recorded_with: VCR-vcr/2.0.0
"""


def test_a_vcrpy_body_still_gzipped_is_served_decoded(tmp_path: Path) -> None:
    raw = json.dumps(WORK, ensure_ascii=False).encode()
    (tmp_path / "w.yaml").write_text(_vcrpy(gzip.compress(raw)))
    [route] = load_cassette(tmp_path / "w.yaml")
    assert (route.path, route.status, route.body) == ("/openalex/works/https://doi.org/10.1016/j.x.2025.1", 200, raw)
    assert route.headers == {"content-type": "application/json"}
    with ReplayServer(ReplayApp(ReplaySettings(fault_rate=0.0), fixtures_dir=tmp_path)) as server:
        r = httpx.get(f"{server.base}/openalex/works/https://doi.org/10.1016%2Fj.x.2025.1")
    assert r.status_code == 200 and r.json() == WORK


def test_an_r_vcr_cassette_reads_with_its_own_keys(tmp_path: Path) -> None:
    (tmp_path / "r.yml").write_text(R_VCR)
    page, error = load_cassette(tmp_path / "r.yml")
    assert (page.path, page.status, page.query) == ("/openalex/works", 200,
                                                    {"filter": "cites:W1", "per-page": "200", "cursor": "*", "mailto": "a@b.org"})
    assert json.loads(page.body) == {"meta": {"count": 0, "next_cursor": None}, "results": []}  # not gzip though so labelled
    assert (error.path, error.status, error.query) == ("/openalex/works/W2", 400, {"select": "NOPE"})


def test_a_gzip_body_that_is_cut_off_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "cut.yaml").write_text(_vcrpy(gzip.compress(b'{"id": "x"}' * 50)[:30]))
    with pytest.raises(InputError, match=r"cut\.yaml interaction 0: not a VCR interaction") as exc:
        load_cassette(tmp_path / "cut.yaml")
    assert "\n" not in str(exc.value)


def test_openalex_urls_land_on_their_mount() -> None:
    assert mount_path("https://api.openalex.org/works/https://doi.org/10.1046%2Fj.1365-2699.2003.00795?select=doi") == (
        "/openalex/works/https://doi.org/10.1046/j.1365-2699.2003.00795", {"select": "doi"})
    assert mount_path("https://api.openalex.org/authors/A5023888391")[0] == "/openalex/authors/A5023888391"
    assert mount_path("https://api.semanticscholar.org/graph/v1/paper/batch")[0] == "/s2/graph/v1/paper/batch"
