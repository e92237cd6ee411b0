"""Fetching the scholarly graph for a list of papers, one source per piece: Semantic Scholar's
references and fields of study, OpenAlex's works (references, topics, authorships) and its authors'
affiliations with years. Pure of the warehouse: a piece builds its client from the settings, asks,
and returns rows in the graph tables' columns with a fetch record per paper it got an answer for.

A paper the source does not know is an answer too (``found`` false, no rows): it is recorded, so a
later refresh does not ask again. A failed request is not an answer: the paper is named in
``failures`` and left without a fetch record, so the next run asks again. A service that stops
answering (``ServiceUnavailable``) ends the piece; what it had fetched is still returned.

The clients clean every string as they parse an answer (a lone surrogate becomes U+FFFD) and cut
every list at its cap; a piece carries both counts (``cleaned``, ``truncated``) to the stage's
notes. Should a row still fail to become a frame, ``storable`` rejects its paper alone, by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from revbench.clients import openalex_graph, s2_graph
from revbench.clients.openalex import OpenAlexClient, arxiv_doi
from revbench.clients.semantic_scholar import GRAPH_PAPER_FIELDS, SemanticScholarClient
from revbench.errors import ServiceUnavailable
from revbench.retry import PermanentError, TransientError
from revbench.schemas.graph import CITATIONS
from revbench.settings import Settings
from revbench.tasks.graph import PaperIndex, Resolution, resolve_citations
from revbench.text_clean import clean_rows
from revbench.workers import map_unordered

S2_KINDS: tuple[str, ...] = ("references", "topics")
OPENALEX_KINDS: tuple[str, ...] = ("references", "topics", "affiliations")
KINDS_OF_SOURCE: dict[str, tuple[str, ...]] = {"s2": S2_KINDS, "openalex": OPENALEX_KINDS}


def enabled_sources(settings: Settings) -> tuple[str, ...]:
    """The sources a graph run asks: Semantic Scholar always, OpenAlex when enabled."""
    return ("s2", "openalex") if settings.openalex.enabled else ("s2",)


def to_fetch(sources: Sequence[str], papers_to_fetch: Callable[[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """``(source, kind) -> papers never asked`` for every source and the kinds it gives
    (``papers_to_fetch`` is the warehouse's query of that name)."""
    return {(src, kind): papers_to_fetch(src, kind) for src in sources for kind in KINDS_OF_SOURCE[src]}


@dataclass
class Fetched:
    """What one piece got from one source; rows in the graph tables' columns."""

    source: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    topics: list[dict[str, Any]] = field(default_factory=list)
    institutions: list[dict[str, Any]] = field(default_factory=list)
    affiliations: list[dict[str, Any]] = field(default_factory=list)
    authorships: list[dict[str, Any]] = field(default_factory=list)
    """OpenAlex only: ``paper_authorships`` rows (every authorship's ids, with or without an institution)."""
    fetches: list[dict[str, Any]] = field(default_factory=list)
    """``arxiv_id, source, kind, found, n_rows``: the papers this answer is for."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    """``arxiv_id, source, kind, error``: asked, no answer; asked again next run."""
    work_ids: dict[str, str] = field(default_factory=dict)
    """OpenAlex only: each fetched paper's own work id -> its arXiv id (resolves OpenAlex's id-only references)."""
    requests: int = 0
    retries: int = 0
    """Sends of a request again, where the client counts them apart from ``requests`` (S2's)."""
    down: str | None = None
    """The one line of a ``ServiceUnavailable`` that ended the piece early."""
    cleaned: int = 0
    """Characters UTF-8 cannot hold (lone surrogates) replaced by U+FFFD in this piece's answers."""
    truncated: list[dict[str, Any]] = field(default_factory=list)
    """``source, of, kept, dropped``: each list cut at its cap (``s2.max_*``, ``openalex.max_*``)."""

    def fetched(self, arxiv_id: str, kind: str, found: bool, n_rows: int, paper_id: str | None = None) -> None:
        self.fetches.append({"arxiv_id": arxiv_id, "source": self.source, "kind": kind, "found": found, "n_rows": n_rows,
                             "source_paper_id": paper_id})

    def failed(self, arxiv_ids: Sequence[str], kind: str, exc: BaseException) -> None:
        line = " ".join(str(exc).split())[:300]
        self.failures += [{"arxiv_id": a, "source": self.source, "kind": kind, "error": line} for a in arxiv_ids]


@contextmanager
def _asking(out: Fetched, client: Any) -> Iterator[None]:
    """A piece's requests through one client: a service that stops answering ends the piece early
    (``out.down``) and what was fetched before stays in ``out``; the client is closed either way."""
    try:
        yield
    except ServiceUnavailable as exc:
        out.down = str(exc)
    finally:
        out.requests = client.requests_made
        out.retries = getattr(client, "retries", 0)
        out.cleaned += getattr(client, "cleaned", 0)
        out.truncated += [cut.row() for cut in getattr(client, "truncated", [])]
        client.close()


def s2_piece(settings: Settings, topics_for: list[str], references_for: list[str]) -> Fetched:
    """Fields of study (``paper_batch`` with ``GRAPH_PAPER_FIELDS``) of ``topics_for`` and the
    references (every page) of ``references_for``, from Semantic Scholar."""
    out = Fetched("s2")
    client = SemanticScholarClient(settings.s2, settings.http)
    unknown: set[str] = set()
    with _asking(out, client):
        for start in range(0, len(topics_for), settings.s2.batch_size):
            ids = topics_for[start:start + settings.s2.batch_size]
            try:
                answers = client.paper_batch(ids, GRAPH_PAPER_FIELDS)
            except (TransientError, PermanentError) as exc:
                out.failed(ids, "topics", exc)
                continue
            rows, misses = s2_graph.batch_topics(ids, answers)
            out.topics += rows
            missing = set(misses)
            unknown |= missing
            for aid, answer in zip(ids, answers, strict=True):
                pid = answer.get("paperId") if isinstance(answer, dict) else None
                out.fetched(aid, "topics", aid not in missing, sum(r["arxiv_id"] == aid for r in rows),
                            pid if isinstance(pid, str) else None)
        def ask(aid: str) -> tuple[str, list[Any] | BaseException]:
            try:
                return aid, client.references(f"ARXIV:{aid}")
            except (PermanentError, TransientError) as exc:
                return aid, exc

        # Several in flight (s2.connections) through the one client, whose pacer spaces them all;
        # taken back in the list's order, so the rows are the same however the answers interleave.
        # A service that stops answering ends the loop; the answers in by then are kept all the same.
        # A paper the batch just said S2 has no record of (its null) would answer 404: recorded so,
        # unasked (a day's new papers S2 has not taken in yet cost a request each otherwise).
        for aid in (a for a in references_for if a in unknown):
            out.fetched(aid, "references", False, 0)
        references_for = [a for a in references_for if a not in unknown]
        answers: dict[str, list[Any] | BaseException] = {}
        try:
            for aid, got in map_unordered(ask, references_for, settings.s2.connections):
                answers[aid] = got
        finally:
            for aid in (a for a in references_for if a in answers):
                got = answers[aid]
                if isinstance(got, PermanentError) and got.kind == "not_found":
                    out.fetched(aid, "references", False, 0)  # S2 does not know the paper: an answer, recorded as such
                elif isinstance(got, BaseException):
                    out.failed([aid], "references", got)
                else:
                    rows = s2_graph.reference_rows(aid, got)
                    out.citations += rows
                    out.fetched(aid, "references", True, len(rows))
    return out


def openalex_piece(settings: Settings, arxiv_ids: list[str], client: OpenAlexClient | None = None) -> Fetched:
    """Each paper's OpenAlex work (by arXiv's DOI): its references, topics and authorships'
    institutions; then each of its authors once, for their affiliations with years. Both are asked
    ``openalex.batch_size`` at a time through OpenAlex's list filters, not one request each.

    Authors are asked once per piece: pieces may run on other Dask workers, so what another piece
    asked is not known here (a person in two pieces is asked twice, in batches either way). A batch
    of authors that fails takes back the ``affiliations`` fetch record of the papers that named them,
    so the next run asks those papers (and so those people) again; ``client`` is for tests."""
    out = Fetched("openalex")
    client = client or OpenAlexClient(settings.openalex, settings.http)
    authors: dict[str, str] = {}  # OpenAlex author id -> the paper that named them
    size = settings.openalex.batch_size
    with _asking(out, client):
        for start in range(0, len(arxiv_ids), size):
            batch = arxiv_ids[start:start + size]
            try:
                works = client.works_by_dois([arxiv_doi(aid) for aid in batch])
            except (TransientError, PermanentError) as exc:
                out.failed(batch, "references", exc)
                continue
            for aid in batch:
                add_work(out, aid, works.get(arxiv_doi(aid)), authors)
        ids = list(authors)
        for start in range(0, len(ids), size):
            batch = ids[start:start + size]
            try:
                found = client.authors_by_ids(batch)
            except (TransientError, PermanentError) as exc:
                # The papers' own authorships are kept; without their fetch record of affiliations
                # the next run asks these papers again, and so these people's other places.
                line = " ".join(str(exc).split())[:250]
                out.failures += [{"arxiv_id": authors[a], "source": "openalex", "kind": "affiliations",
                                  "error": f"author {a}: {line}"} for a in batch]
                again = {authors[a] for a in batch}
                out.fetches = [f for f in out.fetches if not (f["kind"] == "affiliations" and f["arxiv_id"] in again)]
                continue
            for author_id in batch:
                if author_id not in found:
                    # As the one-by-one /authors/<id> answered: OpenAlex's 404 for a person it no longer has.
                    out.failures.append({"arxiv_id": authors[author_id], "source": "openalex", "kind": "affiliations",
                                         "error": f"author {author_id}: OpenAlex has no author {author_id}"})
                    continue
                insts, affs = openalex_graph.author_rows(found[author_id])
                out.institutions += insts
                out.affiliations += affs
    return out


def add_work(out: Fetched, aid: str, work: dict[str, Any] | None, authors: dict[str, str]) -> None:
    """One paper's answer into ``out``: its rows and fetch records, or "not in OpenAlex" for every kind."""
    if work is None:
        for kind in OPENALEX_KINDS:
            out.fetched(aid, kind, False, 0)
        return
    wid = openalex_graph.work_ids(work)["openalex_id"]
    if wid:
        out.work_ids[wid] = aid
    refs, topics = openalex_graph.citation_rows(aid, work), openalex_graph.topic_rows(aid, work)
    insts, affs = openalex_graph.authorship_rows(aid, work)
    out.citations += refs
    out.topics += topics
    out.institutions += insts
    out.affiliations += affs
    out.authorships += openalex_graph.person_rows(aid, work)
    out.fetched(aid, "references", True, len(refs), wid)
    out.fetched(aid, "topics", True, len(topics), wid)
    out.fetched(aid, "affiliations", True, len(affs), wid)
    for a in affs:
        authors.setdefault(a["person_key"].removeprefix("openalex:"), aid)


def citations_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """``citations`` rows as the table's frame (empty when none)."""
    return CITATIONS.conform(pl.DataFrame(rows, infer_schema_length=None)) if rows else CITATIONS.empty()


# What polars and the schema raise for rows that cannot be a frame (a string, a type, a value out of shape).
_UNSTORABLE = (UnicodeError, pl.exceptions.PolarsError, ValueError, TypeError)


def storable(got: Fetched) -> pl.DataFrame:
    """The piece's citations as the table's frame, every row of the piece made storable first: a
    string the client did not clean is cleaned here (counted in ``cleaned``). Should the rows still
    not make a frame, each paper's references are framed alone: a paper whose rows fail is rejected,
    named in ``failures`` (``unstorable: ...``) without its fetch record, so it is asked again; the
    others are kept."""
    for rows in (got.citations, got.topics, got.institutions, got.affiliations, got.authorships):
        got.cleaned += clean_rows(rows)
    try:
        return citations_frame(got.citations)
    except _UNSTORABLE:
        pass
    papers: dict[Any, list[dict[str, Any]]] = {}
    for row in got.citations:
        papers.setdefault(row.get("citing_arxiv_id"), []).append(row)
    frames: list[pl.DataFrame] = []
    rejected: set[Any] = set()
    for aid, rows in papers.items():
        try:
            frames.append(citations_frame(rows))
        except _UNSTORABLE as exc:
            rejected.add(aid)
            got.failures.append({"arxiv_id": aid, "source": got.source, "kind": "references",
                                 "error": "unstorable: " + " ".join(str(exc).split())[:280]})
    got.citations = [r for r in got.citations if r.get("citing_arxiv_id") not in rejected]
    got.fetches = [f for f in got.fetches if not (f["kind"] == "references" and f["arxiv_id"] in rejected)]
    return pl.concat(frames, how="vertical_relaxed") if frames else CITATIONS.empty()


def with_known_works(citations: pl.DataFrame, work_ids: dict[str, str]) -> pl.DataFrame:
    """OpenAlex references name only a work id: where that id is a warehouse paper's own work
    (``work_ids``: OpenAlex id -> arXiv id), its arXiv id is filled in, so the one rule resolves it."""
    if not work_ids or citations.is_empty():
        return citations
    known = pl.DataFrame({"cited_openalex_id": list(work_ids), "_arxiv": list(work_ids.values())},
                         schema={"cited_openalex_id": pl.Utf8, "_arxiv": pl.Utf8})
    return (citations.join(known, on="cited_openalex_id", how="left", maintain_order="left")
            .with_columns(pl.coalesce("cited_arxiv", "_arxiv").alias("cited_arxiv")).drop("_arxiv"))


def resolve_changed(citations: pl.DataFrame, papers: pl.DataFrame | PaperIndex, work_ids: dict[str, str] | None = None
                    ) -> tuple[pl.DataFrame, Resolution]:
    """Resolve ``citations`` against ``papers`` (``arxiv_id, doi, title, year``, or their index); returns the rows
    whose ``cited_arxiv_id`` or ``cited_arxiv`` changed (what needs writing back: a reference resolved
    before may resolve otherwise, or to no one, once a new paper shares its name) and the resolution."""
    before = with_known_works(citations, work_ids or {})
    res = resolve_citations(before, papers)
    changed = res.citations.filter(
        pl.col("cited_arxiv_id").ne_missing(citations["cited_arxiv_id"])
        | (pl.col("cited_arxiv").is_not_null() & citations["cited_arxiv"].is_null()))
    return changed, res


CITATION_KEY = ["citing_arxiv_id", "source", "ordinal"]


def needs_keys(pending: pl.DataFrame, resolved: pl.DataFrame, changed: pl.DataFrame) -> pl.DataFrame:
    """The re-resolved references whose ``match_keys`` must be recorded on their own: those never
    keyed (``match_keys`` null in ``pending``) whose resolution did not change. A changed one is
    written back whole with its keys; one keyed already keeps its keys; one never keyed is keyed
    now, so the next run looks at it only when a new paper can answer. ``resolved`` is
    ``resolve_changed``'s resolution of ``pending`` (its rows in ``pending``'s order) and
    ``changed`` the rows it returned; rows of ``resolved``."""
    return resolved.filter(pending["match_keys"].is_null()).join(changed.select(CITATION_KEY), on=CITATION_KEY,
                                                                  how="anti")


def match_rates(references: dict[str, pl.DataFrame], papers: pl.DataFrame | PaperIndex) -> list[dict[str, Any]]:
    """One row per source of how its ``references`` (``citations`` rows) resolve against ``papers``:
    counts by method (``doi``, ``arxiv``, ``title_year``, ``unresolved``) and the share resolved."""
    return [rate_row(source, resolve_citations(refs, papers).counts, refs.height)
            for source, refs in sorted(references.items()) if not refs.is_empty()]


def rate_row(source: str, counts: dict[str, int], references: int) -> dict[str, Any]:
    """:func:`match_rates`' row of ``source`` from its ``references``' counts by method."""
    resolved = references - counts["unresolved"]
    return {"source": source, **counts, "references": references, "resolved": resolved,
            "match_rate": round(resolved / references, 4)}
