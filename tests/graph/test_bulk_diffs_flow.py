"""A day later from S2AG's diffs, through the graph stage: each run records the release it read,
the next reads only the increments after it (the base files are not read again: they are gone),
and the warehouse it leaves holds the same S2 tables as a fresh one that read the new release
whole; a corpus paper S2 deleted is asked over the API in both; a run again changes nothing."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.schemas.graph import CITATIONS, GRAPH_FETCHES, PAPER_TOPICS
from revbench.synth.bulk_files import write_s2ag
from revbench.synth.world import grow_world
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.graph_rates import rates_resolved_again
from tests.support.worlds import END, START, week_world

pytestmark = pytest.mark.slow
R0, R1 = "2026-09-08", "2026-09-15"


def _s2(s) -> dict[str, pl.DataFrame]:  # type: ignore[no-untyped-def]
    """The warehouse's S2 answers, without when and by which run they came."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        cites = wh.read(CITATIONS).filter(pl.col("source") == "s2")
        topics = wh.read(PAPER_TOPICS).filter(pl.col("scheme") == "s2-fos")
        fetches = wh.read(GRAPH_FETCHES).filter(pl.col("source") == "s2")
        release = wh.runs.last_completed_parameter("graph", "s2_bulk_through")
    out = {"citations": cites, "topics": topics, "fetches": fetches.select("arxiv_id", "kind", "found", "n_rows")}
    out = {k: v.drop([c for c in ("fetched_at", "run_id", "updated_at") if c in v.columns]) for k, v in out.items()}
    return {k: v.sort(v.columns) for k, v in out.items()} | {"release": release}


def _same(a: dict, b: dict) -> None:
    for name in ("citations", "topics", "fetches"):
        assert a[name].equals(b[name]), name


def test_a_day_later_reads_the_increment_and_matches_the_release_read_whole(settings, replay, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    world, root = tmp_path / "world", tmp_path / "s2ag"
    week_world(world, n_papers=30, seed=7)
    write_s2ag(world, root, release=R0)
    s = on_replay(settings.with_overrides(data_dir=tmp_path / "daily"), replay(world=world)).with_overrides(s2={"bulk_dir": root})
    ingest_flow.fn(s, START, END, synthetic=True)
    first = graph_flow.fn(s)
    assert first.failed == 0 and _s2(s)["release"] == {"dir": str(root), "release": R0}
    assert first.match_rates == rates_resolved_again(s.warehouse_path, first.run_id) != []

    grow_world(world, 1)
    write_s2ag(world, root, release=R1, since=R0, revised=True)
    whole = tmp_path / "whole"
    shutil.move(root / R1, whole)  # the day-later run gets the increment alone; the fresh one the release
    shutil.rmtree(root / R0)  # and the base is not read again
    app = replay(world=world)
    grown = on_replay(s, app).with_overrides(s2={"bulk_dir": root})
    ingest_flow.fn(grown, START, END + timedelta(days=1), synthetic=True)
    served = app.faults.stats()["served"].get("s2", 0)
    later = graph_flow.fn(grown)
    asked = app.faults.stats()["served"].get("s2", 0) - served
    daily = _s2(grown)
    assert daily["release"] == {"dir": str(root), "release": R1} and later.failed == 0
    # counted when saved (the patched references, of papers not answered again, are not this run's)
    assert later.match_rates == rates_resolved_again(grown.warehouse_path, later.run_id)

    fresh_root = tmp_path / "fresh-s2ag"
    shutil.copytree(whole, fresh_root / R1)
    fresh = on_replay(settings.with_overrides(data_dir=tmp_path / "fresh"), replay(world=world)).with_overrides(
        s2={"bulk_dir": fresh_root})
    ingest_flow.fn(fresh, START, END + timedelta(days=1), synthetic=True)
    graph_flow.fn(fresh)
    _same(daily, _s2(fresh))
    # the paper S2 deleted was asked over the API (its answer is the replay's), the rest read from files
    line = next(n for n in later.notes if n.startswith("s2: "))
    assert f"release {R1} by the increments {R0}_{R1} after {R0}" in line and "1 papers S2 deleted" in line, line
    # papers citing one S2 retitled were patched where stored, not answered again (and match the fresh run)
    assert re.search(r"; [1-9][0-9]* papers' references to papers S2 updated were patched", line), line
    assert asked > 0

    again = graph_flow.fn(grown)
    assert again.papers_asked == 0 and again.references_saved == 0
    _same(_s2(grown), daily)


def test_a_folder_recorded_under_another_spelling_is_the_same_folder(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A run given ``data/s2ag`` from one directory, the next ``/abs/.../data/s2ag`` (or a link to
    # it): the same folder, so the next reads the increments, not the release whole again.
    from revbench.flows.graph_bulk import same_folder

    (tmp_path / "data" / "s2ag").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    assert same_folder("data/s2ag", tmp_path / "data" / "s2ag")
    assert same_folder(str(tmp_path / "link" / "s2ag"), Path("data/s2ag"))
    assert not same_folder("data", tmp_path / "data" / "s2ag")
    assert not same_folder(None, tmp_path / "data" / "s2ag")
