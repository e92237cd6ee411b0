"""An external Dask cluster on this machine, as a user outgrowing one machine starts one by
hand: a ``dask scheduler`` and ``dask worker`` processes, each in a folder of its own with its own
HOME and none of the caller's revbench or Prefect environment. The tests and the refresh
benchmark run the flows on it through REVBENCH_RUNNER__DASK_ADDRESS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from revbench.replay.server import free_port
from revbench.workers import stop_group as stop

KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TMPDIR")


@dataclass
class LocalCluster:
    """The scheduler's address, its process, the workers' processes and their HOME folders."""

    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]
    homes: list[Path]


def worker_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A cluster process's environment: its own HOME, no REVBENCH_ or PREFECT_ variable, the
    Hugging Face hub offline (a worker finds its models in its own cache or fails its piece)."""
    env = {k: v for k, v in os.environ.items() if k in KEPT_ENV}
    # The profiler deadlocks a worker on Python 3.11 before 3.11.9 (see revbench.flows.pieces).
    return {**env, "HOME": str(home), "HF_HUB_OFFLINE": "1",
            "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False", **(extra or {})}




@contextmanager
def local_cluster(root: Path, workers: int = 2, extra_env: dict[str, str] | None = None,
                  timeout: float = 90) -> Iterator[LocalCluster]:
    """A scheduler on 127.0.0.1 and ``workers`` single-threaded workers, under ``root``
    (``root/scheduler``, ``root/worker-N``, each with its ``log``), until the block ends."""
    bin_dir = Path(sys.executable).parent
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"

    def start(name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        home = root / name
        home.mkdir(parents=True, exist_ok=True)
        with (home / "log").open("w") as log:
            proc = subprocess.Popen([str(bin_dir / "dask"), *args], env=worker_env(home, extra_env), cwd=home,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return proc, home

    scheduler, sched_home = start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(port),
                                                "--no-dashboard"])
    procs: list[subprocess.Popen[bytes]] = []
    homes: list[Path] = []
    try:
        for i in range(workers):
            proc, home = start(f"worker-{i}", ["worker", address, "--nworkers", "1", "--nthreads", "1",
                                               "--no-dashboard", "--name", f"worker-{i}",
                                               "--local-directory", str(root / f"worker-{i}" / "dask")])
            procs.append(proc)
            homes.append(home)
        deadline = time.monotonic() + timeout
        while not all("Registered to" in (h / "log").read_text() for h in homes):
            dead = [p for p in [scheduler, *procs] if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join((h / "log").read_text()[-2000:] for h in [sched_home, *homes])
                raise RuntimeError(f"the local Dask cluster under {root} did not start:\n{logs}")
            time.sleep(0.3)
        yield LocalCluster(address, scheduler, procs, homes)
    finally:
        for proc in procs:
            stop(proc)
        stop(scheduler)
