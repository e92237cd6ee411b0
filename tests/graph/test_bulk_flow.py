"""The graph stage from S2AG files written from the same world the replay serves: the same
citations and topics as the API path (a reference S2 could not place lacks only its title, as
S2AG carries none), the bulk's papers not asked over the API, the rest asked as before."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from revbench.clients import s2_graph
from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.schemas.graph import CITATIONS, GRAPH_FETCHES, PAPER_TOPICS
from revbench.synth.bulk_files import write_s2ag
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.graph_rates import rates_resolved_again
from tests.support.worlds import END, START, week_world

pytestmark = pytest.mark.slow
KEYS = ["citing_arxiv_id", "ordinal"]
SAME = ["cited_s2_id", "cited_arxiv", "cited_doi", "cited_year", "cited_arxiv_id", "is_influential", "n_contexts"]


def _graph(settings, replay, world: Path, data: Path, bulk: Path | None = None):  # type: ignore[no-untyped-def]
    app = replay(world=world)
    s = on_replay(settings.with_overrides(data_dir=data), app)
    if bulk is not None:
        s = s.with_overrides(s2={"bulk_dir": bulk})
    ingest_flow.fn(s, START, END, synthetic=True)
    before = app.faults.stats()["served"].get("s2", 0)
    out = graph_flow.fn(s)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        tables = {t.name: wh.read(t) for t in (CITATIONS, PAPER_TOPICS, GRAPH_FETCHES)}
    return out, tables, app.faults.stats()["served"].get("s2", 0) - before


def test_bulk_and_api_paths_give_the_same_graph(settings, replay, tmp_path: Path) -> None:
    world = tmp_path / "world"
    week_world(world, n_papers=40, seed=5)
    counts = write_s2ag(world, tmp_path / "s2ag")
    assert counts["papers"] > 0 and counts["citations"] > 0
    api, api_t, api_requests = _graph(settings, replay, world, tmp_path / "api")
    bulk, bulk_t, bulk_requests = _graph(settings, replay, world, tmp_path / "bulk", tmp_path / "s2ag")
    a, b = (t["citations"].sort(KEYS) for t in (api_t, bulk_t))
    assert a.height == b.height > 0
    # A reference S2 placed is the same row either way; one it could not place (a null citedcorpusid
    # in S2AG) keeps its position, influence and contexts, and loses what S2AG does not carry.
    placed = a["cited_s2_id"].is_not_null()
    assert placed.any() and (~placed).any()
    assert a.filter(placed).select(KEYS + SAME + ["cited_title"]).equals(b.filter(placed).select(KEYS + SAME + ["cited_title"]))
    kept = KEYS + ["is_influential", "n_contexts"]
    assert a.filter(~placed).select(kept).equals(b.filter(~placed).select(kept))
    assert b.filter(~placed)["cited_title"].null_count() == b.filter(~placed).height  # S2AG has no title for them
    with_contexts = a["n_contexts"] > 0
    assert a.filter(with_contexts)["intents"].to_list() == b.filter(with_contexts)["intents"].to_list()
    topics = [set(t["paper_topics"].filter(pl.col("scheme") == s2_graph.SCHEME).select("arxiv_id", "topic", "origin").iter_rows())
              for t in (api_t, bulk_t)]
    assert topics[0] and topics[0] == topics[1]
    # the bulk answered its papers: the API was asked only for the ones the files lack (none here)
    s2 = next(r for r in bulk.coverage["sources"] if r["source"] == "s2")
    assert s2["papers_with_references"] == next(r for r in api.coverage["sources"] if r["source"] == "s2")["papers_with_references"]
    assert bulk_requests < api_requests


def test_openalex_snapshot_and_api_give_the_same_graph(settings, replay, tmp_path: Path) -> None:
    from revbench.replay.snapshot import write_snapshot
    from revbench.schemas.graph import AUTHOR_AFFILIATIONS, PAPER_AUTHORSHIPS

    world = tmp_path / "world"
    week_world(world, n_papers=30, seed=7)
    counts = write_snapshot(world, tmp_path / "openalex")
    assert counts["works"] > 0 and counts["partitions"] >= 2 and counts["authors"] > 0

    def run(data: Path, snapshot: Path | None) -> dict[str, pl.DataFrame]:
        app = replay(world=world)
        s = on_replay(settings.with_overrides(data_dir=data), app).with_overrides(
            openalex={"enabled": True, **({"snapshot_dir": snapshot} if snapshot else {})})
        ingest_flow.fn(s, START, END, synthetic=True)
        out = graph_flow.fn(s)
        # from the snapshot alone OpenAlex is settled, its rates counted when saved; over the API resolved again
        assert out.match_rates == rates_resolved_again(s.warehouse_path, out.run_id)
        with Warehouse.open(s.warehouse_path, read_only=True) as wh:
            return {t.name: wh.read(t) for t in (CITATIONS, PAPER_TOPICS, AUTHOR_AFFILIATIONS, PAPER_AUTHORSHIPS)}

    api, bulk = run(tmp_path / "api", None), run(tmp_path / "bulk", tmp_path / "openalex")
    oa = [t["citations"].filter(pl.col("source") == "openalex").sort(KEYS).drop("fetched_at", strict=False) for t in (api, bulk)]
    assert oa[0].height > 0 and oa[0].drop(["run_id"], strict=False).equals(oa[1].drop(["run_id"], strict=False))
    for name in ("paper_topics", "author_affiliations", "paper_authorships"):
        cols = [c for c in api[name].columns if c not in ("fetched_at", "run_id", "updated_at")]
        assert api[name].select(cols).sort(cols).equals(bulk[name].select(cols).sort(cols)), name


def test_a_day_later_reads_only_the_snapshots_new_partitions(settings, replay, tmp_path: Path) -> None:
    from datetime import timedelta

    from revbench.flows.graph_bulk import read_bulk
    from revbench.replay.snapshot import write_snapshot
    from revbench.synth.world import grow_world
    from revbench.warehouse.bulk import latest_partition

    world, snap = tmp_path / "world", tmp_path / "openalex"
    week_world(world, n_papers=30, seed=7)
    write_snapshot(world, snap)
    app = replay(world=world)
    s = on_replay(settings, app).with_overrides(openalex={"enabled": True, "snapshot_dir": snap})
    ingest_flow.fn(s, START, END, synthetic=True)
    first = graph_flow.fn(s)
    through = latest_partition(snap, "works")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        recorded = wh.runs.last_completed_parameter("graph", "openalex_bulk_through")
    assert recorded == {"dir": str(snap), "through": through} and first.failed == 0

    manifest = grow_world(world, 1)
    write_snapshot(world, snap)  # the snapshot's next release: one more partition
    assert latest_partition(snap, "works") > through
    grown = on_replay(settings, replay(world=world)).with_overrides(openalex={"enabled": True, "snapshot_dir": snap})
    ingest_flow.fn(grown, START, END + timedelta(days=1), synthetic=True)
    new_day = manifest["days"]["papers_per_day"]
    # only the partitions after the first run's are scanned: the new day's works are found there ...
    with Warehouse.open(grown.warehouse_path, read_only=True) as wh:
        after = wh.runs.last_completed_parameter("graph", "openalex_bulk_through")
        new_ids = sorted(wh.graph.papers_to_fetch("openalex", "references"))
    assert len(new_ids) == new_day
    got = read_bulk(grown, "openalex", {"references": new_ids}, after)
    assert got is not None and got.answered() == set(new_ids)
    # ... and an older paper's work is not in them (it would be asked over the API)
    old = read_bulk(grown, "openalex", {"references": [sorted(set(_ids(s)) - set(new_ids))[0]]}, after)
    assert old is not None and old.fetches.is_empty()
    later = graph_flow.fn(grown)
    assert later.papers_asked == new_day and later.failed == 0


def _ids(s) -> list[str]:  # type: ignore[no-untyped-def]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        return wh.graph.paper_identifiers()["arxiv_id"].to_list()
