"""Download each paper version's PDF and extract its header with GROBID; with ``grobid.fulltext`` on,
the same one request per PDF (the full text) also gives the paper's reference list."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import polars as pl

from revbench.clients.grobid import GrobidHeaderClient
from revbench.clients.pdf import PdfClient
from revbench.errors import ServiceUnavailable
from revbench.retry import PermanentError, TransientError
from revbench.schemas.graph import CITATIONS, GRAPH_FETCHES
from revbench.schemas.tables import DOCUMENTS
from revbench.settings import Settings
from revbench.workers import map_unordered

_PDF_FINAL = {"pdf_unavailable", "pdf_not_pdf", "pdf_too_large", "pdf_truncated"}


def extract_one(pdfs: PdfClient, grobid: GrobidHeaderClient, arxiv_id: str, version: int, now: Callable[[], datetime]) -> dict[str, Any]:
    """The ``documents`` row for one version; every failure of this document becomes a status,
    never an exception. A service that stopped answering (``ServiceUnavailable``) is not this
    document's failure: it propagates and stops the stage. With full text on, an ``ok`` row also
    holds ``references``: its reference list as ``citations`` rows (source grobid, unresolved)."""
    row: dict[str, Any] = {"arxiv_id": arxiv_id, "version": version, "attempts": 1}
    try:
        pdf = pdfs.fetch(arxiv_id, version)
    except (PermanentError, TransientError) as exc:
        kind = exc.kind if exc.kind in _PDF_FINAL else None
        if kind is None:
            kind = "pdf_unavailable" if isinstance(exc, PermanentError) else "fetch_failed"
        return {**row, "status": kind, "detail": str(exc)[:500], "extracted_at": now()}
    except ServiceUnavailable:
        raise
    except Exception as exc:  # a client bug must not stop the other documents
        return {**row, "status": "fetch_failed", "detail": f"{type(exc).__name__}: {exc}"[:500], "extracted_at": now()}
    row.update(pdf_sha256=hashlib.sha256(pdf).hexdigest(), pdf_bytes=len(pdf))
    try:
        header, references, tei = grobid.document(pdf, name=f"{arxiv_id}v{version}.pdf")
    except TransientError as exc:
        status = "grobid_invalid_tei" if exc.kind == "grobid_invalid_tei" else "fetch_failed"
        return {**row, "status": status, "detail": str(exc)[:500], "extracted_at": now()}
    except PermanentError as exc:
        return {**row, "status": "grobid_failed", "detail": str(exc)[:500], "extracted_at": now()}
    except ServiceUnavailable:
        raise
    except Exception as exc:
        return {**row, "status": "fetch_failed", "detail": f"{type(exc).__name__}: {exc}"[:500], "extracted_at": now()}
    row.update(
        status="ok",
        tei_sha256=hashlib.sha256(tei.encode("utf-8", "surrogatepass")).hexdigest(),
        pdf_title=header.title,
        pdf_abstract=header.abstract,
        pdf_authors=[a.as_row() for a in header.authors],
        pdf_orphan_affiliations=[asdict(x) for x in header.orphan_affiliations],
        pdf_dropped_authors=sorted(header.dropped_authors.elements()),
        extracted_at=now(),
    )
    if references is not None:
        row["references"] = [r.as_citation(arxiv_id) for r in references]
    return row


def extract_all(
    pdfs: PdfClient,
    grobid: GrobidHeaderClient,
    keys: pl.DataFrame,
    concurrency: int,
    batch_size: int,
    now: Callable[[], datetime],
    attempts_before: dict[tuple[str, int], int] | None = None,
) -> Iterator[tuple[pl.DataFrame, dict[str, list[dict[str, Any]]]]]:
    """Extract every (arxiv_id, version) in ``keys`` with bounded concurrency, yielding batches
    of ``documents`` rows as they complete, each with the reference lists read with them (arXiv id
    -> ``citations`` rows; empty with full text off), so the caller can commit as it goes. When a
    service stops answering, the finished rows are yielded before ``ServiceUnavailable`` is raised."""
    attempts_before = attempts_before or {}
    todo = list(keys.select("arxiv_id", "version").iter_rows())
    batch: list[dict[str, Any]] = []
    refs: dict[str, list[dict[str, Any]]] = {}
    results = map_unordered(lambda k: extract_one(pdfs, grobid, k[0], k[1], now), todo, concurrency)
    while True:
        try:
            row = next(results)
        except StopIteration:
            break
        except ServiceUnavailable:
            if batch:
                yield documents_frame(batch), refs
            raise
        row["attempts"] = attempts_before.get((row["arxiv_id"], row["version"]), 0) + 1
        if "references" in row:
            refs[row["arxiv_id"]] = row.pop("references")
        batch.append(row)
        if len(batch) >= batch_size:
            yield documents_frame(batch), refs
            batch, refs = [], {}
    if batch:
        yield documents_frame(batch), refs


def documents_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = DOCUMENTS.polars_schema
    nested = {c: schema[c] for c in ("pdf_authors", "pdf_orphan_affiliations", "pdf_dropped_authors")}
    return DOCUMENTS.conform(pl.DataFrame(rows, schema_overrides=nested, infer_schema_length=None))


def _utcnow() -> datetime:
    return datetime.now(UTC)


def references_frames(read: dict[str, list[dict[str, Any]]]) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The reference lists read from PDFs (arXiv id -> ``citations`` rows) as the ``citations``
    frame and one ``graph_fetches`` row per paper (source grobid, without run id or time: a paper
    that cites nothing has its row too, so its list is known to be empty); None when none was read."""
    if not read:
        return None
    rows = [r for refs in read.values() for r in refs]
    citations = CITATIONS.conform(pl.DataFrame(rows, infer_schema_length=None)) if rows else CITATIONS.empty()
    fetches = pl.DataFrame({"arxiv_id": list(read), "source": "grobid", "kind": "references", "found": True,
                            "n_rows": [len(refs) for refs in read.values()]},
                           schema={c: GRAPH_FETCHES.polars_schema[c] for c in ("arxiv_id", "source", "kind", "found", "n_rows")})
    return citations, fetches


def extract_piece(settings: Settings, keys: pl.DataFrame, attempts_before: dict[tuple[str, int], int]
                  ) -> tuple[pl.DataFrame, tuple[pl.DataFrame, pl.DataFrame] | None, ServiceUnavailable | None, dict[str, int]]:
    """One piece of the extract stage, runnable in another process: its own clients, every
    document of ``keys`` extracted, the reference lists read with them (``references_frames``;
    None with full text off), the error that stopped it when a service stopped answering (the
    rows finished before it are returned all the same, to be saved), and the requests it made
    of each service."""
    pdfs = PdfClient(settings.pdf, settings.http)
    grobid = GrobidHeaderClient(settings.grobid, settings.http)
    frames: list[pl.DataFrame] = []
    read: dict[str, list[dict[str, Any]]] = {}
    error: ServiceUnavailable | None = None
    try:
        for batch, refs in extract_all(pdfs, grobid, keys, settings.grobid.concurrency, max(keys.height, 1), _utcnow,
                                       attempts_before):
            frames.append(batch)
            read.update(refs)
    except ServiceUnavailable as exc:
        error = exc
    finally:
        pdfs.close()
    requests = {"pdf_requests": pdfs.requests_made, "grobid_requests": grobid.requests_made}
    return (pl.concat(frames) if frames else DOCUMENTS.empty()), references_frames(read), error, requests
