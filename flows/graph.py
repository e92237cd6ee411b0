"""The graph flow: for the papers each source was never asked about, fetch their references and
topics (Semantic Scholar; OpenAlex with authorships and affiliations when enabled), resolve cited
works to warehouse papers, save each piece as it arrives, then re-resolve older references that
named no warehouse paper (a paper loaded since may be the one they cite). GROBID's reference lists
are read by the ingest from the PDFs it extracts (``grobid.fulltext``) and resolved here, in the
re-resolve step.

Incremental by ``graph_fetches``: a paper asked once (found or not) is not asked again, so a
day-later run asks only about that day's papers. A paper whose request failed gets no fetch
record: it is named in the run's failures and asked again next run.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import polars as pl

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
from revbench.flows.graph_bulk import bulk_dir, bulk_first, bulk_lines, save_bulk
from revbench.flows.pieces import chunks, pieces_started
from revbench.flows.results import FlowResult
from revbench.settings import Settings
from revbench.tasks.graph import KEY_WINDOWS, REFERENCE_KEYS, PaperIndex, index_papers, new_paper_key_windows
from revbench.tasks.graph_fetch import (
    CITATION_KEY,
    Fetched,
    enabled_sources,
    match_rates,
    needs_keys,
    rate_row,
    openalex_piece,
    resolve_changed,
    s2_piece,
    storable,
    to_fetch,
)

log = logging.getLogger("revbench.graph")

GROBID_NONE_YET = ("GROBID full text is on (REVBENCH_GROBID__FULLTEXT) but no reference list from it is in the "
                   "warehouse yet: the ingest reads them from the PDFs it extracts from now on")


@dataclass(frozen=True)
class GraphResult(FlowResult):
    """What a graph run did: papers asked per source and kind, answers saved, failures (asked again
    next run), how references resolved per source, the warehouse's coverage after it, and notes."""

    run_id: str
    papers_asked: int
    papers_answered: int
    failed: int
    references_saved: int
    topics_saved: int
    affiliations_saved: int
    re_resolved: int
    re_checked: int
    """Unresolved references looked at again: all of them on a first run, then only those a paper
    loaded since the last completed run can answer (``unresolved`` is how many there are)."""
    unresolved: int
    asked: dict[str, int]
    failures: list[dict[str, Any]]
    match_rates: list[dict[str, Any]]
    coverage: dict[str, Any]
    notes: list[str]
    warehouse: str


