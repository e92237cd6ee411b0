"""The TEI header parser on what real GROBID writes and the conformance samples lack: nameless
authors (an empty ``persName``, an empty ``author``), ORCID iDs as URLs, raw affiliations."""

from __future__ import annotations

from revbench.clients.tei import normalize_orcid, parse_tei_header
from tests.support.common import FIXTURES

TEI = """<?xml version="1.0" encoding="UTF-8"?>
<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader><fileDesc><titleStmt><title level="a" type="main">T</title></titleStmt>
<sourceDesc><biblStruct><analytic>
 <author><persName><roleName>Dr</roleName><forename type="first">Ada</forename><forename type="middle">B</forename>
   <surname>Lovelace</surname></persName><idno type="ORCID">https://orcid.org/0000-0002-1825-009x</idno>
   <affiliation><orgName type="laboratory">Analytical Lab</orgName><orgName type="institution">Univ. A</orgName>
     <address><settlement>London</settlement><country key="GB">UK;</country></address></affiliation>
   <affiliation>Somewhere without structure</affiliation></author>
 <author><persName/><affiliation><orgName type="institution">Ghost U</orgName></affiliation></author>
 <author><persName><roleName>PhD</roleName></persName></author>
 <author/>
 <author><affiliation><orgName type="institution">Orphan U</orgName></affiliation></author>
</analytic></biblStruct></sourceDesc></fileDesc>
<profileDesc><abstract><div><head>Background</head><p>One.</p></div><div><head>Results</head><p>Two.</p></div></abstract></profileDesc>
</teiHeader></TEI>"""


def test_nameless_authors_are_dropped_by_reason_and_their_affiliations_kept() -> None:
    h = parse_tei_header(TEI)
    assert [a.full_name for a in h.authors] == ["Ada B Lovelace"]
    assert dict(h.dropped_authors) == {"empty_persname": 2, "empty_author": 1}
    assert [o.text for o in h.orphan_affiliations] == ["Ghost U", "Orphan U"]


def test_affiliations_orcid_and_abstract_heads() -> None:
    (ada,) = parse_tei_header(TEI).authors
    assert ada.orcid == "0000-0002-1825-009X"
    first, raw = ada.affiliations
    assert (first.department, first.institution, first.country, first.text) == (None, "Univ. A", "UK", "Analytical Lab, Univ. A, UK")
    assert raw.text == "Somewhere without structure" and raw.institution is None
    assert ada.institution == "Univ. A" and ada.affiliation == "Analytical Lab, Univ. A"
    assert parse_tei_header(TEI).abstract == "Background One. Results Two."


def test_orcid_forms() -> None:
    assert normalize_orcid("0000-0002-1825-0097") == "0000-0002-1825-0097"
    assert normalize_orcid("http://orcid.org/0000-0002-1825-0097/") == "0000-0002-1825-0097"
    assert normalize_orcid("1825-0097") is None and normalize_orcid(None) is None


# GROBID before 0.4 (the fixture is its header output in that release's layout): an empty
# titleStmt, the title only in the source's analytic part, <country> straight under <affiliation>.
OLD = (FIXTURES / "grobid_header_0.3.tei.xml").read_text(encoding="utf-8")


def _titled(title_stmt: str, analytic: str) -> str:
    return (f'<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader><fileDesc><titleStmt>{title_stmt}</titleStmt>'
            f"<sourceDesc><biblStruct><analytic>{analytic}</analytic></biblStruct></sourceDesc></fileDesc></teiHeader></TEI>")


def test_old_grobid_title_comes_from_the_analytic_part() -> None:
    h = parse_tei_header(OLD)
    assert h.title == "Dense Retrieval for Reviewer Assignment"
    assert h.abstract == "We study dense retrieval for matching submissions to reviewers. Experiments show gains."
    assert [a.full_name for a in h.authors] == ["Zoë Müller", "J Wang"]


def test_title_sources_in_order() -> None:
    main = '<title level="a" type="main">Main</title>'
    assert parse_tei_header(_titled(main, '<title level="a" type="main">Analytic</title>')).title == "Main"
    # An untyped article title in titleStmt before the analytic one; a subtitle is not the title.
    analytic = '<title level="a" type="main">A</title>'
    assert parse_tei_header(_titled('<title level="a">Untyped</title>', analytic)).title == "Untyped"
    assert parse_tei_header(_titled('<title level="a" type="sub">Sub</title>', analytic)).title == "A"
    # An empty main title (GROBID writes one when it found none) is no title.
    empty = '<title level="a" type="main"/>'
    assert parse_tei_header(_titled(empty, '<title level="a">Untyped analytic</title>')).title == "Untyped analytic"
    assert parse_tei_header(_titled(empty, "")).title is None


def test_old_grobid_country_under_the_affiliation_is_kept() -> None:
    zoe, wang = parse_tei_header(OLD).authors
    (aff,) = zoe.affiliations
    assert (aff.department, aff.institution, aff.country) == (
        "Department of Computer Science", "ETH Zürich", "Switzerland")
    assert aff.text == "Department of Computer Science, ETH Zürich, Switzerland"
    assert wang.affiliations[0].country == "USA"


def test_every_email_of_an_author_is_kept_in_order_once() -> None:
    zoe, wang = parse_tei_header(OLD).authors
    assert zoe.emails == ["zoe.mueller@inf.ethz.example", "zmueller@gmail.example", "z.mueller@alumni.ethz.example"]
    assert zoe.email == "zoe.mueller@inf.ethz.example"  # the first, as before
    assert zoe.as_row()["emails"] == zoe.emails
    assert wang.emails == [] and wang.email is None
