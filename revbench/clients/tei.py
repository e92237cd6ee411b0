"""Parse GROBID's TEI: the header, and the full text's reference list."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote

from lxml import etree

TEI_NS = "http://www.tei-c.org/ns/1.0"
XML_NS = "http://www.w3.org/XML/1998/namespace"
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


# The reference list of GROBID's full text (``processFulltextDocument``): one record per
# ``<biblStruct>`` of ``<listBibl>``, in order, whatever it lacks.

_DOI = re.compile(r"10\.\d{4,9}/\S+")
_DOI_PREFIX = re.compile(r"^doi\s*:", re.IGNORECASE)
# arXiv's old-style archives (before April 2007): an id of one of these is unmistakable even
# without an "arXiv" beside it; a new-style id (1706.03762) is only taken where arXiv is named.
_OLD_ARCHIVES = (
    "acc-phys|adap-org|alg-geom|ao-sci|astro-ph|atom-ph|bayes-an|chao-dyn|chem-ph|cmp-lg|comp-gas|"
    "cond-mat|cs|dg-ga|funct-an|gr-qc|hep-ex|hep-lat|hep-ph|hep-th|math-ph|math|mtrl-th|nlin|"
    "nucl-ex|nucl-th|patt-sol|physics|plasm-ph|q-alg|q-bio|quant-ph|solv-int|supr-con"
)
_NEW_ID = r"(?P<new>\d{4}\.\d{4,5})"
_OLD_ID = rf"(?P<old>(?P<archive>{_OLD_ARCHIVES})(?:\.[A-Za-z]{{2}})?/(?P<num>\d{{7}}))"
_ID = rf"(?:{_NEW_ID}|{_OLD_ID})(?:v\d+)?"
_ARXIV_PREFIX = r"(?:arxiv\s*:\s*|(?:https?://)?(?:www\.)?arxiv\.org/(?:abs|pdf)/|abs/)"
_IDNO_ARXIV = re.compile(rf"^{_ARXIV_PREFIX}?{_ID}(?:\.pdf)?$", re.IGNORECASE)
_NOTE_ARXIV = re.compile(
    rf"(?:(?P<named>arxiv(?:\s+preprint)?[\s:,]*(?:arxiv\s*:\s*)?(?:abs/)?|arxiv\.org/(?:abs|pdf)/)|(?<![\w/.-])){_ID}(?!\d)",
    re.IGNORECASE,
)
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")


@dataclass
class TeiReference:
    """One entry of the full text's reference list, with what GROBID found in it."""

    ordinal: int
    title: str | None
    year: int | None
    doi: str | None
    arxiv: str | None
    authors: list[str] = field(default_factory=list)
    raw: str | None = None
    idnos: dict[str, str] = field(default_factory=dict)
    """Typed ``<idno>`` values as GROBID gave them (DOI, PMID, ISSN...), the first of each type."""
    grobid_id: str | None = None
    contexts: int = 0
    """How often the body cites it (``<ref type="bibr" target="#b3">``)."""

    def as_citation(self, citing_arxiv_id: str) -> dict[str, Any]:
        """The reference as a ``citations`` record (source ``grobid``, not yet resolved)."""
        extra: dict[str, Any] = {"grobid_id": self.grobid_id, "idno": self.idnos or None,
                                 "authors": self.authors or None, "raw_reference": self.raw}
        return {
            "citing_arxiv_id": citing_arxiv_id, "source": "grobid", "ordinal": self.ordinal,
            "cited_arxiv_id": None, "cited_s2_id": None, "cited_openalex_id": None,
            "cited_doi": self.doi, "cited_arxiv": self.arxiv, "cited_title": self.title, "cited_year": self.year,
            "is_influential": None, "intents": [], "n_contexts": self.contexts,
            "external_ids": json.dumps({k: v for k, v in extra.items() if v is not None}, sort_keys=True, ensure_ascii=False),
        }


def normalize_doi(raw: str | None) -> str | None:
    """A DOI lower-cased and bare (``10.1145/3292500.3330701``), from a bare DOI, ``doi:`` or any URL
    holding one (line breaks GROBID left inside it removed); None when there is none."""
    if not raw:
        return None
    m = _DOI.search(unquote("".join(raw.split())))
    return m.group(0).rstrip(".,;)]").lower() if m else None


def _arxiv_id(m: re.Match[str]) -> str | None:
    """The id of an arXiv match without version or subject class, if its date can be one."""
    if m.group("new"):
        ident = m.group("new")
        yymm = int(ident[:4])
        # yymm.nnnn until 2014, yymm.nnnnn since 2015; the first new-style ids are of April 2007.
        ok = 1 <= yymm % 100 <= 12 and 704 <= yymm and (len(ident) == 9) == (yymm < 1501)
        return ident if ok else None
    num = m.group("num")
    ok = 1 <= int(num[2:4]) <= 12 and (int(num[:2]) >= 91 or int(num[:2]) <= 7)
    return f"{m.group('archive').lower()}/{num}" if ok else None


