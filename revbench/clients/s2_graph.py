"""Semantic Scholar's graph answers as plain records with the warehouse's column names: a paper's
references as ``citations`` rows (source ``s2``), its fields of study as ``paper_topics`` rows
(scheme ``s2-fos``), and its ids and publication types. The client that fetches them is
``SemanticScholarClient`` (``references``, and ``paper_batch`` with ``GRAPH_PAPER_FIELDS``).

Every key is optional and S2 writes JSON null where a list is expected (``authors``,
``references``, ``citations``, ``s2FieldsOfStudy``...): a null list is an empty one, never a crash.
S2's bulk datasets write the same keys in lower case (``externalids``, ``s2fieldsofstudy``):
``from_bulk`` maps them back, so one parser reads both.
"""

from __future__ import annotations

import json
import re
from typing import Any

from revbench.clients.optional import as_dict, as_list, as_text
from revbench.schemas.graph import PAPER_TOPICS, SOURCE_CITATION_COLUMNS

SOURCE = "s2"
SCHEME = "s2-fos"

# The rows are the warehouse tables' rows, column for column (schemas/graph.py).
CITATION_COLUMNS = SOURCE_CITATION_COLUMNS
TOPIC_COLUMNS = tuple(PAPER_TOPICS.names)

_API_KEYS = ("paperId", "corpusId", "externalIds", "title", "year", "authors", "venue", "publicationVenueId",
             "referenceCount", "citationCount", "influentialCitationCount", "isOpenAccess", "s2FieldsOfStudy",
             "fieldsOfStudy", "publicationTypes", "publicationDate", "journal", "references", "citations")
_BULK_KEYS = {k.lower(): k for k in _API_KEYS}
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:)", re.I)
_ARXIV_VERSION = re.compile(r"v\d+$")
# The shapes the warehouse's citations columns hold (schemas/graph.py); an id of another shape is
# left out of cited_doi / cited_arxiv and kept only in external_ids, so the edge is never refused for it.
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
_ARXIV = re.compile(r"^(?:\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})$")


def from_bulk(record: dict[str, Any]) -> dict[str, Any]:
    """A bulk-dataset paper (lower-case keys: ``corpusid``, ``externalids``, ``s2fieldsofstudy``)
    with the Graph API's key names, so the API's parsers read it; keys it does not know stay as they are."""
    return {_BULK_KEYS.get(k, k): v for k, v in record.items()}


def normalise_doi(value: Any) -> str | None:
    """A DOI in lower case, without ``https://doi.org/`` or ``doi:`` (DOIs are case-insensitive);
    None when it is not shaped as one (``10.<registrant>/<suffix>``)."""
    text = as_text(value)
    doi = _DOI_PREFIX.sub("", text).lower() if text else ""
    return doi if _DOI.match(doi) else None


def arxiv_id_of(value: Any) -> str | None:
    """An arXiv id as the warehouse keys papers: no ``arXiv:`` prefix, no version; None when it is
    not shaped as one."""
    text = as_text(value)
    if text is None:
        return None
    text = _ARXIV_VERSION.sub("", text.removeprefix("arXiv:").removeprefix("arxiv:"))
    return text if _ARXIV.match(text) else None


def external_ids_text(ids: Any) -> str | None:
    """The external ids S2 gave, as JSON text (keys sorted); ids S2 wrote as null say nothing and are left out."""
    given = {k: v for k, v in as_dict(ids).items() if v is not None}
    return json.dumps(given, sort_keys=True, ensure_ascii=False) if given else None


def unique(items: Any) -> list[str]:
    """The strings of a list, each once, in first-seen order."""
    out: list[str] = []
    for item in as_list(items):
        if isinstance(item, str) and item and item not in out:
            out.append(item)
    return out