def _save(run: Run, got: Fetched, papers: PaperIndex, work_ids: dict[str, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Resolve one piece's references and store everything it answered, atomically; the rows
    written per table, and how the references stored resolved (by method)."""
    cites = storable(got)  # a paper whose rows cannot be stored is named in got.failures, the rest saved
    counts: dict[str, int] = {}
    if cites.height:
        res = resolve_changed(cites, papers, work_ids)[1]
        cites, counts = res.citations, res.counts
    frame = (lambda rows: pl.DataFrame(rows, infer_schema_length=None) if rows else None)
    return run.wh.graph.save_graph(citations=cites if cites.height else None, topics=frame(got.topics),
                             institutions=frame(got.institutions), affiliations=frame(got.affiliations),
                             authorships=frame(got.authorships),
                             fetches=frame(got.fetches).with_columns(run_id=pl.lit(run.run_id)) if got.fetches else None
                                   ), counts


def _tally(saved: tuple[dict[str, int], dict[str, int]], written: Counter[str], methods: Counter[str]) -> None:
    written.update(saved[0])
    methods.update(saved[1])


def api_pieces(settings: Settings, source: str, todo: dict[str, list[str]], ids: list[str]) -> tuple[Any, list[tuple[Any, ...]]]:
    """The piece function asking ``source``'s API, and its pieces of ``ingest.commit_every`` papers."""
    size = settings.ingest.commit_every
    if source == "s2":
        topics, refs = set(todo["topics"]), set(todo["references"])
        return s2_piece, [(settings, [a for a in c if a in topics], [a for a in c if a in refs]) for c in chunks(ids, size)]
    return openalex_piece, [(settings, list(c)) for c in chunks(ids, size)]


# Not a Prefect task: its pieces are Prefect tasks, and a task submitted from inside another carries
# that task's parameters (the run, with its warehouse connection) to a Dask worker, which cannot take them.
def fetch_stage(run: Run, source: str, todo: dict[str, list[str]], papers: PaperIndex,
                work_ids: dict[str, str]) -> StageResult:
    """Ask ``source`` about its papers in pieces of ``ingest.commit_every``, saving each piece as it
    completes; a service that stops answering ends the stage with the finished pieces saved."""
    with stage(run, f"graph-{source}") as st:
        settings = st.settings
        first = bulk_first(run, settings, source, todo)  # the bulk files first; what they do not hold is asked over the API
        bulk, todo = first.got, first.left
        if bulk is not None:
            work_ids.update(bulk.work_ids)
        ids = sorted(set().union(*todo.values()))
        if ids:
            run.require(source)
        fn, pieces = api_pieces(settings, source, todo, ids)
        # rows written per table; how the references saved resolved (the run's match rates, where settled)
        written, methods = Counter[str](), Counter[str]()
        answered: set[str] = bulk.answered() if bulk else set()
        failures: list[dict[str, Any]] = list(bulk.failures) if bulk else []
        requests, retries, down, cleaned = 0, 0, None, 0
        truncated: list[dict[str, Any]] = []
        # the bulk answer is saved while the API pieces wait on the service's pace, not before they start
        with pieces_started(fn, pieces, f"graph-{source}", source, in_flight=getattr(settings.limits, source)) as results, \
                st.progress(len(ids), f"{source} graph of {len(ids)} papers") as progress:
            if bulk:
                _tally(save_bulk(run, bulk, papers, work_ids), written, methods)
            for got in results:
                work_ids.update(got.work_ids)
                _tally(_save(run, got, papers, work_ids), written, methods)
                answered.update(f["arxiv_id"] for f in got.fetches)
                failures += got.failures
                requests += got.requests
                retries += got.retries
                cleaned += got.cleaned
                truncated += got.truncated
                progress.advance(len({f["arxiv_id"] for f in got.fetches} | {f["arxiv_id"] for f in got.failures}))
                if got.down:
                    down = got.down
                    log.warning("%s stopped answering; the papers not asked are asked next run: %s", source, got.down)
                    break
        st.result.rows_in, st.result.rows_out = len(ids), len(answered)
        st.result.rejected = len({f["arxiv_id"] for f in failures})
        st.result.notes = {"written": dict(written), "failures": failures, "requests": requests, "retries": retries,
                           "down": down, "answered": sorted(answered), "asked": {k: len(v) for k, v in todo.items()},
                           "text_cleaned": cleaned, "truncated": truncated,
                           "bulk": first.notes, "settled": settled(source, ids), "resolved_by": dict(methods)}
    return st.result


def settled(source: str, asked: list[str]) -> bool:
    """Whether the references ``source`` answered in this run are resolved for good when saved:
    the papers' index is the run's, and S2's references name no OpenAlex work; OpenAlex's do, so
    its are settled only when no API piece came after the bulk files' answer (a later piece's
    works could resolve an earlier one's references)."""
    return source == "s2" or not asked


RESOLVED_FROM = ("citing_arxiv_id", "source", "ordinal", "cited_arxiv_id", "cited_openalex_id", *REFERENCE_KEYS, "match_keys")
"""What resolving a stored reference again reads of it: what it writes back, and what that rests on."""


@stage_task("resolve-citations")
def resolve_stage(run: Run, papers: pl.DataFrame, index: PaperIndex, work_ids: dict[str, str],
                  settled_sources: tuple[str, ...] = ()) -> StageResult:
    """Resolve again the references that named no warehouse paper and that a paper loaded since the
    last completed graph run can answer (every one of them on a first run), against today's papers;
    this run's references from ``settled_sources`` were resolved against the same when saved."""
    with stage(run, "resolve-citations") as st:
        since = st.wh.graph.last_completed_graph(run.run_id)
        keys = pl.DataFrame(schema=KEY_WINDOWS)
        if since is not None:
            keys = new_paper_key_windows(papers, st.wh.graph.ids_loaded_since(since))
        pending = st.wh.graph.citations_to_resolve(since=since, keys=keys, settled=(run.run_id, settled_sources),
                                                   columns=RESOLVED_FROM)
        changed, res = resolve_changed(pending, index, work_ids) if pending.height else (pending, None)
        if changed.height:
            st.wh.graph.rewrite_references(changed.select(*CITATION_KEY, "cited_arxiv_id", "cited_arxiv", "match_keys"))
        if res is not None:
            st.wh.graph.set_match_keys(needs_keys(pending, res.citations, changed))
        st.result.rows_in = pending.height
        st.result.rows_out = int(changed["cited_arxiv_id"].is_not_null().sum()) if changed.height else 0
        st.result.notes = {"counts": res.counts if res else {}, "scope": "all" if since is None else "since",
                           "since": since.isoformat() if since else None, "new_paper_keys": keys["k"].n_unique(),
                           "unresolved": st.wh.graph.unresolved_count()}
    return st.result


def run_match_rates(run: Run, fetched: dict[str, StageResult], todo: dict[tuple[str, str], list[str]],
                    index: PaperIndex) -> list[dict[str, Any]]:
    """How this run's papers' references stand now, per source (the re-resolution included);
    GROBID's lists (read by the ingest) are those of the papers this run took up."""
    taken = sorted({a for ids in todo.values() for a in ids})
    keys = ("citing_arxiv_id", *REFERENCE_KEYS)
    refs = run.wh.graph.references_of
    # A settled source's references stand as resolved when saved (the re-resolution leaves them
    # out): their counts then are the rates, without resolving every one of them again (a first
    # run's millions took most of ten seconds).
    kept = {src: r.notes["resolved_by"] for src, r in fetched.items() if r.notes["settled"]}
    rows = [rate_row(src, counts, sum(counts.values())) for src, counts in kept.items() if sum(counts.values())]
    return sorted(rows + match_rates({src: refs(r.notes["answered"], src, keys) for src, r in fetched.items() if src not in kept}
                                     | {"grobid": refs(taken, "grobid", keys)}, index), key=lambda r: r["source"])


def hostile_notes(source: str, notes: dict[str, Any]) -> list[str]:
    """Lines for a run's notes: characters of ``source``'s answers replaced because UTF-8 cannot
    hold them, and the lists it gave that were cut at their cap (the first few named)."""
    out = []
    if notes.get("text_cleaned"):
        out.append(f"{source}: {notes['text_cleaned']} characters UTF-8 cannot hold (lone surrogates) were replaced by "
                   "U+FFFD; the records were kept")
    cuts = notes.get("truncated") or []
    if cuts:
        named = "; ".join(f"{c['of']} (kept {c['kept']})" for c in cuts[:3]) + ("; ..." if len(cuts) > 3 else "")
        out.append(f"{source}: {len(cuts)} lists cut at their cap: {named}")
    return out


def _summary(coverage: dict[str, Any], rates: list[dict[str, Any]], notes: list[str], failed: int) -> str:
    papers = coverage["papers"]
    md = [f"## Graph coverage ({papers} papers)", "", "| source | papers with references | references | resolved | "
          "papers with topics |", "|---|---:|---:|---:|---:|"]
    md += [f"| {s['source']} | {s['papers_with_references']} | {s['references']} | {s['resolved']} | "
           f"{s['papers_with_topics']} |" for s in coverage["sources"]]
    md += ["", f"Institutions {coverage['institutions']} ({coverage['with_ror']} with a ROR id); affiliations "
               f"{coverage['affiliations']} of {coverage['people']} people.", ""]
    if rates:
        md += ["## This run's match rates", "", "| source | doi | arxiv | title_year | unresolved | rate |",
               "|---|---:|---:|---:|---:|---:|"]
        md += [f"| {r['source']} | {r.get('doi', 0)} | {r.get('arxiv', 0)} | {r.get('title_year', 0)} | "
               f"{r.get('unresolved', 0)} | {r['match_rate']} |" for r in rates]
    if failed:
        md += ["", f"{failed} papers got no answer; they are asked again next run."]
    md += [f"- {n}" for n in notes]
    return "\n".join(md)


@revbench_flow("graph")
def graph_flow(settings: Settings) -> GraphResult:
    """Fetch the scholarly graph for the papers no enabled source was asked about yet, resolve cited
    works to warehouse papers, and re-resolve older unresolved references."""
    params = {"sources": list(enabled_sources(settings)), "grobid_fulltext": settings.grobid.fulltext,
              # only when set: a run without them records the parameters runs recorded before them
              **{f"{src}_bulk": str(d) for src in enabled_sources(settings) if (d := bulk_dir(settings, src))}}
    with flow_run(settings, "graph", params) as run:
        notes: list[str] = []
        todo = to_fetch(enabled_sources(settings), run.wh.graph.papers_to_fetch)
        papers = run.wh.graph.paper_identifiers()
        index = index_papers(papers)  # once: every piece's references resolve against it
        # Earlier runs' works too: a new paper's referenced_works name old papers by their work id alone.
        work_ids = run.wh.graph.known_work_ids()
        fetched: list[StageResult] = []
        for source in enabled_sources(settings):
            mine = {kind: ids for (src, kind), ids in todo.items() if src == source}
            fetched.append(fetch_stage(run, source, mine, index, work_ids))
            if fetched[-1].notes["down"]:
                notes.append(f"{source} stopped answering: {fetched[-1].notes['down']}")
            notes += hostile_notes(source, fetched[-1].notes) + bulk_lines(source, fetched[-1].notes["bulk"])
        resolved = resolve_stage(run, papers, index, work_ids, tuple(s for s, r in zip(
            enabled_sources(settings), fetched, strict=True) if r.notes["settled"]))
        coverage = run.wh.graph.graph_coverage()
        rates = run_match_rates(run, dict(zip(enabled_sources(settings), fetched, strict=True)), todo, index)
        if settings.grobid.fulltext and not any(s["source"] == "grobid" for s in coverage["sources"]):
            notes.append(GROBID_NONE_YET)
            log.info(GROBID_NONE_YET)
        failures = [f for r in fetched for f in r.notes["failures"]]
        written: Counter[str] = Counter()
        for r in fetched:
            written.update(r.notes["written"])
        publish_table("graph-stages", stage_rows(run.stages), "Rows in and out of each graph stage")
        publish_table("graph-coverage", coverage["sources"], "Graph coverage per source: papers with references and "
                      "topics, references resolved to warehouse papers")
        publish_table("graph-match-rates", rates, "How this run's references resolved, per source and method")
        publish_table("graph-failures", failures, "Papers a source did not answer for (asked again next run)")
        failed = len({(f["arxiv_id"], f["source"]) for f in failures})
        publish_markdown("graph-summary", _summary(coverage, rates, notes, failed), "Graph coverage and match rates")
        return GraphResult(
            run_id=run.run_id, papers_asked=sum(r.rows_in for r in fetched),
            papers_answered=sum(r.rows_out for r in fetched), failed=failed,
            references_saved=written["citations"], topics_saved=written["paper_topics"],
            affiliations_saved=written["author_affiliations"], re_resolved=resolved.rows_out,
            re_checked=resolved.rows_in, unresolved=resolved.notes["unresolved"],
            asked={f"{s}/{k}": len(v) for (s, k), v in todo.items()}, failures=failures, match_rates=rates,
            coverage=coverage, notes=notes, warehouse=str(settings.warehouse_path.resolve()),
        )
