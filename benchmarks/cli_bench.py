"""Wall time of one-off ``revbench evaluate`` commands, cold process, median of N runs.

1. RATE's shipped LR-bench predictions (``../shared/external/lrbench-sample``, or SYNTHETIC files
   of the same format when the samples are absent), ``--bootstrap 0``.
2. TPMS + metrics + 1,000 bootstrap resamples on a SYNTHETIC gold-standard layout of the full
   dataset's size: 58 reviewers rating 8 papers each, ten draws ``d_20_1..10`` of 20-paper profiles.

Each runs in-process (the default without a Prefect API) and with ``--track`` (a Prefect flow
run; without an API configured, a temporary server starts in each process). The baseline in the
same run is a bare Python process that reads the same LR-bench files and computes their loss
with nothing else loaded: the floor a command cannot go below.

``cold_evaluate_rate`` is the goal of the one-off command (1.): at most 0.5 s, median of N cold
``python -m revbench`` processes (after one untimed run that creates the warehouse), timed in
turn with the baseline and the console script so that the machine's other load weighs on all
three alike; it keeps each one's CPU time (user + system) too, which other processes on a
shared machine disturb less than the wall time.

    .venv/bin/python -m benchmarks.cli_bench [--repeat 5] [--rate-script PATH]

``--rate-script`` times RATE's own ``evaluation_script.py`` (its public repository, kept outside
this one) in the same turns, on the same two files (``--pred_paths``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
EXTERNAL = ROOT.parent / "shared" / "external" / "lrbench-sample"
GOAL_S = 0.5
"""The cold one-off evaluate of RATE's files, median wall seconds (the issue's goal)."""

BASELINE = """
import json, sys
for path in sys.argv[1:]:
    items = json.load(open(path))
    cost = weight = 0.0
    for t in items:
        w = abs(t["positive_ref_score"] - t["negative_ref_score"])
        d = t["positive_score"] - t["negative_score"]
        cost += w * ((d < 0) + 0.5 * (d == 0))
        weight += w
    print(path, cost / weight)
"""


def lr_files(work: Path) -> tuple[Path, Path, str]:
    """The public RATE prediction samples, or SYNTHETIC files of their format and size."""
    if EXTERNAL.exists():
        return EXTERNAL / "RATE_pc.sample.json", EXTERNAL / "RATE_rc.sample.json", "public samples (16 pc + 40 rc tuples)"
    rng = random.Random(0)
    out = []
    for kind, n in (("paper_centric", 16), ("reviewer_centric", 40)):
        rows = []
        for i in range(n):
            hi, lo = rng.randint(2, 5), 0
            lo = rng.randint(1, hi - 1)
            rows.append({"anchor_id": f"a{i}", "positive_id": f"p{i}", "negative_id": f"n{i}", "type": kind,
                         "positive_score": rng.random(), "negative_score": rng.random(),
                         "positive_ref_score": hi, "negative_ref_score": lo})
        path = work / f"RATE_{kind[:1]}c.json"
        path.write_text(json.dumps(rows))
        out.append(path)
    return out[0], out[1], "SYNTHETIC files of the samples' format (16 pc + 40 rc tuples)"


def gold_layout(work: Path, reviewers: int = 58, rated: int = 8, draws: int = 10, seed: int = 1) -> Path:
    """A SYNTHETIC gold-standard layout of the full dataset's size (flat slice layout)."""
    from revbench.synth.draw import Generator, WorldSpec

    g = Generator(WorldSpec(seed=seed))
    root = work / "gold-full"
    root.mkdir()
    subs: dict[str, dict] = {}
    rows = []
    pools: dict[str, list[dict]] = {}
    for r in range(reviewers):
        rid = str(1000 + r)
        topic = g.choice(g.topic_ids)
        pools[rid] = []
        for k in range(40):
            t = g.title(topic if g.rng.random() < 0.8 else g.choice(g.topic_ids))
            pools[rid].append({"id": f"{rid}-{k}", "content": {"title": t, "abstract": g.abstract(topic, t), "year": 2020}})
        row = {"ParticipantID": rid}
        for i in range(1, 11):
            row[f"Paper{i}"] = row[f"Expertise{i}"] = ""
        for i in range(1, rated + 1):
            own = g.rng.random() < 0.5
            t_topic = topic if own else g.choice(g.topic_ids)
            t = g.title(t_topic)
            pid = f"s{len(subs)}"
            subs[pid] = {"id": pid, "content": {"title": t, "abstract": g.abstract(t_topic, t)}}
            row[f"Paper{i}"], row[f"Expertise{i}"] = pid, str(min(5.0, max(1.0, (4.5 if own else 2.0) + g.rng.integers(-1, 2))))
        rows.append(row)
    cols = ["ParticipantID", *[f"Paper{i}" for i in range(1, 11)], *[f"Expertise{i}" for i in range(1, 11)]]
    (root / "evaluations.tsv").write_text("\n".join("\t".join(str(r[c]) for c in cols) for r in [dict(zip(cols, cols))] + rows) + "\n")
    for d in range(1, draws + 1):
        dd = root / f"d_20_{d}"
        (dd / "archives").mkdir(parents=True)
        (dd / "submissions.json").write_text(json.dumps(subs))
        for rid, pool in pools.items():
            pick = [pool[i] for i in sorted(g.rng.choice(len(pool), 20, replace=False))]
            (dd / "archives" / f"~{rid}.jsonl").write_text("\n".join(json.dumps(p) for p in pick) + "\n")
    return root


