"""Parse the header of a GROBID TEI document."""

from __future__ import annotations

from dataclasses import dataclass, field

from lxml import etree

TEI_NS = "http://www.tei-c.org/ns/1.0"
NS = {"tei": TEI_NS}
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, recover=False, huge_tree=False)


class TeiError(ValueError):
    """The text is not a well-formed TEI document."""


@dataclass
class TeiAuthor:
    """One author as GROBID read it from the PDF header."""

    forename: str | None
    surname: str | None
    email: str | None
    department: str | None
    institution: str | None
    affiliation: str | None

    @property
    def full_name(self) -> str:
        return " ".join(p for p in (self.forename, self.surname) if p)


@dataclass
class TeiHeader:
    """Title, abstract, authors and arXiv id from a TEI header."""

    title: str | None
    abstract: str | None
    authors: list[TeiAuthor] = field(default_factory=list)
    arxiv_id: str | None = None


def _text(el: etree._Element | None) -> str | None:
    if el is None:
        return None
    text = " ".join("".join(el.itertext()).split())
    return text or None


def parse_tei_header(xml: str | bytes) -> TeiHeader:
    """Parse ``processHeaderDocument`` output; raises ``TeiError`` when it is not TEI."""
    data = xml.encode("utf-8") if isinstance(xml, str) else xml
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise TeiError(f"malformed TEI: {exc}") from exc
    if root is None or etree.QName(root).localname != "TEI":
        raise TeiError("not a TEI document")
    header = root.find("tei:teiHeader", NS)
    if header is None:
        raise TeiError("TEI without teiHeader")
    title = _text(header.find("tei:fileDesc/tei:titleStmt/tei:title[@level='a'][@type='main']", NS))
    paragraphs = [_text(p) for p in header.iterfind("tei:profileDesc/tei:abstract//tei:p", NS)]
    abstract = " ".join(p for p in paragraphs if p) or None
    bibl = header.find("tei:fileDesc/tei:sourceDesc/tei:biblStruct", NS)
    authors: list[TeiAuthor] = []
    arxiv_id = None
    if bibl is not None:
        for a in bibl.iterfind("tei:analytic/tei:author", NS):
            pers = a.find("tei:persName", NS)
            if pers is None:
                continue
            forenames = [_text(f) for f in pers.iterfind("tei:forename", NS)]
            forename = " ".join(f for f in forenames if f) or None
            surname = _text(pers.find("tei:surname", NS))
            aff = a.find("tei:affiliation", NS)
            dept = inst = aff_text = None
            if aff is not None:
                dept = _text(aff.find("tei:orgName[@type='department']", NS))
                inst = _text(aff.find("tei:orgName[@type='institution']", NS))
                orgs = [_text(o) for o in aff.iterfind("tei:orgName", NS)]
                aff_text = ", ".join(o for o in orgs if o) or None
            authors.append(
                TeiAuthor(
                    forename=forename,
                    surname=surname,
                    email=_text(a.find("tei:email", NS)),
                    department=dept,
                    institution=inst,
                    affiliation=aff_text,
                )
            )
        arxiv_id = _text(bibl.find("tei:idno[@type='arXiv']", NS))
    return TeiHeader(title=title, abstract=abstract, authors=authors, arxiv_id=arxiv_id)
