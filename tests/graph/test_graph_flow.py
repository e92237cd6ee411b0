"""The graph flow on a SYNTHETIC world served by the replay: references resolved to the world's
papers as its truth says, null-id references kept by title, topics stored; incremental (a second run
asks nothing, a day later only the new papers); a Semantic Scholar that fails for some papers
loses nothing and the next run asks exactly those."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.refresh import Plan, plan_graph
from revbench.schemas.graph import CITATIONS, GRAPH_FETCHES, PAPER_TOPICS
from revbench.settings import Settings
from revbench.synth.graph_files import read_graph
from revbench.synth.world import grow_world
from revbench.tasks.graph_fetch import resolve_changed
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.graph_rates import rates_resolved_again
from tests.support.worlds import END, START, week_world


@pytest.fixture
def world(tmp_path: Path) -> Path:
    out = tmp_path / "world"
    week_world(out, n_papers=40, seed=5)
    return out


def _ingested(settings: Settings, replay, world: Path, until: date = END) -> Settings:  # type: ignore[no-untyped-def]
    s = on_replay(settings, replay(world=world))
    ingest_flow.fn(s, START, until, synthetic=True)
    return s


def _read(s: Settings, table) -> pl.DataFrame:  # type: ignore[no-untyped-def]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return wh.read(table)


def _plan(s: Settings) -> Plan:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return plan_graph(s, wh)


def test_references_resolve_to_the_world_papers_its_truth_names(settings, replay, world: Path) -> None:
    s = _ingested(settings, replay, world)
    out = graph_flow.fn(s)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ours = set(wh.graph.paper_identifiers()["arxiv_id"])
        cites, topics, fetches = wh.read(CITATIONS), wh.read(PAPER_TOPICS), wh.read(GRAPH_FETCHES)
    truth = read_graph(world)["references"]
    assert out.failed == 0 and out.papers_asked == len(ours)
    s2 = {r["source"]: r for r in out.coverage["sources"]}["s2"]
    # A paper S2 does not know is an answer too: recorded as not found, not asked again.
    known = set(fetches.filter(pl.col("found") & (pl.col("kind") == "references"))["arxiv_id"])
    assert len(known) >= 0.8 * len(ours) and fetches.height == 2 * len(ours)
    assert set(fetches.filter(~pl.col("found"))["arxiv_id"]) == ours - known
    assert s2["papers_with_references"] == len(known) and s2["papers_with_topics"] == len(known)

    expected = {(p, i): r for p in known for i, r in enumerate(truth[p])}
    assert cites.height == len(expected)
    got = {(c["citing_arxiv_id"], c["ordinal"]): c for c in cites.to_dicts()}
    in_corpus = [k for k, r in expected.items() if r["arxiv_id"] in ours]
    assert in_corpus, "the world cites its own papers"
    # Every reference to a paper of ours resolves to it; outside works stay unresolved (a title
    # the world happens to give twice aside).
    assert [k for k in in_corpus if got[k]["cited_arxiv_id"] != expected[k]["arxiv_id"]] == []
    wrong = [k for k, r in expected.items() if r["arxiv_id"] not in ours and got[k]["cited_arxiv_id"] is not None]
    assert len(wrong) <= 0.02 * len(expected)
    assert s2["resolved"] == cites["cited_arxiv_id"].is_not_null().sum() >= len(in_corpus)
    rate = {r["source"]: r for r in out.match_rates}["s2"]
    assert rate["resolved"] == s2["resolved"] and rate["references"] == cites.height
    # the settled sources' rates, counted when saved, are what resolving every reference again gives
    assert out.match_rates == rates_resolved_again(s.warehouse_path, out.run_id)

    nulls = [k for k, r in expected.items() if r["s2_id"] is None]
    assert nulls and all(got[k]["cited_s2_id"] is None and got[k]["cited_title"] == expected[k]["title"] for k in nulls)
    assert topics.filter(pl.col("scheme") == "s2-fos").height >= 2 * len(known)


def test_a_second_run_asks_nothing_and_a_day_later_only_the_new_papers(settings, replay, world: Path) -> None:
    s = _ingested(settings, replay, world)
    assert _plan(s).run
    first = graph_flow.fn(s)
    assert not _plan(s).run and _plan(s).reason == "every paper asked of s2 already"
    again = graph_flow.fn(s)
    assert first.papers_asked > 0 and again.papers_asked == 0 and again.references_saved == 0
    before = _read(s, GRAPH_FETCHES)

    manifest = grow_world(world, 1)
    grown = _ingested(s, replay, world, END + timedelta(days=1))
    new_day = manifest["days"]["papers_per_day"]
    assert _plan(grown).reason == f"papers not asked yet: {new_day} for s2/references, {new_day} for s2/topics"
    later = graph_flow.fn(grown)
    fetches = _read(grown, GRAPH_FETCHES)
    new = fetches.join(before.select("arxiv_id", "source", "kind"), on=["arxiv_id", "source", "kind"], how="anti")
    assert later.papers_asked == new["arxiv_id"].n_unique() == manifest["days"]["papers_per_day"]
    assert later.asked == {"s2/references": later.papers_asked, "s2/topics": later.papers_asked}
    # The earlier answers were not asked again (their fetch rows are the first run's).
    kept = fetches.join(before, on=["arxiv_id", "source", "kind"])
    assert kept.height == before.height and (kept["run_id"] == first.run_id).all()


def test_s2_failing_for_some_papers_loses_nothing_and_the_next_run_asks_them(settings, replay, world: Path) -> None:
    s = _ingested(settings, replay, world)
    faulty = on_replay(s, replay(world=world, fault_rate=0.35, max_consecutive_faults=50, fault_kinds={"s2": ("500",)}))
    faulty = faulty.with_overrides(http={"max_attempts": 1, "breaker_failures": 1000})
    first = graph_flow.fn(faulty)
    assert 0 < first.failed and first.papers_answered > 0
    assert all(f["source"] == "s2" and "500" in f["error"] for f in first.failures)
    failed_refs = {f["arxiv_id"] for f in first.failures if f["kind"] == "references"}
    fetches = _read(s, GRAPH_FETCHES)
    cites = _read(s, CITATIONS)
    refs = fetches.filter(pl.col("kind") == "references")
    assert failed_refs and not failed_refs & set(refs["arxiv_id"]), "a failed paper is not recorded as asked"
    assert set(cites["citing_arxiv_id"]) == set(refs.filter("found")["arxiv_id"]), "every answer was kept"

    second = graph_flow.fn(on_replay(s, replay(world=world)))
    assert second.failed == 0
    assert second.asked["s2/references"] == len(failed_refs)
    refs = _read(s, GRAPH_FETCHES).filter(pl.col("kind") == "references")
    assert failed_refs <= set(refs["arxiv_id"]) and refs.height == len(set(refs["arxiv_id"]))
    assert set(_read(s, CITATIONS)["citing_arxiv_id"]) == set(refs.filter("found")["arxiv_id"]) > set(cites["citing_arxiv_id"])


def test_a_day_later_looks_again_only_at_references_a_new_paper_can_answer(settings, replay, world: Path) -> None:
    # Day 1, then a planted reference of a day-1 paper to a work that arrives only on day 2 (by
    # title, as a preprint's published version is cited before it is on arXiv), and one to nothing.
    s = _ingested(settings, replay, world).with_overrides(openalex={"enabled": True})
    first = graph_flow.fn(s)
    # A first run looks at every unresolved reference but S2's, which it resolved as it saved them
    # against the same papers (and which name no OpenAlex work a later answer could resolve).
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        unresolved_s2 = wh.graph.citations_to_resolve().filter(pl.col("source") == "s2").height
    assert unresolved_s2 > 0
    assert first.re_checked == first.unresolved - unresolved_s2 + first.re_resolved > 0
    grow_world(world, 1)
    grown = _ingested(s, replay, world, END + timedelta(days=1))
    with Warehouse.open(grown.warehouse_path) as wh:
        day1 = wh.graph.citations_to_resolve().row(0, named=True)["citing_arxiv_id"]
        new = wh.graph.paper_identifiers().filter(pl.col("arxiv_id").is_in(wh.graph.ids_loaded_since(datetime.now(UTC) - timedelta(minutes=10))))
        target = new.filter(~pl.col("arxiv_id").is_in(list(set(_read(s, GRAPH_FETCHES)["arxiv_id"])))).row(0, named=True)
        planted = CITATIONS.conform(pl.DataFrame([
            {"citing_arxiv_id": day1, "source": "grobid", "ordinal": 900, "cited_title": target["title"].upper() + ".",
             "cited_year": target["year"]},
            {"citing_arxiv_id": day1, "source": "grobid", "ordinal": 901, "cited_title": "A work none of ours is",
             "cited_year": target["year"]}], infer_schema_length=None))
        # Keyed as the day-1 run left its references: resolved against day 1's papers, to nothing.
        keyed = resolve_changed(planted, wh.graph.paper_identifiers().filter(pl.col("arxiv_id") != target["arxiv_id"]))[1]
        assert keyed.citations["cited_arxiv_id"].is_null().all() and keyed.citations["match_keys"].is_not_null().all()
        wh.graph.save_graph(citations=keyed.citations)
        unresolved_before = wh.graph.unresolved_count()
    later = graph_flow.fn(grown)
    got = {r["ordinal"]: r["cited_arxiv_id"] for r in _read(grown, CITATIONS).filter(
        (pl.col("citing_arxiv_id") == day1) & (pl.col("source") == "grobid")).to_dicts()}
    assert got[900] == target["arxiv_id"] and got[901] is None
    assert 0 < later.re_checked < unresolved_before, "only the references a new paper can answer were looked at"
    # Nothing was missed: resolving every unresolved reference against every paper changes none.
    with Warehouse.open(grown.warehouse_path, read_only=True) as wh:
        pending = wh.graph.citations_to_resolve()
        assert pending["match_keys"].is_not_null().all(), "every reference looked at is keyed"
        assert resolve_changed(pending, wh.graph.paper_identifiers(), wh.graph.known_work_ids())[0].height == 0
        assert later.unresolved == pending.height


def test_an_older_reference_resolves_once_the_paper_it_cites_arrives() -> None:
    old = CITATIONS.conform(pl.DataFrame([
        {"citing_arxiv_id": "2401.00001", "source": "s2", "ordinal": 0, "cited_title": "A Paper That Arrived Later",
         "cited_year": 2024},
        {"citing_arxiv_id": "2401.00001", "source": "openalex", "ordinal": 0, "cited_openalex_id": "W123"},
        {"citing_arxiv_id": "2401.00001", "source": "s2", "ordinal": 1, "cited_title": "Still nowhere to be found",
         "cited_year": 2024}], infer_schema_length=None))
    papers = pl.DataFrame({"arxiv_id": ["2409.00007", "2409.00008"], "doi": [None, None],
                           "title": ["A paper that arrived later", "Another new paper entirely"], "year": [2024, 2024]})
    changed, res = resolve_changed(old, papers, {"W123": "2409.00008"})
    assert changed.select("source", "ordinal", "cited_arxiv_id").rows() == [("s2", 0, "2409.00007"),
                                                                           ("openalex", 0, "2409.00008")]
    assert res.counts == {"doi": 0, "arxiv": 1, "title_year": 1, "unresolved": 1}


def test_openalex_when_enabled_gives_topics_affiliations_and_references_to_our_papers(settings, replay, world: Path) -> None:
    # Pieces of 7 papers: a reference to a paper of a later piece resolves only once that piece is in.
    s = _ingested(settings, replay, world).with_overrides(openalex={"enabled": True}, ingest={"commit_every": 7})
    out = graph_flow.fn(s)
    assert out.failed == 0
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ours = set(wh.graph.paper_identifiers()["arxiv_id"])
        cites = wh.read(CITATIONS).filter(pl.col("source") == "openalex")
    truth = read_graph(world)["references"]
    oa = {r["source"]: r for r in out.coverage["sources"]}["openalex"]
    assert oa["papers_with_topics"] == len(ours) and out.coverage["affiliations"] > 0
    assert out.coverage["with_ror"] == out.coverage["institutions"] > 0
    # OpenAlex lists only works it knows (the world's own); those that are our papers resolve by their work id.
    cited_ours = sum(r["arxiv_id"] in ours for p in ours for r in truth[p] if r["in_world"])
    assert cites["cited_arxiv_id"].is_not_null().sum() == cited_ours > 0
    assert {r["source"]: r for r in out.match_rates}["openalex"]["resolved"] == oa["resolved"] == cited_ours
    assert _plan(s).reason == "every paper asked of s2, openalex already"


def test_a_day_later_referenced_works_resolve_to_papers_an_earlier_run_fetched(settings, replay, world: Path) -> None:
    # OpenAlex names a cited work by its work id alone; the day-1 papers' own work ids must outlive day 1's run.
    s = _ingested(settings, replay, world).with_overrides(openalex={"enabled": True})
    graph_flow.fn(s)
    day1 = set(_read(s, GRAPH_FETCHES)["arxiv_id"])
    grow_world(world, 1)
    grown = _ingested(s, replay, world, END + timedelta(days=1))
    later = graph_flow.fn(grown)
    cites = _read(grown, CITATIONS).filter((pl.col("source") == "openalex") & ~pl.col("citing_arxiv_id").is_in(list(day1)))
    truth = read_graph(world)["references"]
    # OpenAlex lists only the works it knows (the world's own), in the paper's order.
    want = {(p, i): r["arxiv_id"] for p in set(cites["citing_arxiv_id"])
            for i, r in enumerate(r for r in truth[p] if r["in_world"])}
    to_day1 = [(c["citing_arxiv_id"], c["ordinal"]) for c in cites.to_dicts()
               if want[(c["citing_arxiv_id"], c["ordinal"])] in day1]
    assert to_day1, "the new day's papers cite day 1's"
    got = {(c["citing_arxiv_id"], c["ordinal"]): c["cited_arxiv_id"] for c in cites.to_dicts()}
    assert [k for k in to_day1 if got[k] != want[k]] == []
    assert {r["source"]: r for r in later.match_rates}["openalex"]["resolved"] >= len(to_day1)
    found = _read(grown, GRAPH_FETCHES).filter((pl.col("source") == "openalex") & pl.col("found"))
    with Warehouse.open(grown.warehouse_path, read_only=True) as wh:
        assert set(wh.graph.known_work_ids().values()) == set(found["arxiv_id"]) > day1 & set(found["arxiv_id"])
