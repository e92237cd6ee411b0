"""The refresh on a SYNTHETIC world: the first run does the work, the second does none (each stage
says why), and after the world grows by a day only that day's work is done."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from revbench.flows.refresh import RefreshResult, StageOutcome, refresh_flow, window
from revbench.schemas.tables import MENTIONS, PAPERS, REFRESH_STAGES
from revbench.settings import Settings
from revbench.synth.draw import WorldSpec
from revbench.synth.world import generate_world, grow_world
from revbench.warehouse import Warehouse
from tests.support.common import on_replay

pytestmark = pytest.mark.slow

START, END = date(2026, 9, 1), date(2026, 9, 14)


def _stages(out: RefreshResult) -> dict[str, StageOutcome]:
    return {r.stage: r for r in out.stages}


def _run_stage_rows(s: Settings, flow: str) -> pl.DataFrame:
    """``run_stages`` rows of the newest run of ``flow``."""
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        run_id = wh.runs.latest_runs(50).filter(pl.col("flow") == flow)["run_id"][0]
        return wh.runs.run_stages(run_id)


def test_refresh_twice_then_a_day_later(prefect_server, replay, settings, tmp_path: Path) -> None:
    world = tmp_path / "world"
    generate_world(world, WorldSpec(n_papers=90, seed=11, start=START, end=END))
    base = settings.with_overrides(
        refresh={"window_days": (END - START).days + 1, "until": END.isoformat(), "new_round_min_papers": 1000},
        pools={"tau": 0.5, "min_recent_papers": 1, "candidates_per_query": 3, "queries_per_category": 3},
        disambiguate={"use_llm": False})
    s = on_replay(base, replay(world=world))

    first = refresh_flow(s, synthetic=True)
    st = _stages(first)
    assert st["disambiguate"].reason.startswith("no disambiguation by a refresh yet")
    assert [r.stage for r in first.stages] == ["ingest", "graph", "disambiguate", "pools", "survey", "ratings", "release",
                                                      "evaluate"]
    assert {k: v.status for k, v in st.items()} == {
        "ingest": "ran", "graph": "ran", "disambiguate": "ran", "pools": "ran", "survey": "skipped", "ratings": "skipped",
        "release": "skipped", "evaluate": "skipped"}
    assert "REVBENCH_SMTP__HOST" in st["survey"].reason and "no survey store" in st["ratings"].reason
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        papers_first = wh.count(PAPERS)
    assert papers_first > 0

    second = refresh_flow(s, synthetic=True)
    st2 = _stages(second)
    assert all(r.status == "skipped" for r in second.stages), second.stages
    assert "crawled" in st2["ingest"].reason and "unchanged" in st2["disambiguate"].reason
    assert st2["graph"].reason == "every paper asked of s2 already"
    assert "papers new since round 1" in st2["pools"].reason
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        recorded = wh.read(REFRESH_STAGES).filter(pl.col("refresh_id") == second.run_id)
        runs = wh.runs.latest_runs(50)
    assert recorded.height == 8 and set(recorded["status"]) == {"skipped"}
    assert runs.filter(pl.col("flow") == "ingest").height == 1, "the second refresh started no ingest"

    manifest = grow_world(world, 1)
    grown = s.with_overrides(refresh={"until": (END + timedelta(days=1)).isoformat()})
    grown = on_replay(grown, replay(world=world))
    third = refresh_flow(grown, synthetic=True)
    st3 = _stages(third)
    assert st3["ingest"].status == "ran" and st3["disambiguate"].status == "ran"
    # The graph asks only about the new day's papers.
    new_day = manifest["days"]["papers_per_day"]
    assert st3["graph"].reason == f"papers not asked yet: {new_day} for s2/references, {new_day} for s2/topics"
    # Only the day's mentions count as changed, and only their name blocks are read.
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        n_mentions, day_mentions = wh.count(MENTIONS), wh._exec(
            "SELECT count(*) FROM mentions JOIN papers USING (arxiv_id) WHERE papers.run_id = ?",
            [json.loads(st3["ingest"].summary)["run_id"]])[0][0]
    assert 0 < day_mentions < n_mentions
    assert st3["disambiguate"].reason.startswith(
        f"{day_mentions} of {n_mentions} mentions new or changed and 0 removed since the last disambiguation")
    decided = json.loads(st3["disambiguate"].summary)
    assert decided["mentions"] == n_mentions and day_mentions <= decided["mentions_checked"] < n_mentions
    assert 0 < decided["blocks_decided"] < decided["blocks"]
    assert st3["pools"].status == "skipped"
    assert "5 of 70 day slices" in st3["ingest"].reason  # 5 categories x 14 days: the new day of each
    ingest_rows = {r["stage"]: r for r in _run_stage_rows(grown, "ingest").to_dicts()}
    new_papers = manifest["days"]["papers_per_day"]
    assert ingest_rows["crawl"]["rows_in"] == 5  # one slice per category: only the new day
    assert ingest_rows["extract"]["rows_in"] == new_papers
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        assert wh.count(PAPERS) == papers_first + new_papers


def test_window_defaults_to_yesterday(settings: Settings) -> None:
    s = settings.with_overrides(refresh={"window_days": 7})
    assert window(s, date(2026, 11, 23)) == (date(2026, 11, 16), date(2026, 11, 22))
    pinned = s.with_overrides(refresh={"until": "2026-10-31"})
    assert window(pinned, date(2026, 11, 23)) == (date(2026, 10, 25), date(2026, 10, 31))