def timed(cmd: list[str], env: dict[str, str], cwd: Path, repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, check=False, env=env, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3), "max_s": round(max(times), 3)}


def interleaved(cmds: dict[str, list[str]], env: dict[str, str], cwd: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Each command ``repeat`` times, in turn (a, b, c, a, b, c, ...): wall and CPU time (user +
    system) of each cold process, median, min and max."""
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeat):
        for key, cmd in cmds.items():
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            out = subprocess.run(cmd, check=False, env=env, cwd=cwd, capture_output=True, text=True)
            wall[key].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[key].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            if out.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return {k: {"median_s": round(statistics.median(wall[k]), 3), "min_s": round(min(wall[k]), 3),
                "max_s": round(max(wall[k]), 3), "cpu_median_s": round(statistics.median(cpu[k]), 3)} for k in cmds}


def cold_evaluate(work: Path, env: dict[str, str], pc: Path, rc: Path, repeat: int,
                  rate_script: Path | None = None) -> dict[str, Any]:
    """The cold ``revbench evaluate`` of RATE's files against the bare baseline (and RATE's own
    ``evaluation_script.py`` where given), in turn (see the module)."""
    args = ["evaluate", "-p", f"rate_pc={pc}", "-p", f"rate_rc={rc}", "--bootstrap", "0"]
    cmds = {"baseline": [sys.executable, "-c", BASELINE, str(pc), str(rc)], "module": [sys.executable, "-m", "revbench", *args]}
    if rate_script is not None:
        cmds["rate_script"] = [sys.executable, str(rate_script), "--pred_paths", str(pc), str(rc)]
    script = Path(sys.executable).parent / "revbench"
    if script.exists():
        cmds["script"] = [str(script), *args]
    timed(cmds["module"], env, work, 1)  # creates the warehouse: the runs below find it, as a user's do
    t = interleaved(cmds, env, work, repeat)
    ev, base = t["module"], t["baseline"]
    return {
        "command": f"python -m revbench evaluate -p rate_pc={pc.name} -p rate_rc={rc.name} --bootstrap 0",
        **ev,
        "goal_s": GOAL_S,
        "goal_met": ev["median_s"] <= GOAL_S,
        "baseline": base,
        "ratio_vs_baseline": round(ev["median_s"] / base["median_s"], 1),
        "cpu_ratio_vs_baseline": round(ev["cpu_median_s"] / base["cpu_median_s"], 1),
        "console_script": t.get("script"),
        "rate_script": t.get("rate_script"),
        "ratio_vs_rate_script": round(ev["median_s"] / t["rate_script"]["median_s"], 2) if "rate_script" in t else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--track-repeat", type=int, default=3)
    p.add_argument("--rate-script", type=Path,
                   help="RATE's evaluation_script.py (github.com/Gnociew/RATE-Reviewer-Assignment; not part of this "
                        "repository), timed in turn on the same files")
    a = p.parse_args()
    if a.rate_script is not None and not a.rate_script.is_file():
        p.error(f"--rate-script {a.rate_script}: no such file")
    revbench = [sys.executable, "-m", "revbench"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pc, rc, lr_source = lr_files(work)
        gold = gold_layout(work)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
        env.update(REVBENCH_DATA_DIR=str(work / "data"), PREFECT_HOME=str(work / "prefect"))
        lr_cmd = ["evaluate", "-p", f"rate_pc={pc}", "-p", f"rate_rc={rc}", "--bootstrap", "0"]
        gold_cmd = ["evaluate", "-b", f"goldstandard={gold}", "-s", "tpms", "--bootstrap", "1000"]
        cold = cold_evaluate(work, env, pc, rc, a.repeat, a.rate_script)
        result = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
            "repeat": a.repeat, "lr_source": lr_source,
            "gold_layout": "SYNTHETIC: 58 reviewers x 8 rated papers, 10 draws of 20-paper profiles",
            "cold_evaluate_rate": cold,
            "baseline_bare_python_lr": cold["baseline"],
            "python_startup": timed([sys.executable, "-c", "pass"], env, work, a.repeat),
            "lr_in_process": {k: cold[k] for k in ("median_s", "min_s", "max_s", "cpu_median_s")},
            "gold_tpms_bootstrap_in_process": timed([*revbench, *gold_cmd], env, work, a.repeat),
            "lr_tracked": timed([*revbench, *lr_cmd, "--track"], env, work, a.track_repeat),
            "gold_tpms_bootstrap_tracked": timed([*revbench, *gold_cmd, "--track"], env, work, a.track_repeat),
        }
    base = result["baseline_bare_python_lr"]["median_s"]
    result["ratio_lr_in_process_vs_baseline"] = round(result["lr_in_process"]["median_s"] / base, 1)
    result["ratio_lr_tracked_vs_in_process"] = round(result["lr_tracked"]["median_s"] / result["lr_in_process"]["median_s"], 1)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cli.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
