"""OpenAlex's answers as plain records with the warehouse's column names (``schemas/graph.py``): a
work's ``referenced_works`` as ``citations`` rows (source ``openalex``), its ``topics`` and
``primary_topic`` as ``paper_topics`` rows (scheme ``openalex-topic``), its authorships'
institutions as ``institutions`` rows, the people at them as ``author_affiliations`` rows and every
authorship's ids as ``paper_authorships`` rows; an
author's ``affiliations[].years`` as affiliations with first and last year. The client that
fetches them is ``revbench.clients.openalex.OpenAlexClient``.

Every key is optional: OpenAlex adds keys every year (read here only by name, so a new one is
ignored), writes null for an abstract, a primary topic or an author id (paratext works, deleted
authors), and leaves keys out altogether (a deleted author has no ``affiliations``). A null or a
missing key is an empty answer, never a crash. An institution is known by its ROR id when OpenAlex
gives one (``ror:<bare id>``), else by its normalised name (``name:<...>``, the same key the
disambiguation's exact affiliation rule uses), so one institution under two spellings is one; every
key is minted by ``revbench.keys``.
Each institution row also carries what lets a conflict check meet it under another key
(``institution_identity``): its other names, with the raw strings OpenAlex matched to it alone, its
lineage, and its ROR successors, predecessors, parents and children where a whole record gives them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from revbench.clients.optional import as_dict, as_list, as_text
from revbench.keys import institution_key, institution_part, openalex_person_key
from revbench.schemas.graph import (
    AUTHOR_AFFILIATIONS,
    INSTITUTION_RELATIONSHIPS,
    INSTITUTIONS,
    PAPER_TOPICS,
    SOURCE_CITATION_COLUMNS,
)

SOURCE = "openalex"
SCHEME = "openalex-topic"

# The rows are the warehouse tables' rows, column for column (schemas/graph.py).
CITATION_COLUMNS = SOURCE_CITATION_COLUMNS
TOPIC_COLUMNS = tuple(PAPER_TOPICS.names)
INSTITUTION_COLUMNS = tuple(INSTITUTIONS.names)
AFFILIATION_COLUMNS = tuple(AUTHOR_AFFILIATIONS.names)

_ROR = re.compile(r"^0[0-9a-z]{6}\d{2}$", re.I)
_ORCID = re.compile(r"(\d{4}-\d{4}-\d{4}-\d{3}[\dX])$", re.I)
_COUNTRY = re.compile(r"^[A-Z]{2}$")


def _year(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 1400 <= value <= 2100 else None


def openalex_id(value: Any) -> str | None:
    """``https://openalex.org/W2741809807`` -> ``W2741809807`` (a bare id stays as it is)."""
    text = as_text(value)
    return (text.rstrip("/").rpartition("/")[2] or None) if text else None


def bare_ror(value: Any) -> str | None:
    """``https://ror.org/05ppvf150`` -> ``05ppvf150``; None when it is not a ROR id. The last path
    segment decides: OpenAlex has written ``https://ror.org/https://ror.org/01ppj9r51``."""
    last = (as_text(value) or "").rstrip("/").rpartition("/")[2]
    return last.lower() if _ROR.match(last) else None


def bare_orcid(value: Any) -> str | None:
    """``https://orcid.org/0000-0003-1613-5981`` -> ``0000-0003-1613-5981``; None when it is not an ORCID iD."""
    m = _ORCID.search(as_text(value) or "")
    return m.group(1).upper() if m else None


def institution_row(inst: Any) -> dict[str, Any] | None:
    """One ``institutions`` row from an OpenAlex institution (dehydrated in an authorship or an
    author's affiliation, or whole), with its ``institution_identity``; None when it has neither a
    ROR id nor a name."""
    d = as_dict(inst)
    ror, name = bare_ror(d.get("ror")), as_text(d.get("display_name"))
    key = institution_key(ror, name)
    if key is None:
        return None
    country = as_text(d.get("country_code"))
    return {"institution_key": key, "ror": ror, "name": name or ror,
            "country": country.upper() if country and _COUNTRY.match(country.upper()) else None,
            "type": as_text(d.get("type")), "openalex_id": openalex_id(d.get("id")), **institution_identity(d)}


def _texts(value: Any) -> list[str]:
    return [t for t in (as_text(v) for v in as_list(value)) if t]


