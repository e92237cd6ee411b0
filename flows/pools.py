"""The pools flow: embed -> sample queries -> faiss recall -> candidates -> COI -> screening -> assignment."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from flows.common import StageResult, publish_markdown, publish_table, record_stage, recorded_run
from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.embeddings import EmbeddingCache
from revbench.retry import PermanentError, TransientError
from revbench.settings import Settings
from schemas.tables import S2_AUTHOR_PAPERS
from tasks import pools
from tasks.normalize import normalize_affiliation
from warehouse import Warehouse, utcnow

REPORT_TAUS = [0.4, 0.5, 0.6, 0.7, 0.8]


@task(name="embed-papers", cache_policy=NO_CACHE)
def embed_stage(papers: pl.DataFrame, model: str) -> tuple[Any, int]:
    """Vectors of every paper's title and abstract; only texts never embedded are encoded."""
    settings = Settings()
    cache = EmbeddingCache.shared(settings.cache_dir, model)
    before = cache.encoded
    texts = (papers["title"].fill_null("") + " " + papers["abstract"].fill_null("")).to_list()
    return cache.embed(texts), cache.encoded - before


@task(name="fetch-s2-histories", cache_policy=NO_CACHE)
def s2_stage(s2_ids: list[str]) -> dict[str, int]:
    """Publication histories of candidates from Semantic Scholar, fetched once and kept."""
    settings = Settings()
    client = SemanticScholarClient(settings.s2, settings.http)
    fetched = failed = streak = 0
    # One connection for the whole stage; each author is still committed on its own, so a
    # crash keeps what was fetched.
    with Warehouse.open(settings.warehouse_path) as wh:
        todo = sorted(set(s2_ids) - wh.fetched_s2_authors())
        try:
            for sid in todo:
                if streak >= 3:
                    # The service is down or unreachable: stop asking, screen on the corpus alone,
                    # and leave the rest for the next run instead of retrying every author in turn.
                    failed += 1
                    continue
                try:
                    papers = client.author_papers(sid, fields="paperId,externalIds,year")
                    streak = 0
                except PermanentError:
                    papers = []  # unknown to S2: remembered as fetched with no papers
                    streak = 0
                except TransientError:
                    failed += 1
                    streak += 1
                    continue
                rows = [{"s2_author_id": sid, "paper_key": "", "year": None, "arxiv_id": None, "fetched_at": utcnow()}]
                rows += [{"s2_author_id": sid, "paper_key": p.get("paperId") or "", "year": p.get("year"),
                          "arxiv_id": (p.get("externalIds") or {}).get("ArXiv"), "fetched_at": utcnow()}
                         for p in papers if p.get("paperId")]
                wh.upsert(S2_AUTHOR_PAPERS, pl.DataFrame(rows, schema=S2_AUTHOR_PAPERS.polars_schema))
                fetched += 1
        finally:
            client.close()
    return {"asked": len(todo), "fetched": fetched, "failed": failed}


def recent_counts(inputs: dict[str, pl.DataFrame], s2: pl.DataFrame, since_year: int) -> dict[str, int]:
    """Recent papers per author: the corpus, plus S2 papers the corpus does not already hold."""
    ay = inputs["author_years"]
    corpus = ay.filter(pl.col("year") >= since_year).group_by("author_id").agg(pl.col("arxiv_id").n_unique().alias("n"))
    counts = dict(corpus.iter_rows())
    if s2.height:
        own = set(ay["arxiv_id"].to_list())
        author_of = {}
        for a, ids in inputs["authors"].select("author_id", "s2_author_ids").iter_rows():
            for sid in ids or []:
                author_of.setdefault(sid, set()).add(a)
        extra = Counter()
        seen = set()
        for sid, key, year, arxiv in s2.iter_rows():
            if year is None or year < since_year or (arxiv and arxiv in own):
                continue
            for a in author_of.get(sid, ()):
                if (a, key) not in seen:
                    seen.add((a, key))
                    extra[a] += 1
        for a, n in extra.items():
            counts[a] = counts.get(a, 0) + n
    return counts


