"""Rebuilding a published benchmark (``revbench demo --world KIND=PATH``): time, peak memory, each
stage's share and the comparison's headline numbers, on the two public samples and, with
``--scale``, on LR-bench-format files of the full LR-bench's size.

Each rebuild is the real command in its own process (``.venv/bin/revbench demo --world``), with a
fresh data directory and ``PREFECT_HOME`` under the work folder, so it is cold: no world, no
warehouse, no embedding cache, a new temporary Prefect server (tracked, as a user's run is, unless
``--no-track``). Its peak memory is the process tree's (the command, its replay server, Prefect's
server), summed over the tree's processes every 0.2 s with psutil (``ru_maxrss`` cannot see a
tree: it is one process's peak). Each stage's seconds are the gaps between the command's
``rebuild i/9: <stage> (<seconds> s)`` lines as they arrive (unbuffered), so they are not
rounded to the whole seconds those lines print.

The baseline in the same run is the cold import and strict load of the same benchmark files in a
bare process (``load_benchmark(kind, path, strict=True)``, median of ``--repeat``): the first
thing a rebuild does and the floor any command that reads those files pays. The synthetic demo
at a comparable size is itself a whole loop, as slow as what it would calibrate, and the pools
stage alone needs a warehouse the rebuild itself makes; the load needs nothing, and its ratio to
the rebuild says what the whole loop costs on top of reading the benchmark, on the same machine
under the same load.

``--scale`` writes an LR-bench-format folder of the full LR-bench's size (212 paper-centric
tuples, 150 query papers, 235 reviewers, 2,400 reviewer publications) from the lrbench sample's
real texts, reused cyclically with each title made distinct (`` (variant k)``) so no two papers
merge, ratings cycled from the sample, and rebuilds it against the goal of 20 minutes on two
cores. Its recall and losses are not LR-bench's: the same abstracts recur many times over, so
similarities are far denser than in the real files; only its time and memory mean something.
The texts keep their web addresses: a title with a github.com address shows in the invitation
email, and the simulated mail scanners, which open every link, pass over what they cannot reach.

    .venv/bin/python -m benchmarks.rebuild_bench [--samples lrbench,goldstandard] [--repeat 3] [--work DIR]
    .venv/bin/python -m benchmarks.rebuild_bench --scale [--work DIR]

Results go to ``benchmarks/results/rebuild.json`` (``samples`` and ``scale`` written by their own
runs; each keeps the other's). A ``--work`` folder is kept, with each rebuild's data directory,
log and report; without it a temporary folder is used and removed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
EXTERNAL = ROOT.parent / "shared" / "external"
SAMPLES = {"lrbench": EXTERNAL / "lrbench-sample", "goldstandard": EXTERNAL / "goldstandard-sample"}
REVBENCH = ROOT / ".venv" / "bin" / "revbench"
STAGE_LINE = re.compile(r"rebuild (\d+)/(\d+): (\w+)\s+\((\d+) s\)")
GOAL_S = 20 * 60
FULL_SIZE = {"tuples": 212, "papers": 150, "reviewers": 235, "publications": 2400}
"""The full LR-bench's paper-centric split, as the RATE paper gives it."""

LOAD = """
import resource, sys
from pathlib import Path
from revbench.evaluation.importers.registry import load_benchmark
b = load_benchmark(sys.argv[1], Path(sys.argv[2]), strict=True)
print(b.name, b.version, sum(s.tuples.height if s.tuples is not None else s.ratings.height for s in b.splits))
print("maxrss_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def child_env(work: Path) -> dict[str, str]:
    """This environment without revbench's or Prefect's API settings, with the data and Prefect
    home in ``work``, output unbuffered (the stage lines are timed as they arrive) and wide."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env.update(REVBENCH_DATA_DIR=str(work / "data"), PREFECT_HOME=str(work / "prefect"), PYTHONUNBUFFERED="1",
               COLUMNS="240", HF_HUB_OFFLINE="1", PREFECT_SERVER_ANALYTICS_ENABLED="false", GX_ANALYTICS_ENABLED="false")
    return env


