"""The demo as a newcomer runs it: ``make demo`` twice in a fresh data folder, timed, with what it
printed (lines, the widest line) and the numbers it reported (``data/reports/demo.json``).

The README and Getting started quote these numbers; ``docs/gen_numbers.py`` renders them from
``benchmarks/results/demo.json`` into the pages, so the pages say what the last run printed.

    .venv/bin/python -m benchmarks.demo_bench                 # about 3 to 5 minutes on two cores
    .venv/bin/python -m benchmarks.demo_bench --work /tmp/demo-bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


PATH_OR_URL = re.compile(r"\S*/\S*")
"""A word with a slash: a path or a URL, which a log keeps whole however long."""


def one_run(env: dict[str, str], log: Path) -> dict[str, Any]:
    """``revbench demo`` as ``make demo`` runs it (tracked, on a temporary Prefect server): wall
    time, lines printed, the widest (a terminal of 80 columns; in a log nothing wraps) and the
    widest once its paths and URLs are taken out, and the lines of its full output
    (``data/reports/demo.txt``)."""
    t0 = time.monotonic()
    with log.open("w") as f:
        done = subprocess.run([str(ROOT / ".venv" / "bin" / "revbench"), "demo"], env=env, stdout=f,
                              stderr=subprocess.STDOUT, check=False)
    seconds = time.monotonic() - t0
    load = os.getloadavg()[0]
    lines = log.read_text(errors="replace").splitlines()
    if done.returncode:
        raise SystemExit(f"revbench demo failed (exit {done.returncode}); {log}:\n" + "\n".join(lines[-8:]))
    full = Path(env["REVBENCH_DATA_DIR"]) / "reports" / "demo.txt"
    return {"seconds": round(seconds, 1), "lines": len(lines), "widest": max((len(x) for x in lines), default=0),
            "widest_text": max((len(PATH_OR_URL.sub("", x)) for x in lines), default=0),
            "full_lines": len(full.read_text().splitlines()) if full.exists() else None, "load_after": round(load, 1)}


def save_realism(report: Path, out: Path, run: dict[str, Any]) -> None:
    """The realism rows the demo wrote as ``world_realism.json``, keeping the values measured on
    earlier world formats (``format7_before``, ``format8_before``, their notes) that the docs show
    beside them."""
    rows = json.loads(report.read_text())["rows"]
    kept = json.loads(out.read_text()) if out.exists() else {}
    out.write_text(json.dumps({
        "benchmark": "world_realism", "measured": run["when"][:10], "machine": run["machine"],
        "command": f"make demo in a fresh data folder (python -m benchmarks.demo_bench; {run['facts']['papers']} papers, "
                   f"seed {run['facts']['seed']}, world format {run['facts']['world']['format']})",
        "rows": rows, **{k: v for k, v in kept.items() if k.startswith("format") and k.endswith(("_before", "_note"))}},
        indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=ROOT / "data" / "bench" / "demo", help="the fresh data folder (emptied first)")
    ap.add_argument("--out", type=Path, default=RESULTS / "demo.json")
    args = ap.parse_args(argv)
    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    # What the Makefile exports for `make demo`, in a folder of its own.
    env = {**os.environ, "REVBENCH_DATA_DIR": str(work / "data"), "PREFECT_HOME": str(work / "data" / "prefect"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "GX_ANALYTICS_ENABLED": "false", "HF_HUB_OFFLINE": "1",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120", "COLUMNS": "80"}
    env.pop("PREFECT_API_URL", None)
    print("first run ...", flush=True)
    first = one_run(env, work / "first.log")
    facts = json.loads((work / "data" / "reports" / "demo.json").read_text())
    print(f"first run: {first['seconds']} s, {first['lines']} lines; second run ...", flush=True)
    second = one_run(env, work / "second.log")
    again = json.loads((work / "data" / "reports" / "demo.json").read_text())
    out = {"when": datetime.now(UTC).isoformat(timespec="seconds"),
           "machine": f"{os.cpu_count()} cores, python {platform.python_version()}",
           "command": "make demo (revbench demo, tracked), twice in a fresh data folder",
           "first": first, "second": {**second, "invitations_sent": again["survey"]["sent"]}, "facts": facts}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    save_realism(work / "data" / "reports" / "world_realism.json", args.out.parent / "world_realism.json", out)
    print(f"second run: {second['seconds']} s, {second['lines']} lines; results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
