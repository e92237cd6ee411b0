"""The pools flow: embed -> sample queries -> faiss recall and citation recall -> candidates -> COI -> screening ->
assignment."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from revbench.clients.semantic_scholar import SemanticScholarClient
from revbench.errors import UsageError
from revbench.flows.common import Run, flow_run, publish_markdown, publish_table, revbench_flow, stage, stage_task
from revbench.flows.encoding import encode_texts
from revbench.flows.results import FlowResult
from revbench.retry import PermanentError, TransientError
from revbench.schemas.tables import ASSIGNMENTS, S2_AUTHOR_PAPERS
from revbench.settings import PoolsSettings, Settings
from revbench.tasks import enrich, pool_citations, pool_coi, pools
from revbench.warehouse import utcnow
from revbench.workers import map_unordered

REPORT_TAUS = [0.4, 0.5, 0.6, 0.7, 0.8]
S2_COMMIT_EVERY = 100


@dataclass(frozen=True)
class RoundPlan:
    """The round being built: its number, whether it may replace the current version, the
    parameters that shape it with their hash, and the warehouse's record of its current version."""

    round: int
    replace: bool
    params_hash: str
    parameters: dict[str, Any]
    state: dict[str, Any] | None

    def refuse_other_settings(self) -> None:
        """Stop before any work when the round has invitations built with other settings (unless
        it may be replaced)."""
        st = self.state
        if st and not self.replace and st["params_hash"] not in (None, self.params_hash):
            raise UsageError(
                f"round {self.round} already has {st['invitations']} invitations built with other settings "
                f"({pools.parameter_changes(st['parameters'], self.parameters)}); re-run it with its settings, choose "
                f"another --round, or pass --replace (the current version is kept as superseded)")

    def refuse_changed_invitations(self, current: pl.DataFrame, assignments: pl.DataFrame) -> None:
        """Stop before saving when the round, rebuilt without leave to replace it, would invite
        other pairs than its ``current`` assignments."""
        changed = pools.changed_pairs(current, assignments)
        if changed and self.state:
            raise UsageError(
                f"round {self.round}'s invitations would change ({changed} query-candidate pairs differ from its "
                f"{self.state['invitations']} invitations): the corpus changed since it was built; choose another "
                "--round, or pass --replace (the current version is kept as superseded)")

    @property
    def replaced_revision(self) -> int | None:
        """The revision this build supersedes, if it replaces one."""
        return self.state["revision"] if self.state and self.replace else None


@dataclass(frozen=True)
class HistoryFetch:
    """Candidates whose Semantic Scholar history was asked for, fetched, and left for a later run."""

    asked: int = 0
    fetched: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Recall:
    """The pools stage's work: the sampled queries, pool sizes by threshold, the candidates with
    their evidence (each row with its recall path), and the conflicts of interest the corpus and the
    graph show among them with the candidates left after those (``found``)."""

    samples: pl.DataFrame
    queries: list[str]
    tau_report: list[dict[str, float]]
    evidence: pl.DataFrame
    found: pool_coi.CorpusConflicts


@dataclass(frozen=True)
class Assigned:
    """The assign stage's work: every exclusion (COI and screening), the candidates kept, the
    invitations by query and by candidate, and the round's revision as saved."""

    exclusions: pl.DataFrame
    kept: pl.DataFrame
    assignments: pl.DataFrame
    invites: pl.DataFrame
    revision: int


@dataclass(frozen=True)
class PoolsResult(FlowResult, pools.RoundStats):
    """One round: its numbers (the fields of ``tasks.pools.RoundStats``), the papers embedded now,
    the S2 histories fetched, pool sizes by threshold, where the affinity files are, how long it took;
    whether citation recall shaped it, candidates (query-candidate pairs before COI) and invitations
    by recall path, and the candidates citation recall added that the semantic path missed."""

    round: int
    revision: int
    embedded_now: int
    s2: HistoryFetch
    tau_report: list[dict[str, float]]
    out_dir: str
    seconds: float
    run_id: str
    citation_recall: bool
    candidates_by_path: dict[str, int]
    invitations_by_path: dict[str, int]
    citation_added: int


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
        texts = pools.paper_texts(papers, model)
        vectors, encoded, pieces = encode_texts(st, model, texts, "papers")
        st.result.rows_in, st.result.rows_out = len(texts), encoded
        st.result.notes = {"pieces": pieces, "model": model}
    return vectors, encoded