def measured(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``cmd``: its exit status, wall time, every output line with its arrival time, and the
    peak RSS of its process tree (sum), of the command itself and of its largest process."""
    import psutil

    log.parent.mkdir(parents=True, exist_ok=True)
    peaks = {"tree": 0.0, "main": 0.0, "largest": 0.0}
    lines: list[tuple[float, str]] = []
    done = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def sample() -> None:
        me = psutil.Process(proc.pid)
        while True:
            try:
                procs = [me, *me.children(recursive=True)]
                rss = []
                for p in procs:
                    try:
                        rss.append(p.memory_info().rss / 2**20)
                    except psutil.Error:  # ended between the listing and the reading
                        rss.append(0.0)
            except psutil.Error:
                return
            peaks["tree"] = max(peaks["tree"], sum(rss))
            peaks["main"] = max(peaks["main"], rss[0])
            peaks["largest"] = max(peaks["largest"], max(rss))
            if done.wait(0.2):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with log.open("w") as out:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.perf_counter() - t0, line.rstrip("\n")))
            out.write(line)
            out.flush()  # the log can be followed while it runs
    rc = proc.wait()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    return {"rc": rc, "wall_s": round(wall, 2), "lines": lines, "peak_tree_rss_mb": round(peaks["tree"]),
            "peak_main_rss_mb": round(peaks["main"]), "peak_largest_rss_mb": round(peaks["largest"])}


def stage_seconds(lines: list[tuple[float, str]], wall: float) -> tuple[dict[str, float], dict[str, int], float]:
    """Each stage's seconds (arrival of its line to the next one's, the last to the process's
    end), the start each line prints, and the seconds before the first stage (start-up)."""
    starts = [(t, m.group(3), int(m.group(4))) for t, text in lines if (m := STAGE_LINE.search(text))]
    if not starts:
        return {}, {}, 0.0
    ends = [t for t, _, _ in starts[1:]] + [wall]
    seconds: dict[str, float] = {}
    first: dict[str, int] = {}
    for (t, name, printed), end in zip(starts, ends, strict=True):  # a stage may print twice (pools: both configurations)
        seconds[name] = round(seconds.get(name, 0.0) + end - t, 1)
        first.setdefault(name, printed)
    return seconds, first, round(starts[0][0], 1)


def baseline(kind: str, path: Path, env: dict[str, str], log: Path, repeat: int) -> dict[str, Any]:
    """Cold import and strict load of ``path`` in a bare process, ``repeat`` times (its peak is its
    own ``ru_maxrss``: it often ends before the sampler's first look)."""
    runs = []
    for i in range(repeat):
        r = measured([sys.executable, "-c", LOAD, kind, str(path)], env, log.with_name(f"{log.stem}-{i}.log"))
        if r["rc"]:
            raise SystemExit(f"loading {kind}={path} failed (exit {r['rc']}); its log: {log}")
        runs.append(r)
    walls = [r["wall_s"] for r in runs]
    peak = max(int(text.split()[1]) for r in runs for _, text in r["lines"] if text.startswith("maxrss_kb "))
    return {"median_s": round(statistics.median(walls), 2), "min_s": min(walls), "max_s": max(walls),
            "peak_rss_mb": round(peak / 1024)}


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """What ``rebuild.json`` says in a line or two: recall, the misses, the tuples, the scorers."""
    p, t = report["pool_recall"], report["tuples"]
    return {
        "pool_recall": {"pairs": p["pairs"], "recalled": p["recalled"],
                        "recall": None if p["recall"] is None else round(p["recall"], 4), "tau": p["tau"],
                        "missed_by_reason": {k: n for k, n in p["missed_by_reason"].items() if n}},
        "tuples": {k: t[k] for k in ("original", "rebuilt", "recalled", "matched", "reversed", "tied", "extra",
                                     "labels_identical", "ratings_identical", "ratings_compared")},
        "scorers": {s["name"]: {"original_loss": s["original_loss"], "original_n": s["original_n"],
                                "rebuilt_loss": s["rebuilt_loss"], "rebuilt_n": s["rebuilt_n"]} for s in report["scorers"]},
        "kendall_tau": None if report["kendall_tau"] is None else round(report["kendall_tau"], 4),
        "reported_seconds": report.get("seconds"),
        **({"product_pools": product_pools(report)} if "defaults" in report else {}),
    }


def product_pools(report: dict[str, Any]) -> dict[str, Any]:
    """What the product's pool settings (as configured for the run) recall of the original's rated
    pairs, beside the settings fitted to them: both settings, the recall, the misses by reason and
    the recall by similarity stratum."""
    d, pools = report["defaults"]["pool_recall"], report["pools"]
    return {"settings": pools["defaults"], "fitted": pools["fitted"],
            "recall": {"pairs": d["pairs"], "recalled": d["recalled"],
                       "recall": None if d["recall"] is None else round(d["recall"], 4),
                       "missed_by_reason": {k: n for k, n in d["missed_by_reason"].items() if n}},
            "by_stratum": report["pooling_bias"]["recall_by_stratum"]["defaults"],
            "by_stratum_fitted": report["pooling_bias"]["recall_by_stratum"]["fitted"]}


def rebuild(kind: str, path: Path, work: Path, track: bool, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One cold rebuild of ``kind=path`` with its data under ``work`` (``env``: settings for it):
    time, memory, stages and the report's headline."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cmd = [str(REVBENCH), "demo", "--world", f"{kind}={path}", *([] if track else ["--no-track"])]
    print(f"rebuild {kind}={path} ({'tracked' if track else 'untracked'}), log {work / 'rebuild.log'}", flush=True)
    r = measured(cmd, {**child_env(work), **(env or {})}, work / "rebuild.log")
    if r["rc"]:
        tail = "\n".join(text for _, text in r["lines"][-15:])
        raise SystemExit(f"revbench demo --world {kind}={path} failed (exit {r['rc']}):\n{tail}")
    stages, printed, startup = stage_seconds(r["lines"], r["wall_s"])
    report = json.loads((work / "data" / "reports" / "rebuild" / kind / "rebuild.json").read_text())
    world = next((work / "data" / "rebuild" / kind / "worlds").glob("*/world.json"))
    imported = json.loads(world.read_text())["imported"]
    out = {"command": " ".join(["revbench", *cmd[1:]]), "tracked": track, "wall_s": r["wall_s"],
           "peak_tree_rss_mb": r["peak_tree_rss_mb"], "peak_main_rss_mb": r["peak_main_rss_mb"],
           "peak_largest_rss_mb": r["peak_largest_rss_mb"], "startup_s": startup, "stage_s": stages,
           "stage_start_printed_s": printed,
           "world": {k: imported[k] for k in ("queries", "reviewers", "publications", "rated_pairs")},
           **headline(report)}
    slowest = sorted(stages.items(), key=lambda kv: -kv[1])[:3]
    print(f"  {r['wall_s']:.1f} s, peak {r['peak_tree_rss_mb']} MB (tree), {r['peak_main_rss_mb']} MB (command); slowest: "
          + ", ".join(f"{k} {v:.1f} s" for k, v in slowest) + f"; recall {out['pool_recall']['recalled']}/"
          f"{out['pool_recall']['pairs']}, tuples {out['tuples']['matched']}/{out['tuples']['recalled']} matched, "
          f"kendall tau {out['kendall_tau']}", flush=True)
    return out


def with_ratios(run: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """``run`` with the baseline and its ratios to it."""
    return {**run, "baseline_load": base,
            "ratio_wall_vs_load": round(run["wall_s"] / base["median_s"], 1),
            "ratio_peak_rss_vs_load": round(run["peak_tree_rss_mb"] / max(1, base["peak_rss_mb"]), 1)}


def full_size_lrbench(sample: Path, out: Path, size: dict[str, int] = FULL_SIZE) -> dict[str, int]:
    """Write ``out/evaluations_pc.json``: paper-centric tuples of ``size`` made of the sample's
    texts and ratings (see the module). Tuple j follows sample tuple j mod 16 (its anchor's text,
    its ratings, its reviewers' publications first); the papers after the first
    ``tuples - papers`` get one tuple, those get a second one sharing the first one's positive
    with a new, lower-rated negative (as the sample's papers with two tuples do)."""
    items = [t for t in json.loads((sample / "evaluations_pc.sample.json").read_text())
             if "author_id" in t["positive"]]
    uses: dict[str, int] = {}

    def distinct(title: str) -> str:
        title = title.strip()
        uses[title] = uses.get(title, 0) + 1
        return f"{title} (variant {uses[title]})"

    # Every distinct publication of the sample, its reviewers' in order, and where each one's start.
    flat: list[dict[str, str]] = []
    first: dict[str, int] = {}
    for t in items:
        for side in ("positive", "negative"):
            a = t[side]
            if a["author_id"] not in first:
                first[a["author_id"]] = len(flat)
                flat += [{"title": p["title"], "abstract": p.get("abstract", "")} for p in a["papers"]]
    n_pc, n_papers, n_rev, n_pub = size["tuples"], size["papers"], size["reviewers"], size["publications"]
    twice = {round(k * n_papers / (n_pc - n_papers)) for k in range(n_pc - n_papers)}
    slot = 0
    profiles: dict[int, list[dict[str, str]]] = {}

    def reviewer(source_author: str) -> tuple[str, list[dict[str, str]]]:
        nonlocal slot
        r = slot % n_rev
        slot += 1
        if r not in profiles:  # the reviewer's publications: its first slot's sample author's, then the next ones'
            count = n_pub * (r + 1) // n_rev - n_pub * r // n_rev
            start = first[source_author]
            profiles[r] = [{"title": distinct(p["title"]), "abstract": p["abstract"]}
                           for p in (flat[(start + i) % len(flat)] for i in range(count))]
        return f"author_{800_000 + r}", profiles[r]

    tuples = []
    for q in range(n_papers):
        src = items[q % len(items)]
        anchor = {"paper_id": f"paper_{300_000 + q}", "paper_title": distinct(src["anchor"]["paper_title"]),
                  "abstract": src["anchor"].get("abstract", "")}
        sides = []
        for side in ("positive", "negative"):
            rid, papers = reviewer(src[side]["author_id"])
            sides.append({"author_id": rid, "score": src[side]["score"], "papers": papers})
        tuples.append({"anchor": anchor, "positive": sides[0], "negative": sides[1], "type": "paper_centric"})
        if q in twice:
            other = items[(n_papers + len(tuples)) % len(items)]
            rp = sides[0]["score"]
            assert rp > 1, "a positive rated 1 cannot have a lower-rated negative"
            rid, papers = reviewer(other["negative"]["author_id"])
            neg = {"author_id": rid, "score": max(1, min(other["negative"]["score"], rp - 1)), "papers": papers}
            tuples.append({"anchor": anchor, "positive": sides[0], "negative": neg, "type": "paper_centric"})
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluations_pc.json").write_text(json.dumps(tuples, ensure_ascii=False))
    return {"tuples": len(tuples), "papers": n_papers, "reviewers": len(profiles),
            "publications": sum(len(p) for p in profiles.values())}


def save(key: str, value: dict[str, Any]) -> Path:
    """``value`` under ``key`` of the results file, the other keys kept."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "rebuild.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    result[key] = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
                   "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}", **value}
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", default="lrbench,goldstandard", help="which public samples to rebuild")
    p.add_argument("--repeat", type=int, default=3, help="runs of the baseline load (median)")
    p.add_argument("--scale", action="store_true", help="rebuild LR-bench-format files of the full LR-bench's size instead")
    p.add_argument("--no-track", dest="track", action="store_false", help="pass --no-track (no Prefect server)")
    p.add_argument("--work", type=Path, help="keep each rebuild's data, logs and reports here (default: a temporary folder)")
    p.add_argument("--pool-taus", help="TAU,TAU,...: rebuild the lrbench sample with each as the product's pools.tau "
                                       "and record what the product's pools recall (results key product_pools)")
    a = p.parse_args()
    if not REVBENCH.exists():
        raise SystemExit(f"{REVBENCH} is missing: run `make venv` first")
    with tempfile.TemporaryDirectory(prefix="rebuild-bench-") as tmp:
        work = (a.work or Path(tmp)).resolve()
        if a.pool_taus:
            runs = {}
            for tau in a.pool_taus.split(","):
                if not 0 < float(tau) <= 1:
                    raise SystemExit(f"--pool-taus {a.pool_taus!r}: {tau} is not a threshold in (0, 1]")
                run = rebuild("lrbench", SAMPLES["lrbench"], work / f"tau-{tau}", a.track, {"REVBENCH_POOLS__TAU": tau})
                runs[tau] = {"wall_s": run["wall_s"], "command": f"REVBENCH_POOLS__TAU={tau} {run['command']}",
                             **run.get("product_pools", {})}
                print(f"  tau {tau}: the product's pools recall {runs[tau]['recall']['recalled']}/"
                      f"{runs[tau]['recall']['pairs']}", flush=True)
            print(f"results: {save('product_pools', {'sample': 'lrbench', 'by_tau': runs})}")
            return
        if a.scale:
            files = work / "lrbench-full-size"
            sizes = full_size_lrbench(SAMPLES["lrbench"], files)
            print(f"wrote {files}: {sizes}", flush=True)
            base = baseline("lrbench", files, child_env(work / "load"), work / "load" / "load.log", a.repeat)
            run = with_ratios(rebuild("lrbench", files, work / "scale", a.track), base)
            run.update(files=sizes, goal_s=GOAL_S, within_goal=run["wall_s"] <= GOAL_S,
                       note="texts and ratings of the lrbench sample reused cyclically: time and memory only")
            print(f"results: {save('scale', run)}")
            return
        out: dict[str, Any] = {}
        for kind in [k.strip() for k in a.samples.split(",") if k.strip()]:
            if kind not in SAMPLES:
                raise SystemExit(f"--samples {a.samples!r}: the samples are {', '.join(SAMPLES)}")
            if not SAMPLES[kind].exists():
                print(f"{SAMPLES[kind]} is absent: {kind} skipped", flush=True)
                continue
            base = baseline(kind, SAMPLES[kind], child_env(work / f"{kind}-load"), work / f"{kind}-load" / "load.log", a.repeat)
            print(f"baseline: cold strict load of {kind} {base['median_s']:.2f} s, peak {base['peak_rss_mb']} MB", flush=True)
            out[kind] = with_ratios(rebuild(kind, SAMPLES[kind], work / kind, a.track), base)
        if out:
            print(f"results: {save('samples', out)}")


if __name__ == "__main__":
    main()
