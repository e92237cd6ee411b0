"""Reconciliation: the LR-bench recipe for deciding which crawled papers enter the corpus.

A paper is dropped, with a named reason, when its PDF could not be fetched or read, when its
title, abstract or authors are missing, when its text is corrupted, or when the PDF title
deviates from the arXiv title beyond a threshold. Kept papers get one mention per arXiv
author, carrying the email and affiliation of the PDF author aligned to it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from revbench.clients.tei import normalize_orcid
from revbench.schemas.tables import MENTIONS, PAPERS, REJECTS
from revbench.settings import IngestSettings
from revbench.tasks.align import align
from revbench.tasks.text import corruption, title_similarity

RULES_VERSION = "1"
RULE_FIELDS = {"title_similarity_threshold", "author_match_threshold", "min_abstract_chars"}
"""Settings that change verdicts (batching settings do not)."""
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
"""Bump when a rule changes so that every paper is reconciled again."""


@dataclass
class Reconciled:
    """What reconciliation decided for a batch of papers."""

    papers: pl.DataFrame
    mentions: pl.DataFrame
    rejects: pl.DataFrame
    skipped: int


def input_hash(row: dict[str, Any], rules: IngestSettings) -> str:
    """Everything a paper's verdict depends on; an unchanged hash means nothing to redo."""
    parts = [
        row["record_hash"], row["doc_status"], row.get("pdf_sha256") or "", row.get("tei_sha256") or "",
        row.get("s2_hash") or "", RULES_VERSION, rules.model_dump_json(include=RULE_FIELDS),
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def unreconciled(keys: pl.DataFrame, rules: IngestSettings, done_hashes: set[str]) -> list[str]:
    """The papers of ``keys`` (the columns :func:`input_hash` reads, with ``arxiv_id``) whose
    input hash is not in ``done_hashes``: the only ones :func:`reconcile` has to read whole."""
    return [row["arxiv_id"] for row in keys.iter_rows(named=True) if input_hash(row, rules) not in done_hashes]


def clean_email(raw: str | None) -> str | None:
    """A usable address or None; GROBID sometimes glues punctuation or several addresses."""
    if not raw:
        return None
    email = raw.strip().strip(".,;<>()").lower()
    return email if _EMAIL.match(email) else None


def clean_emails(author: dict[str, Any]) -> list[str]:
    """Every usable address of one PDF author, in order, each once (documents extracted before
    every address was kept have ``emails`` null: their one ``email`` stands in)."""
    raw = author.get("emails")
    out: list[str] = []
    for e in raw if raw is not None else [author.get("email")]:
        if (email := clean_email(e)) and email not in out:
            out.append(email)
    return out


def _verdict(row: dict[str, Any], rules: IngestSettings) -> tuple[str | None, str | None, float]:
    if row["doc_status"] != "ok":
        return row["doc_status"], row.get("doc_detail"), 0.0
    if not row["title"] or not row["pdf_title"]:
        return "missing_title", "no title in " + ("arXiv" if not row["title"] else "the PDF"), 0.0
    abstract = row.get("pdf_abstract") or ""
    if not row["abstract"] or len(abstract) < rules.min_abstract_chars:
        return "missing_abstract", f"PDF abstract has {len(abstract)} characters", 0.0
    pdf_authors = row.get("pdf_authors") or []
    if not row["authors"] or not pdf_authors:
        return "missing_authors", "no authors in " + ("arXiv" if not row["authors"] else "the PDF"), 0.0
    names = [" ".join(p for p in (a["forename"], a["surname"]) if p) for a in pdf_authors]
    for label, text in [("title", row["title"]), ("abstract", row["abstract"]), ("PDF title", row["pdf_title"]),
                        ("PDF abstract", abstract), *[("author", n) for n in row["authors"] + names]]:
        why = corruption(text)
        if why:
            return "corrupted_text", f"{label}: {why}", 0.0
    sim = title_similarity(row["title"], row["pdf_title"])
    if sim < rules.title_similarity_threshold:
        return "title_mismatch", f"similarity {sim:.2f} < {rules.title_similarity_threshold}", sim
    return None, None, sim


def _arxiv_affiliations(row: dict[str, Any], pos: int) -> list[str]:
    # Records crawled before arXiv affiliations were kept have none (null).
    per_author = row.get("author_affiliations") or []
    return list(per_author[pos] or []) if pos < len(per_author) else []


def reconcile(inputs: pl.DataFrame, rules: IngestSettings, done_hashes: set[str], run_id: str, now: datetime) -> Reconciled:
    """Decide every input row whose input hash is not in ``done_hashes``."""
    papers: list[dict[str, Any]] = []
    mentions: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    skipped = 0
    for row in inputs.iter_rows(named=True):
        h = input_hash(row, rules)
        if h in done_hashes:
            skipped += 1
            continue
        reason, detail, sim = _verdict(row, rules)
        if reason:
            stage = "extract" if row["doc_status"] != "ok" else "reconcile"
            rejects.append(dict(arxiv_id=row["arxiv_id"], version=row["version"], stage=stage, reason=reason,
                                detail=(detail or "")[:500], input_hash=h, run_id=run_id, recorded_at=now))
            continue
        pdf_authors = row["pdf_authors"]
        pdf_names = [" ".join(p for p in (a["forename"], a["surname"]) if p) for a in pdf_authors]
        to_pdf = align(row["authors"], pdf_names, rules.author_match_threshold)
        s2_authors = row.get("s2_authors") or []
        to_s2 = align(row["authors"], [a["name"] or "" for a in s2_authors], rules.author_match_threshold)
        for pos, name in enumerate(row["authors"]):
            m: dict[str, Any] = dict(arxiv_id=row["arxiv_id"], position=pos, name=name,
                                     arxiv_affiliations=_arxiv_affiliations(row, pos))
            if pos in to_pdf:
                j, score = to_pdf[pos]
                a = pdf_authors[j]
                emails = clean_emails(a)
                m.update(pdf_name=pdf_names[j], email=emails[0] if emails else None, emails=emails,
                         affiliation=a["affiliation"],
                         department=a["department"], institution=a["institution"], pdf_match_score=round(score, 4),
                         affiliations=a.get("affiliations") or [], orcid=normalize_orcid(a.get("orcid")))
            if pos in to_s2:
                m["s2_author_id"] = s2_authors[to_s2[pos][0]]["author_id"]
            mentions.append(m)
        when = row["published"] or row["updated"]
        papers.append(dict(
            arxiv_id=row["arxiv_id"], version=row["version"], title=row["title"], abstract=row["abstract"],
            primary_category=row["primary_category"], categories=row["categories"], published=row["published"],
            updated=row["updated"], year=when.year, s2_paper_id=row.get("s2_paper_id"),
            pdf_sha256=row["pdf_sha256"], pdf_title=row["pdf_title"], title_similarity=round(sim, 4),
            n_authors=len(row["authors"]), input_hash=h, run_id=run_id, loaded_at=now,
            journal_ref=row.get("journal_ref"), doi=row.get("doi"),
            orphan_affiliations=row.get("pdf_orphan_affiliations") or [],
        ))
    return Reconciled(
        papers=PAPERS.conform(pl.DataFrame(papers, schema=PAPERS.polars_schema)) if papers else PAPERS.empty(),
        mentions=MENTIONS.conform(pl.DataFrame(mentions, infer_schema_length=None)) if mentions else MENTIONS.empty(),
        rejects=REJECTS.conform(pl.DataFrame(rejects, infer_schema_length=None)) if rejects else REJECTS.empty(),
        skipped=skipped,
    )
