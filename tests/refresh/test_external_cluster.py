"""The flows on a real external Dask cluster: a `dask scheduler` and two `dask worker` processes
on 127.0.0.1, each with its own working directory and HOME and none of the flow's environment.
Work done on the workers reports to the flow's Prefect server, nothing outlives the run, and a
worker lost in the middle of a run costs nothing but time."""

from __future__ import annotations

import os
import signal
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from revbench.replay.cluster import LocalCluster, local_cluster
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.refresh.test_dask_runner import _run
from tests.support.cli import cli
from tests.support.common import on_replay
from tests.support.processes import wait_for

pytestmark = pytest.mark.slow

TAG = "RB_CLUSTER_TEST_TAG"
"""An environment variable every process of a test carries, and every process they start
inherits: whatever still carries it after the test outlived its run."""


def tagged(tag: str) -> list[int]:
    """The pids of every process whose environment carries ``tag``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{TAG}={tag}".encode() in env.split(b"\0"):
            out.append(int(entry.name))
    return out


@contextmanager
def external_cluster(root: Path, tag: str, workers: int = 2) -> Iterator[LocalCluster]:
    """The stand-in external cluster, every process of it tagged."""
    with local_cluster(root, workers, {TAG: tag}) as cluster:
        yield cluster


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def prefect_servers(tag: str) -> list[str]:
    """The Prefect servers among the tagged processes (Prefect starts its temporary one as uvicorn)."""
    return [c for c in map(_cmdline, tagged(tag)) if "prefect.server.api.server" in c]


def no_worker_server(cluster: LocalCluster) -> None:
    """No worker started a Prefect server: none runs, and none left a database in its HOME."""
    for home in cluster.homes:
        assert not list(home.rglob("prefect.db")), f"{home.name} started a Prefect server of its own"


def piece_runs(flow_name: str) -> dict[str, list[str]]:
    """The task runs of the newest run of ``flow_name`` on this process's Prefect API, by task name."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
                                      sort=FlowRunSort.START_TIME_DESC, limit=1)
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
    out: dict[str, list[str]] = {}
    for t in tasks:
        out.setdefault(t.name.rsplit("-", 1)[0], []).append(str(t.state_type.value if t.state_type else None))
    return out


def test_an_external_cluster_reports_to_the_flows_server_and_equals_threads(
        prefect_server, small_world, replay, settings: Settings, tmp_path: Path) -> None:
    """Ingest, disambiguation and pools of the test world through REVBENCH_RUNNER__DASK_ADDRESS on
    two workers that share neither the flow's process, environment nor HOME: the same warehouse
    as on threads, every piece's task run on the flow's Prefect server, no worker starting one of
    its own, and nothing of the cluster's left once it is stopped."""
    tag = uuid.uuid4().hex
    app = replay(world=small_world)
    piece = {"ingest": {"commit_every": 20}}
    threaded = _run(on_replay(settings.with_overrides(data_dir=tmp_path / "threads", **piece), app))
    with external_cluster(tmp_path / "cluster", tag) as cluster:
        s = on_replay(settings.with_overrides(data_dir=tmp_path / "dask", runner={"kind": "dask",
                                              "dask_address": cluster.address}, **piece), app)
        dask = _run(s)
        extracted = piece_runs("ingest")
        assert len(extracted["extract-documents"]) >= 2 and set(extracted["extract-documents"]) == {"COMPLETED"}
        assert prefect_servers(tag) == [] and len(tagged(tag)) >= 3
        no_worker_server(cluster)
    assert tagged(tag) == [], [_cmdline(p) for p in tagged(tag)]
    assert threaded.keys() == dask.keys() and threaded["papers"].height > 0
    for name, df in threaded.items():
        assert df.equals(dask[name]), name


