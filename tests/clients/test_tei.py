"""The TEI header parser on what real GROBID writes and the conformance samples lack: nameless
authors (an empty ``persName``, an empty ``author``), ORCID iDs as URLs, raw affiliations."""

from __future__ import annotations

from revbench.clients.tei import normalize_orcid, parse_tei_header

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
