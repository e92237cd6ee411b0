"""The ingest flow: crawl -> enrich -> fetch PDFs and extract -> reconcile -> load.

Each stage reads what is pending from the warehouse and commits as it goes, so a re-run over
the same window does no work, a killed run resumes where it stopped, and a widened window
costs only its new slices. The warehouse state is the cache: Prefect's own result caching is
off (``NO_CACHE``) because a stage must always look for new work.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import date
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.common import (
    StageProgress,
    StageResult,
    publish_markdown,
    publish_table,
    record_stage,
    recorded_run,
    stage_rows,
)
from revbench.clients.arxiv_api import ArxivClient
from revbench.clients.grobid import GrobidHeaderClient
from revbench.clients.pdf import PdfClient
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.retry import PermanentError, TransientError
from revbench.settings import Settings
from schemas.quality import DataQualityError, validate_frames
from schemas.tables import MENTIONS, PAPERS, REJECTS, S2_PAPERS
from tasks import crawl, documents, enrich, reconcile
from templates import render
from warehouse import Warehouse, utcnow

log = logging.getLogger("revbench.ingest")


@task(name="crawl", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def crawl_stage(since: date, until: date, categories: list[str], run_id: str) -> StageResult:
    """Crawl every open or not-yet-crawled slice; each closed slice is committed with its records."""
    settings = Settings()
    t0 = time.monotonic()
    client = ArxivClient(settings.arxiv, settings.http)
    now = utcnow()
    with Warehouse.open(settings.warehouse_path) as wh:
        done = wh.completed_slices()
    plan = [
        (cat, s, e)
        for cat in categories
        for s, e in crawl.plan_slices(since, until, settings.arxiv.slice_days)
        if (cat, s, e) not in done
    ]
    seen: set[str] = set()
    failed: list[str] = []
    progress = StageProgress("crawl-progress", f"crawl {len(plan)} slices", len(plan))
    with Warehouse.open(settings.warehouse_path) as wh:
        for cat, start, end in plan:
            try:
                records = crawl.fetch_slice(client, cat, start, end)
            except (TransientError, PermanentError, RuntimeError) as exc:
                # The slice stays uncrawled and is tried again next run; other slices go on.
                failed.append(f"{cat} {start:%Y-%m-%d}: {exc}")
                log.warning("crawl slice %s %s failed: %s", cat, start, exc)
                progress.advance()
                continue
            frame = crawl.records_frame(records, now)
            slice_row = (
                dict(category=cat, slice_start=start, slice_end=end, n_results=len(records), completed_at=now,
                     run_id=run_id)
                if crawl.is_closed(end, now)
                else None
            )
            wh.save_slice(frame, slice_row)
            seen.update(frame["arxiv_id"].to_list())
            progress.advance()
    progress.close()
    return StageResult(
        "crawl", rows_in=len(plan), rows_out=len(seen), seconds=time.monotonic() - t0,
        notes={"slices_planned": len(plan), "slices_skipped": len(done), "slices_failed": failed,
               "requests": client.requests_made},
    )


@task(name="enrich", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def enrich_stage(run_id: str) -> StageResult:
    """Attach S2 paper and author ids to papers not yet looked up."""
    settings = Settings()
    t0 = time.monotonic()
    with Warehouse.open(settings.warehouse_path) as wh:
        missing = wh.ids_missing_s2()
    client = SemanticScholarClient(settings.s2, settings.http)
    found = 0
    failed = 0
    progress = StageProgress("enrich-progress", f"S2 lookup of {len(missing)} papers", len(missing))
    try:
        for ids in enrich.batches(missing, settings.s2.batch_size):
            try:
                answers = client.paper_batch(ids)
            except (TransientError, PermanentError) as exc:
                # Left for the next run; enrichment is optional evidence, not a gate.
                failed += len(ids)
                log.warning("S2 batch of %d failed: %s", len(ids), exc)
                progress.advance(len(ids))
                continue
            frame = enrich.s2_frame(ids, answers, utcnow())
            with Warehouse.open(settings.warehouse_path) as wh:
                wh.upsert(S2_PAPERS, frame)
            found += int(frame["found"].sum())
            progress.advance(len(ids))
    finally:
        client.close()
        progress.close()
    return StageResult("enrich", rows_in=len(missing), rows_out=found, seconds=time.monotonic() - t0,
                       notes={"not_in_s2": len(missing) - found - failed, "failed": failed})


@task(name="extract", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def extract_stage(run_id: str) -> StageResult:
    """Download and extract every pending paper version, committing every ``commit_every``."""
    settings = Settings()
    t0 = time.monotonic()
    with Warehouse.open(settings.warehouse_path) as wh:
        pending = wh.pending_documents()
        attempts = wh.previous_attempts(pending)
    pdfs = PdfClient(settings.pdf, settings.http)
    grobid = GrobidHeaderClient(settings.grobid, settings.http)
    statuses: Counter[str] = Counter()
    progress = StageProgress("extract-progress", f"PDF + GROBID for {pending.height} papers", pending.height)
    try:
        for batch in documents.extract_all(
            pdfs, grobid, pending, settings.grobid.concurrency, settings.ingest.commit_every, utcnow, attempts
        ):
            with Warehouse.open(settings.warehouse_path) as wh:
                wh.save_documents(batch)
            statuses.update(batch["status"].to_list())
            progress.advance(batch.height)
    finally:
        pdfs.close()
        progress.close()
    return StageResult(
        "extract", rows_in=pending.height, rows_out=statuses.get("ok", 0),
        rejected=pending.height - statuses.get("ok", 0), seconds=time.monotonic() - t0,
        notes={"statuses": dict(statuses), "pdf_requests": pdfs.requests_made, "grobid_requests": grobid.requests_made},
    )


@task(name="reconcile-and-load", cache_policy=NO_CACHE)
def reconcile_stage(run_id: str) -> StageResult:
    """Apply the reconciliation rules to papers whose inputs changed, validate, load atomically."""
    settings = Settings()
    t0 = time.monotonic()
    with Warehouse.open(settings.warehouse_path) as wh:
        inputs = wh.reconcile_inputs()
        done = wh.loaded_input_hashes()
    result = reconcile.reconcile(inputs, settings.ingest, done, run_id, utcnow())
    if result.papers.height or result.mentions.height or result.rejects.height:
        report = validate_frames({PAPERS: result.papers, MENTIONS: result.mentions, REJECTS: result.rejects})
        if not report.success:
            publish_markdown("ingest-data-quality", report.to_markdown(), "Data quality checks that stopped the load")
            raise DataQualityError(report)
        with Warehouse.open(settings.warehouse_path) as wh:
            wh.load_corpus(result.papers, result.mentions, result.rejects)
    reasons = Counter(result.rejects["reason"].to_list())
    return StageResult(
        "reconcile", rows_in=inputs.height - result.skipped, rows_out=result.papers.height,
        rejected=result.rejects.height, seconds=time.monotonic() - t0,
        notes={"rejects_by_reason": dict(reasons), "mentions": result.mentions.height, "unchanged": result.skipped,
               "sample": result.papers.head(10).select("arxiv_id", "version", "title", "n_authors").to_dicts()},
    )


@flow(name="ingest", log_prints=True)
def ingest_flow(since: date, until: date, categories: list[str] | None = None, synthetic: bool = False) -> dict[str, Any]:
    """Crawl arXiv for ``since..until`` (last-revision dates, inclusive) and load the corpus."""
    settings = Settings()
    cats = categories or settings.arxiv.categories
    params = {"since": since.isoformat(), "until": until.isoformat(), "categories": cats, "synthetic": synthetic}
    with recorded_run(settings, "ingest", params) as run_id:
        results: list[StageResult] = []
        for stage in (crawl_stage, enrich_stage, extract_stage, reconcile_stage):
            res = stage(since, until, cats, run_id) if stage is crawl_stage else stage(run_id)
            record_stage(settings, run_id, res)
            results.append(res)
        with Warehouse.open(settings.warehouse_path) as wh:
            totals = {"papers": wh.count(PAPERS), "mentions": wh.count(MENTIONS), "rejects": wh.count(REJECTS)}
            all_rejects = {r["reason"]: r["n"] for r in wh.reject_counts().to_dicts()}
        rec = results[-1]
        publish_table("ingest-stages", stage_rows(results), "Rows in and out of each ingest stage")
        publish_table(
            "ingest-rejects",
            [{"reason": k, "this_run": rec.notes["rejects_by_reason"].get(k, 0), "in_warehouse": v} for k, v in all_rejects.items()],
            "Rejected papers by named reason",
        )
        summary_md, template_version = render(
            "reports/ingest_summary.md.j2", run_id=run_id, since=since, until=until, categories=cats,
            synthetic=synthetic, stages=results, run_rejects=rec.notes["rejects_by_reason"], totals=totals,
            sample=rec.notes["sample"],
        )
        publish_markdown("ingest-summary", summary_md, f"Ingest summary (template {template_version})")
        return {
            "run_id": run_id,
            "stages": stage_rows(results),
            "notes": {r.stage: {k: v for k, v in r.notes.items() if k != "sample"} for r in results},
            "rejects_this_run": rec.notes["rejects_by_reason"],
            "rejects_in_warehouse": all_rejects,
            "totals": totals,
            "warehouse": str(settings.warehouse_path.resolve()),
            "summary_markdown": summary_md,
        }
