"""Download each paper version's PDF and extract its header with GROBID."""

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
from revbench.schemas.tables import DOCUMENTS
from revbench.settings import Settings
from revbench.workers import map_unordered

_PDF_FINAL = {"pdf_unavailable", "pdf_not_pdf", "pdf_too_large", "pdf_truncated"}


def extract_one(pdfs: PdfClient, grobid: GrobidHeaderClient, arxiv_id: str, version: int, now: Callable[[], datetime]) -> dict[str, Any]:
    """The ``documents`` row for one version; every failure of this document becomes a status,
    never an exception. A service that stopped answering (``ServiceUnavailable``) is not this
    document's failure: it propagates and stops the stage."""
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
        header, tei = grobid.header(pdf, name=f"{arxiv_id}v{version}.pdf")
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
    return row


def extract_all(
    pdfs: PdfClient,
    grobid: GrobidHeaderClient,
    keys: pl.DataFrame,
    concurrency: int,
    batch_size: int,
    now: Callable[[], datetime],
    attempts_before: dict[tuple[str, int], int] | None = None,
) -> Iterator[pl.DataFrame]:
    """Extract every (arxiv_id, version) in ``keys`` with bounded concurrency, yielding batches
    of ``documents`` rows as they complete, so the caller can commit as it goes. When a service
    stops answering, the finished rows are yielded before ``ServiceUnavailable`` is raised."""
    attempts_before = attempts_before or {}
    todo = list(keys.select("arxiv_id", "version").iter_rows())
    batch: list[dict[str, Any]] = []
    results = map_unordered(lambda k: extract_one(pdfs, grobid, k[0], k[1], now), todo, concurrency)
    while True:
        try:
            row = next(results)
        except StopIteration:
            break
        except ServiceUnavailable:
            if batch:
                yield documents_frame(batch)
            raise
        row["attempts"] = attempts_before.get((row["arxiv_id"], row["version"]), 0) + 1
        batch.append(row)
        if len(batch) >= batch_size:
            yield documents_frame(batch)
            batch = []
    if batch:
        yield documents_frame(batch)


def documents_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = DOCUMENTS.polars_schema
    nested = {c: schema[c] for c in ("pdf_authors", "pdf_orphan_affiliations", "pdf_dropped_authors")}
    return DOCUMENTS.conform(pl.DataFrame(rows, schema_overrides=nested, infer_schema_length=None))


def _utcnow() -> datetime:
    return datetime.now(UTC)


def extract_piece(settings: Settings, keys: pl.DataFrame,
                  attempts_before: dict[tuple[str, int], int]) -> tuple[pl.DataFrame, ServiceUnavailable | None, dict[str, int]]:
    """One piece of the extract stage, runnable in another process: its own clients, every
    document of ``keys`` extracted, and the error that stopped it when a service stopped
    answering (the rows finished before it are returned all the same, to be saved), and the
    requests it made of each service."""
    pdfs = PdfClient(settings.pdf, settings.http)
    grobid = GrobidHeaderClient(settings.grobid, settings.http)
    frames: list[pl.DataFrame] = []
    error: ServiceUnavailable | None = None
    try:
        for batch in extract_all(pdfs, grobid, keys, settings.grobid.concurrency, max(keys.height, 1), _utcnow,
                                 attempts_before):
            frames.append(batch)
    except ServiceUnavailable as exc:
        error = exc
    finally:
        pdfs.close()
    requests = {"pdf_requests": pdfs.requests_made, "grobid_requests": grobid.requests_made}
    return (pl.concat(frames) if frames else DOCUMENTS.empty()), error, requests
