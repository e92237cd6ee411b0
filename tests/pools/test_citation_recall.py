"""Citation recall, the pools' second path (issue 35): the authors of papers a query cites join its
candidates with the evidence a neighbour gives, each row and invitation naming its path; off, or
without citations, the pools are the semantic path's alone; rounds recorded before it keep their
hash and are rebuilt as they were; on a SYNTHETIC world the conflict only the graph reveals is
recalled by citation and excluded with its evidence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.schemas.graph import CITATIONS
from revbench.schemas.tables import ASSIGNMENTS, AUTHOR_LINKS, INVITATIONS, POOL_EVIDENCE, POOL_EXCLUSIONS
from revbench.settings import PoolsSettings, Settings
from revbench.synth.truth import graph_conflicts_caught, load_truth
from revbench.tasks.pool_citations import NO_CITATIONS, applies, pair_paths, path_counts, recall, with_paths
from revbench.tasks.pools import candidate_evidence, parameters_hash, round_parameters
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.migrations import warehouse_at
from tests.support.worlds import END, START, week_world

IDS = ["q", "n1", "c1", "c2"]
VECTORS = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]])
LINKS = pl.DataFrame({"arxiv_id": ["n1", "n1", "c1", "c2"], "author_id": ["ann", "bob", "bob", "cy"]})
SEMANTIC = candidate_evidence(pl.DataFrame({"query_id": ["q"], "neighbor_id": ["n1"], "similarity": [0.8]}), LINKS)


def _cited(*pairs: tuple[str, str]) -> pl.DataFrame:
    return pl.DataFrame({"query_id": [q for q, _ in pairs], "neighbor_id": [n for _, n in pairs]},
                        schema={"query_id": pl.Utf8, "neighbor_id": pl.Utf8})


def test_cited_papers_bring_their_authors_with_a_neighbour_s_evidence() -> None:
    ev = recall(SEMANTIC, _cited(("q", "n1"), ("q", "c1"), ("q", "c2"), ("q", "elsewhere")), VECTORS, IDS, LINKS)
    assert ev.select("author_id", "neighbor_id", "path").rows() == [
        ("ann", "n1", "both"), ("bob", "c1", "citation"), ("bob", "n1", "both"), ("cy", "c2", "citation")]
    sims = dict(zip(ev["neighbor_id"], ev["similarity"], strict=True))
    # A cited paper scores as the index scores a neighbour; one found both ways keeps faiss's similarity.
    assert sims["c1"] == pytest.approx(0.6) and sims["c2"] == pytest.approx(0.0) and sims["n1"] == 0.8
    # A candidate found both ways is one pair; one found only by citation says so.
    assert pair_paths(ev).rows() == [("q", "ann", "both"), ("q", "bob", "both"), ("q", "cy", "citation")]
    assert path_counts(pair_paths(ev)) == {"semantic": 0, "citation": 1, "both": 2}
    invited = pl.DataFrame({"query_id": ["q", "q"], "author_id": ["cy", "ann"], "score": [0.0, 0.8], "rank": [2, 1]})
    assert with_paths(invited, ev).select("author_id", "path").rows() == [("cy", "citation"), ("ann", "both")]


def test_without_citations_the_evidence_is_the_semantic_path_s() -> None:
    ev = recall(SEMANTIC, NO_CITATIONS, VECTORS, IDS, LINKS)
    assert ev.drop("path").equals(SEMANTIC) and ev["path"].to_list() == ["semantic", "semantic"]
    assert path_counts(ev.head(0)) == {"semantic": 0, "citation": 0, "both": 0}


def test_rounds_recorded_before_citation_recall_keep_their_hash_and_their_recall() -> None:
    before = {k: v for k, v in PoolsSettings().model_dump().items()
              if k not in ("query_categories", "coi_by_institution", "coi_institution_years", "citation_recall")}
    old = parameters_hash({**before, "categories": ["cs.AI"]})
    assert parameters_hash(round_parameters(PoolsSettings(citation_recall=False), ["cs.AI"])) == old
    assert round_parameters(PoolsSettings(), ["cs.AI"])["citation_recall"] is True
    recorded = {"revision": 1, "params_hash": old, "parameters": {**before, "categories": ["cs.AI"]}, "invitations": 3}
    assert not applies(recorded, replace=False) and applies(recorded, replace=True)
    assert applies(None, replace=False)
    assert applies({**recorded, "parameters": round_parameters(PoolsSettings(), ["cs.AI"])}, replace=False)


def test_rounds_saved_before_migration_16_were_found_by_similarity(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    con = warehouse_at(path, 15)
    con.execute("INSERT INTO assignments VALUES (1, 1, 'q', 'a', 0.7, 1)")
    con.execute("INSERT INTO pool_evidence VALUES (1, 1, 'q', 'a', 'n', 0.7)")
    con.close()
    with Warehouse.open(path) as wh:
        assert wh.schema_version() >= 16
        assert wh.read(ASSIGNMENTS)["path"].to_list() == ["semantic"] == wh.read(POOL_EVIDENCE)["path"].to_list()


POOLS = {"queries_per_category": 50, "reuse_queries": True, "min_recent_papers": 1, "fetch_s2_histories": False,
         "candidates_per_query": 10, "max_queries_per_candidate": 6}


@pytest.fixture
def world(tmp_path: Path) -> Path:
    out = tmp_path / "world"
    week_world(out, n_papers=40, seed=5)
    return out


def _round(s: Settings, n: int) -> dict[str, pl.DataFrame]:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return {t.name: wh.pools.read_round(t, n).drop("round", "revision")
                for t in (POOL_EVIDENCE, POOL_EXCLUSIONS, ASSIGNMENTS, INVITATIONS)}


def test_citation_recall_on_a_world_with_a_graph(settings: Settings, replay, world: Path) -> None:  # type: ignore[no-untyped-def]
    s = on_replay(settings, replay(world=world)).with_overrides(
        openalex={"enabled": True}, disambiguate={"use_llm": False}, pools=POOLS)
    ingest_flow.fn(s, START, END, synthetic=True)
    disambiguate_flow.fn(s)
    # Round 1 before the graph: recall on, nothing cited, so the semantic path alone.
    graphless = s.with_overrides(pools={"coi_by_institution": False})
    first = pools_flow.fn(graphless, round=1)
    r1 = _round(s, 1)
    assert first.citation_recall and first.citation_added == 0
    assert set(r1["pool_evidence"]["path"]) == {"semantic"} and set(r1["assignments"]["path"]) == {"semantic"}
    assert first.invitations_by_path == {"semantic": first.assignments, "citation": 0, "both": 0}

    graph_flow.fn(s)
    # (b) With the path off, a warehouse with citations gives the pools it gave without them.
    off = pools_flow.fn(graphless.with_overrides(pools={"citation_recall": False}), round=2)
    r2 = _round(s, 2)
    for name in r1:
        assert r2[name].equals(r1[name]), name
    assert not off.citation_recall and off.citation_added == 0

    # (a) On: authors of the papers a query cites join it, marked 'citation' where similarity missed them.
    on = pools_flow.fn(s, round=3)
    r3 = _round(s, 3)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        cites = wh.read(CITATIONS).drop_nulls("cited_arxiv_id")
        links = wh.read(AUTHOR_LINKS)
    cited = set(cites.select("citing_arxiv_id", "cited_arxiv_id").iter_rows())
    ev = r3["pool_evidence"]
    by_citation = ev.filter(pl.col("path") != "semantic")
    assert by_citation.height and set(by_citation.select("query_id", "neighbor_id").iter_rows()) <= cited
    # Off and on agree on what similarity found.
    semantic = ev.filter(pl.col("path") != "citation").drop("path").sort("query_id", "author_id", "neighbor_id")
    assert semantic.equals(r2["pool_evidence"].drop("path").sort("query_id", "author_id", "neighbor_id"))
    added = pair_paths(ev).filter(pl.col("path") == "citation")
    assert on.citation_added == added.height > 0
    assert added.join(r2["pool_evidence"], on=["query_id", "author_id"], how="semi").height == 0
    assert on.candidates_by_path["citation"] + on.candidates_by_path["both"] > 0
    # Every invitation names its path, and the split adds up; caps and the COI still hold.
    assert sum(on.invitations_by_path.values()) == on.assignments == r3["assignments"].height
    assert r3["assignments"]["path"].null_count() == 0 and on.invitations_by_path["citation"] > 0
    assert r3["assignments"].group_by("author_id").len()["len"].max() <= POOLS["max_queries_per_candidate"]
    assert r3["assignments"].join(r3["pool_exclusions"], on=["query_id", "author_id"], how="semi").height == 0

    # (c) The conflict only the graph reveals: the query cites the person's earlier paper, citation
    # recall brings them in by it, and the institution COI excludes them, naming the institution and years.
    truth = load_truth(world)
    [planted] = truth.graph_conflicts.to_dicts()
    paper = planted["detail"].rsplit(" ", 1)[-1]
    assert (planted["query_id"], paper) in cited
    [after] = graph_conflicts_caught(truth, ev, r3["pool_exclusions"], r3["assignments"], links)
    assert after["caught"] and after["reasons"] == ["same_institution"] and not after["invited"]
    theirs = links.join(truth.mentions.filter(pl.col("person_id") == planted["person_id"]), on=["arxiv_id", "position"])
    by_it = ev.filter((pl.col("query_id") == planted["query_id"]) & (pl.col("neighbor_id") == paper)
                      & pl.col("author_id").is_in(theirs["author_id"].to_list()))
    assert by_it["path"].to_list() in (["citation"], ["both"])
    row = r3["pool_exclusions"].join(by_it, on=["query_id", "author_id"], how="semi")
    assert row["reason"].to_list() == ["same_institution"]
    why = json.loads(row["evidence"][0])
    assert why["institution_key"] == f"ror:{planted['ror']}" and why["candidate_years"][1] == planted["last_year"]
    assert f"ror:{planted['ror']}" in row["detail"][0] and str(planted["last_year"]) in row["detail"][0]

    # A round recorded without citation recall is rebuilt as it was, not refused; --replace adds the path.
    again = pools_flow.fn(graphless, round=2)
    assert not again.citation_recall and again.revision == off.revision and _round(s, 2)["assignments"].equals(r2["assignments"])
    replaced = pools_flow.fn(graphless, round=2, replace=True)
    assert replaced.citation_recall and replaced.revision == off.revision + 1 and replaced.citation_added == on.citation_added
