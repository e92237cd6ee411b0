"""The warehouse benchmark's graph on a SYNTHETIC world: before the graph stage it carries none;
after it, the resolved citations among its papers are the world's own references (each pair once,
influential where Semantic Scholar says so), its papers' topics, its reviewers' institutions by
the rule the conflict check uses, and their co-authorships; the graph scorers then run on it.
Each reviewer's history is every corpus paper of theirs (and of their S2 history), not the capped
profile; the reference lists reach works outside the corpus; a graph without citations is refused
by the citation scorer in one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.evaluation.importers.warehouse import load_warehouse
from revbench.evaluation.scorers import Context, make_scorer
from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.errors import InputError
from revbench.keys import person_links
from revbench.schemas.graph import GRAPH_FETCHES, PAPER_TOPICS
from revbench.schemas.tables import S2_AUTHOR_PAPERS
from revbench.settings import Settings
from revbench.synth.graph_files import read_graph
from revbench.tasks.coi import author_stints
from revbench.warehouse import Warehouse
from tests.support.cli import evaluate_cli, one_line_error
from tests.support.common import on_replay
from tests.support.evaluation import rate_cited_authors
from tests.support.worlds import END, START, week_world


@pytest.fixture
def world(tmp_path: Path) -> Path:
    out = tmp_path / "world"
    week_world(out, n_papers=40, seed=5)
    return out


def rated_world(settings: Settings, replay, world: Path):  # type: ignore[no-untyped-def]
    """The world ingested and disambiguated, with ratings of some cited authors: the settings, the
    world's graph truth, the mention links, the rated submissions and the rated reviewers."""
    s = on_replay(settings, replay(world=world)).with_overrides(openalex={"enabled": True}, disambiguate={"use_llm": False})
    ingest_flow.fn(s, START, END, synthetic=True)
    disambiguate_flow.fn(s)
    truth = read_graph(world)
    assert truth is not None
    with Warehouse.open(s.warehouse_path) as wh:
        links = wh.pools.pool_inputs()["links"]
        subs, reviewers = rate_cited_authors(wh, truth, links)
    return s, truth, links, subs, reviewers


def test_the_warehouse_benchmark_carries_the_graph_of_its_world(  # type: ignore[no-untyped-def]
        settings: Settings, replay, world: Path, tmp_path: Path) -> None:
    s, truth, links, subs, reviewers = rated_world(settings, replay, world)
    assert len(subs) >= 3 and len(reviewers) >= 3
    assert load_warehouse(s.warehouse_path).graph is None  # no graph stage yet: no graph, not an empty one
    with pytest.raises(Exception, match="^warehouse carries no citation graph: "):
        make_scorer("citation", Context(s)).score(load_warehouse(s.warehouse_path))

    graph_flow.fn(s)
    b = load_warehouse(s.warehouse_path)
    g = b.graph
    assert g is not None
    assert g.history is not None and g.references is not None
    # Uncapped here (20 papers a profile): the history is the profile, and the graph covers it.
    assert set(g.history.select("reviewer_id", "paper_id").rows()) == set(b.draws[0].select("reviewer_id", "paper_id").rows())
    papers = set(b.submissions["paper_id"]) | set(b.draws[0]["paper_id"])
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        fetched = wh.read(GRAPH_FETCHES).filter(pl.col("found") & (pl.col("kind") == "references"))
        topics = wh.read(PAPER_TOPICS)
        coi = wh.pools.coi_inputs()
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


