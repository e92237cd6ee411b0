"""Parse the header of a GROBID TEI document."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from lxml import etree

TEI_NS = "http://www.tei-c.org/ns/1.0"
NS = {"tei": TEI_NS}
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, recover=False, huge_tree=False)
_ORCID = re.compile(r"(\d{4}-\d{4}-\d{4}-\d{3}[\dX])$")


class TeiError(ValueError):
    """The text is not a well-formed TEI document."""


@dataclass
class TeiAffiliation:
    """One ``<affiliation>`` as GROBID structured it; ``text`` is the whole of it as one string."""

    department: str | None
    institution: str | None
    country: str | None
    text: str | None


@dataclass
class TeiAuthor:
    """One author as GROBID read it from the PDF header. ``department``, ``institution`` and
    ``affiliation`` are those of the first affiliation; ``affiliations`` holds every one, in order;
    likewise ``email`` and ``emails``."""

    forename: str | None
    surname: str | None
    email: str | None
    department: str | None
    institution: str | None
    affiliation: str | None
    affiliations: list[TeiAffiliation] = field(default_factory=list)
    orcid: str | None = None
    emails: list[str] = field(default_factory=list)
    """Every ``<email>`` of the author, in order (GROBID writes several; ``email`` is the first)."""

    @property
    def full_name(self) -> str:
        return " ".join(p for p in (self.forename, self.surname) if p)

    def as_row(self) -> dict[str, Any]:
        """The author as a ``documents.pdf_authors`` item."""
        return asdict(self)


@dataclass
class TeiHeader:
    """Title, abstract, authors and arXiv id from a TEI header. ``orphan_affiliations`` are
    GROBID's ``<author>`` elements holding an affiliation but no name (it could not attach the
    affiliation to anyone); ``dropped_authors`` counts the nameless authors left out, by reason."""

    title: str | None
    abstract: str | None
    authors: list[TeiAuthor] = field(default_factory=list)
    arxiv_id: str | None = None
    orphan_affiliations: list[TeiAffiliation] = field(default_factory=list)
    dropped_authors: Counter[str] = field(default_factory=Counter)


def _text(el: etree._Element | None) -> str | None:
    if el is None:
        return None
    text = " ".join("".join(el.itertext()).split())
    return text or None


def _joined(els: list[etree._Element], sep: str = ", ") -> str | None:
    return sep.join(t for t in (_text(e) for e in els) if t) or None


def normalize_orcid(raw: str | None) -> str | None:
    """The bare ``0000-0002-1825-0097`` form of an ORCID iD (GROBID may give a URL), or None."""
    if not raw:
        return None
    m = _ORCID.search("".join(raw.split()).upper().rstrip("/"))
    return m.group(1) if m else None


def parse_affiliation(aff: etree._Element) -> TeiAffiliation:
    """Department, institution and country of one ``<affiliation>``; a lab stays in ``text``."""
    orgs = aff.findall("tei:orgName", NS)
    # GROBID leaves the separator after a country in the text ("France;"); before 0.4 it wrote
    # the country straight under the affiliation, without an address.
    country = (_text(aff.find("tei:address/tei:country", NS)) or _text(aff.find("tei:country", NS)) or "").rstrip(" ;,") or None
    parts = [t for t in (_text(o) for o in orgs) if t]
    if country:
        parts.append(country)
    return TeiAffiliation(
        department=_joined(aff.findall("tei:orgName[@type='department']", NS)),
        institution=_joined(aff.findall("tei:orgName[@type='institution']", NS)),
        country=country,
        # Without orgNames (a raw affiliation only), the element's own text is all there is.
        text=", ".join(parts) if parts else _text(aff),
    )


def _abstract(header: etree._Element) -> str | None:
    abstract = header.find("tei:profileDesc/tei:abstract", NS)
    if abstract is None:
        return None
    # Section heads ("Background", "Methods") are part of what the authors wrote.
    blocks = [_text(e) for e in abstract.xpath(".//tei:head | .//tei:p", namespaces=NS)]
    return " ".join(b for b in blocks if b) or _text(abstract)


_TITLES = (
    "tei:fileDesc/tei:titleStmt/tei:title[@level='a'][@type='main']",
    "tei:fileDesc/tei:titleStmt/tei:title[@level='a'][not(@type)]",
    # GROBID before 0.4 left titleStmt empty and wrote the title only in the source's analytic part.
    "tei:fileDesc/tei:sourceDesc/tei:biblStruct/tei:analytic/tei:title[@type='main']",
    "tei:fileDesc/tei:sourceDesc/tei:biblStruct/tei:analytic/tei:title[not(@type)]",
)


def _title(header: etree._Element) -> str | None:
    """The article's title: the main title statement's, else the first other place GROBID put it."""
    for path in _TITLES:
        for el in header.xpath(path, namespaces=NS):
            if text := _text(el):
                return text
    return None


def _emails(author: etree._Element) -> list[str]:
    out: list[str] = []
    for e in author.iterfind("tei:email", NS):
        text = _text(e)
        if text and text not in out:
            out.append(text)
    return out


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
    out = TeiHeader(
        title=_title(header),
        abstract=_abstract(header),
    )
    bibl = header.find("tei:fileDesc/tei:sourceDesc/tei:biblStruct", NS)
    if bibl is None:
        return out
    for a in bibl.iterfind("tei:analytic/tei:author", NS):
        affiliations = [parse_affiliation(x) for x in a.iterfind("tei:affiliation", NS)]
        pers = a.find("tei:persName", NS)
        forename = surname = None
        if pers is not None:
            forename = _joined(pers.findall("tei:forename", NS), " ")
            surname = _joined(pers.findall("tei:surname", NS), " ")
        if not forename and not surname:
            # A nameless author cannot be a mention; its affiliations still belong to the paper.
            out.orphan_affiliations.extend(affiliations)
            if pers is not None:
                out.dropped_authors["empty_persname"] += 1
            elif not affiliations:
                out.dropped_authors["empty_author"] += 1
            continue
        first = affiliations[0] if affiliations else TeiAffiliation(None, None, None, None)
        emails = _emails(a)
        out.authors.append(
            TeiAuthor(
                forename=forename,
                surname=surname,
                email=emails[0] if emails else None,
                department=first.department,
                institution=first.institution,
                affiliation=_joined(_first_orgs(a)),
                affiliations=affiliations,
                orcid=normalize_orcid(_text(a.find("tei:idno[@type='ORCID']", NS))),
                emails=emails,
            )
        )
    out.arxiv_id = _text(bibl.find("tei:idno[@type='arXiv']", NS))
    return out


def _first_orgs(author: etree._Element) -> list[etree._Element]:
    # ``affiliation`` keeps its meaning from before every affiliation was kept: the first one's orgNames.
    aff = author.find("tei:affiliation", NS)
    return aff.findall("tei:orgName", NS) if aff is not None else []
