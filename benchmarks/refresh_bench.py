"""The whole refresh at LR-bench's size, with threads and with a 2-worker local Dask cluster.

A SYNTHETIC world of 160k papers (with their PDFs and GROBID answers) served by the replay
server; each runner gets a fresh data directory and runs the refresh one stage per process, so
each stage's time and peak memory are its own (the flow process's peak RSS, and the largest
child process's: the Dask workers). Then the world grows by one day and each runner runs the
whole refresh again: its cost as a fraction of the first run's is the incremental cost.

The graph stage runs in its own process after the ingest: Semantic Scholar's references and
fields of study and OpenAlex's works and authors (enabled here, off by default), served from the
world's graph; its counts (papers asked, references saved, coverage and the share resolved to
our papers, requests per service and per second) go into the results beside its time.

Settings of the run: paper embeddings by the weightless ``hashing`` encoder (MiniLM encodes
about 50 texts/s on this CPU, so 160k papers would add about 55 min to each run; its throughput
is measured by ``pools_bench``), author disambiguation with the offline fallback (the LLM path's
number of calls at this size is measured by ``disambiguate_bench``), DuckDB limited to 8 GB.

    .venv/bin/python -m benchmarks.refresh_bench [--papers 160000] [--runners threads,dask,dask-external]

``--new-round-min-papers 100`` lets a small world's day-later run take the pools round-2 path
that a day at 160k takes; ``--profile DIR --py-spy PATH`` records every stage process (and its
Dask workers) with py-spy as collapsed stacks; ``--out FILE`` writes the results elsewhere.

Results go to ``benchmarks/results/refresh.json`` (written after each run, so a partial run
keeps what it measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, date, datetime, timedelta
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
STAGE_GROUPS = [["ingest"], ["graph"], ["disambiguate"], ["pools"], ["survey", "ratings", "release", "evaluate"]]


def _settings(data: Path, base: str, runner: str, until: date, window_days: int, new_round_min_papers: int | None = None,
              pools_model: str = "hashing", embed_backend: str = "auto", dask_address: str = "") -> Any:
    from revbench.replay.server import replay_overrides
    from revbench.settings import Settings

    refresh: dict[str, Any] = {"until": until.isoformat(), "window_days": window_days}
    if new_round_min_papers:
        # A day-later run at 20k adds ~330 papers, below the default 1000: lowered, it takes the
        # round-2 path that a day at 160k takes (the product's default is left alone).
        refresh["new_round_min_papers"] = new_round_min_papers
    services = replay_overrides(base)
    # The graph stage asks OpenAlex too (off by default), at the replay, unpaced.
    services["openalex"] = {**services["openalex"], "enabled": True}
    return Settings(data_dir=data).with_overrides(
        **services,
        refresh=refresh,
        runner={"kind": "dask", "dask_address": dask_address} if dask_address else {"kind": runner, "dask_workers": 2},
        # Hashed word counts of one synthetic field's papers are close: at tau 0.4 a query has
        # ~20k neighbours among 160k papers, and uncapped the recall outgrew 24 GB.
        pools={"model": pools_model, "max_neighbors": 200},
        embed={"backend": embed_backend},
        disambiguate={"use_llm": False},
        warehouse={"memory_limit": "8GB"},
    )


def stage_main(a: argparse.Namespace) -> None:
    """One refresh over ``a.stages`` in this process; prints one JSON line."""
    import psutil

    from revbench.flows.refresh import refresh_flow

    s = _settings(Path(a.data), a.base, a.runner, date.fromisoformat(a.until), a.window_days, a.new_round_min_papers,
                  a.pools_model, a.embed_backend, a.dask_address or "")
    peaks = {"workers": 0.0, "self": 0.0}
    done = threading.Event()

    def sample() -> None:
        # Sampled, not ru_maxrss: a child's ru_maxrss starts at its parent's size at fork (the
        # benchmark process holds the world when it grows it), and Dask workers are children.
        me = psutil.Process()
        while not done.wait(0.2):
            peaks["self"] = max(peaks["self"], me.memory_info().rss / 2**20)
            try:
                kids = [c for c in me.children(recursive=True) if "spawn_main" in " ".join(c.cmdline())]
                peaks["workers"] = max(peaks["workers"], max((c.memory_info().rss for c in kids), default=0) / 2**20)
            except psutil.Error:
                pass

    threading.Thread(target=sample, daemon=True).start()
    began = datetime.now(UTC)
    t = time.perf_counter()
    out = refresh_flow.run(s, stages=a.stages.split(","), synthetic=True, track=True)
    seconds = time.perf_counter() - t
    done.set()
    print(json.dumps({
        "embed": embed_record(s, began),
        "graph": graph_record(s, out.stages),
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(peaks["self"]),
        "peak_worker_rss_mb": round(peaks["workers"]),
        "stages": [{k: getattr(r, k) for k in ("stage", "status", "reason", "seconds")} for r in out.stages],
        "status": out.status,
    }))


def embed_record(s: Any, since: datetime) -> dict[str, Any] | None:
    """The pools stage's embedding step in a run started by this process (``since``), from
    ``run_stages``: texts asked for, encoded, its seconds and texts per second, the runtime."""
    from revbench.ml.backends import runtime_for
    import polars as pl

    from revbench.schemas.tables import RUN_STAGES, RUNS
    from revbench.warehouse import Warehouse

    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        rows = (wh.read(RUN_STAGES).filter(pl.col("stage") == "embed").join(wh.read(RUNS), on="run_id")
                .filter(pl.col("started_at") >= since))
    if rows.is_empty():
        return None
    last = rows.sort("started_at").tail(1).row(0, named=True)
    texts, encoded, secs = int(last["rows_in"] or 0), int(last["rows_out"] or 0), float(last["seconds"] or 0)
    return {"model": s.pools.model, "runtime": runtime_for(s.embed.backend, s.cache_dir, s.pools.model), "texts": texts,
            "encoded": encoded, "seconds": round(secs, 1), "texts_per_s": round(encoded / secs, 1) if secs and encoded else None,
            "saved_share": round(1 - encoded / texts, 4) if texts else None}


def graph_record(s: Any, stages: list[Any]) -> dict[str, Any] | None:
    """The graph stage of this refresh (``stages``, the refresh's outcomes): its status and the
    scalar counts it reported, and the warehouse's graph coverage after it with the share of references
    resolved to our papers per source; None when the refresh did not have the graph stage."""
    from revbench.warehouse import Warehouse

    outcome = next((r for r in stages if r.stage == "graph"), None)
    if outcome is None:
        return None
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        coverage = wh.graph.graph_coverage()
    for src in coverage["sources"]:
        src["resolved_share"] = round(src["resolved"] / src["references"], 4) if src["references"] else None
    summary = json.loads(outcome.summary) if outcome.summary else {}
    return {"status": outcome.status, "counts": summary, "coverage": coverage}


def replay_state(base: str) -> dict[str, Any]:
    """Requests the replay server answered so far, per service, and its process's memory now (MiB):
    the graph is loaded into it the first time a graph request comes."""
    import httpx
    import psutil

    served = httpx.get(f"{base}/_replay/stats", timeout=30).json()["served"]
    replays = [c for c in psutil.Process().children(recursive=True) if "revbench.replay" in " ".join(c.cmdline())]
    return {"served": served, "rss_mb": round(max((c.memory_info().rss for c in replays), default=0) / 2**20)}


EXTERNAL = "dask-external"
"""The runner name of a Dask cluster started apart from the flow (revbench.replay.cluster: a
scheduler and two workers, each with its own HOME), reached through RUNNER__DASK_ADDRESS."""


@contextlib.contextmanager
def _sampled(pids: list[int]) -> Iterator[dict[str, float]]:
    """The largest RSS any of ``pids`` (with its children) reached while the block ran, in MiB."""
    import psutil

    peak = {"workers": 0.0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            for pid in pids:
                try:
                    p = psutil.Process(pid)
                    rss = max([p.memory_info().rss, *(c.memory_info().rss for c in p.children(recursive=True))])
                except psutil.Error:
                    continue
                peak["workers"] = max(peak["workers"], rss / 2**20)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


def run_stages(stages: list[str], data: Path, base: str, runner: str, until: date, window_days: int,
               env: dict[str, str], a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.refresh_bench", "--stage-run", ",".join(stages), "--data", str(data),
           "--base", base, "--runner", runner, "--until", until.isoformat(), "--window-days", str(window_days)]
    if a.new_round_min_papers:
        cmd += ["--new-round-min-papers", str(a.new_round_min_papers)]
    cmd += ["--pools-model", a.pools_model, "--embed-backend", a.embed_backend]
    if a.embed_backend == "auto":
        # auto follows embed_bench's measurement of this machine, kept in the default data folder.
        from revbench.ml.backends import DECISION_FILE
        from revbench.settings import Settings

        measured, target = Settings().cache_dir / DECISION_FILE, Settings(data_dir=data).cache_dir / DECISION_FILE
        if measured.exists() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(measured, target)
    log = data.parent / "logs" / f"{runner}-{'-'.join(stages)}-{until}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if a.profile:
        # Every thread's stack, idle ones too (waiting on a service or a worker is wall time),
        # and the Dask workers': collapsed stacks, one file per stage process.
        a.profile.mkdir(parents=True, exist_ok=True)
        out = a.profile / f"{runner}-{'-'.join(stages)}-{until}.txt"
        cmd = [a.py_spy, "record", "--format", "raw", "--rate", "50", "--idle", "--threads", "--subprocesses",
               "--nonblocking", "-o", str(out), "--", *cmd]
    with contextlib.ExitStack() as stack:
        if runner == EXTERNAL:
            # Started for each stage process, as its own processes (not the stage's children):
            # their start is not timed, their peak memory is sampled from here.
            from revbench.replay.cluster import local_cluster

            cluster = stack.enter_context(local_cluster(data.parent / "cluster" / "-".join(stages), 2))
            cmd += ["--dask-address", cluster.address]
            peak = stack.enter_context(_sampled([p.pid for p in cluster.workers]))
        before = replay_state(base)
        t = time.perf_counter()
        with log.open("w") as err:
            proc = subprocess.run(cmd, check=False, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        wall = time.perf_counter() - t
        after = replay_state(base)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise SystemExit(f"refresh over {stages} with {runner} failed (exit {proc.returncode}); its log: {log}")
    out = json.loads(lines[-1])
    out["process_s"] = round(wall, 1)
    out["requests"] = {k: n - before["served"].get(k, 0) for k, n in after["served"].items() if n > before["served"].get(k, 0)}
    out["replay_rss_mb"] = after["rss_mb"]
    if out.get("graph") and stages == ["graph"]:
        graph_s = next((r["seconds"] for r in out["stages"] if r["stage"] == "graph"), 0) or 0
        # The graph ran alone in this process: every request it made, per second of the stage.
        out["graph"]["requests_per_s"] = round(sum(out["requests"].values()) / graph_s, 1) if graph_s else None
    if runner == EXTERNAL:
        out["peak_worker_rss_mb"] = round(peak["workers"])
    print(f"  {runner:7s} {','.join(stages):35s} {out['seconds']:8.1f} s  peak {out['peak_rss_mb']} MB"
          f" (largest Dask worker {out['peak_worker_rss_mb']} MB)  " + "; ".join(f"{r['stage']}: {r['status']}" for r in out["stages"]),
          flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--papers", type=int, default=160_000)
    p.add_argument("--runners", default="threads,dask")
    p.add_argument("--work", type=Path, default=Path("data/bench/refresh"))
    p.add_argument("--worlds", type=Path, default=Path("data/bench"))
    p.add_argument("--phase", choices=["both", "first", "incremental"], default="both",
                   help="first runs only, or only the day-later runs over an earlier --phase first (its data kept)")
    p.add_argument("--day", type=int, default=1,
                   help="the day-later runs refresh up to this many days after the first (the world grown that far): "
                        "--day 2 after a --day 1 measures another day-later refresh over the state the first left")
    p.add_argument("--resume", action="store_true",
                   help="keep the work folder and the stages already recorded in the results (after a failure)")
    p.add_argument("--new-round-min-papers", type=int,
                   help="override REVBENCH_REFRESH__NEW_ROUND_MIN_PAPERS (a day at 20k is below the default 1000: "
                        "lower it to measure the day-later pools round)")
    p.add_argument("--out", type=Path, help="results file (default benchmarks/results/refresh[-<n>k].json)")
    p.add_argument("--profile", type=Path, help="record each stage process with py-spy into this folder")
    p.add_argument("--py-spy", default="py-spy", help="the py-spy executable for --profile")
    p.add_argument("--pools-model", default="hashing",
                   help="the pools' model: hashing (weightless) or the product's all-MiniLM-L6-v2")
    p.add_argument("--embed-backend", default="auto", help="REVBENCH_EMBED__BACKEND for the pools' model")
    p.add_argument("--stage-run")
    p.add_argument("--data")
    p.add_argument("--base")
    p.add_argument("--runner")
    p.add_argument("--until")
    p.add_argument("--window-days", type=int)
    p.add_argument("--dask-address")
    a = p.parse_args()
    if a.day < 1:
        p.error(f"--day {a.day}: expected 1 or more")
    if a.stage_run:
        a.stages = a.stage_run
        stage_main(a)
        return

    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    from revbench.replay import spawn_replay
    from revbench.settings import ReplaySettings
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world, grow_world, spec_of

    runners = [r.strip() for r in a.runners.split(",") if r.strip()]
    world = a.work / "world"
    if a.phase == "incremental":  # checked before a world is made or a server started
        if not (world / "world.json").exists():
            raise SystemExit(f"--phase incremental: no world under {world}: run --phase first with this --work")
        grown_days = spec_of(json.loads((world / "world.json").read_text())).extra_days
        if a.day < grown_days:
            raise SystemExit(f"--day {a.day}: the world under {world} has grown {grown_days} days already; "
                             f"ask for day {grown_days} (to finish it) or a later one")
    spec = WorldSpec(n_papers=a.papers, seed=11)
    base_world = a.worlds / f"world-{a.papers // 1000}k"
    t = time.perf_counter()
    manifest = ensure_world(base_world, spec)
    gen_s = time.perf_counter() - t
    if a.phase != "incremental" and not a.resume:
        shutil.rmtree(a.work, ignore_errors=True)
        shutil.copytree(base_world, world)  # the copy grows; the base stays for the next run
    window_days = (spec.end - spec.start).days + 1
    out_file = a.out or RESULTS / ("refresh.json" if a.papers == 160_000 else f"refresh-{a.papers // 1000}k.json")
    earlier = json.loads(out_file.read_text()) if (a.phase == "incremental" or a.resume) and out_file.exists() else {}
    result: dict[str, Any] = earlier or {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
        "papers": manifest["counts"]["papers"], "mentions": manifest["counts"]["mentions"],
        "documents": manifest["counts"]["documents"],
        "world_generation_s": round(gen_s, 1), "settings": f"pools.model={a.pools_model}, embed.backend={a.embed_backend}, "
        "disambiguate.use_llm=false, "
        "pools.max_neighbors=200, warehouse.memory_limit=8GB, runner.dask_workers=2, openalex.enabled=true",
        "world_graph": {k: manifest["counts"].get(k) for k in ("references", "references_outside", "paper_topics",
                                                               "affiliations")},
        "first": {}, "incremental": {}}
    out_file.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out_file.write_text(json.dumps(result, indent=2) + "\n")

    replay = ReplaySettings(timeout_delay_seconds=1.0, retry_after_seconds=0)
    with prefect_test_harness(server_startup_timeout=180):
        env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
        with spawn_replay(world, replay) as base:
            for runner in runners if a.phase != "incremental" else []:
                print(f"first refresh, {runner}:", flush=True)
                data = a.work / runner
                runs = result["first"].get(runner, {}).get("runs", [])
                done = {tuple(r["stage"] for r in run["stages"]) for run in runs}
                for g in STAGE_GROUPS:
                    if tuple(g) in done:
                        continue
                    runs.append(run_stages(g, data, base, runner, spec.end, window_days, env, a))
                    result["first"][runner] = {"total_s": round(sum(r["seconds"] for r in runs), 1), "runs": runs}
                    save()
        if a.phase == "first":
            return
        grown_days = spec_of(json.loads((world / "world.json").read_text())).extra_days  # a resumed --phase both too
        grown = grow_world(world, max(0, a.day - grown_days))
        result["new_papers"] = grown["days"]["papers_per_day"]
        key = "incremental" if a.day == 1 else f"incremental_day{a.day}"
        result.setdefault(key, {})
        with spawn_replay(world, replay) as base:
            for runner in runners:
                print(f"refresh a day later, {runner}:", flush=True)
                out = run_stages([s for g in STAGE_GROUPS for s in g], a.work / runner, base, runner,
                                 spec.end + timedelta(days=a.day), window_days, env, a)
                # A first run stopped part-way and resumed (--resume) also spent the stopped attempt's
                # time, which its record keeps beside the runs (``stopped_attempt``).
                first = result["first"][runner]["total_s"] + result["first"][runner].get("stopped_attempt", {}).get("seconds", 0)
                result[key][runner] = {**out, "day": a.day, "fraction_of_first": round(out["seconds"] / first, 4)}
                save()
    print(json.dumps({k: v for k, v in result.items() if k not in ("first", "incremental")}, indent=2))


if __name__ == "__main__":
    main()