@stage_task("fetch-s2-histories")
def s2_stage(run: Run, s2_ids: list[str]) -> HistoryFetch:
    """Publication histories of candidates from Semantic Scholar, fetched once and kept; each
    batch of S2_COMMIT_EVERY authors is committed as it fills, so a crash keeps what was
    fetched. Screening counts on them: when Semantic Scholar stops answering the run fails
    rather than screen on the corpus alone (set REVBENCH_POOLS__FETCH_S2_HISTORIES=false to do
    that on purpose)."""
    with stage(run, "s2-histories") as st:
        todo = sorted(set(s2_ids) - st.wh.pools.fetched_s2_authors())
        if todo:
            run.require("s2")
        client = SemanticScholarClient(st.settings.s2, st.settings.http)
        fetched = failed = 0
        pending: list[dict[str, Any]] = []

        def commit() -> None:
            if pending:
                st.wh.pools.upsert(S2_AUTHOR_PAPERS, pl.DataFrame(pending, schema=S2_AUTHOR_PAPERS.polars_schema))
                pending.clear()

        def ask(sid: str) -> tuple[str, list[dict[str, Any]] | None]:
            try:
                return sid, client.author_papers(sid, fields="paperId,externalIds,year")
            except PermanentError:
                return sid, []  # unknown to S2: remembered as fetched with no papers
            except TransientError:
                return sid, None  # left for the next run; the breaker stops a run on a dead service

        try:
            with st.progress(len(todo), f"S2 histories of {len(todo)} candidates") as progress:
                # s2.connections in flight through the one client, whose pacer spaces them all.
                for sid, papers in map_unordered(ask, todo, st.settings.s2.connections):
                    progress.advance()
                    if papers is None:
                        failed += 1
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
    return HistoryFetch(len(todo), fetched, failed)


def recall_stage(run: Run, settings: Settings, inputs: dict[str, pl.DataFrame], vectors: np.ndarray,
                 earlier: set[str]) -> Recall:
    """Sample the queries, recall their neighbours and the candidates among their authors, and
    find the conflicts of interest."""
    p, papers, links, authors = settings.pools, inputs["papers"], inputs["links"], inputs["authors"]
    with stage(run, "pools") as st:
        samples = pools.sample_queries(papers, p.query_categories or settings.arxiv.categories, p.queries_per_category,
                                       p.seed, earlier)
        queries = samples["arxiv_id"].to_list()
        neighbors_all = pools.range_neighbors(vectors, papers["arxiv_id"].to_list(), queries,
                                              min([p.tau, *REPORT_TAUS]), p.max_neighbors)
        tau_report = pools.pool_size_report(neighbors_all, links, queries, sorted({p.tau, *REPORT_TAUS}))
        semantic = pools.candidate_evidence(neighbors_all.filter(pl.col("similarity") >= p.tau), links)
        cited = st.wh.graph.cited_papers(queries) if p.citation_recall else pool_citations.NO_CITATIONS
        evidence = pool_citations.recall(semantic, cited, vectors, papers["arxiv_id"].to_list(), links)
        found = pool_coi.corpus_conflicts(evidence, pool_coi.query_authors(links, queries), inputs["edges"], authors, papers,
                                          st.wh.pools.coi_inputs() if p.coi_by_institution else None, p.same_affiliation_coi,
                                          p.coi_institution_years)
        st.result.rows_in, st.result.rejected = len(queries), found.conflicts.height
        st.result.rows_out = found.after.select(pools.PAIR).n_unique()
    return Recall(samples, queries, tau_report, evidence, found)


def assign_stage(run: Run, p: PoolsSettings, plan: RoundPlan, inputs: dict[str, pl.DataFrame], recall: Recall,
                 s2_ids: list[str]) -> Assigned:
    """Exclude the co-authors the Semantic Scholar histories show, screen the candidates (recent
    papers, a usable email), assign the invitations and save the round."""
    authors = inputs["authors"]
    with stage(run, "assign") as st:
        query_authors = pool_coi.query_authors(inputs["links"], recall.queries)
        histories = run.wh.pools.s2_papers_of(pool_coi.history_ids(s2_ids, query_authors, authors))
        screened = pool_coi.screen_candidates(recall.found, query_authors, authors, histories, s2_ids, inputs["papers"],
                                              inputs["author_years"], p.recent_years, p.min_recent_papers)
        exclusions, kept = screened.exclusions, screened.kept
        assignments = pool_citations.with_paths(pools.assign(kept, p.max_queries_per_candidate, p.candidates_per_query,
                                                             p.seed), recall.evidence)
        invites = pools.invitations(assignments, screened.emails, pools.author_names(authors))
        if plan.state and not plan.replace:
            plan.refuse_changed_invitations(run.wh.pools.read_round(ASSIGNMENTS, plan.round), assignments)
        revision = run.wh.pools.save_round(plan.round, {
            "query_samples": pools.query_sample_rows(recall.samples, p.seed, utcnow()),
            "pool_evidence": recall.evidence, "pool_exclusions": exclusions, "assignments": assignments,
            "invitations": invites,
        }, plan.params_hash, plan.parameters, run.run_id, plan.replace)
        st.result.rows_in, st.result.rows_out, st.result.rejected = len(recall.queries), assignments.height, exclusions.height
    return Assigned(exclusions, kept, assignments, invites, revision)


