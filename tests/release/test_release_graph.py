"""The graph in a release, on a small SYNTHETIC world: a release built before the graph stage
carries no graph files and reads with graph=None; after it, the release carries the graph's four
files, listed and verified by the manifest (a changed one refused in one line), ids only and read
by the privacy audit (a rater's name planted in a topic stops the release), and the release
importer's graph is the warehouse importer's on the same papers, under the release's ids."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest

from revbench.errors import ReleaseTampered
from revbench.evaluation.importers.release import load_release
from revbench.evaluation.importers.warehouse import load_warehouse
from revbench.evaluation.scorers import Context, make_scorer
from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.release import PrivacyAuditFailed, release_flow
from revbench.schemas.graph import PAPER_TOPICS
from revbench.schemas.release import FREE_TEXT, GRAPH_TABLES, GRAPH_VOCABULARY
from revbench.settings import Settings
from revbench.synth.graph_files import read_graph
from revbench.tasks.release import release_id
from revbench.warehouse import Warehouse
from tests.release.test_release_card import assert_configs_cover_the_listed_tables, run_card_snippets
from tests.support.cli import evaluate_cli
from tests.support.common import on_replay
from tests.support.evaluation import rate_cited_authors
from tests.support.worlds import END, START, week_world

KEY = "release-graph-key-" + "g" * 20


def test_the_graph_tables_hold_ids_years_and_vocabularies_only() -> None:
    for t in GRAPH_TABLES:
        for c in t.columns:
            if c.dtype == pl.Utf8:
                assert (c.pattern or c.allowed or c.name in GRAPH_VOCABULARY) and c.name not in FREE_TEXT, \
                    f"{t.name}.{c.name} is free text"


def _in_release_ids(b_wh, b_rel) -> dict[str, pl.DataFrame]:  # type: ignore[no-untyped-def]
    """The warehouse benchmark's graph under the release's ids, restricted to the release's papers
    and reviewers (the release keeps the publications of its profile years, the warehouse 20)."""
    key = KEY.encode()
    paper = {p: release_id(key, "paper", p) for p in b_wh.submissions["paper_id"]}
    paper |= {p: hashlib.sha1(t.encode()).hexdigest() for p, t in b_wh.draws[0].select("paper_id", "title").iter_rows()}
    ours = set(b_rel.submissions["paper_id"]) | set(b_rel.draws[0]["paper_id"])
    g = b_wh.graph
    people = set(g.reviewer_institutions["reviewer_id"]) | set(g.coauthors["reviewer_id"])
    rid = {r: release_id(key, "reviewer", r) for r in people}
    inst = {k: k if k.startswith("ror:") else release_id(key, "institution", k)
            for k in g.reviewer_institutions["institution_key"]}
    cites = {(paper[a], paper[b]): (i, s) for a, b, i, s in g.citations.iter_rows()
             if a in paper and b in paper and paper[a] in ours and paper[b] in ours}
    topics = {(paper[p], sc, t): v for p, sc, t, v in g.topics.iter_rows() if p in paper and paper[p] in ours}
    return {"citations": cites, "topics": topics,
            "institutions": {(rid[r], inst[k], f, last) for r, k, f, last in g.reviewer_institutions.iter_rows()},
            "coauthors": {(rid[a], rid[b]) for a, b in g.coauthors.iter_rows()}}


def test_a_release_carries_the_graph_verified_audited_and_read_back(  # type: ignore[no-untyped-def]
        settings: Settings, replay, tmp_path: Path) -> None:
    world = tmp_path / "world"
    week_world(world, n_papers=40, seed=5)
    s = on_replay(settings, replay(world=world)).with_overrides(
        openalex={"enabled": True}, disambiguate={"use_llm": False}, release={"id_key": KEY, "evaluate_after": False})
    ingest_flow.fn(s, START, END, synthetic=True)
    disambiguate_flow.fn(s)
    truth = read_graph(world)
    assert truth is not None
    with Warehouse.open(s.warehouse_path) as wh:
        _subs, reviewers = rate_cited_authors(wh, truth, wh.pools.pool_inputs()["links"])
    assert len(reviewers) >= 3

    # Built before the graph stage, as every release before the graph files: no graph, not an empty one.
    old = release_flow.fn(s, approve="yes")
    assert not [f for f in old.files if f["path"].startswith("data/graph_")]
    assert load_release(Path(old.dir)).graph is None

    graph_flow.fn(s)
    with Warehouse.open(s.warehouse_path) as wh:
        rater = wh.release.release_inputs()["people"].drop_nulls("name").sort("person_id", "name").row(0, named=True)
        some_paper = wh.ratings.benchmark_frames(None)["papers"]["paper_id"][0]
        first, *_, last = rater["name"].split()
        planted = {"arxiv_id": some_paper, "scheme": "s2-fos", "topic": f"{last}, {first[0]}.", "origin": "external"}
        wh.upsert(PAPER_TOPICS, pl.DataFrame([planted]))
    with pytest.raises(PrivacyAuditFailed, match=r"^privacy audit: 1 identifiers in the release, nothing was written: "
                                                 r"graph_topics row \d+ field topic: person_name"):
        release_flow.fn(s, approve="yes")
    assert not (s.releases_dir / "v2").exists()
    with Warehouse.open(s.warehouse_path) as wh:
        wh.con.execute("DELETE FROM paper_topics WHERE topic = ?", [planted["topic"]])

    new = release_flow.fn(s, approve="yes")
    assert new.version == "v2" and new.parent == "v1"
    listed = {f["path"]: f for f in new.files}
    assert all(f"data/{t.name}.parquet" in listed for t in GRAPH_TABLES)
    folder = Path(new.dir)
    keys = pl.read_parquet(folder / "data" / "graph_institutions.parquet")["institution_key"]
    assert keys.len() > 0 and all(re.fullmatch(r"ror:\w{9}|i_[0-9a-f]{16}", k) for k in keys)  # ids, never a name
    assert "graph_citations" in (folder / "CHANGES.md").read_text()
    # The card names each graph file it lists as a configuration; its snippets load them all, from
    # inside the folder and from elsewhere.
    text = (folder / "README.md").read_text()
    assert {"graph_citations", "graph_coauthors"} <= set(assert_configs_cover_the_listed_tables(text))
    run_card_snippets(text, folder, tmp_path, sql_rows=False)  # the query finds no paper-centric tuple of this small world

    b_rel, b_wh = load_release(folder), load_warehouse(s.warehouse_path)
    assert b_rel.graph is not None and b_wh.graph is not None
    want = _in_release_ids(b_wh, b_rel)
    g = b_rel.graph
    assert len(want["citations"]) >= 3
    assert {(a, b): (i, src) for a, b, i, src in g.citations.iter_rows()} == want["citations"]
    assert {(p, sc, t): v for p, sc, t, v in g.topics.iter_rows()} == want["topics"]
    assert set(g.reviewer_institutions.iter_rows()) == want["institutions"] and want["institutions"]
    assert set(g.coauthors.iter_rows()) == want["coauthors"]
    for spec in ("citation", "topic"):
        scores = make_scorer(spec, Context(s)).score(b_rel).draws[0]
        assert scores.height > 0 and scores["score"].max() > 0, spec
    code, _, err = evaluate_cli(tmp_path, "-b", f"release={folder}", "-s", "citation", "-s", "topic", "--bootstrap", "0")
    assert code == 0, err
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert {r["scorer"] for r in rows} == {"citation", "topic"} and any(r["metric"] == "loss" for r in rows)

    # A graph file changed after the build is refused by name, before anything is read.
    path = folder / "data" / "graph_citations.parquet"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert any(f["path"] == "data/graph_citations.parquet" for f in manifest["files"])
    pl.read_parquet(path).head(1).write_parquet(path)
    with pytest.raises(ReleaseTampered, match=r"graph_citations\.parquet: \d+ bytes where manifest\.json lists \d+"):
        load_release(folder)


def test_the_demo_evaluates_the_graph_scorers_and_cof_only_where_registered(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from revbench.app.demo import demo_scorers
    from revbench.evaluation.scorers import base

    configured = ["trivial", "tpms", "bm25:pooling=mean", "embedding:pooling=mean"]
    monkeypatch.delitem(base.SCORER_MODULES, "cof", raising=False)
    assert demo_scorers(configured) == [*configured, "citation", "topic"]
    monkeypatch.setitem(base.SCORER_MODULES, "cof", "revbench.evaluation.scorers.cof")
    assert demo_scorers([*configured, "topic"]) == [*configured, "topic", "citation", "cof"]


def test_graph_tables_keep_ids_only_and_merge_a_publication_given_twice() -> None:
    from revbench.tasks.release import graph_tables

    key = KEY.encode()
    rid, pid = {"a1": "r_" + "1" * 16, "a2": "r_" + "2" * 16}, {"2609.00001": "p_" + "0" * 16}
    papers = pl.DataFrame({"paper_id": ["2609.00001"]})
    profiles = pl.DataFrame({"reviewer_id": ["a1", "a2"], "paper_id": ["2609.00002", "2609.00003"],
                             "title": ["Same title", "Same title"]})  # one publication, twice in the corpus
    graph = {
        "citations": pl.DataFrame({"citing_id": ["2609.00001", "2609.00001", "2609.00001"],
                                   "cited_id": ["2609.00002", "2609.00003", "2609.09999"],
                                   "is_influential": [None, True, False], "source": ["openalex", "s2", "s2"]}),
        "topics": pl.DataFrame({"paper_id": ["2609.00002"], "scheme": ["arxiv"], "topic": ["cs.IR"], "score": [None]},
                               schema_overrides={"score": pl.Float64}),
        "reviewer_institutions": pl.DataFrame({"reviewer_id": ["a1", "a2", "x9"],
                                               "institution_key": ["ror:05x2bcf33", "name:jane doe lab at acme", "name:x"],
                                               "first_year": [2020, None, 2021], "last_year": [2024, 2025, 2022]}),
        "coauthors": pl.DataFrame({"reviewer_id": ["a1", "a2", "a1"], "other_id": ["a2", "a1", "x9"]}),
    }
    out = graph_tables(graph, papers, profiles, rid, pid, key)
    same = hashlib.sha1(b"Same title").hexdigest()
    assert out["graph_citations"].rows() == [("p_" + "0" * 16, same, True, "openalex,s2")]
    assert out["graph_topics"].rows() == [(same, "arxiv", "cs.IR", None)]
    assert sorted(out["graph_institutions"].rows()) == [
        (rid["a1"], "ror:05x2bcf33", 2020, 2024),
        (rid["a2"], release_id(key, "institution", "name:jane doe lab at acme"), None, 2025)]
    assert "doe" not in str(out["graph_institutions"].to_dicts()).lower()  # a name-keyed institution is a keyed hash
    assert sorted(out["graph_coauthors"].rows()) == [(rid["a1"], rid["a2"]), (rid["a2"], rid["a1"])]
