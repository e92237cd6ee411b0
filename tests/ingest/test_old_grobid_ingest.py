"""``revbench ingest`` and ``revbench disambiguate`` on a header in the layout GROBID wrote before
0.4 (title only under ``biblStruct/analytic``, ``<country>`` under ``<affiliation>``, several
``<email>`` per author): the title, the country and every address reach the warehouse, and a
second paper that shows only the author's second address is the same person."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from revbench.schemas.tables import AUTHOR_LINKS, AUTHORS, MENTIONS, PAPERS, REJECTS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.common import FIXTURES, on_replay, run_cli, settings_env

SECOND_ENTRY = """<entry>
    <id>http://arxiv.org/abs/2509.00007v1</id>
    <updated>2025-09-01T20:00:00Z</updated>
    <published>2025-09-01T20:00:00Z</published>
    <title>Sparse Retrieval for Reviewer Assignment</title>
    <summary>We study sparse retrieval for matching submissions to reviewers, with lexical baselines.</summary>
    <author><name>Zoë Müller</name></author>
    <arxiv:primary_category term="cs.IR" scheme="http://arxiv.org/schemas/atom"/>
    <category term="cs.IR" scheme="http://arxiv.org/schemas/atom"/>
  </entry>"""
# The second paper's header, as GROBID 0.8 writes it: one address, the author's second one.
SECOND_TEI = """<?xml version="1.0" encoding="UTF-8"?>
<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader><fileDesc>
<titleStmt><title level="a" type="main">Sparse Retrieval for Reviewer Assignment</title></titleStmt>
<sourceDesc><biblStruct><analytic><author><persName><forename type="first">Zoë</forename><surname>Müller</surname></persName>
<email>ZMueller@gmail.example</email><affiliation key="aff0"><orgName type="institution">Google Research</orgName>
<address><country key="CH">Switzerland</country></address></affiliation></author>
<title level="a" type="main">Sparse Retrieval for Reviewer Assignment</title></analytic></biblStruct></sourceDesc></fileDesc>
<profileDesc><abstract><div><p>We study sparse retrieval for matching submissions to reviewers, with lexical baselines.</p></div>
</abstract></profileDesc></teiHeader></TEI>"""


def _routes(d: Path) -> None:
    d.mkdir()
    page = (FIXTURES / "arxiv_page.xml").read_text(encoding="utf-8")
    page = re.sub(r"<entry>\s*<id>http://arxiv.org/abs/2509.00007v1</id>.*?</entry>", SECOND_ENTRY, page, flags=re.S)
    assert "Sparse Retrieval" in page
    (d / "page.xml").write_text(page, encoding="utf-8")
    (d / "s2.json").write_text(json.dumps([None, None]))
    (d / "old.tei.xml").write_bytes((FIXTURES / "grobid_header_0.3.tei.xml").read_bytes())
    (d / "new.tei.xml").write_text(SECOND_TEI, encoding="utf-8")
    atom, xml = {"content-type": "application/atom+xml; charset=utf-8"}, {"content-type": "application/xml; charset=UTF-8"}
    routes: list[dict[str, object]] = [
        {"method": "GET", "path": "/arxiv/api/query", "headers": atom, "body_file": "page.xml"},
        {"method": "POST", "path": "/s2/graph/v1/paper/batch", "headers": {"content-type": "application/json"},
         "body_file": "s2.json"},
    ]
    for arxiv_id, tei in (("2508.01234v2", "old.tei.xml"), ("2509.00007v1", "new.tei.xml")):
        marker = f"%paper {arxiv_id}"
        (d / f"{arxiv_id}.pdf").write_bytes((FIXTURES / "paper.pdf").read_bytes() + marker.encode() + b"\n")
        routes += [{"method": "GET", "path": f"/arxiv/pdf/{arxiv_id}", "headers": {"content-type": "application/pdf"},
                    "body_file": f"{arxiv_id}.pdf"},
                   {"method": "POST", "path": "/grobid/api/processHeaderDocument", "body_contains": marker, "headers": xml,
                    "body_file": tei}]
    (d / "routes.json").write_text(json.dumps(routes, indent=1))


def test_old_grobid_header_keeps_title_country_and_every_email(tmp_path: Path, replay, settings: Settings,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _routes(tmp_path / "routes")
    s = on_replay(settings, replay(fixtures=tmp_path / "routes")).with_overrides(arxiv={"categories": ["cs.IR"]})
    for k, v in settings_env(s).items():
        monkeypatch.setenv(k, v)
    code, out, err = run_cli("ingest", "--since", "2025-09-01", "--until", "2025-09-01", "--no-track")
    assert code == 0, out + err
    code, out, err = run_cli("disambiguate", "--fallback", "--no-track")
    assert code == 0, out + err
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        papers, rejects = wh.read(PAPERS), wh.read(REJECTS)
        mentions = wh.read(MENTIONS).sort("arxiv_id", "position")
        links, authors = wh.read(AUTHOR_LINKS), wh.read(AUTHORS)
    # The old header's title is found (not missing_title), so both papers load.
    assert rejects.height == 0 and sorted(papers["arxiv_id"]) == ["2508.01234", "2509.00007"]
    assert papers.filter(papers["arxiv_id"] == "2508.01234")["pdf_title"].item() == "Dense Retrieval for Reviewer Assignment"
    zoe = mentions.filter((mentions["arxiv_id"] == "2508.01234") & (mentions["position"] == 0)).row(0, named=True)
    assert zoe["email"] == "zoe.mueller@inf.ethz.example"
    assert zoe["emails"] == ["zoe.mueller@inf.ethz.example", "zmueller@gmail.example", "z.mueller@alumni.ethz.example"]
    assert [a["country"] for a in zoe["affiliations"]] == ["Switzerland"]
    # The second paper shows only the second address: an exact email match, one author with all three.
    by_key = {(a, p): (author, method)
              for a, p, author, method in links.select("arxiv_id", "position", "author_id", "method").iter_rows()}
    (first, how1), (second, how2) = by_key[("2508.01234", 0)], by_key[("2509.00007", 0)]
    assert first == second and {how1, how2} == {"email"}
    emails = authors.filter(authors["author_id"] == first)["emails"].item().to_list()
    assert emails == ["z.mueller@alumni.ethz.example", "zmueller@gmail.example", "zoe.mueller@inf.ethz.example"]
