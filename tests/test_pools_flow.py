"""Pools after a real ingest and disambiguation of the small SYNTHETIC world."""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from flows.disambiguate import disambiguate_flow
from flows.ingest import ingest_flow
from flows.pools import pools_flow
from revbench.settings import Settings
from schemas.tables import ASSIGNMENTS, INVITATIONS, PAPERS, POOL_EVIDENCE, QUERY_SAMPLES
from tasks.audit import coi_violations
from warehouse import Warehouse

pytestmark = pytest.mark.slow


def _round(n: int) -> dict[str, pl.DataFrame]:
    with Warehouse.open(Settings().warehouse_path) as wh:
        return {t.name: wh.read(t).filter(pl.col("round") == n).drop([c for c in ("sampled_at",) if c in t.names])
                for t in (QUERY_SAMPLES, POOL_EVIDENCE, ASSIGNMENTS, INVITATIONS)}


def test_pools_round(prefect_server, small_world, replay, monkeypatch) -> None:
    replay(world=small_world)
    monkeypatch.setenv("REVBENCH_POOLS__TAU", "0.5")
    monkeypatch.setenv("REVBENCH_POOLS__MIN_RECENT_PAPERS", "1")
    monkeypatch.setenv("REVBENCH_POOLS__CANDIDATES_PER_QUERY", "4")
    monkeypatch.setenv("REVBENCH_POOLS__MAX_QUERIES_PER_CANDIDATE", "2")
    ingest_flow(since=date(2026, 9, 1), until=date(2026, 9, 15))
    disambiguate_flow()
    first = pools_flow(round=1, per_category=4)
    assert first["embedded_now"] > 0 and first["assignments"] > 0
    assert coi_violations(Settings(), small_world, 1) == 0
    r1 = _round(1)
    assert r1["assignments"].group_by("author_id").len()["len"].max() <= 2
    # Every invited candidate is explained by evidence rows for that query.
    assert r1["assignments"].join(r1["pool_evidence"], on=["query_id", "author_id"], how="anti").height == 0
    assert r1["invitations"]["email"].null_count() == 0

    again = pools_flow(round=1, per_category=4)
    assert again["embedded_now"] == 0
    for name, df in _round(1).items():
        assert df.equals(r1[name]), name

    with Warehouse.open(Settings().warehouse_path) as wh:
        before = wh.count(PAPERS)
    ingest_flow(since=date(2026, 9, 1), until=date(2026, 9, 20))
    disambiguate_flow()
    with Warehouse.open(Settings().warehouse_path) as wh:
        after = wh.count(PAPERS)
    grown = pools_flow(round=2, per_category=4)
    assert after > before and grown["embedded_now"] == after - before  # only the new papers
    assert not set(_round(2)["query_samples"]["arxiv_id"]) & set(r1["query_samples"]["arxiv_id"])
