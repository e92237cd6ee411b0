"""The same flows on a 2-worker local Dask cluster end with exactly the warehouse of a threaded run."""

from __future__ import annotations

import socket
from datetime import date

import polars as pl
import pytest

from revbench.errors import ServiceUnavailable
from revbench.flows.disambiguate import disambiguate_flow
from revbench.flows.graph import graph_flow
from revbench.flows.ingest import ingest_flow
from revbench.flows.pools import pools_flow
from revbench.schemas.tables import ASSIGNMENTS, INVITATIONS, POOL_EVIDENCE, QUERY_SAMPLES
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.common import on_replay

pytestmark = pytest.mark.slow

POOLS = {"tau": 0.5, "min_recent_papers": 1, "candidates_per_query": 3, "queries_per_category": 3}


def _warehouse(s: Settings) -> dict[str, pl.DataFrame]:
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        out = wh.ingest.snapshot()
        for t in (QUERY_SAMPLES, POOL_EVIDENCE, ASSIGNMENTS, INVITATIONS):
            df = wh.pools.read_round(t, 1)
            out[t.name] = df.drop([c for c in df.columns if c.endswith("_at") or c == "run_id"]).sort(df.columns[:3])
    return out


def _run(s: Settings) -> dict[str, pl.DataFrame]:
    out = ingest_flow(s, date(2026, 9, 1), date(2026, 9, 12), synthetic=True)
    assert out.notes["extract"]["pieces"] >= 2, "the documents went out in several pieces"
    graph = graph_flow(s)  # S2 and OpenAlex pieces travel to the workers like the documents do
    assert graph.papers_answered > 0 and graph.references_saved > 0 and graph.failed == 0
    disambiguate_flow(s.with_overrides(disambiguate={"use_llm": False}))
    pools_flow(s.with_overrides(pools=POOLS), round=1)
    return _warehouse(s)


def test_dask_equals_threads(prefect_server, small_world, replay, settings, tmp_path) -> None:
    app = replay(world=small_world)
    piece = {"ingest": {"commit_every": 20}}
    threaded = _run(on_replay(settings.with_overrides(data_dir=tmp_path / "threads", **piece), app))
    dask = _run(on_replay(settings.with_overrides(
        data_dir=tmp_path / "dask", runner={"kind": "dask", "dask_workers": 2, "dask_threads_per_worker": 1}, **piece), app))
    assert threaded.keys() == dask.keys()
    assert threaded["papers"].height > 0 and threaded["assignments"].height > 0
    for name, df in threaded.items():
        assert df.equals(dask[name]), name


def test_task_runner_follows_the_settings(settings: Settings) -> None:
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    from revbench.flows.pieces import task_runner

    threads = task_runner(settings.runner.model_copy(update={"max_workers": 3}))
    assert isinstance(threads, ThreadPoolTaskRunner) and threads._max_workers == 3
    with socket.socket() as listening:  # stands in for a scheduler: the check only connects
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"tcp://127.0.0.1:{listening.getsockname()[1]}"
        remote = task_runner(settings.with_overrides(runner={"kind": "dask", "dask_address": address}).runner)
        assert isinstance(remote, DaskTaskRunner) and remote.address == address
    # Now nothing listens there: one clear error before any work, not Dask's OSError after 30 s.
    with pytest.raises(ServiceUnavailable, match="Dask scheduler .*unreachable"):
        task_runner(settings.with_overrides(runner={"kind": "dask", "dask_address": address}).runner, 2.0)
    with pytest.raises(ValueError, match="dask_address"):
        settings.with_overrides(runner={"dask_address": "10.0.0.5:8786"})
