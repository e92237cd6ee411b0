"""Wall time of one-off ``revbench evaluate`` commands, cold process, median of N runs.

1. RATE's shipped LR-bench predictions (``../shared/external/lrbench-sample``, or SYNTHETIC files
   of the same format when the samples are absent), ``--bootstrap 0``.
2. TPMS + metrics + 1,000 bootstrap resamples on a SYNTHETIC gold-standard layout of the full
   dataset's size: 58 reviewers rating 8 papers each, ten draws ``d_20_1..10`` of 20-paper profiles.

Each runs in-process (the default without a Prefect API) and with ``--track`` (a Prefect flow
run; without an API configured, a temporary server starts in each process). The baseline in the
same run is a bare Python process that reads the same LR-bench files and computes their loss
with nothing else loaded: the floor a command cannot go below.

``cold_evaluate_rate`` is the goal of the one-off command (1.): no slower than RATE's own
``evaluation_script.py`` on the same two files (``--rate-script PATH``: its public repository, kept
outside this one; ``--pred_paths``), median of N cold ``python -m revbench`` processes against the
median of N cold runs of RATE's script, timed in turn with the baseline and the console script
(after one untimed run of each, which reads the files into the page cache) so that the machine's
other load weighs on all of them alike; it keeps each one's CPU time (user + system) too, which
other processes on a shared machine disturb less than the wall time. Without ``--rate-script`` the
goal is not judged (``goal_met`` null). The command takes the lean lane (``revbench.app.lean_evaluate``).

``cold_evaluate_gold`` is the gold standard's goal: at least 30x faster than the gold standard's
own ``evaluation_script.py`` (``--gold-script PATH``: its public repository,
github.com/niharshah/goldstandard-reviewer-paper-match, with its ``scripts/helpers.py`` and
``scripts/scoring.py``, kept outside this one). On the REAL gold standard
(``../shared/external/goldstandard-full``): the script requires ten prediction files
``<algo>_d_20_<1..10>_ta.json`` (``{participant: {paper: score}}``) and always computes, besides the
mean loss over them, 1,000 reviewer resamples for its 95% interval; the shared copy holds one draw,
``d_20_1``, so revbench's TPMS on it (computed once, untimed) is written as each of the ten files,
and ``revbench evaluate -b goldstandard=<the layout with d_20_1 as each of the ten draws> -p
tpms=<those files> --bootstrap 1000`` computes the same on them. The two are timed in turn (with
the same command at ``--bootstrap 0``, which the script cannot skip, for information), after one
untimed run of each; the script's own ``compute_main_metric`` and ``compute_resolution`` (untimed)
give its values at full precision, which must agree with revbench's (``values_agree``). The command
takes the lean lane too (``revbench.evaluation.lean_gold``, with numpy) and stores nothing.
Without ``--gold-script`` it is not timed (``cold_evaluate_gold`` null).

    .venv/bin/python -m benchmarks.cli_bench [--repeat 5] [--rate-script PATH] [--gold-script PATH]
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
GOAL_RATIO = 1.0
"""The cold one-off evaluate of RATE's files against RATE's own script on them, median wall time
over median wall time: no slower (the issue's goal)."""
GOAL = "no slower than RATE's evaluation_script.py on the same files (median wall time ratio <= 1.0)"
MIN_REPEAT = 3
GOLD_EXTERNAL = ROOT.parent / "shared" / "external" / "goldstandard-full"
GOLD_GOAL_RATIO = 30.0
"""The gold standard's evaluation against its own script on the same files, the script's median
wall time over ours: at least this (the issue's goal)."""
GOLD_GOAL = ("at least 30x faster than the gold standard's evaluation_script.py on the same files "
             "(reference median wall time / ours >= 30)")
GOLD_DRAWS = 10
"""The script reads exactly ten prediction files, ``<algo>_d_20_1..10_ta.json``."""

GOLD_CHECK = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import pandas as pd
import scripts.helpers as hlp
from scripts.scoring import compute_main_metric, compute_resolution
refs, _ = hlp.to_dicts(pd.read_csv(sys.argv[2], sep='\\t'))
reviewers = list(refs)
papers = set().union(*(r.keys() for r in refs.values()))
preds = [json.load(open(f)) for f in sys.argv[3:]]
out = {"loss": float(np.mean([compute_main_metric(p, refs, papers, reviewers) for p in preds]))}
for regime in ("easy", "hard"):
    r = [compute_resolution(p, refs, papers, reviewers, regime) for p in preds]
    out[regime + "_accuracy"] = float(np.mean([x["score"] for x in r]))
    out[regime + "_pairs"] = f"{r[0]['correct']}/{r[0]['total']}"
print(json.dumps(out))
"""
"""The gold-standard script's values at full precision, by its own functions (it prints the mean
loss rounded to two places): argv = its folder, the evaluations file, the prediction files."""

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
    """The cold ``revbench evaluate`` of RATE's files against the bare baseline and RATE's own
    ``evaluation_script.py`` (where given), in turn (see the module)."""
    args = ["evaluate", "-p", f"rate_pc={pc}", "-p", f"rate_rc={rc}", "--bootstrap", "0"]
    cmds = {"baseline": [sys.executable, "-c", BASELINE, str(pc), str(rc)], "module": [sys.executable, "-m", "revbench", *args]}
    if rate_script is not None:
        cmds["rate_script"] = [sys.executable, str(rate_script), "--pred_paths", str(pc), str(rc)]
    script = Path(sys.executable).parent / "revbench"
    if script.exists():
        cmds["script"] = [str(script), *args]
    for cmd in cmds.values():
        timed(cmd, env, work, 1)  # the files into the page cache, for each alike
    t = interleaved(cmds, env, work, repeat)
    ev, base = t["module"], t["baseline"]
    ratio = round(ev["median_s"] / t["rate_script"]["median_s"], 2) if "rate_script" in t else None
    return {
        "command": f"python -m revbench evaluate -p rate_pc={pc.name} -p rate_rc={rc.name} --bootstrap 0",
        **ev,
        "goal": GOAL,
        "goal_ratio": GOAL_RATIO,
        # Judged on the two medians (in ms); null where RATE's script was not timed.
        "goal_met": ev["median_s"] <= GOAL_RATIO * t["rate_script"]["median_s"] if "rate_script" in t else None,
        "baseline": base,
        "ratio_vs_baseline": round(ev["median_s"] / base["median_s"], 1),
        "cpu_ratio_vs_baseline": round(ev["cpu_median_s"] / base["cpu_median_s"], 1),
        "console_script": t.get("script"),
        "rate_script": t.get("rate_script"),
        "ratio_vs_rate_script": ratio,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def gold_reference_files(work: Path, env: dict[str, str]) -> tuple[Path, Path, str]:
    """The real gold standard laid out with its one shared draw, ``d_20_1``, as each of the ten
    draws, and revbench's TPMS on it (untimed) as the ten prediction files the gold standard's
    script requires: (layout, predictions folder, algo)."""
    layout = work / "gold-real"
    (layout / "data").mkdir(parents=True)
    (layout / "data" / "evaluations.csv").symlink_to(GOLD_EXTERNAL / "data" / "evaluations.csv")
    for x in range(1, GOLD_DRAWS + 1):
        (layout / "evaluation_datasets").mkdir(exist_ok=True)
        (layout / "evaluation_datasets" / f"d_20_{x}").symlink_to(GOLD_EXTERNAL / "evaluation_datasets" / "d_20_1")
    report = work / "gold-tpms"
    timed([sys.executable, "-m", "revbench", "evaluate", "-b", f"goldstandard={GOLD_EXTERNAL}", "-s", "tpms",
           "--bootstrap", "0", "--no-track", "--no-plot", "--report", str(report)], env, work, 1)
    tpms = json.loads((report / "predictions" / "goldstandard" / "tpms.json").read_text())
    preds = work / "gold-preds"
    preds.mkdir()
    for x in range(1, GOLD_DRAWS + 1):
        (preds / f"tpms_d_20_{x}_ta.json").write_text(json.dumps(tpms))
    return layout, preds, "tpms"


def _printed(stdout: str) -> dict[str, Any]:
    """The gold-standard script's two lines: ``Pointwise estimate of performance: 0.28`` and
    ``95% confidence interval: [0.24; 0.34]``."""
    lines = dict(line.split(": ", 1) for line in stdout.splitlines() if ": " in line)
    lo, hi = lines["95% confidence interval"].strip("[]").split(";")
    return {"loss": float(lines["Pointwise estimate of performance"]), "ci95": [float(lo), float(hi)]}


def cold_evaluate_gold(work: Path, env: dict[str, str], gold_script: Path, repeat: int) -> dict[str, Any]:
    """The gold standard's evaluation, ``revbench evaluate`` against the gold standard's own
    ``evaluation_script.py`` on the same files, in turn, and their values (see the module)."""
    from importlib.metadata import version

    layout, preds, algo = gold_reference_files(work, env)
    files = [preds / f"{algo}_d_20_{x}_ta.json" for x in range(1, GOLD_DRAWS + 1)]
    evaluations = layout / "data" / "evaluations.csv"
    args = ["evaluate", "-b", f"goldstandard={layout}", "-p", f"{algo}={preds}", "--no-track"]
    cmds = {
        "reference": [sys.executable, str(gold_script), "--dataset", str(evaluations), "--prediction_dir", str(preds),
                      "--algo", algo],
        "module": [sys.executable, "-m", "revbench", *args, "--bootstrap", "1000"],
        "module_bootstrap_0": [sys.executable, "-m", "revbench", *args, "--bootstrap", "0"],
    }
    # One untimed run of each (the files into the page cache, the warehouse created), which also
    # give the values: the script's printed lines, revbench's rows.
    ref_out = subprocess.run(cmds["reference"], check=False, env=env, cwd=work, capture_output=True, text=True)
    if ref_out.returncode != 0:
        raise SystemExit(f"{' '.join(cmds['reference'])} failed:\n{ref_out.stdout[-2000:]}\n{ref_out.stderr[-2000:]}")
    rows_path = work / "gold-rows.json"
    timed([*cmds["module"], "--json-out", str(rows_path)], env, work, 1)
    timed(cmds["module_bootstrap_0"], env, work, 1)
    check = subprocess.run([sys.executable, "-c", GOLD_CHECK, str(gold_script.resolve().parent), str(evaluations),
                            *map(str, files)], check=True, env=env, cwd=work, capture_output=True, text=True)
    reference = json.loads(check.stdout)
    rows = {r["metric"]: r for r in json.loads(rows_path.read_text())}
    ours = {"loss": rows["loss"]["value"], "ci95": [rows["loss"]["ci_low"], rows["loss"]["ci_high"]],
            **{f"{k}_accuracy": rows[f"{k}_accuracy"]["value"] for k in ("easy", "hard")},
            **{f"{k}_pairs": f"{round(rows[f'{k}_accuracy']['value'] * rows[f'{k}_accuracy']['n'])}/"
                             f"{rows[f'{k}_accuracy']['n']}" for k in ("easy", "hard")},
            "pairs": rows["loss"]["n"]}
    printed = _printed(ref_out.stdout)
    agree = (all(abs(ours[k] - reference[k]) <= 1e-9 for k in ("loss", "easy_accuracy", "hard_accuracy"))
             and all(ours[f"{k}_pairs"] == reference[f"{k}_pairs"] for k in ("easy", "hard"))
             and round(ours["loss"], 2) == printed["loss"])
    with evaluations.open() as f:
        table = [line.rstrip("\n").split("\t") for line in f][1:]
    rated = sum(1 for row in table for cell in row[1:11] if cell.strip())
    t = interleaved(cmds, env, work, repeat)
    ev, ref = t["module"], t["reference"]
    return {
        "reference": "evaluation_script.py of github.com/niharshah/goldstandard-reviewer-paper-match (with its "
                     "scripts/helpers.py and scripts/scoring.py; kept outside this repository), run with this "
                     f"venv's python (numpy {version('numpy')}, pandas {version('pandas')})",
        "reference_command": f"python evaluation_script.py --dataset data/evaluations.csv --prediction_dir "
                             f"{preds.name} --algo {algo}",
        "command": f"python -m revbench evaluate -b goldstandard=<real, d_20_1 as each of {GOLD_DRAWS} draws> "
                   f"-p {algo}=<the {GOLD_DRAWS} files> --bootstrap 1000 --no-track",
        "data": f"REAL gold standard ({GOLD_EXTERNAL.name}): {len(table)} participants, {rated} ratings; its one "
                f"shared draw d_20_1 stands in for each of the {GOLD_DRAWS} draws the script requires",
        "participants": len(table), "ratings": rated, "draws": GOLD_DRAWS,
        "predictions": f"revbench's TPMS on d_20_1 (untimed), written as each of {algo}_d_20_1..{GOLD_DRAWS}_ta.json",
        "work": "both: the loss of each of the ten files and 1,000 reviewer resamples for a 95% interval (the script "
                "always does); revbench also computes accuracy, easy and hard accuracy with their intervals and "
                "writes its report (it stores nothing: prediction files alone, in its lean lane)",
        **ev,
        "goal": GOLD_GOAL,
        "goal_ratio": GOLD_GOAL_RATIO,
        # Judged on the two medians.
        "goal_met": ref["median_s"] >= GOLD_GOAL_RATIO * ev["median_s"],
        "reference_script": ref,
        "ratio_reference_vs_ours": round(ref["median_s"] / ev["median_s"], 1),
        "cpu_ratio_reference_vs_ours": round(ref["cpu_median_s"] / ev["cpu_median_s"], 1),
        "bootstrap_0": t["module_bootstrap_0"],
        "values": {"reference_printed": printed, "reference_functions": reference, "ours": ours,
                   "note": "the intervals come from different random resamples (the script's are unseeded) and "
                           "are not compared"},
        "values_agree": agree,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--track-repeat", type=int, default=3)
    p.add_argument("--rate-script", type=Path,
                   help="RATE's evaluation_script.py (github.com/Gnociew/RATE-Reviewer-Assignment; not part of this "
                        "repository), timed in turn on the same files")
    p.add_argument("--gold-script", type=Path,
                   help="The gold standard's evaluation_script.py (github.com/niharshah/goldstandard-reviewer-paper-match, "
                        "with its scripts/; not part of this repository), timed in turn on the same files")
    a = p.parse_args()
    if a.rate_script is not None and not a.rate_script.is_file():
        p.error(f"--rate-script {a.rate_script}: no such file")
    if a.gold_script is not None:
        if not a.gold_script.is_file():
            p.error(f"--gold-script {a.gold_script}: no such file")
        if not (a.gold_script.resolve().parent / "scripts" / "scoring.py").is_file():
            p.error(f"--gold-script {a.gold_script}: its scripts/helpers.py and scripts/scoring.py are not beside it")
        if not (GOLD_EXTERNAL / "data" / "evaluations.csv").is_file():
            p.error(f"--gold-script: the real gold standard is not at {GOLD_EXTERNAL}")
    if a.repeat < MIN_REPEAT:
        p.error(f"--repeat {a.repeat}: the goal is judged on a median of at least {MIN_REPEAT}")
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
        cold_gold = cold_evaluate_gold(work, env, a.gold_script, a.repeat) if a.gold_script is not None else None
        result = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{os.cpu_count()} cores, python {sys.version.split()[0]}",
            "repeat": a.repeat, "lr_source": lr_source,
            "gold_layout": "SYNTHETIC: 58 reviewers x 8 rated papers, 10 draws of 20-paper profiles",
            "cold_evaluate_rate": cold,
            "cold_evaluate_gold": cold_gold,
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