@flow(name="pools", log_prints=True)
def pools_flow(round: int = 1, per_category: int | None = None, tau: float | None = None) -> dict[str, Any]:
    """Build one round of candidate pools and invitations (a re-run of a round is identical)."""
    settings = Settings()
    p = settings.pools
    per_category = per_category or p.queries_per_category
    tau = p.tau if tau is None else tau
    params = {"round": round, "per_category": per_category, "tau": tau, "seed": p.seed, "model": p.model}
    with recorded_run(settings, "pools", params) as run_id:
        t0 = time.monotonic()
        with Warehouse.open(settings.warehouse_path) as wh:
            inputs = wh.pool_inputs()
            earlier = set() if p.reuse_queries else wh.earlier_queries(round)
        papers = inputs["papers"]
        if papers.height == 0 or inputs["links"].height == 0:
            raise ValueError("no corpus with authors yet: run ingest and disambiguate first")
        vectors, encoded = embed_stage(papers, p.model)
        ids = papers["arxiv_id"].to_list()
        samples = pools.sample_queries(papers, settings.arxiv.categories, per_category, p.seed, earlier)
        queries = samples["arxiv_id"].to_list()
        neighbors_all = pools.range_neighbors(vectors, ids, queries, min([tau, *REPORT_TAUS]), p.max_neighbors)
        tau_report = pools.pool_size_report(neighbors_all, inputs["links"], queries, sorted({tau, *REPORT_TAUS}))
        evidence = pools.candidate_evidence(neighbors_all.filter(pl.col("similarity") >= tau), inputs["links"])
        query_authors = inputs["links"].filter(pl.col("arxiv_id").is_in(queries))
        affs = None
        if p.same_affiliation_coi:
            affs = inputs["authors"].select("author_id", pl.col("affiliations").list.eval(
                pl.element().map_elements(lambda a: normalize_affiliation(a) or "", return_dtype=pl.Utf8))).explode("affiliations").rename({"affiliations": "affiliation"}).filter(pl.col("affiliation") != "")
        names = dict(inputs["authors"].select("author_id", "name").iter_rows())
        coi = pools.conflicts(evidence, query_authors, inputs["edges"], affs, names)
        after_coi = evidence.join(coi.select("query_id", "author_id"), on=["query_id", "author_id"], how="anti")
        candidate_authors = set(after_coi["author_id"].to_list())
        s2_ids = sorted({sid for a, ids_ in inputs["authors"].select("author_id", "s2_author_ids").iter_rows()
                         if a in candidate_authors for sid in (ids_ or [])})
        s2_stats = s2_stage(s2_ids) if p.fetch_s2_histories and s2_ids else {"asked": 0, "fetched": 0, "failed": 0}
        with Warehouse.open(settings.warehouse_path) as wh:
            s2 = wh.s2_papers_of(s2_ids) if s2_ids else pl.DataFrame(schema={"s2_author_id": pl.Utf8, "paper_key": pl.Utf8, "year": pl.Int64, "arxiv_id": pl.Utf8})
        newest = int(papers["year"].max())
        recent = recent_counts(inputs, s2, newest - p.recent_years + 1)
        emails = {a: (e[0] if e else None) for a, e in inputs["authors"].select("author_id", "emails").iter_rows()}
        screened = pools.screening(after_coi, recent, emails, p.min_recent_papers)
        exclusions = pl.concat([coi, screened])
        kept = after_coi.join(screened.select("query_id", "author_id"), on=["query_id", "author_id"], how="anti")
        assignments = pools.assign(kept, p.max_queries_per_candidate, p.candidates_per_query, p.seed)
        invites = (assignments.group_by("author_id").agg(pl.col("query_id").sort().alias("query_ids"))
                   .with_columns(pl.col("author_id").replace_strict(emails, return_dtype=pl.Utf8).alias("email"),
                                 pl.col("author_id").replace_strict(names, return_dtype=pl.Utf8).alias("name"))
                   .sort("author_id"))
        now = utcnow()
        with Warehouse.open(settings.warehouse_path) as wh:
            wh.save_round(round, {
                "query_samples": samples.with_columns(pl.lit(p.seed).alias("seed"), pl.lit(now).alias("sampled_at")),
                "pool_evidence": evidence, "pool_exclusions": exclusions, "assignments": assignments, "invitations": invites,
            })
        out_dir = settings.data_dir / "pools" / f"round-{round}"
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "candidates_affinity.csv").write_text(pools.affinity_csv(kept))
        (out_dir / "invited_affinity.csv").write_text(pools.affinity_csv(assignments))

        def sizes(ev: pl.DataFrame) -> dict[str, float]:
            n = ev.group_by("query_id").agg(pl.col("author_id").n_unique().alias("n"))["n"].to_list()
            n += [0] * (len(queries) - len(n))
            return {"median": float(pl.Series(n).median() or 0), "mean": float(sum(n) / max(len(n), 1)), "zero": n.count(0)}

        per_cand = assignments.group_by("author_id").len()["len"].to_list()
        short = assignments.group_by("query_id").len().filter(pl.col("len") < p.candidates_per_query).height + len(set(queries) - set(assignments["query_id"].to_list()))
        stats = {
            "round": round, "queries": len(queries), "papers": papers.height, "embedded_now": encoded,
            "pool_before_coi": sizes(evidence), "pool_after_coi": sizes(after_coi), "pool_after_screening": sizes(kept),
            "exclusions": dict(Counter(exclusions["reason"].to_list())), "assignments": assignments.height,
            "invited_candidates": invites.height, "max_queries_per_candidate": max(per_cand, default=0),
            "queries_short_of_target": short, "s2": s2_stats, "tau_report": tau_report,
            "out_dir": str(out_dir), "seconds": time.monotonic() - t0,
        }
        record_stage(settings, run_id, StageResult("pools", rows_in=len(queries), rows_out=assignments.height,
                                                   rejected=exclusions.height, seconds=stats["seconds"]))
        publish_table("pools-sizes", [{"stage": k.replace("pool_", ""), **v} for k, v in stats.items() if k.startswith("pool_")],
                      "Candidates per query before and after COI and screening")
        publish_table("pools-exclusions", [{"reason": k, "pairs": v} for k, v in stats["exclusions"].items()], "Exclusions by reason")
        publish_table("pools-tau", tau_report, "Pool sizes at several thresholds (to choose tau)")
        publish_markdown("pools-summary", (
            f"## Pools round {round}\n\n{len(queries)} queries; {encoded} papers embedded now (the rest cached).\n\n"
            f"{assignments.height} invitations to {invites.height} candidates (at most {stats['max_queries_per_candidate']} "
            f"queries each); {short} queries below the target of {p.candidates_per_query}.\n"), "Pools summary")
        return stats