def reference_row(citing_arxiv_id: str, ordinal: int, item: dict[str, Any]) -> dict[str, Any]:
    """One ``citations`` row from one reference. ``item`` is either S2's edge (``contexts``,
    ``intents``, ``isInfluential``, ``citedPaper``, from ``/paper/{id}/references``) or a bare
    paper (a paper object's own ``references`` list, which has no edge fields). ``n_contexts``
    counts the contexts as S2 gave them: two that differ only in Unicode normalisation are two
    (S2 lists them apart, and the count stays checkable against the raw answer); it is None when
    the contexts were not asked."""
    edge = "citedPaper" in item or any(k in item for k in ("contexts", "contextsWithIntent", "intents", "isInfluential"))
    cited = as_dict(item.get("citedPaper")) if edge else item
    ids = as_dict(cited.get("externalIds"))
    year = cited.get("year")
    with_intent = as_list(item.get("contextsWithIntent"))
    intents = unique(item.get("intents")) if "intents" in item else unique(
        [i for c in with_intent for i in as_list(as_dict(c).get("intents"))])
    if "contexts" in item:
        n_contexts: int | None = len(as_list(item.get("contexts")))
    else:
        n_contexts = len(with_intent) if "contextsWithIntent" in item else None
    influential = item.get("isInfluential")
    return {
        "citing_arxiv_id": citing_arxiv_id, "source": SOURCE, "ordinal": ordinal, "cited_arxiv_id": None,
        "cited_s2_id": as_text(cited.get("paperId")), "cited_openalex_id": None, "cited_doi": normalise_doi(ids.get("DOI")),
        "cited_arxiv": arxiv_id_of(ids.get("ArXiv")), "cited_title": as_text(cited.get("title")),
        "cited_year": year if isinstance(year, int) and not isinstance(year, bool) else None,
        "is_influential": influential if isinstance(influential, bool) else None,
        "intents": intents, "n_contexts": n_contexts, "external_ids": external_ids_text(ids),
    }


def reference_rows(citing_arxiv_id: str, items: Any) -> list[dict[str, Any]]:
    """``citations`` rows of one paper's references, ``ordinal`` their position in S2's list from 0.
    A cited paper without an S2 id is kept, by its title and external ids; an item that is not an
    object (never seen) is skipped, and its ordinal with it, so the others keep their positions."""
    return [reference_row(citing_arxiv_id, i, item) for i, item in enumerate(as_list(items)) if isinstance(item, dict)]


def topic_rows(arxiv_id: str, paper: Any) -> list[dict[str, Any]]:
    """``paper_topics`` rows of one paper: each ``s2FieldsOfStudy`` category with its source
    (``external`` or ``s2-fos-model``) as origin; without those, each ``fieldsOfStudy`` name with
    origin ``external`` (S2 documents them as "from external sources"). Once per (topic, origin)."""
    paper = as_dict(paper)
    pairs = [(as_text(f.get("category")), as_text(f.get("source")) or "unknown")
             for f in as_list(paper.get("s2FieldsOfStudy")) if isinstance(f, dict)]
    if not pairs:
        pairs = [(as_text(name), "external") for name in as_list(paper.get("fieldsOfStudy"))]
    rows, seen = [], set()
    for topic, origin in pairs:
        if topic is None or (topic, origin) in seen:
            continue
        seen.add((topic, origin))
        rows.append({"arxiv_id": arxiv_id, "scheme": SCHEME, "topic": topic, "label": topic, "origin": origin,
                     "score": None, "domain": None, "field": None, "subfield": None})
    return rows


def paper_facts(paper: Any) -> dict[str, Any]:
    """A paper's S2 id, DOI, arXiv id, publication types and external ids (JSON text)."""
    paper = as_dict(paper)
    ids = as_dict(paper.get("externalIds"))
    return {"s2_paper_id": as_text(paper.get("paperId")), "doi": normalise_doi(ids.get("DOI")),
            "arxiv": arxiv_id_of(ids.get("ArXiv")), "publication_types": unique(paper.get("publicationTypes")),
            "external_ids": external_ids_text(ids)}


def batch_topics(arxiv_ids: list[str], answers: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """``paper_topics`` rows of one ``paper_batch`` answer (aligned with ``arxiv_ids``) and the
    ids S2 has no record of (its JSON null), by name."""
    rows: list[dict[str, Any]] = []
    misses: list[str] = []
    for aid, answer in zip(arxiv_ids, answers, strict=True):
        if answer is None:
            misses.append(aid)
        else:
            rows += topic_rows(aid, answer)
    return rows, misses
