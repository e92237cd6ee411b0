"""The warehouse benchmark's graph on a SYNTHETIC world: before the graph stage it carries none;
after it, the resolved citations among its papers are the world's own references (each pair once,
influential where Semantic Scholar says so), its papers' topics, its reviewers' institutions by
the rule the conflict check uses, and their co-authorships; the graph scorers then run on it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from revbench.evaluation.importers.warehouse import load_warehouse
from revbench.evaluation.scorers import Context, make_scorer
from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.schemas.graph import GRAPH_FETCHES, PAPER_TOPICS
from revbench.settings import Settings
from revbench.synth.graph_files import read_graph
from revbench.person_links import person_links
from revbench.tasks.coi import author_stints
from revbench.warehouse import Warehouse
from tests.support.cli import evaluate_cli
from tests.support.common import on_replay
from tests.support.evaluation import rate_cited_authors
from tests.support.worlds import END, START, week_world


@pytest.fixture
def world(tmp_path: Path) -> Path:
    out = tmp_path / "world"
    week_world(out, n_papers=40, seed=5)
    return out


def test_the_warehouse_benchmark_carries_the_graph_of_its_world(  # type: ignore[no-untyped-def]
        settings: Settings, replay, world: Path, tmp_path: Path) -> None:
    s = on_replay(settings, replay(world=world)).with_overrides(openalex={"enabled": True}, disambiguate={"use_llm": False})
    ingest_flow.fn(s, START, END, synthetic=True)
    disambiguate_flow.fn(s)
    truth = read_graph(world)
    assert truth is not None
    with Warehouse.open(s.warehouse_path) as wh:
        links = wh.pool_inputs()["links"]
        subs, reviewers = rate_cited_authors(wh, truth, links)
    assert len(subs) >= 3 and len(reviewers) >= 3
    assert load_warehouse(s.warehouse_path).graph is None  # no graph stage yet: no graph, not an empty one
    with pytest.raises(Exception, match="^warehouse carries no citation graph: "):
        make_scorer("citation", Context(s)).score(load_warehouse(s.warehouse_path))

    graph_flow.fn(s)
    b = load_warehouse(s.warehouse_path)
    g = b.graph
    assert g is not None
    papers = set(b.submissions["paper_id"]) | set(b.draws[0]["paper_id"])
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        fetched = wh.read(GRAPH_FETCHES).filter(pl.col("found") & (pl.col("kind") == "references"))
        topics = wh.read(PAPER_TOPICS)
        coi = wh.coi_inputs()
    by_s2 = set(fetched.filter(pl.col("source") == "s2")["arxiv_id"])
    answered = set(fetched["arxiv_id"])
    # Every reference the world draws between two of the benchmark's papers, once, from a paper a source knew.
    want = {(p, r["arxiv_id"]): (r["is_influential"] if p in by_s2 else None)
            for p in papers & answered for r in truth["references"][p] if r["arxiv_id"] in papers - {p}}
    got = {(c["citing_id"], c["cited_id"]): c["is_influential"] for c in g.citations.to_dicts()}
    assert len(want) >= 5 and got == want
    assert g.citations.height == len(got)  # one edge per pair, whichever sources gave it
    assert set(g.citations["source"]) <= {"s2", "openalex", "openalex,s2"} and "openalex,s2" in set(g.citations["source"])
    assert set(g.citations["citing_id"]) & set(subs)  # the submissions cite the reviewers' papers

    stored = topics.filter(pl.col("arxiv_id").is_in(sorted(papers)))
    assert set(g.topics.select("paper_id", "scheme", "topic").rows()) == set(stored.select("arxiv_id", "scheme", "topic").rows())
    assert g.topics.height == g.topics.select("paper_id", "scheme", "topic").n_unique() > 0

    # Institutions: the conflict check's rule (tasks.coi) by reviewer, each stint widened over sources.
    stints = author_stints(person_links(coi["mentions"], coi["affiliations"]), coi["affiliations"])
    expected = (stints.filter(pl.col("author_id").is_in(reviewers))
                .group_by("author_id", "institution_key").agg(pl.col("first_year").min(), pl.col("last_year").max()))
    assert expected.height > 0
    assert sorted(g.reviewer_institutions.rows()) == sorted(expected.rows())

    # Co-authors: two reviewers linked to one paper, both ways.
    mine = links.filter(pl.col("author_id").is_in(reviewers))
    pairs = {(a, c) for p, a in mine.iter_rows() for q, c in mine.iter_rows() if p == q and a != c}
    assert pairs and set(g.coauthors.rows()) == pairs and g.coauthors.height == len(pairs)

    for spec in ("citation", "topic"):
        scores = make_scorer(spec, Context(s)).score(b).draws[0]
        assert scores.height > 0 and scores["score"].max() > 0, spec
    # What a user runs on their own warehouse.
    code, _, err = evaluate_cli(tmp_path, "-b", "warehouse", "-s", "citation", "-s", "topic", "--bootstrap", "0")
    assert code == 0, err
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert {r["scorer"] for r in rows} == {"citation", "topic"} and any(r["metric"] == "loss" for r in rows)