def write_affinities(out_dir: Path, set_aside_revision: int | None, done: Assigned) -> None:
    """The round's candidate and invited pools as OpenReview affinity files; a replaced
    version's files are first set aside under ``revision-<n>/``."""
    if set_aside_revision is not None:
        set_aside(out_dir, set_aside_revision)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "candidates_affinity.csv").write_text(pools.affinity_csv(done.kept))
    (out_dir / "invited_affinity.csv").write_text(pools.affinity_csv(done.assignments))


def publish_round(result: PoolsResult, target: int) -> None:
    """The curator's tables and summary of a round, with the split by recall path."""
    sizes = {"before_coi": result.pool_before_coi, "after_coi": result.pool_after_coi,
             "after_screening": result.pool_after_screening}
    publish_table("pools-sizes", [{"stage": k, **v} for k, v in sizes.items()],
                  "Candidates per query before and after COI and screening")
    publish_table("pools-exclusions", [{"reason": k, "pairs": v} for k, v in result.exclusions.items()], "Exclusions by reason")
    publish_table("pools-tau", result.tau_report, "Pool sizes at several thresholds (to choose tau)")
    publish_table("pools-paths", [{"path": k, "candidates": v, "invitations": result.invitations_by_path[k]}
                                  for k, v in result.candidates_by_path.items()],
                  "Candidates (query-candidate pairs before COI) and invitations by recall path")
    publish_markdown("pools-summary", (
        f"## Pools round {result.round}\n\n{result.queries} queries; {result.embedded_now} papers embedded now (the rest "
        f"cached).\n\n{result.assignments} invitations to {result.invited_candidates} candidates (at most "
        f"{result.max_queries_per_candidate} queries each); {result.queries_short_of_target} queries below the target "
        f"of {target}.\n\n{recall_line(result)}\n"), "Pools summary")


def recall_line(result: PoolsResult) -> str:
    """The split by recall path in one sentence."""
    if not result.citation_recall:
        return ("Citation recall off for this round (in the settings, or the round was recorded without it; --replace "
                "rebuilds it with it): every candidate was found by similarity.")
    inv = result.invitations_by_path
    share = (inv["citation"] + inv["both"]) / result.assignments if result.assignments else 0.0
    return (f"Invitations by recall path: semantic {inv['semantic']}, citation {inv['citation']}, both {inv['both']} "
            f"({share:.0%} found by citation); citation recall added {result.citation_added} candidates the "
            "semantic path missed.")


@revbench_flow("pools")
def pools_flow(settings: Settings, round: int = 1, replace: bool = False) -> PoolsResult:
    """Build one round of candidate pools and invitations. Re-running a round with the same
    settings on the same corpus reproduces it; a round whose invitations would change is rebuilt
    only with ``replace``, which keeps the current version as superseded. A round recorded without
    citation recall (every round before it existed) is rebuilt without it unless replaced."""
    p = settings.pools
    parameters = pools.round_parameters(p, settings.arxiv.categories)
    with flow_run(settings, "pools", {"round": round, "replace": replace, **parameters}) as run:
        state = run.wh.pools.round_state(round)
        if p.citation_recall and not pool_citations.applies(state, replace):
            settings = settings.with_overrides(pools={"citation_recall": False})
            p = settings.pools
            parameters = pools.round_parameters(p, settings.arxiv.categories)
        plan = RoundPlan(round, replace, pools.parameters_hash(parameters), parameters, state)
        plan.refuse_other_settings()
        inputs = run.wh.pools.pool_inputs()
        earlier = set() if p.reuse_queries else run.wh.pools.earlier_queries(round)
        papers = inputs["papers"]
        if papers.height == 0 or inputs["links"].height == 0:
            raise ValueError("no corpus with authors yet: run ingest and disambiguate first")
        vectors, encoded = embed_stage(run, papers, p.model)
        recall = recall_stage(run, settings, inputs, vectors, earlier)
        s2_ids = pools.candidate_s2_ids(recall.found.after, inputs["authors"])
        s2_stats = s2_stage(run, s2_ids) if p.fetch_s2_histories and s2_ids else HistoryFetch()
        done = assign_stage(run, p, plan, inputs, recall, s2_ids)
        out_dir = settings.data_dir / "pools" / f"round-{round}"
        write_affinities(out_dir, plan.replaced_revision, done)
        stats = pools.round_stats(recall.queries, papers.height, recall.evidence, recall.found.after, done.kept,
                                  done.exclusions, done.assignments, p.candidates_per_query)
        candidates = pool_citations.path_counts(pool_citations.pair_paths(recall.evidence))
        result = PoolsResult(round=round, revision=done.revision, embedded_now=encoded, **asdict(stats), s2=s2_stats,
                             tau_report=recall.tau_report, out_dir=str(out_dir),
                             seconds=sum(s.seconds for s in run.stages), run_id=run.run_id,
                             citation_recall=p.citation_recall, candidates_by_path=candidates,
                             invitations_by_path=pool_citations.path_counts(done.assignments),
                             citation_added=candidates["citation"])
        publish_round(result, p.candidates_per_query)
        return result