def test_a_run_without_a_prefect_server_gives_its_workers_its_temporary_one(
        small_world, replay, settings: Settings, tmp_path: Path) -> None:
    """`revbench ingest` with no PREFECT_API_URL (the demo's way) on the external cluster: its
    temporary server gets every piece's task run, no worker starts one, and when the command and
    the cluster have ended no process started on their behalf is left."""
    tag = uuid.uuid4().hex
    home = tmp_path / "flow-home"
    app = replay(world=small_world)
    with external_cluster(tmp_path / "cluster", tag) as cluster:
        s = on_replay(settings, app).with_overrides(runner={"kind": "dask", "dask_address": cluster.address},
                                                    ingest={"commit_every": 20})
        res = cli(s, "ingest", "--since", "2026-09-01", "--until", "2026-09-12",
                  extra={"PREFECT_HOME": str(home / ".prefect"), TAG: tag})
        assert res.returncode == 0, res.stderr[-3000:]
        no_worker_server(cluster)
        with sqlite3.connect(home / ".prefect" / "prefect.db") as db:
            pieces = db.execute("SELECT state_type FROM task_run WHERE name LIKE 'extract-documents-%'").fetchall()
        assert len(pieces) >= 2 and {p[0] for p in pieces} == {"COMPLETED"}
        # The command is gone, and its temporary server with it; only the cluster is left.
        assert prefect_servers(tag) == []
        # Stopped the way a person stops them (SIGTERM to each, not to their process groups).
        for proc in [*cluster.workers, cluster.scheduler]:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        wait_for("the cluster's processes to end", lambda: tagged(tag) == [], 30)


def test_a_worker_lost_mid_run_costs_only_time(small_world, replay, settings: Settings, tmp_path: Path) -> None:
    """One of two workers is killed (SIGKILL, with its children) while the documents are being
    extracted: the run completes on the other, with the warehouse a threaded run writes."""
    tag = uuid.uuid4().hex
    app = replay(world=small_world)
    # Small pieces, so the run still has several to go when a worker is lost, on a loaded machine too
    piece = {"ingest": {"commit_every": 4}}
    threaded = on_replay(settings.with_overrides(data_dir=tmp_path / "threads", **piece), app)
    assert cli(threaded, "ingest", "--since", "2026-09-01", "--until", "2026-09-12").returncode == 0
    with external_cluster(tmp_path / "cluster", tag) as cluster:
        s = on_replay(settings.with_overrides(data_dir=tmp_path / "dask", runner={"kind": "dask",
                                              "dask_address": cluster.address}, **piece), app)
        proc = cli(s, "ingest", "--since", "2026-09-01", "--until", "2026-09-12",
                   extra={"PREFECT_HOME": str(tmp_path / "flow-home"), TAG: tag}, wait=False)
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "Connecting to an existing Dask cluster" in line:
                break
        import time

        time.sleep(1.0)
        assert proc.poll() is None, "the run ended before a worker could be lost"
        os.killpg(cluster.workers[0].pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, "".join(seen) + err[-3000:]
        assert "Remove worker" in next(line for line in (tmp_path / "cluster" / "scheduler" / "log").read_text()
                                       .splitlines() if "name: worker-0" in line and "Remove" in line)
    with sqlite3.connect(tmp_path / "flow-home" / "prefect.db") as db:
        pieces = db.execute("SELECT state_type FROM task_run WHERE name LIKE 'extract-documents-%'").fetchall()
    assert len(pieces) >= 4 and {p[0] for p in pieces} == {"COMPLETED"}
    with Warehouse.open(threaded.warehouse_path, read_only=True) as a, Warehouse.open(s.warehouse_path, read_only=True) as b:
        want, got = a.ingest.snapshot(), b.ingest.snapshot()
    assert want.keys() == got.keys() and want["papers"].height > 0
    for name, df in want.items():
        assert df.equals(got[name]), name


def test_a_piece_that_lacks_its_model_on_a_worker_names_the_worker_and_the_piece(
        prefect_server, settings: Settings, tmp_path: Path) -> None:
    """An embedding piece whose model the worker cannot load (no such model, and the worker
    offline) fails in one line naming the worker, the piece and the model."""
    from prefect import flow

    from revbench.errors import PieceFailed
    from revbench.flows.pieces import map_pieces, task_runner, workers_report_here
    from revbench.ml.embeddings import encode_piece

    model = "revbench-test/no-such-model"

    @flow(name="piece-on-a-worker")
    def one_piece() -> list[object]:
        return list(map_pieces(encode_piece, [(model, [("h", "a text")], 0, "torch", None)], "embed-probe"))

    tag = uuid.uuid4().hex
    with external_cluster(tmp_path / "cluster", tag, workers=1) as cluster:
        runner = settings.with_overrides(runner={"kind": "dask", "dask_address": cluster.address}).runner
        with workers_report_here(runner), pytest.raises(PieceFailed) as failed:
            one_piece.with_options(task_runner=task_runner(runner))()
    line = str(failed.value)
    assert "\n" not in line and "piece embed-probe failed on Dask worker worker-0 (tcp://127.0.0.1:" in line
    assert model in line