def test_the_history_is_every_paper_of_a_reviewer_and_the_graph_covers_it(  # type: ignore[no-untyped-def]
        settings: Settings, replay, world: Path, tmp_path: Path) -> None:
    s, truth, links, subs, reviewers = rated_world(settings, replay, world)
    graph_flow.fn(s)
    mine = links.filter(pl.col("author_id").is_in(reviewers) & ~pl.col("arxiv_id").is_in(subs))
    authored = set(mine.select("author_id", "arxiv_id").rows())
    # One reviewer's Semantic Scholar history lists a corpus paper they have no author link to
    # (with its version), a work outside the corpus and the marker row of a fetched author.
    with Warehouse.open(s.warehouse_path) as wh:
        ids = wh.con.execute(
            """SELECT l.author_id, m.s2_author_id FROM author_links l JOIN mentions m USING (arxiv_id, "position")
               WHERE m.s2_author_id IS NOT NULL ORDER BY 1, 2""").fetchall()
        who, sid = next((r, i) for r, i in ids if r in reviewers)
        other = sorted(set(wh.graph.paper_identifiers()["arxiv_id"]) - {p for r, p in authored if r == who} - set(subs))[0]
        now = datetime(2026, 9, 21, tzinfo=UTC)
        wh.upsert(S2_AUTHOR_PAPERS, pl.DataFrame([
            dict(s2_author_id=sid, paper_key="", year=None, arxiv_id=None, fetched_at=now),
            dict(s2_author_id=sid, paper_key="S2-OTHER", year=2026, arxiv_id=f"{other}v2", fetched_at=now),
            dict(s2_author_id=sid, paper_key="S2-AWAY", year=2020, arxiv_id="1901.00001", fetched_at=now)],
            schema=S2_AUTHOR_PAPERS.polars_schema))
    b = load_warehouse(s.warehouse_path, profile_max_papers=1)
    g = b.graph
    assert g is not None and g.history is not None and g.references is not None
    history = set(g.history.select("reviewer_id", "paper_id").rows())
    assert history == authored | {(who, other)}
    profile = set(b.draws[0].select("reviewer_id", "paper_id").rows())
    assert profile < history and b.draws[0]["reviewer_id"].value_counts()["count"].max() == 1  # capped text, whole graph
    years = dict(zip(b.submissions["paper_id"], b.submissions["year"], strict=True))
    assert all(y is not None for y in g.history["year"]) and set(years) & set(g.history["paper_id"]) == set()

    # Citations: the world's references among the submissions and every history paper.
    papers = set(b.submissions["paper_id"]) | set(g.history["paper_id"])
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        fetched = wh.read(GRAPH_FETCHES).filter(pl.col("found") & (pl.col("kind") == "references"))
        raw = wh.con.execute("SELECT citing_arxiv_id, cited_arxiv_id FROM citations").fetchall()
    answered = set(fetched["arxiv_id"])
    want = {(p, r["arxiv_id"]) for p in papers & answered for r in truth["references"][p] if r["arxiv_id"] in papers - {p}}
    assert set(g.citations.select("citing_id", "cited_id").rows()) == want and len(want) > 0
    assert set(g.topics["paper_id"]) - papers == set() and set(g.topics["paper_id"]) & (papers - set(b.draws[0]["paper_id"]))

    # References: every list of the benchmark's papers and every reference to one of them, each
    # resolved one by the paper's id, the others by a prefixed key (works outside the corpus).
    refs = set(g.references.rows())
    resolved = {(a, c) for a, c in raw if c is not None and a != c and (a in papers or c in papers)}
    assert resolved <= refs and any(a not in papers for a, _ in resolved)  # a paper outside citing one of ours
    assert {a for a, _ in raw if a in papers} == {a for a, _ in refs if a in papers}
    outside = {k for _, k in refs if k not in set(c for _, c in raw)}
    assert outside and all(k.split(":")[0] in ("doi", "arxiv", "title", "s2", "openalex") for k in outside)

    # The history's papers count: a citation of a reviewer's paper beyond the capped profile.
    lone = load_warehouse(s.warehouse_path, profile_max_papers=1)
    assert lone.graph is not None
    lone.graph.history = None
    for spec in ("citation", "coupling", "cocitation", "topic"):
        whole = make_scorer(spec, Context(s)).score(b).draws[0]
        capped = make_scorer(spec, Context(s)).score(lone).draws[0]
        assert whole.height >= capped.height > 0, spec
        assert whole.filter(pl.col("score") > 0).height >= capped.filter(pl.col("score") > 0).height, spec
    whole, capped = (make_scorer("citation", Context(s)).score(x).draws[0].filter(pl.col("score") > 0).height for x in (b, lone))
    assert whole > capped

    # A graph with topics but without a single citation: citation refuses in one line, topic scores.
    with Warehouse.open(s.warehouse_path) as wh:
        wh.con.execute("DELETE FROM citations")
    bare = load_warehouse(s.warehouse_path)
    assert bare.graph is not None and bare.graph.citations.height == 0 and bare.graph.topics.height > 0
    with pytest.raises(InputError, match="^warehouse carries no citation between its papers: the citation scorer"):
        make_scorer("citation", Context(s)).score(bare)
    assert make_scorer("topic", Context(s)).score(bare).draws[0].height > 0
    code, out, err = evaluate_cli(tmp_path, "-b", "warehouse", "-s", "topic", "-s", "citation", "--bootstrap", "0")
    one_line_error(code, out, err, 2, "warehouse carries no citation between its papers", "the citation scorer")
    assert not (tmp_path / "rows.json").exists()  # no row for the scorer that could score, none zero for the other
