"""The disambiguate flow: mentions -> blocks -> rules, then LLM or fallback -> authors and edges."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from revbench.clients.llm import LlmClient, LlmUnavailable
from revbench.flows.common import (
    Run,
    Stage,
    StageProgress,
    flow_run,
    publish_markdown,
    publish_table,
    revbench_flow,
    stage,
    stage_task,
)
from revbench.flows.results import FlowResult
from revbench.keys import block_key
from revbench.schemas.quality import DataQualityError, validate_frames
from revbench.schemas.tables import AUTHOR_LINKS, AUTHORS, COAUTHOR_EDGES, LINK_METHODS
from revbench.settings import Settings
from revbench.tasks.decisions import block_size_histogram, decision_frame, recent_since
from revbench.tasks.disambiguate import (
    Decider,
    base_key,
    block_scope,
    disambiguate,
    fallback_decider,
)
from revbench.tasks.llm_clusters import llm_decider
from revbench.warehouse import Warehouse, utcnow


@dataclass(frozen=True)
class Decisions:
    """What deciding the name blocks did: mentions and blocks seen, blocks decided, dropped and
    split, merges and refused ORCID conflicts by method, the decider, its LLM calls (made and
    from the cache), block sizes, a sample of valid LLM answers, and the stage's seconds."""

    mentions: int
    blocks: int
    blocks_decided: int
    blocks_dropped: int
    split_blocks: list[str]
    merges: dict[str, int]
    orcid_conflicts: dict[str, int]
    decider: str
    llm_calls: int
    llm_cached: int
    histogram: list[dict[str, Any]]
    llm_samples: list[dict[str, Any]]
    seconds: float
    mentions_checked: int
    """Mentions whose name blocks were read and hashed: every mention on a first pass, only the
    name blocks of new, changed or removed mentions after one."""


@dataclass(frozen=True)
class DisambiguationResult(Decisions, FlowResult):
    """The decisions, then the authors and co-authorship edges the warehouse now holds and the
    mentions linked by each method."""

    authors: int
    edges: int
    links_by_method: dict[str, int]
    run_id: str


def choose_decider(settings: Settings) -> tuple[Decider, str, LlmClient | None]:
    """The LLM when configured and allowed, otherwise the offline fallback."""
    if settings.disambiguate.use_llm:
        try:
            client = LlmClient(settings.llm, settings.http, cache_dir=settings.cache_dir)
            return llm_decider(client), f"llm:{settings.llm.model}", client
        except LlmUnavailable:
            pass
    threshold = settings.disambiguate.fallback_threshold
    return fallback_decider(threshold), f"fallback:{threshold}", None


@dataclass(frozen=True)
class Scope:
    """The mentions a pass reads: with ``since``, only the name blocks (before splits) of the
    mentions new, changed or removed since the last pass started (the others' hashes cannot have
    changed); without, every mention."""

    mentions: pl.DataFrame
    known: dict[str, str]
    since: datetime | None = None
    changed: pl.DataFrame | None = None
    bases: set[str] | None = None
    """The name blocks (before splits) read whole (a partial pass only)."""
    previous: dict[str, Any] | None = None
    """The parameters the last pass recorded (a partial pass only)."""


def read_scope(wh: Warehouse, run_id: str, scope: dict[str, Any]) -> Scope:
    """Every mention, unless the last disambiguation completed under the same scope: then the
    name blocks of what changed since it started (it held the warehouse from its start to its
    end, so nothing was loaded in between unseen)."""
    last = wh.disambiguate.last_disambiguation(run_id)
    if last is None or last["status"] != "completed" or last["parameters"].get("scope") != scope:
        return Scope(wh.disambiguate.mentions_with_years(), wh.disambiguate.block_hashes())
    since = last["started_at"]
    changed = wh.disambiguate.changed_mentions(since)
    bases = sorted({block_key(n) for n in changed["name"].to_list()} | wh.disambiguate.link_base_keys(since))
    return Scope(wh.disambiguate.mentions_of_blocks(bases, changed), wh.disambiguate.block_hashes(bases), since, changed, set(bases),
                 last["parameters"])


