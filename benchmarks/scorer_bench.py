"""What each built-in scorer costs a one-off ``revbench evaluate``: the first run (a cold process,
an empty vector cache: models loaded, every text encoded) and the next run on the same data
folder (the vectors cached), median wall seconds of ``--repeat`` cold processes each.

The benchmarks are the CMU gold standard as ``../shared/external/goldstandard-full`` has it (58
reviewers, their profiles in ``d_20_1``) and the LR-bench slice in ``../shared/external/lrbench-sample``,
or, without them, a SYNTHETIC layout of the gold standard's size (``cli_bench.gold_layout``). Every run is in-process (no Prefect API), ``--bootstrap 0``. The
baseline in the same run is ``trivial``, which scores every pair alike: what any evaluation costs
before its scorer does anything. Models with weights run only where they are on this machine
(nothing is downloaded); the others are listed as skipped with the reason ``revbench models``
gives.

    .venv/bin/python -m benchmarks.scorer_bench [--repeat 3]

Results go to ``benchmarks/results/scorers.json``; the evaluation page of the docs quotes them.
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
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.cli_bench import gold_layout

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
EXTERNAL = ROOT.parent / "shared" / "external"
GOLD = EXTERNAL / "goldstandard-full"
LRBENCH = EXTERNAL / "lrbench-sample"
SCORERS = ("trivial", "tpms", "bm25", "embedding:model=hashing", "embedding:model=minilm", "embedding:model=specter2",
           "embedding:model=specter+scincl,merge_alpha=0.5")


def _run(spec: str, bench: str, data: Path, cwd: Path) -> tuple[float, int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVBENCH_", "PREFECT_API"))}
    env.update(REVBENCH_DATA_DIR=str(data), HF_HUB_OFFLINE="1", PREFECT_HOME=str(data / "prefect"))
    cmd = [sys.executable, "-m", "revbench", "evaluate", "-b", bench, "-s", spec, "--bootstrap", "0"]
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    said = (done.stderr or done.stdout).strip()
    return time.perf_counter() - t, done.returncode, said.splitlines()[-1] if said else ""


def _skipped(line: str) -> dict[str, str]:
    why = "weights not on this machine (nothing is downloaded)" if "download it where there is a network" in line else line
    return {"skipped": why, "detail": line}


def measure(spec: str, bench: str, work: Path, repeat: int) -> dict[str, Any]:
    """First and cached runs of one scorer, ``repeat`` times each on fresh data folders."""
    first, cached = [], []
    for i in range(repeat):
        data = work / f"{re.sub(r'[^A-Za-z0-9-]', '_', spec)}-{i}"
        shutil.rmtree(data, ignore_errors=True)
        secs, rc, line = _run(spec, bench, data, work)
        if rc != 0:
            return _skipped(line)
        first.append(secs)
        secs, rc, line = _run(spec, bench, data, work)
        if rc != 0:
            return _skipped(line)
        cached.append(secs)
    return {"first_s": round(statistics.median(first), 2), "cached_s": round(statistics.median(cached), 2),
            "first_runs": [round(x, 2) for x in first], "cached_runs": [round(x, 2) for x in cached]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=RESULTS / "scorers.json")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if GOLD.exists():
            benches = {"goldstandard": (f"goldstandard={GOLD}", "the CMU gold standard (../shared/external/goldstandard-full)")}
            if LRBENCH.exists():
                benches["lrbench-sample"] = (f"lrbench={LRBENCH}", "the LR-bench slice (../shared/external/lrbench-sample)")
        else:
            benches = {"goldstandard": (f"goldstandard={gold_layout(work)}", "SYNTHETIC: the gold standard's layout and size")}
        results: dict[str, Any] = {}
        for name, (bench, source) in benches.items():
            rows: dict[str, Any] = {}
            for spec in SCORERS:
                rows[spec] = measure(spec, bench, work, a.repeat)
                print(name, spec, rows[spec], flush=True)
            base = rows["trivial"]
            for r in rows.values():
                if "first_s" in r:
                    r["first_vs_trivial"] = round(r["first_s"] / base["first_s"], 1)
                    r["cached_vs_trivial"] = round(r["cached_s"] / base["cached_s"], 1)
            results[name] = {"source": source, "scorers": rows}
    out = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
           "repeat": a.repeat, "command": "revbench evaluate -b KIND=PATH -s SCORER --bootstrap 0 (in-process, a cold "
           "process; first: an empty data folder, cached: the same folder again)", "benchmarks": results}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
