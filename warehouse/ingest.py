"""Ingest: the arXiv crawl, S2 lookups, PDF extraction, and the reconciled corpus loaded from them.

Owns ``crawl_slices``, ``arxiv_records``, ``s2_papers``, ``documents``, ``papers``, ``mentions``
and ``rejects``; saves GROBID's reference lists through the graph's queries (``save_graph``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from revbench.schemas.tables import (
    ARXIV_RECORDS,
    CRAWL_SLICES,
    DOCUMENTS,
    MENTIONS,
    PAPERS,
    REJECTS,
    S2_PAPERS,
    TRANSIENT_DOCUMENT_STATUSES,
)
from revbench.warehouse.slice import Slice


class IngestSlice(Slice):
    """Crawl slices, pending documents, the reconcile inputs, and the corpus load (a document's
    references go to the graph's tables through ``wh.graph``, in the same transaction)."""

    stage = "ingest"

    def completed_slices(self) -> set[tuple[str, datetime, datetime]]:
        rows = self._exec("SELECT category, slice_start, slice_end FROM crawl_slices")
        return {(c, s, e) for c, s, e in rows}

    def save_slice(self, records: pl.DataFrame, slice_row: dict[str, Any] | None) -> None:
        """Store a crawled slice's records and, for a closed slice, mark it done, atomically."""
        with self.transaction():
            # A newer version replaces an older one; an older one never overwrites a newer.
            self.upsert(ARXIV_RECORDS, records, only_if="excluded.version >= arxiv_records.version")
            if slice_row is not None:
                self.upsert(CRAWL_SLICES, pl.DataFrame([slice_row]))

    def ids_missing_s2(self) -> list[str]:
        rows = self._exec(
            "SELECT r.arxiv_id FROM arxiv_records r ANTI JOIN s2_papers s USING (arxiv_id) ORDER BY r.arxiv_id"
        )
        return [r[0] for r in rows]

    def pending_documents(self) -> pl.DataFrame:
        """Latest versions with no final extraction outcome yet."""
        transient = ", ".join(f"'{s}'" for s in TRANSIENT_DOCUMENT_STATUSES)
        return self._frame(
            f"""SELECT r.arxiv_id, r.version FROM arxiv_records r
                LEFT JOIN documents d ON d.arxiv_id = r.arxiv_id AND d.version = r.version
                WHERE d.arxiv_id IS NULL OR d.status IN ({transient})
                ORDER BY r.arxiv_id"""
        )

    def previous_attempts(self, keys: pl.DataFrame) -> dict[tuple[str, int], int]:
        if keys.height == 0:
            return {}
        self.con.register("_k", keys.select("arxiv_id", "version").to_arrow())
        rows = self._exec(
            "SELECT d.arxiv_id, d.version, d.attempts FROM documents d JOIN _k USING (arxiv_id, version)"
        )
        self.con.unregister("_k")
        return {(a, v): n for a, v, n in rows}

    def save_documents(self, docs: pl.DataFrame, references: tuple[pl.DataFrame, pl.DataFrame] | None = None,
                       run_id: str | None = None) -> None:
        """Store extracted documents and, when GROBID's full text was read, their reference lists
        (``citations`` of source grobid, one ``graph_fetches`` row per paper) in one transaction: a
        crash keeps both or neither, and a document read again replaces its paper's earlier list."""
        with self.transaction():
            self.upsert(DOCUMENTS, docs)
            if references is not None:
                citations, fetches = references
                self.wh.graph.save_graph(citations=citations, fetches=fetches.with_columns(run_id=pl.lit(run_id, pl.Utf8)))

    def reconcile_keys(self) -> pl.DataFrame:
        """What each reconcile input's verdict depends on (``arxiv_id, record_hash, doc_status,
        pdf_sha256, tei_sha256, s2_hash``), for every paper :meth:`reconcile_inputs` would return:
        a few short columns, so that only the papers whose inputs changed are read whole."""
        transient = ", ".join(f"'{s}'" for s in TRANSIENT_DOCUMENT_STATUSES)
        return self._frame(
            f"""SELECT r.arxiv_id, r.record_hash, d.status AS doc_status, d.pdf_sha256, d.tei_sha256,
                      s.record_hash AS s2_hash
               FROM arxiv_records r
               JOIN documents d ON d.arxiv_id = r.arxiv_id AND d.version = r.version
               LEFT JOIN s2_papers s ON s.arxiv_id = r.arxiv_id
               WHERE d.status NOT IN ({transient})
               ORDER BY r.arxiv_id"""
        )

    def reconcile_inputs(self, ids: list[str] | None = None) -> pl.DataFrame:
        """Each paper's latest arXiv record with its extraction and S2 lookup (documents never
        attempted, or whose service could not be reached, are left out: pending, not rejected);
        only the papers ``ids`` when given."""
        transient = ", ".join(f"'{s}'" for s in TRANSIENT_DOCUMENT_STATUSES)
        only = ""
        if ids is not None:
            self.con.register("_ids", pl.DataFrame({"arxiv_id": ids}, schema={"arxiv_id": pl.Utf8}).to_arrow())
            only = "AND r.arxiv_id IN (SELECT arxiv_id FROM _ids)"
        df = self._frame(
            f"""SELECT r.arxiv_id, r.version, r.title, r.abstract, r.authors, r.primary_category,
                      r.categories, r.published, r.updated, r.record_hash,
                      r.journal_ref, r.doi, r.author_affiliations,
                      d.status AS doc_status, d.detail AS doc_detail, d.pdf_sha256, d.tei_sha256,
                      d.pdf_title, d.pdf_abstract, d.pdf_authors, d.pdf_orphan_affiliations,
                      s.found AS s2_found, s.s2_paper_id, s.authors AS s2_authors,
                      s.record_hash AS s2_hash
               FROM arxiv_records r
               JOIN documents d ON d.arxiv_id = r.arxiv_id AND d.version = r.version
               LEFT JOIN s2_papers s ON s.arxiv_id = r.arxiv_id
               WHERE d.status NOT IN ({transient}) {only}
               ORDER BY r.arxiv_id"""
        )
        if ids is not None:
            self.con.unregister("_ids")
        return df

    def loaded_input_hashes(self) -> set[str]:
        rows = self._exec(
            "SELECT input_hash FROM papers UNION ALL SELECT input_hash FROM rejects"
        )
        return {r[0] for r in rows}

    def load_corpus(self, papers: pl.DataFrame, mentions: pl.DataFrame, rejects: pl.DataFrame) -> None:
        """Write accepted papers with their mentions and rejected papers with their reasons, in
        one transaction; a paper's mentions are replaced whole, and a rejected later version
        removes the paper from the corpus."""
        accepted = papers["arxiv_id"].to_list() if papers.height else []
        rejected = rejects["arxiv_id"].to_list() if rejects.height else []
        with self.transaction():
            self.delete_where_in(MENTIONS, "arxiv_id", accepted + rejected)
            self.delete_where_in(PAPERS, "arxiv_id", rejected)
            self.delete_where_in(REJECTS, "arxiv_id", accepted)
            self.upsert(PAPERS, papers)
            self.upsert(MENTIONS, mentions)
            self.upsert(REJECTS, rejects)

    def corpus_papers(self) -> pl.DataFrame:
        """The loaded corpus: ``arxiv_id, title, abstract, year, primary_category``."""
        return self._frame("SELECT arxiv_id, title, abstract, year, primary_category FROM papers ORDER BY arxiv_id")

    def rejected_papers(self, run_id: str) -> pl.DataFrame:
        """Papers a run rejected: ``arxiv_id, version, title, reason, detail``."""
        return self._frame(
            """SELECT j.arxiv_id, j.version, r.title, j.reason, left(j.detail, 200) AS detail
               FROM rejects j LEFT JOIN arxiv_records r USING (arxiv_id)
               WHERE j.run_id = ? ORDER BY j.reason, j.arxiv_id""", [run_id])

    def reject_counts(self) -> pl.DataFrame:
        return self._frame(
            "SELECT reason, count(*) AS n FROM rejects GROUP BY reason ORDER BY n DESC, reason"
        )

    def snapshot(self) -> dict[str, pl.DataFrame]:
        """Every corpus table without run bookkeeping or timestamps, for comparing runs."""
        out: dict[str, pl.DataFrame] = {}
        volatile = {"run_id", "crawled_at", "fetched_at", "extracted_at", "loaded_at", "recorded_at", "completed_at", "attempts", "detail"}
        for table in (ARXIV_RECORDS, S2_PAPERS, DOCUMENTS, PAPERS, MENTIONS, REJECTS):
            df = self.read(table)
            out[table.name] = df.drop([c for c in df.columns if c in volatile])
        return out