@stage_task("decide-blocks")
def decide_stage(run: Run) -> Decisions:
    """Decide every block whose inputs changed, save its links, rebuild authors and edges."""
    with stage(run, "disambiguate") as st:
        d = st.settings.disambiguate
        if d.use_llm and st.settings.llm.base_url:
            run.require("llm")
        decider, decider_name, client = choose_decider(st.settings)
        scope = block_scope(decider_name, d)
        sc = read_scope(st.wh, run.run_id, scope)
        mentions, known = sc.mentions, sc.known
        bar: list[StageProgress] = []

        def report(done: int, total: int) -> None:
            if not bar:
                bar.append(st.progress(total, f"decide {total} name blocks ({decider_name})"))
            bar[0].advance()

        try:
            out = disambiguate(mentions, known, decider, decider_name, d.max_block_size, d.candidate_similarity,
                               utcnow(), concurrency=d.llm_concurrency, progress=report, only=sc.bases)
        finally:
            for b in bar:
                b.close()
        decisions = decision_frame(out.decisions, run.run_id, utcnow())
        report = validate_frames({AUTHOR_LINKS: out.links})
        if not report.success:
            publish_markdown("disambiguate-data-quality", report.to_markdown(), "Checks that stopped the load")
            raise DataQualityError(report)
        save_and_rebuild(st, sc, out, decisions, scope)
        n_authors, n_mentions, sizes = st.wh.count(AUTHORS), st.wh.disambiguate.mention_count(), st.wh.disambiguate.block_sizes()
        st.result.rows_in, st.result.rows_out = n_mentions, n_authors
        # The mentions of the name blocks considered (a partial pass reads their co-authors too).
        checked = sum(n * c for n, c in out.block_sizes.items())
        st.result.notes = {"mentions_checked": checked, "blocks_checked": out.blocks_total}
    # Counted over every block the warehouse holds now, whether this pass read it or not.
    return Decisions(
        mentions=n_mentions, blocks=len(sizes), blocks_decided=out.blocks_decided,
        blocks_dropped=len(out.drop_blocks), split_blocks=sorted({base_key(k) for k, _ in sizes if k.count("|") >= 2}),
        merges=dict(out.merges), orcid_conflicts=dict(out.conflicts),
        decider=decider_name, llm_calls=client.requests_made if client else 0,
        llm_cached=client.cache_hits if client else 0, histogram=block_size_histogram(Counter(n for _, n in sizes)),
        llm_samples=[r for r in out.decisions if r.get("valid")][:5], seconds=st.result.seconds,
        mentions_checked=checked,
    )


def save_and_rebuild(st: Stage, sc: Scope, out: Any, decisions: pl.DataFrame, scope: dict[str, Any]) -> None:
    """Save the decided blocks' links, then rebuild the authors (after a partial pass, only
    those it can have changed) and record the pass's scope."""
    d = st.settings.disambiguate
    redecided = out.blocks["block_key"].to_list() + out.drop_blocks
    # The authors whose links a partial pass replaces, read before they are replaced.
    before = st.wh.disambiguate.authors_of_links(redecided, out.links) if sc.changed is not None else set()
    st.wh.disambiguate.save_blocks(out.links, out.blocks, decisions, out.drop_blocks)
    recent = recent_since(pl.Series([st.wh.disambiguate.newest_mention_year()], dtype=pl.Int64), d.recent_years, datetime.now().year)
    if sc.changed is not None and sc.previous is not None and sc.previous.get("recent_since") == recent:
        # Only authors with a link replaced, or a mention of a reloaded paper (its year may
        # have changed), can differ from what the last pass built.
        st.wh.disambiguate.rebuild_authors(recent, only=sorted(before | st.wh.disambiguate.authors_of_links(redecided, sc.changed)))
    else:
        st.wh.disambiguate.rebuild_authors(recent)
    st.wh.runs.add_run_parameters(st.run.run_id, {"scope": scope, "recent_since": recent})


def summary_markdown(run_id: str, res: Decisions, n_authors: int, n_edges: int) -> str:
    """The curator's summary of a disambiguation run."""
    refused = ", ".join(f"{n} asked by {k.removesuffix('_vs_orcid')}" for k, n in sorted(res.orcid_conflicts.items()))
    md = [f"## Disambiguation run {run_id}", "",
          (f"{res.mentions} mentions in {res.blocks} blocks; {res.blocks_decided} decided this run "
           f"(the rest unchanged; {res.mentions_checked} mentions read to find them), decider `{res.decider}`."),
          f"LLM calls: {res.llm_calls} made, {res.llm_cached} answered from the cache.",
          f"Now {n_authors} authors and {n_edges} co-authorship edges.",
          f"Oversized blocks split: {', '.join(res.split_blocks) or 'none'}.",
          "Merges refused because the two sides carry different ORCIDs: " + (refused or "none") + "."]
    if res.llm_samples:
        md += ["", "**Sample of LLM decisions**", "", "| block | instances | answer |", "|---|---:|---|"]
        md += [f"| {r['block_key']} | {r['instances']} | `{(r.get('answer') or '')[:120]}` |" for r in res.llm_samples]
    return "\n".join(md)


@revbench_flow("disambiguate")
def disambiguate_flow(settings: Settings) -> DisambiguationResult:
    """Resolve author mentions to canonical authors; only blocks with changed inputs are decided."""
    params = {"decider_pref": "llm" if settings.disambiguate.use_llm else "fallback"}
    with flow_run(settings, "disambiguate", params) as run:
        res = decide_stage(run)
        n_authors, n_edges = run.wh.count(AUTHORS), run.wh.count(COAUTHOR_EDGES)
        by_method = run.wh.disambiguate.links_by_method()
        publish_table("disambiguate-merges", [{"method": k, "merges_this_run": res.merges.get(k, 0),
                                               "mentions_linked_by": by_method.get(k, 0)} for k in LINK_METHODS],
                      "Merges by method")
        publish_table("disambiguate-block-sizes", res.histogram, "Mentions per name block")
        publish_markdown("disambiguate-summary", summary_markdown(run.run_id, res, n_authors, n_edges),
                         "Disambiguation summary")
        return DisambiguationResult(**vars(res), authors=n_authors, edges=n_edges, links_by_method=by_method,
                                    run_id=run.run_id)