def institution_identity(inst: Any) -> dict[str, Any]:
    """``aliases``, ``lineage`` and ``related`` of an OpenAlex institution: its other names
    (``display_name_alternatives``, ``display_name_acronyms``), the OpenAlex ids above it
    (``lineage``, itself left out) and its ``associated_institutions`` that are successors,
    predecessors, parents or children. Each is None where the object lacks its key (a dehydrated
    institution carries only ``lineage``), so a later answer's None keeps what is stored."""
    d = as_dict(inst)
    own = openalex_id(d.get("id"))
    names = [k for k in ("display_name_alternatives", "display_name_acronyms") if isinstance(d.get(k), list)]
    aliases = list(dict.fromkeys(t for k in names for t in _texts(d.get(k)))) if names else None
    lineage = ([i for i in dict.fromkeys(map(openalex_id, d["lineage"])) if i and i != own]
               if isinstance(d.get("lineage"), list) else None)
    related = None
    if isinstance(d.get("associated_institutions"), list):
        related = []
        for a in map(as_dict, d["associated_institutions"]):
            rel, ror, oid = (as_text(a.get("relationship")) or "").lower(), bare_ror(a.get("ror")), openalex_id(a.get("id"))
            if rel in INSTITUTION_RELATIONSHIPS and (ror or oid):
                related.append({"relationship": rel, "ror": ror, "openalex_id": oid, "name": as_text(a.get("display_name"))})
    return {"aliases": aliases, "lineage": lineage, "related": related}


def _with_aliases(row: dict[str, Any], aliases: list[str]) -> dict[str, Any]:
    """``row`` with ``aliases`` added to its own (each once, never its display name)."""
    new = [a for a in aliases if a != row["name"] and a not in (row["aliases"] or [])]
    return {**row, "aliases": [*(row["aliases"] or []), *new]} if new else row


def citation_rows(citing_arxiv_id: str, work: Any) -> list[dict[str, Any]]:
    """A work's ``referenced_works`` as citations, in the list's order (ordinal from 0). OpenAlex
    gives only the cited work's id: resolving it to a warehouse paper is the stage's."""
    rows = []
    for ordinal, ref in enumerate(as_list(as_dict(work).get("referenced_works"))):
        wid = openalex_id(ref)
        if wid is None:
            continue
        rows.append({"citing_arxiv_id": citing_arxiv_id, "source": SOURCE, "ordinal": ordinal, "cited_arxiv_id": None,
                     "cited_s2_id": None, "cited_openalex_id": wid, "cited_doi": None, "cited_arxiv": None,
                     "cited_title": None, "cited_year": None, "is_influential": None, "intents": [],
                     "n_contexts": None, "external_ids": json.dumps({"openalex": wid})})
    return rows


