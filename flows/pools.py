"""The pools flow: embed -> sample queries -> faiss recall -> candidates -> COI -> screening -> assignment."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.errors import UsageError
from revbench.flows.common import Run, flow_run, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.flows.embed import encode_texts
from revbench.retry import PermanentError, TransientError
from revbench.schemas.tables import ASSIGNMENTS, S2_AUTHOR_PAPERS
from revbench.settings import Settings
from revbench.tasks import enrich, pools
from revbench.warehouse import utcnow

REPORT_TAUS = [0.4, 0.5, 0.6, 0.7, 0.8]
S2_COMMIT_EVERY = 100


def set_aside(out_dir: Path, revision: int) -> None:
    """Move the affinity files of the version being replaced into ``revision-<n>/``, kept."""
    if not out_dir.is_dir():
        return
    dest = out_dir / f"revision-{revision}"
    dest.mkdir(parents=True, exist_ok=True)
    for f in out_dir.glob("*.csv"):
        f.rename(dest / f.name)


def embed_stage(run: Run, papers: pl.DataFrame, model: str) -> tuple[np.ndarray, int]:
    """Vectors of every paper's title and abstract; only texts never embedded are encoded, in
    pieces of RUNNER__EMBED_BATCH (Prefect tasks on the run's task runner when tracked), each
    kept as it completes, so a killed run encodes only what it had not finished."""
    with stage(run, "embed") as st:
        texts = (papers["title"].fill_null("") + " " + papers["abstract"].fill_null("")).to_list()
        vectors, encoded, pieces = encode_texts(st, model, texts, "papers")
        st.result.rows_in, st.result.rows_out = len(texts), encoded
        st.result.notes = {"pieces": pieces, "model": model}
    return vectors, encoded


@stage_task("fetch-s2-histories")
def s2_stage(run: Run, s2_ids: list[str]) -> dict[str, int]:
    """Publication histories of candidates from Semantic Scholar, fetched once and kept; each
    batch of S2_COMMIT_EVERY authors is committed as it fills, so a crash keeps what was
    fetched. Screening counts on them: when Semantic Scholar stops answering the run fails
    rather than screen on the corpus alone (set REVBENCH_POOLS__FETCH_S2_HISTORIES=false to do
    that on purpose)."""
    with stage(run, "s2-histories") as st:
        todo = sorted(set(s2_ids) - st.wh.fetched_s2_authors())
        if todo:
            run.require("s2")
        client = SemanticScholarClient(st.settings.s2, st.settings.http)
        fetched = failed = 0
        pending: list[dict[str, Any]] = []

        def commit() -> None:
            if pending:
                st.wh.upsert(S2_AUTHOR_PAPERS, pl.DataFrame(pending, schema=S2_AUTHOR_PAPERS.polars_schema))
                pending.clear()

        try:
            with st.progress(len(todo), f"S2 histories of {len(todo)} candidates") as progress:
                for sid in todo:
                    progress.advance()
                    try:
                        papers = client.author_papers(sid, fields="paperId,externalIds,year")
                    except PermanentError:
                        papers = []  # unknown to S2: remembered as fetched with no papers
                    except TransientError:
                        failed += 1  # left for the next run; the breaker stops a run on a dead service
                        continue
                    pending.extend(enrich.history_rows(sid, papers, utcnow()))
                    fetched += 1
                    # One commit per author cost more than its request at 30k candidates; a crash
                    # now re-fetches at most this many authors (the upsert keeps no duplicates).
                    if fetched % S2_COMMIT_EVERY == 0:
                        commit()
        finally:
            commit()
            client.close()
        st.result.rows_in, st.result.rows_out, st.result.rejected = len(todo), fetched, failed
    return {"asked": len(todo), "fetched": fetched, "failed": failed}


@revbench_flow("pools")
def pools_flow(settings: Settings, round: int = 1, replace: bool = False) -> dict[str, Any]:
    """Build one round of candidate pools and invitations. Re-running a round with the same
    settings on the same corpus reproduces it; a round whose invitations would change is rebuilt
    only with ``replace``, which keeps the current version as superseded."""
    p = settings.pools
    per_category, tau = p.queries_per_category, p.tau
    parameters = pools.round_parameters(p, settings.arxiv.categories)
    params_hash = pools.parameters_hash(parameters)
    with flow_run(settings, "pools", {"round": round, "replace": replace, **parameters}) as run:
        state = run.wh.round_state(round)
        if state and not replace and state["params_hash"] not in (None, params_hash):
            raise UsageError(
                f"round {round} already has {state['invitations']} invitations built with other settings "
                f"({pools.parameter_changes(state['parameters'], parameters)}); re-run it with its settings, choose "
                f"another --round, or pass --replace (the current version is kept as superseded)")
        inputs = run.wh.pool_inputs()
        earlier = set() if p.reuse_queries else run.wh.earlier_queries(round)
        papers, links, authors = inputs["papers"], inputs["links"], inputs["authors"]
        if papers.height == 0 or links.height == 0:
            raise ValueError("no corpus with authors yet: run ingest and disambiguate first")
        vectors, encoded = embed_stage(run, papers, p.model)
        with stage(run, "pools") as st:
            samples = pools.sample_queries(papers, settings.arxiv.categories, per_category, p.seed, earlier)
            queries = samples["arxiv_id"].to_list()
            neighbors_all = pools.range_neighbors(vectors, papers["arxiv_id"].to_list(), queries,
                                                  min([tau, *REPORT_TAUS]), p.max_neighbors)
            tau_report = pools.pool_size_report(neighbors_all, links, queries, sorted({tau, *REPORT_TAUS}))
            evidence = pools.candidate_evidence(neighbors_all.filter(pl.col("similarity") >= tau), links)
            affs = pools.author_affiliations(authors) if p.same_affiliation_coi else None
            names = dict(authors.select("author_id", "name").iter_rows())
            coi = pools.conflicts(evidence, links.filter(pl.col("arxiv_id").is_in(queries)), inputs["edges"], affs, names)
            after_coi = evidence.join(coi.select("query_id", "author_id"), on=["query_id", "author_id"], how="anti")
            st.result.rows_in, st.result.rejected = len(queries), coi.height
            st.result.rows_out = after_coi.select("query_id", "author_id").n_unique()
        candidates = set(after_coi["author_id"].to_list())
        s2_ids = sorted({sid for a, ids in authors.select("author_id", "s2_author_ids").iter_rows()
                         if a in candidates for sid in (ids or [])})
        s2_stats = s2_stage(run, s2_ids) if p.fetch_s2_histories and s2_ids else {"asked": 0, "fetched": 0, "failed": 0}
        with stage(run, "assign") as st2:
            s2 = run.wh.s2_papers_of(s2_ids)
            recent = pools.recent_counts(inputs["author_years"], authors, s2, int(papers["year"].max()) - p.recent_years + 1)
            emails = {a: (e[0] if e else None) for a, e in authors.select("author_id", "emails").iter_rows()}
            screened = pools.screening(after_coi, recent, emails, p.min_recent_papers)
            exclusions = pl.concat([coi, screened])
            kept = after_coi.join(screened.select("query_id", "author_id"), on=["query_id", "author_id"], how="anti")
            assignments = pools.assign(kept, p.max_queries_per_candidate, p.candidates_per_query, p.seed)
            invites = pools.invitations(assignments, emails, names)
            if state and not replace:
                changed = pools.changed_pairs(run.wh.read_round(ASSIGNMENTS, round), assignments)
                if changed:
                    raise UsageError(
                        f"round {round}'s invitations would change ({changed} query-candidate pairs differ from its "
                        f"{state['invitations']} invitations): the corpus changed since it was built; choose another "
                        "--round, or pass --replace (the current version is kept as superseded)")
            now = utcnow()
            revision = run.wh.save_round(round, {
                "query_samples": samples.with_columns(pl.lit(p.seed).alias("seed"), pl.lit(now).alias("sampled_at")),
                "pool_evidence": evidence, "pool_exclusions": exclusions, "assignments": assignments,
                "invitations": invites,
            }, params_hash, parameters, run.run_id, replace)
            st2.result.rows_in, st2.result.rows_out, st2.result.rejected = len(queries), assignments.height, exclusions.height
        out_dir = settings.data_dir / "pools" / f"round-{round}"
        if state and replace:
            set_aside(out_dir, state["revision"])
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "candidates_affinity.csv").write_text(pools.affinity_csv(kept))
        (out_dir / "invited_affinity.csv").write_text(pools.affinity_csv(assignments))
        per_cand = assignments.group_by("author_id").len()["len"].to_list()
        short = pools.queries_short_of_target(assignments, queries, p.candidates_per_query)
        stats = {
            "round": round, "revision": revision, "queries": len(queries), "papers": papers.height, "embedded_now": encoded,
            "pool_before_coi": pools.pool_sizes(evidence, queries), "pool_after_coi": pools.pool_sizes(after_coi, queries),
            "pool_after_screening": pools.pool_sizes(kept, queries),
            "exclusions": dict(Counter(exclusions["reason"].to_list())), "assignments": assignments.height,
            "invited_candidates": invites.height, "max_queries_per_candidate": max(per_cand, default=0),
            "queries_short_of_target": short, "s2": s2_stats, "tau_report": tau_report,
            "out_dir": str(out_dir), "seconds": sum(s.seconds for s in run.stages), "run_id": run.run_id,
        }
        publish_table("pools-sizes", [{"stage": k.replace("pool_", ""), **v} for k, v in stats.items() if k.startswith("pool_")],
                      "Candidates per query before and after COI and screening")
        publish_table("pools-exclusions", [{"reason": k, "pairs": v} for k, v in stats["exclusions"].items()], "Exclusions by reason")
        publish_table("pools-tau", tau_report, "Pool sizes at several thresholds (to choose tau)")
        publish_markdown("pools-summary", (
            f"## Pools round {round}\n\n{len(queries)} queries; {encoded} papers embedded now (the rest cached).\n\n"
            f"{assignments.height} invitations to {invites.height} candidates (at most {stats['max_queries_per_candidate']} "
            f"queries each); {short} queries below the target of {p.candidates_per_query}.\n"), "Pools summary")
        return stats
