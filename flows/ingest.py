"""The ingest flow: crawl -> enrich -> fetch PDFs and extract -> reconcile -> load.

Each stage reads what is pending from the warehouse and commits as it goes, so a re-run over
the same window does no work, a killed run resumes where it stopped, and a widened window
costs only its new slices. The warehouse state is the cache.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import date
from typing import Any

from revbench.clients.arxiv_api import ArxivClient
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.errors import ServiceUnavailable
from revbench.flows.common import (
    Run,
    StageResult,
    flow_run,
    publish_markdown,
    publish_table,
    revbench_flow,
    stage,
    stage_rows,
    stage_task,
)
from revbench.flows.pieces import map_pieces
from revbench.flows.results import FlowResult
from revbench.retry import PermanentError, TransientError
from revbench.schemas.quality import DataQualityError, validate_frames
from revbench.schemas.tables import MENTIONS, PAPERS, REJECTS, S2_PAPERS
from revbench.settings import Settings
from revbench.tasks import crawl, documents, enrich, reconcile
from revbench.templates import render
from revbench.warehouse import utcnow

log = logging.getLogger("revbench.ingest")


@dataclass(frozen=True)
class IngestResult(FlowResult):
    """What an ingest did: rows in and out of each stage with its notes, rejects by reason (this
    run's and the warehouse's), the papers it rejected, the warehouse totals, and the summary."""

    run_id: str
    stages: list[dict[str, Any]]
    notes: dict[str, dict[str, Any]]
    rejects_this_run: dict[str, int]
    rejects_in_warehouse: dict[str, int]
    rejected_papers: list[dict[str, Any]]
    totals: dict[str, int]
    warehouse: str
    summary_markdown: str


@stage_task("crawl")
def crawl_stage(run: Run, since: date, until: date, categories: list[str]) -> StageResult:
    """Crawl every open or not-yet-crawled slice; each closed slice is committed with its records."""
    with stage(run, "crawl") as st:
        settings = st.settings
        client = ArxivClient(settings.arxiv, settings.http)
        now = utcnow()
        done = st.wh.ingest.completed_slices()
        plan = [
            (cat, s, e)
            for cat in categories
            for s, e in crawl.plan_slices(since, until, settings.arxiv.slice_days)
            if (cat, s, e) not in done
        ]
        seen: set[str] = set()
        failed: list[str] = []
        if plan:
            run.require("arxiv")
        with st.progress(len(plan), f"crawl {len(plan)} slices") as progress:
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
                         run_id=run.run_id)
                    if crawl.is_closed(end, now)
                    else None
                )
                st.wh.ingest.save_slice(frame, slice_row)
                seen.update(frame["arxiv_id"].to_list())
                progress.advance()
        st.result.rows_in, st.result.rows_out = len(plan), len(seen)
        st.result.notes = {"slices_planned": len(plan), "slices_skipped": len(done), "slices_failed": failed,
                           "requests": client.requests_made}
    return st.result


@stage_task("enrich")
def enrich_stage(run: Run) -> StageResult:
    """Attach S2 paper and author ids to papers not yet looked up."""
    with stage(run, "enrich") as st:
        missing = st.wh.ingest.ids_missing_s2()
        if missing:
            run.require("s2")
        client = SemanticScholarClient(st.settings.s2, st.settings.http)
        found = failed = 0
        try:
            with st.progress(len(missing), f"S2 lookup of {len(missing)} papers") as progress:
                for ids in enrich.batches(missing, st.settings.s2.batch_size):
                    try:
                        answers = client.paper_batch(ids)
                    except (TransientError, PermanentError) as exc:
                        # Left for the next run; enrichment is optional evidence, not a gate.
                        failed += len(ids)
                        log.warning("S2 batch of %d failed: %s", len(ids), exc)
                        progress.advance(len(ids))
                        continue
                    frame = enrich.s2_frame(ids, answers, utcnow())
                    st.wh.ingest.upsert(S2_PAPERS, frame)
                    found += int(frame["found"].sum())
                    progress.advance(len(ids))
        finally:
            client.close()
        st.result.rows_in, st.result.rows_out = len(missing), found
        # A throttled run is a slowed run, not a failed one: the notes say how much it slowed.
        st.result.notes = {"not_in_s2": len(missing) - found - failed, "failed": failed,
                           "throttled": client.throttled, "slowest_pause_seconds": round(client.pacer.slowest, 2),
                           # Lone surrogates replaced by U+FFFD, and author lists cut at s2.max_authors_per_paper.
                           "text_cleaned": client.cleaned, "truncated": [cut.row() for cut in client.truncated]}
    return st.result


def extract_stage(run: Run) -> StageResult:
    """Download and extract every pending paper version in pieces of ``commit_every`` (Prefect
    tasks on the run's task runner, threads or Dask, when tracked), saving each piece as it
    completes; a service that stops answering stops the stage after the finished pieces are saved."""
    with stage(run, "extract") as st:
        settings = st.settings
        pending = st.wh.ingest.pending_documents()
        attempts = st.wh.ingest.previous_attempts(pending)
        if pending.height:
            run.require("pdf", "grobid")
        size = settings.ingest.commit_every
        pieces = [(settings, pending.slice(i, size), attempts) for i in range(0, pending.height, size)]
        statuses: Counter[str] = Counter()
        dropped: Counter[str] = Counter()  # nameless GROBID authors left out, by reason
        errors: list[ServiceUnavailable] = []
        requests: Counter[str] = Counter({"pdf_requests": 0, "grobid_requests": 0})
        read = 0  # papers whose reference list GROBID's full text gave
        with st.progress(pending.height, f"PDF + GROBID for {pending.height} papers") as progress:
            for frame, references, error, made in map_pieces(documents.extract_piece, pieces, "extract-documents",
                                                             "grobid", in_flight=settings.limits.grobid):
                requests.update(made)
                if frame.height:
                    # The reference lists read from these PDFs are saved with them, in one transaction.
                    st.wh.ingest.save_documents(frame, references, run.run_id)
                    read += references[1].height if references else 0
                    statuses.update(frame["status"].to_list())
                    dropped.update(r for rs in frame["pdf_dropped_authors"].drop_nulls().to_list() for r in rs)
                    progress.advance(frame.height)
                if error:
                    errors.append(error)
                    break  # the service is down: further pieces would only wait for it
        ok = statuses.get("ok", 0)
        st.result.rows_in, st.result.rows_out, st.result.rejected = pending.height, ok, pending.height - ok
        st.result.notes = {"statuses": dict(statuses), "pieces": len(pieces), "dropped_authors": dict(dropped), **requests}
        if settings.grobid.fulltext:
            st.result.notes["reference_lists"] = read
    if errors:
        raise errors[0]
    return st.result


@stage_task("reconcile-and-load")
def reconcile_stage(run: Run) -> StageResult:
    """Apply the reconciliation rules to papers whose inputs changed, validate, load atomically."""
    with stage(run, "reconcile") as st:
        done = st.wh.ingest.loaded_input_hashes()
        keys = st.wh.ingest.reconcile_keys()
        # Whole rows (titles, abstracts, author lists) only for the papers whose inputs changed.
        todo = reconcile.unreconciled(keys, st.settings.ingest, done)
        inputs = st.wh.ingest.reconcile_inputs(todo)
        result = reconcile.reconcile(inputs, st.settings.ingest, done, run.run_id, utcnow())
        skipped = keys.height - inputs.height + result.skipped
        if result.papers.height or result.mentions.height or result.rejects.height:
            report = validate_frames({PAPERS: result.papers, MENTIONS: result.mentions, REJECTS: result.rejects})
            if not report.success:
                publish_markdown("ingest-data-quality", report.to_markdown(), "Data quality checks that stopped the load")
                raise DataQualityError(report)
            st.wh.ingest.load_corpus(result.papers, result.mentions, result.rejects)
        st.result.rows_in = keys.height - skipped
        st.result.rows_out, st.result.rejected = result.papers.height, result.rejects.height
        st.result.notes = {
            "rejects_by_reason": dict(Counter(result.rejects["reason"].to_list())), "mentions": result.mentions.height,
            "unchanged": skipped,
            "sample": result.papers.head(10).select("arxiv_id", "version", "title", "n_authors").to_dicts(),
        }
    return st.result


@revbench_flow("ingest")
def ingest_flow(settings: Settings, since: date, until: date, categories: list[str] | None = None,
                synthetic: bool = False, derived_from: str | None = None) -> IngestResult:
    """Crawl arXiv for ``since..until`` (last-revision dates, inclusive) and load the corpus;
    ``derived_from`` names the published benchmark a rebuilt world came from (its releases cite it)."""
    cats = categories or settings.arxiv.categories
    params = {"since": since.isoformat(), "until": until.isoformat(), "categories": cats, "synthetic": synthetic,
              **({"derived_from": derived_from} if derived_from else {})}
    with flow_run(settings, "ingest", params) as run:
        crawl_stage(run, since, until, cats)
        enrich_stage(run)
        extract_stage(run)
        rec = reconcile_stage(run)
        totals = {"papers": run.wh.count(PAPERS), "mentions": run.wh.count(MENTIONS), "rejects": run.wh.count(REJECTS)}
        all_rejects = {r["reason"]: r["n"] for r in run.wh.ingest.reject_counts().to_dicts()}
        publish_table("ingest-stages", stage_rows(run.stages), "Rows in and out of each ingest stage")
        publish_table(
            "ingest-rejects",
            [{"reason": k, "this_run": rec.notes["rejects_by_reason"].get(k, 0), "in_warehouse": v} for k, v in all_rejects.items()],
            "Rejected papers by named reason",
        )
        rejected = run.wh.ingest.rejected_papers(run.run_id)
        publish_table("ingest-rejected-papers", rejected.to_dicts(),
                      "Papers this run rejected: arXiv id, title, reason and what the check saw")
        summary_md, template_version = render(
            "reports/ingest_summary.md.j2", run_id=run.run_id, since=since, until=until, categories=cats,
            synthetic=synthetic, stages=run.stages, run_rejects=rec.notes["rejects_by_reason"], totals=totals,
            sample=rec.notes["sample"], rejected=rejected.head(50).to_dicts(), rejected_total=rejected.height,
        )
        publish_markdown("ingest-summary", summary_md, f"Ingest summary (template {template_version})")
        return IngestResult(
            run_id=run.run_id,
            stages=stage_rows(run.stages),
            notes={r.stage: {k: v for k, v in r.notes.items() if k != "sample"} for r in run.stages},
            rejects_this_run=rec.notes["rejects_by_reason"],
            rejects_in_warehouse=all_rejects,
            rejected_papers=rejected.to_dicts(),
            totals=totals,
            warehouse=str(settings.warehouse_path.resolve()),
            summary_markdown=summary_md,
        )
