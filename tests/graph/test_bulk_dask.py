"""The bulk files read one piece per file on a 2-worker local Dask cluster leave the same graph
as on threads: S2AG (a release in three shards per dataset) and the OpenAlex snapshot (a file per
``updated_date`` partition), each file a Prefect task of the tracked run."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.replay.snapshot import write_snapshot
from revbench.schemas.graph import AUTHOR_AFFILIATIONS, CITATIONS, GRAPH_FETCHES, PAPER_AUTHORSHIPS, PAPER_TOPICS
from revbench.synth.bulk_files import write_s2ag
from revbench.warehouse import Warehouse
from tests.support.common import on_replay
from tests.support.worlds import END, START, week_world

pytestmark = pytest.mark.slow
PARTS = 3


def _graph(s) -> dict[str, pl.DataFrame]:  # type: ignore[no-untyped-def]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        out = {t.name: wh.read(t) for t in (CITATIONS, PAPER_TOPICS, GRAPH_FETCHES, AUTHOR_AFFILIATIONS, PAPER_AUTHORSHIPS)}
    out = {k: v.drop([c for c in v.columns if c.endswith("_at") or c == "run_id"]) for k, v in out.items()}
    return {k: v.sort(v.columns) for k, v in out.items()}


def test_bulk_pieces_on_dask_equal_threads(prefect_server, replay, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from prefect.client.orchestration import get_client

    world = week_world(tmp_path / "world", n_papers=20, seed=3)
    write_s2ag(world, tmp_path / "s2ag", release="2026-09-08", parts=PARTS)
    partitions = write_snapshot(world, tmp_path / "openalex")["partitions"]
    app = replay(world=world)

    def run(name: str, runner: dict) -> dict[str, pl.DataFrame]:
        s = on_replay(settings.with_overrides(data_dir=tmp_path / name, runner=runner), app).with_overrides(
            s2={"bulk_dir": tmp_path / "s2ag"}, openalex={"enabled": True, "snapshot_dir": tmp_path / "openalex"})
        ingest_flow.fn(s, START, END, synthetic=True)
        served = app.faults.stats()["served"].get("s2", 0)
        out = graph_flow(s)  # tracked: each file a task on the run's runner
        assert out.failed == 0 and app.faults.stats()["served"].get("s2", 0) == served, "S2 answered from the files alone"
        return _graph(s)

    threads = run("threads", {"kind": "threads"})
    dask = run("dask", {"kind": "dask", "dask_workers": 2, "dask_threads_per_worker": 1})
    assert threads["citations"].height > 0 and threads["paper_authorships"].height > 0
    for name, df in threads.items():
        assert df.equals(dask[name]), name
    with get_client(sync_client=True) as client:
        names: list[str] = []
        while page := client.read_task_runs(limit=200, offset=len(names)):
            names += [t.name for t in page]
    for piece, files in (("s2ag-papers", PARTS), ("s2ag-citations", PARTS), ("openalex-works", partitions)):
        assert sum(n.startswith(piece) for n in names) == 2 * files, piece  # one per file, each run
