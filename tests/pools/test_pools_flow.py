"""Pools after a real ingest and disambiguation of the small SYNTHETIC world."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.schemas.tables import ASSIGNMENTS, AUTHOR_LINKS, INVITATIONS, PAPERS, POOL_EVIDENCE, POOL_EXCLUSIONS, QUERY_SAMPLES
from revbench.settings import Settings
from revbench.synth.truth import coi_violations, load_truth, planted_conflicts_caught
from revbench.warehouse import Warehouse
from tests.support.common import on_replay

pytestmark = pytest.mark.slow


def _round(s: Settings, n: int) -> dict[str, pl.DataFrame]:
    with Warehouse.open(s.warehouse_path) as wh:
        return {t.name: wh.pools.read_round(t, n).drop([c for c in ("sampled_at",) if c in t.names])
                for t in (QUERY_SAMPLES, POOL_EVIDENCE, ASSIGNMENTS, INVITATIONS)}


def test_pools_round(prefect_server, small_world, replay, settings) -> None:
    s = on_replay(settings, replay(world=small_world)).with_overrides(
        pools={"tau": 0.5, "min_recent_papers": 1, "candidates_per_query": 4, "max_queries_per_candidate": 2,
               "queries_per_category": 4, "same_affiliation_coi": True})
    ingest_flow(s, date(2026, 9, 1), date(2026, 9, 15))
    disambiguate_flow(s)
    first = pools_flow(s, round=1)
    assert first.embedded_now > 0 and first.assignments > 0
    with Warehouse.open(s.warehouse_path) as wh:
        links = wh.read(AUTHOR_LINKS)
    r1 = _round(s, 1)
    truth = load_truth(small_world)
    assert coi_violations(truth, r1["assignments"], links) == 0
    # The world's planted conflict (only a second affiliation reveals it) is never invited.
    with Warehouse.open(s.warehouse_path) as wh:
        exclusions = wh.pools.read_round(POOL_EXCLUSIONS, 1)
    planted = planted_conflicts_caught(truth, r1["pool_evidence"], exclusions, r1["assignments"], links)
    assert planted and not any(p["invited"] for p in planted)
    assert all(p["caught"] and p["reasons"] == ["same_affiliation"] for p in planted if p["recalled"])
    assert r1["assignments"].group_by("author_id").len()["len"].max() <= 2
    # Every invited candidate is explained by evidence rows for that query.
    assert r1["assignments"].join(r1["pool_evidence"], on=["query_id", "author_id"], how="anti").height == 0
    assert r1["invitations"]["email"].null_count() == 0

    again = pools_flow(s, round=1)
    assert again.embedded_now == 0
    for name, df in _round(s, 1).items():
        assert df.equals(r1[name]), name

    with Warehouse.open(s.warehouse_path) as wh:
        before = wh.count(PAPERS)
    ingest_flow(s, date(2026, 9, 1), date(2026, 9, 20))
    disambiguate_flow(s)
    with Warehouse.open(s.warehouse_path) as wh:
        after = wh.count(PAPERS)
    grown = pools_flow(s, round=2)
    assert after > before and grown.embedded_now == after - before  # only the new papers
    assert not set(_round(s, 2)["query_samples"]["arxiv_id"]) & set(r1["query_samples"]["arxiv_id"])
