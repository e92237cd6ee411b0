"""What reading S2AG one piece per file needs, on threads and on a local Dask cluster: time, peak
memory (the process and, for Dask, each worker's resident set, sampled) and disk (the release's
files, what the graph stage keeps of it, an increment), for a SYNTHETIC world written as an S2AG
release in ``--shards`` files per dataset, and the increment to the same world with S2's
corrections (``revise``) applied.

    .venv/bin/python -m benchmarks.bulk_pieces_bench [--papers 20000] [--shards 8] [--workers 2]

Each mode runs in a process of its own. Results: ``benchmarks/results/bulk_pieces[-<n>k].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
R0, R1 = "2026-01-06", "2026-01-13"


def _mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 2)


class Peak:
    """The peak resident set of this process and of its children (Dask's workers), sampled."""

    def __init__(self) -> None:
        import psutil

        self.me = psutil.Process()
        self.own = 0.0
        self.children: dict[int, float] = {}
        self.done = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self.done.wait(0.1):
            self.own = max(self.own, self.me.memory_info().rss / 2**20)
            for c in self.me.children(recursive=True):
                try:
                    self.children[c.pid] = max(self.children.get(c.pid, 0.0), c.memory_info().rss / 2**20)
                except Exception:  # noqa: BLE001 - a child that just ended
                    pass

    def stop(self) -> dict[str, Any]:
        self.done.set()
        return {"peak_rss_mb": round(self.own), "worker_peak_rss_mb": sorted(round(v) for v in self.children.values())}


def child(a: argparse.Namespace) -> None:
    """One mode in this process; prints one JSON line."""
    from revbench.flows.pieces import map_pieces
    from revbench.warehouse.bulk_diffs import apply_diff
    from revbench.warehouse.bulk_state import build_state

    work = Path(a.work)
    corpus = json.loads((work / "corpus.json").read_text())
    out: dict[str, Any] = {}
    if a.child == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)

        def mapper(fn: Any, pieces: list[tuple[Any, ...]], name: str) -> Any:
            return client.gather(client.map(fn, *zip(*pieces, strict=True), pure=False))
        time.sleep(1)
    else:
        def mapper(fn: Any, pieces: list[tuple[Any, ...]], name: str) -> Any:
            return map_pieces(fn, pieces, name, local_workers=a.workers)
    peak = Peak()
    t = time.perf_counter()
    if a.child == "diff":
        changed, dropped, _, _ = apply_diff(work / "state" / "threads", work / "s2ag" / "diffs" / f"{R0}_{R1}", work / "state" / "diff",
                                      corpus, 1)
        out["changed"], out["dropped"] = len(changed), len(dropped)
    else:
        out["read"] = build_state(work / "s2ag" / R0, work / "state" / a.child, corpus, mapper, 1)
    out["seconds"] = round(time.perf_counter() - t, 2)
    out.update(peak.stop())
    if a.child == "dask":
        client.close()
        cluster.close()
    print(json.dumps(out))


def _run(work: Path, mode: str, workers: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.bulk_pieces_bench", "--child", mode, "--work", str(work), "--workers", str(workers)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _same(work: Path) -> bool:
    import duckdb

    from revbench.warehouse.bulk_state import part

    con = duckdb.connect()
    for name in ("papers", "covered", "citations"):
        a, b = (con.sql(f"SELECT * FROM {part(work / 'state' / m, name)}").pl() for m in ("threads", "dask"))
        if not a.sort(a.columns).equals(b.sort(b.columns)):
            return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--papers", type=int, default=20_000)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--work", default="data/bench/bulk-pieces")
    p.add_argument("--child")
    a = p.parse_args()
    if a.child:
        child(a)
        return
    import polars as pl

    from revbench.synth.bulk_files import write_s2ag
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world

    work = Path(a.work)
    shutil.rmtree(work / "s2ag", ignore_errors=True)
    shutil.rmtree(work / "state", ignore_errors=True)
    world = work / f"world-{a.papers // 1000}k"
    t = time.perf_counter()
    ensure_world(world, WorldSpec(n_papers=a.papers, seed=11, documents=False))
    result: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
                              "command": f"python -m benchmarks.bulk_pieces_bench --papers {a.papers} --shards {a.shards} "
                                         f"--workers {a.workers}",
                              "world_s": round(time.perf_counter() - t, 1)}
    (work / "corpus.json").write_text(json.dumps(pl.read_parquet(world / "s2_papers.parquet")["arxiv_id"].to_list()))
    result["release"] = write_s2ag(world, work / "s2ag", release=R0, parts=a.shards)
    result["increment"] = {k: v for k, v in write_s2ag(world, work / "s2ag", release=R1, since=R0, revised=True,
                                                       parts=a.shards).items() if "_" in k}
    shutil.rmtree(work / "s2ag" / R1)
    result["disk_mb"] = {"release": _mb(work / "s2ag" / R0), "increment": _mb(work / "s2ag" / "diffs")}
    for mode in ("threads", "dask", "diff"):
        result[mode] = _run(work, mode, a.workers)
    result["disk_mb"]["kept"] = _mb(work / "state" / "threads")
    result["dask_equals_threads"] = _same(work)
    result["note"] = ("SYNTHETIC S2AG rows carry only the keys the graph reads; a real release's rows (authors, venue, "
                      "abstract ids...) are larger, so 'kept' against 'release' is an upper bound of the share")
    out = RESULTS / ("bulk_pieces.json" if a.papers == 20_000 else f"bulk_pieces-{a.papers // 1000}k.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
