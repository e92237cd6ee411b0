"""The disambiguate flow: mentions -> blocks -> rules, then LLM or fallback -> authors and edges."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime
from typing import Any

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.common import StageResult, publish_markdown, publish_table, record_stage, recorded_run
from revbench.clients.llm import LlmClient, LlmUnavailable
from revbench.settings import Settings
from schemas.quality import DataQualityError, validate_frames
from schemas.tables import AUTHOR_LINKS, AUTHORS, COAUTHOR_EDGES, LLM_DECISIONS
from tasks.disambiguate import disambiguate, fallback_decider
from tasks.llm_clusters import llm_decider
from warehouse import Warehouse, utcnow


def choose_decider(settings: Settings) -> tuple[Any, str, LlmClient | None]:
    """The LLM when configured and allowed, otherwise the offline fallback."""
    if settings.disambiguate.use_llm:
        try:
            client = LlmClient(settings.llm, settings.http, cache_dir=settings.cache_dir)
            return llm_decider(client), f"llm:{settings.llm.model}", client
        except LlmUnavailable:
            pass
    return fallback_decider(settings.disambiguate.fallback_threshold), f"fallback:{settings.disambiguate.fallback_threshold}", None


def histogram(sizes: Counter[int]) -> list[dict[str, Any]]:
    """Block sizes in buckets a curator can read."""
    edges = [(1, 1), (2, 2), (3, 5), (6, 10), (11, 50), (51, 200), (201, 10**9)]
    rows = []
    for lo, hi in edges:
        n = sum(c for s, c in sizes.items() if lo <= s <= hi)
        if n:
            rows.append({"mentions_in_block": f"{lo}" if lo == hi else (f"{lo}+" if hi > 10**6 else f"{lo}-{hi}"), "blocks": n})
    return rows


@task(name="decide-blocks", cache_policy=NO_CACHE)
def decide_stage(run_id: str) -> dict[str, Any]:
    settings = Settings()
    t0 = time.monotonic()
    decider, decider_name, client = choose_decider(settings)
    with Warehouse.open(settings.warehouse_path) as wh:
        mentions = wh.mentions_with_years()
        known = wh.block_hashes()
    d = settings.disambiguate
    out = disambiguate(mentions, known, decider, decider_name, d.max_block_size, d.candidate_similarity, utcnow(),
                       concurrency=d.llm_concurrency)
    decisions = pl.DataFrame(
        [{**r, "run_id": run_id, "decided_at": utcnow()} for r in out.decisions], infer_schema_length=None
    ) if out.decisions else LLM_DECISIONS.empty()
    report = validate_frames({AUTHOR_LINKS: out.links})
    if not report.success:
        publish_markdown("disambiguate-data-quality", report.to_markdown(), "Checks that stopped the load")
        raise DataQualityError(report)
    with Warehouse.open(settings.warehouse_path) as wh:
        wh.save_blocks(out.links, out.blocks, decisions, out.drop_blocks)
        newest = max((y for y in mentions["year"].to_list() if y is not None), default=datetime.now().year)
        wh.rebuild_authors(newest - d.recent_years + 1)
    return {
        "mentions": mentions.height, "blocks": out.blocks_total, "blocks_decided": out.blocks_decided,
        "blocks_dropped": len(out.drop_blocks), "split_blocks": out.split_blocks, "merges": dict(out.merges),
        "decider": decider_name, "llm_calls": client.requests_made if client else 0,
        "llm_cached": client.cache_hits if client else 0, "histogram": histogram(out.block_sizes),
        "llm_samples": [r for r in out.decisions if r.get("valid")][:5], "seconds": time.monotonic() - t0,
    }


@flow(name="disambiguate", log_prints=True)
def disambiguate_flow() -> dict[str, Any]:
    """Resolve author mentions to canonical authors; only blocks with changed inputs are decided."""
    settings = Settings()
    with recorded_run(settings, "disambiguate", {"decider_pref": "llm" if settings.disambiguate.use_llm else "fallback"}) as run_id:
        res = decide_stage(run_id)
        with Warehouse.open(settings.warehouse_path) as wh:
            n_authors, n_edges = wh.count(AUTHORS), wh.count(COAUTHOR_EDGES)
            by_method = {m: n for m, n in wh.frame("SELECT method, count(*) AS n FROM author_links GROUP BY method ORDER BY n DESC").iter_rows()}
        record_stage(settings, run_id, StageResult("disambiguate", rows_in=res["mentions"], rows_out=n_authors,
                                                   seconds=res["seconds"]))
        publish_table("disambiguate-merges", [{"method": k, "merges_this_run": res["merges"].get(k, 0),
                                               "mentions_linked_by": by_method.get(k, 0)} for k in
                                              ["email", "affiliation", "llm", "fallback", "singleton"]],
                      "Merges by method")
        publish_table("disambiguate-block-sizes", res["histogram"], "Mentions per name block")
        md = [f"## Disambiguation run {run_id}", "",
              f"{res['mentions']} mentions in {res['blocks']} blocks; {res['blocks_decided']} decided this run "
              f"(the rest unchanged), decider `{res['decider']}`.",
              f"LLM calls: {res['llm_calls']} made, {res['llm_cached']} answered from the cache.",
              f"Now {n_authors} authors and {n_edges} co-authorship edges.",
              f"Oversized blocks split: {', '.join(res['split_blocks']) or 'none'}."]
        if res["llm_samples"]:
            md += ["", "**Sample of LLM decisions**", "", "| block | instances | answer |", "|---|---:|---|"]
            md += [f"| {r['block_key']} | {r['instances']} | `{(r.get('answer') or '')[:120]}` |" for r in res["llm_samples"]]
        publish_markdown("disambiguate-summary", "\n".join(md), "Disambiguation summary")
        return {**res, "authors": n_authors, "edges": n_edges, "links_by_method": by_method, "run_id": run_id}