def arxiv_in_idno(raw: str | None) -> str | None:
    """The arXiv id an untyped ``<idno>`` holds when the whole of it is one (``abs/1412.6980``,
    ``arXiv:1706.03762v5``, ``hep-th/9901001``); a page range, ISBN or other number gives None."""
    m = _IDNO_ARXIV.match("".join((raw or "").split()))
    return _arxiv_id(m) if m else None


def arxiv_in_text(text: str | None) -> str | None:
    """The first arXiv id a note names ("arXiv preprint arXiv:1706.03762", "ArXiv, abs/1412.6980",
    "hep-th/9901001"), or None."""
    for m in _NOTE_ARXIV.finditer(text or ""):
        if (m.group("named") or m.group("old")) and (ident := _arxiv_id(m)):
            return ident
    return None


def _year(bibl: etree._Element) -> int | None:
    dates = bibl.xpath("tei:monogr/tei:imprint/tei:date", namespaces=NS) or bibl.xpath(".//tei:date", namespaces=NS)
    for d in dates:
        for value in (d.get("when"), _text(d)):
            if value and (m := _YEAR.search(value)):
                return int(m.group(1))
    return None


def _ref_title(bibl: etree._Element) -> str | None:
    for path in ("tei:analytic/tei:title[@type='main']", "tei:analytic/tei:title",
                 "tei:monogr/tei:title[@type='main']", "tei:monogr/tei:title[@level='m']", "tei:monogr/tei:title"):
        for el in bibl.xpath(path, namespaces=NS):
            if text := _text(el):
                return text
    return None


def _ref_authors(bibl: etree._Element) -> list[str]:
    people = bibl.xpath("tei:analytic/tei:author/tei:persName", namespaces=NS) or bibl.xpath(
        "tei:monogr/tei:author/tei:persName", namespaces=NS)
    names = ((_joined(pers.findall("tei:forename", NS), " "), _joined(pers.findall("tei:surname", NS), " ")) for pers in people)
    return [" ".join(p for p in parts if p) for parts in names if any(parts)]


def _reference(bibl: etree._Element, ordinal: int, contexts: dict[str, int]) -> TeiReference:
    idnos: dict[str, str] = {}
    untyped: list[str] = []
    for el in bibl.iterfind(".//tei:idno", NS):
        if value := _text(el):
            kind = el.get("type")
            if kind:
                idnos.setdefault(kind, value)
            else:
                untyped.append(value)
    typed_doi = next((v for k, v in idnos.items() if k.lower() == "doi"), None)
    # An untyped idno is a DOI only when it says so ("doi: 10.1002/ mus.1137", as GROBID 0.6 wrote).
    doi = normalize_doi(typed_doi) or next((normalize_doi(v) for v in untyped if _DOI_PREFIX.match(v)), None)
    raw = _text(bibl.find("tei:note[@type='raw_reference']", NS))
    notes = [_text(n) for n in bibl.iterfind(".//tei:note", NS) if n.get("type") != "raw_reference"]
    targets = [t for t in bibl.xpath(".//tei:ptr/@target", namespaces=NS) if "arxiv.org" in t.lower()]
    arxiv = (arxiv_in_idno(next((v for k, v in idnos.items() if k.lower() == "arxiv"), None))
             or next((a for a in map(arxiv_in_idno, untyped) if a), None)
             # DataCite's arXiv DOIs (10.48550/arXiv.1706.03762) name the id too.
             or (arxiv_in_idno(doi.split("/arxiv.", 1)[1]) if doi and doi.startswith("10.48550/arxiv.") else None)
             or next((a for a in map(arxiv_in_text, [*notes, raw, *targets]) if a), None))
    ident = bibl.get(f"{{{XML_NS}}}id")
    return TeiReference(ordinal=ordinal, title=_ref_title(bibl), year=_year(bibl), doi=doi, arxiv=arxiv,
                        authors=_ref_authors(bibl), raw=raw, idnos=idnos, grobid_id=ident,
                        contexts=contexts.get(ident, 0) if ident else 0)


def parse_tei_references(xml: str | bytes, name: str = "TEI") -> list[TeiReference]:
    """Every ``<biblStruct>`` of a ``processFulltextDocument`` answer's ``<listBibl>``, in order
    (none for a header-only TEI); raises ``TeiError`` naming ``name`` when it is not TEI."""
    data = xml.encode("utf-8") if isinstance(xml, str) else xml
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise TeiError(f"{name}: malformed TEI: {' '.join(str(exc).split())}") from exc
    if root is None or etree.QName(root).localname != "TEI":
        raise TeiError(f"{name}: not a TEI document")
    targets = root.xpath("tei:text/tei:body//tei:ref[@type='bibr']/@target", namespaces=NS)
    contexts = Counter(t.lstrip("#") for target in targets for t in target.split())
    bibls = root.xpath("tei:text//tei:listBibl/tei:biblStruct", namespaces=NS)
    return [_reference(b, i, contexts) for i, b in enumerate(bibls)]
