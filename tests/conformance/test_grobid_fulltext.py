"""Every recorded GROBID full text (0.5.5 to 0.8.1) through the real ``GrobidHeaderClient``: the
replay server answers ``processFulltextDocument`` with the recorded bytes, the client posts a PDF
and parses the reference list. Nothing lost: one record per ``<biblStruct>``, counted here with a
plain XPath of its own; DOIs typed ``DOI`` or ``doi``, arXiv ids only untyped or in notes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from lxml import etree

from revbench.clients.tei import TeiHeader, TeiReference, parse_tei_header
from revbench.schemas.graph import SOURCE_CITATION_COLUMNS
from revbench.settings import Settings
from tests.support.conformance import REAL, expected, needs_samples, through_grobid

pytestmark = needs_samples
FOLDER = REAL / "grobid-fulltext"
EXPECTED = expected("grobid-fulltext") if REAL.exists() else {}
SAMPLES = sorted(p.name for p in FOLDER.glob("*.tei.xml")) if REAL.exists() else []
NS = {"t": "http://www.tei-c.org/ns/1.0"}
CITATION_COLUMNS = set(SOURCE_CITATION_COLUMNS)


def test_every_sample_has_expected_values() -> None:
    assert SAMPLES and sorted(EXPECTED) == SAMPLES


def _references(serve: Callable[..., Any], settings: Settings, name: str) -> list[TeiReference]:
    return through_grobid(serve, settings, FOLDER / name, "processFulltextDocument",
                          lambda client: client.references(b"%PDF-1.4\n%%EOF\n", name="sample.pdf"), fulltext=True)


@pytest.mark.parametrize("name", SAMPLES)
def test_grobid_fulltext_sample(serve, settings, name: str) -> None:
    want = EXPECTED[name]
    tree = etree.parse(str(FOLDER / name))
    bibls = tree.xpath("//t:listBibl//t:biblStruct", namespaces=NS)
    refs = _references(serve, settings, name)

    assert len(refs) == len(bibls) > 0 and [r.ordinal for r in refs] == list(range(len(bibls)))
    assert refs[0].title is not None and refs[0].title.startswith(want["first"][0]) and refs[0].year == want["first"][1]
    # Every reference with a typed DOI (either case) has it, lower-cased; the known ones by position.
    typed = [i for i, b in enumerate(bibls) if b.xpath(".//t:idno[translate(@type, 'DOI', 'doi') = 'doi']", namespaces=NS)]
    assert typed == [r.ordinal for r in refs if r.doi] and len(typed) == want["n_dois"]
    for i, doi in want["dois"].items():
        assert refs[int(i)].doi == doi
    assert {str(r.ordinal): r.arxiv for r in refs if r.arxiv} == want["arxiv"]
    assert [r.ordinal for r in refs if r.title is None] == want["no_title"]
    assert [r.ordinal for r in refs if not r.authors] == want["no_authors"]
    assert [r.ordinal for r in refs if r.year is None] == want["no_year"]

    rows = [r.as_citation("2004.07180") for r in refs]
    assert all(set(row) == CITATION_COLUMNS and row["source"] == "grobid" for row in rows)
    extras = [json.loads(row["external_ids"]) for row in rows]
    assert sum("raw_reference" in e for e in extras) == want["raw_references"]
    # Each entry's own xml:id comes through, so a record can be traced back to its biblStruct.
    assert [e.get("grobid_id") for e in extras] == [b.get("{http://www.w3.org/XML/1998/namespace}id") for b in bibls]


@pytest.mark.parametrize("name", SAMPLES)
def test_with_full_text_on_one_request_gives_the_header_and_the_references(serve, settings, name: str) -> None:
    # What the ingest asks with grobid.fulltext on: processFulltextDocument alone (through_grobid
    # checks one request), its teiHeader read by the header parser, the same list as references().
    header, refs = through_grobid(serve, settings, FOLDER / name, "processFulltextDocument",
                                  lambda client: _both(client.document(b"%PDF-1.4\n%%EOF\n", name="sample.pdf")),
                                  fulltext=True)
    assert header == parse_tei_header((FOLDER / name).read_bytes()) and header.title and header.authors
    assert refs == _references(serve, settings, name)


def _both(answer: tuple[TeiHeader, list[TeiReference] | None, str]) -> tuple[tuple[TeiHeader, list[TeiReference] | None], str]:
    header, refs, tei = answer
    return (header, refs), tei


def test_the_full_texts_header_reads_as_the_same_grobids_other_answer_for_that_pdf() -> None:
    # One PDF through GROBID 0.6.1 twice (two recordings, different bytes): the header is the same.
    pdf = "0046d83a-edd6-4631-b57c-755cdcce8b7f"
    full = (FOLDER / f"grobid_client_python__{pdf}.grobid-0.6.1.tei.xml").read_bytes()
    other = (REAL / "grobid" / f"resources__test_pdf__{pdf}.tei.xml").read_bytes()
    assert full != other and parse_tei_header(full) == parse_tei_header(other)