def _score(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1 else None


def topic_rows(arxiv_id: str, work: Any) -> list[dict[str, Any]]:
    """A work's ``topics`` (and its ``primary_topic`` when the list lacks it) as paper topics, each once."""
    w = as_dict(work)
    rows: list[dict[str, Any]] = []
    for topic in [*as_list(w.get("topics")), w.get("primary_topic")]:
        t = as_dict(topic)
        tid = openalex_id(t.get("id"))
        if tid is None or any(r["topic"] == tid for r in rows):
            continue
        rows.append({"arxiv_id": arxiv_id, "scheme": SCHEME, "topic": tid, "label": as_text(t.get("display_name")),
                     "origin": SOURCE, "score": _score(t.get("score")),
                     "domain": as_text(as_dict(t.get("domain")).get("display_name")),
                     "field": as_text(as_dict(t.get("field")).get("display_name")),
                     "subfield": as_text(as_dict(t.get("subfield")).get("display_name"))})
    return rows


def _authorship_institutions(authorship: dict[str, Any]) -> list[dict[str, Any]]:
    """The institutions OpenAlex matched, each with the raw strings it matched to that one alone
    as aliases (the spellings an unmatched string elsewhere meets it by), then each raw
    affiliation string it matched to none (by name)."""
    out = [row for inst in as_list(authorship.get("institutions")) if (row := institution_row(inst)) is not None]
    affiliations = authorship.get("affiliations")
    if isinstance(affiliations, list):
        for a in map(as_dict, affiliations):
            ids = {i for i in map(openalex_id, as_list(a.get("institution_ids"))) if i}
            text = as_text(a.get("raw_affiliation_string"))
            if len(ids) == 1 and text:
                out = [_with_aliases(r, [institution_part(text)]) if r["openalex_id"] in ids else r for r in out]
        # `institution_ids: [null]` is OpenAlex's too for a string it matched to nothing.
        raw = [as_text(as_dict(a).get("raw_affiliation_string")) for a in affiliations
               if not any(openalex_id(i) for i in as_list(as_dict(a).get("institution_ids")))]
    else:  # works indexed before OpenAlex split out `affiliations` (2024) have the raw strings alone
        raw = [] if out else [as_text(s) for s in as_list(authorship.get("raw_affiliation_strings"))]
    for text in raw:
        key = institution_key(None, None, text) if text else None
        if key:
            out.append({"institution_key": key, "ror": None, "name": institution_part(text), "country": None,
                        "type": None, "openalex_id": None, "aliases": None, "lineage": None, "related": None})
    return out


def _person(author: Any) -> tuple[str | None, str | None]:
    a = as_dict(author)
    aid = openalex_id(a.get("id"))
    return openalex_person_key(aid), bare_orcid(a.get("orcid"))


def authorship_rows(arxiv_id: str | None, work: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(institutions, author affiliations) of a work's authorships: each author with an OpenAlex id
    at each of their institutions, in the work's publication year, with their place in the author
    list (``position``, from 0: what ties them to the paper's mention when no id does); an
    authorship whose author id is null (deleted, or never resolved) gives its institutions but no person."""
    w = as_dict(work)
    year = _year(w.get("publication_year"))
    institutions: dict[str, dict[str, Any]] = {}
    affiliations: dict[tuple[str, str], dict[str, Any]] = {}
    for position, authorship in enumerate(as_list(w.get("authorships"))):
        insts = _authorship_institutions(as_dict(authorship))
        for inst in insts:
            key = inst["institution_key"]
            institutions[key] = _with_aliases(institutions[key], inst["aliases"] or []) if key in institutions else inst
        person, orcid = _person(as_dict(authorship).get("author"))
        if person is None:
            continue
        for inst in insts:
            affiliations.setdefault((person, inst["institution_key"]), {
                "person_key": person, "orcid": orcid, "institution_key": inst["institution_key"], "first_year": year,
                "last_year": year, "source": SOURCE, "arxiv_id": arxiv_id, "position": position})
    return list(institutions.values()), list(affiliations.values())


def person_rows(arxiv_id: str, work: Any) -> list[dict[str, Any]]:
    """``paper_authorships`` rows: each authorship's place in the list, its author's OpenAlex id and
    ORCID, and the name as the paper wrote it (``raw_author_name``, else the profile's). An authorship
    with neither id is left out: it ties nothing."""
    rows = []
    for position, authorship in enumerate(as_list(as_dict(work).get("authorships"))):
        a = as_dict(authorship)
        person, orcid = _person(a.get("author"))
        if person is None and orcid is None:
            continue
        name = as_text(a.get("raw_author_name")) or as_text(as_dict(a.get("author")).get("display_name"))
        rows.append({"arxiv_id": arxiv_id, "source": SOURCE, "position": position, "person_key": person,
                     "orcid": orcid, "name": name})
    return rows


def author_rows(author: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(institutions, author affiliations) of an author's ``affiliations[]``, each with the first and
    last of its ``years``; a deleted author (no ``affiliations``) gives none."""
    person, orcid = _person(author)
    institutions: dict[str, dict[str, Any]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for aff in as_list(as_dict(author).get("affiliations")):
        inst = institution_row(as_dict(aff).get("institution"))
        if inst is None:
            continue
        key = inst["institution_key"]
        institutions.setdefault(key, inst)
        years = [y for y in map(_year, as_list(as_dict(aff).get("years"))) if y is not None]
        if person is None:
            continue
        row = rows.setdefault(key, {"person_key": person, "orcid": orcid, "institution_key": key, "first_year": None,
                                    "last_year": None, "source": SOURCE, "arxiv_id": None,
                                    "position": None})
        if years:  # two affiliations naming one institution (a ROR and its merged twin) widen one row
            row["first_year"] = min(y for y in (row["first_year"], *years) if y is not None)
            row["last_year"] = max(y for y in (row["last_year"], *years) if y is not None)
    return list(institutions.values()), list(rows.values())


def work_ids(work: Any) -> dict[str, str | None]:
    """The ids a work carries: its OpenAlex id, DOI (bare, lower-case) and arXiv id when its DOI is arXiv's."""
    w = as_dict(work)
    doi = as_text(w.get("doi")) or as_text(as_dict(w.get("ids")).get("doi"))
    if doi:
        doi = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:)", "", doi, flags=re.I).lower()
    arxiv = doi[len("10.48550/arxiv."):] if doi and doi.startswith("10.48550/arxiv.") else None
    return {"openalex_id": openalex_id(w.get("id")), "doi": doi, "arxiv": arxiv}
