"""The survey server under load: one-click ratings and form submissions from concurrent people.

The server runs as `revbench survey serve` does, in its own process; clients on threads of this
process open signed links over HTTP. Each click and submit is committed (SQLite WAL,
synchronous=FULL) before it is acknowledged. Baselines in the same run: ``/healthz`` on the same
server (HTTP and the token-free path, no store), and bare SQLite inserts of the same rows with the
same durability (the store's floor).

    .venv/bin/python -m benchmarks.survey_bench [--invitations 2000] [--clients 8]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

RESULTS = Path(__file__).resolve().parent / "results"
KEY = "bench-signing-key-" + "b" * 24


def hammer(base: str, urls: list[tuple[str, dict[str, str] | None]], clients: int) -> dict[str, float]:
    """Open ``urls`` (GET, or POST with form data) from ``clients`` threads; rate and latencies."""
    lat: list[float] = []
    codes: list[int] = []
    lock = threading.Lock()
    chunks = [urls[i::clients] for i in range(clients)]

    def work(chunk: list[tuple[str, dict[str, str] | None]]) -> None:
        mine, my_codes = [], []
        with httpx.Client(base_url=base, timeout=60) as c:
            for url, form in chunk:
                t = time.perf_counter()
                r = c.post(url, data=form) if form is not None else c.get(url)
                mine.append(time.perf_counter() - t)
                my_codes.append(r.status_code)
        with lock:
            lat.extend(mine)
            codes.extend(my_codes)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work, args=(ch,)) for ch in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()
    return {"requests": len(lat), "seconds": round(wall, 2), "per_second": round(len(lat) / wall, 1),
            "p50_ms": round(1000 * statistics.median(lat), 1), "p95_ms": round(1000 * lat[int(0.95 * (len(lat) - 1))], 1),
            "errors": sum(1 for c in codes if c >= 400)}


def bare_sqlite(path: Path, rows: int) -> dict[str, float]:
    """The floor: one committed insert per answer, WAL and synchronous=FULL, one connection."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE e (i INTEGER PRIMARY KEY, inv TEXT, paper TEXT, rating INT, digest TEXT UNIQUE, at TEXT)")
    t0 = time.perf_counter()
    for n in range(rows):
        con.execute("BEGIN IMMEDIATE")
        con.execute("INSERT INTO e (inv, paper, rating, digest, at) VALUES (?, ?, ?, ?, ?)",
                    [f"inv{n}", "p", 3, f"d{n}", datetime.now(UTC).isoformat()])
        con.execute("COMMIT")
    wall = time.perf_counter() - t0
    con.close()
    return {"requests": rows, "seconds": round(wall, 2), "per_second": round(rows / wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--invitations", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()
    from pydantic import SecretStr

    from revbench.replay.server import free_port
    from revbench.survey.tokens import Claim, LinkSigner
    from revbench.warehouse.survey_store import SurveyStore

    signer = LinkSigner(SecretStr(KEY))
    papers = [{"paper_id": f"2609.{k:05d}", "title": f"SYNTHETIC paper {k}", "abstract": "SYNTHETIC abstract. " * 40}
              for k in range(3)]
    ids = [f"inv_{n:020x}" for n in range(args.invitations)]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        SurveyStore(data / "survey.sqlite").publish_invitations(
            [{"invitation_id": i, "round": 1, "papers": papers} for i in ids])
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("REVBENCH_")}
        env.update({"REVBENCH_DATA_DIR": str(data), "REVBENCH_SURVEY__SIGNING_KEY": KEY,
                    "REVBENCH_SURVEY__RATE_LIMIT_PER_MINUTE": "100000"})
        proc = subprocess.Popen([sys.executable, "-m", "revbench", "survey", "serve", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    httpx.get(f"{base}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            hammer(base, [("/healthz", None)] * 200, args.clients)  # warm-up
            out = {
                "healthz (baseline)": hammer(base, [("/healthz", None)] * len(ids), args.clients),
                "click (one-click rating)": hammer(
                    base, [(f"/r/{signer.sign(Claim(i, 'rate', papers[0]['paper_id'], 4))}", None) for i in ids],
                    args.clients),
                "page (GET, 3 papers)": hammer(base, [(f"/i/{signer.sign(Claim(i, 'page'))}", None) for i in ids],
                                               args.clients),
                "submit (form, 3 answers)": hammer(
                    base, [(f"/i/{signer.sign(Claim(i, 'page'))}",
                            {f"answer-{p['paper_id']}": "skip" if k == 2 else "3" for k, p in enumerate(papers)}) for i in ids],
                    args.clients),
            }
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        events = len(SurveyStore(data / "survey.sqlite").events_since())
        out["bare sqlite insert (floor)"] = bare_sqlite(Path(tmp) / "bare.sqlite", len(ids))
    expected = len(ids) * (1 + 3)  # one click, then the form changes paper 0 (4 -> 3) and adds two answers
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "invitations": len(ids), "clients": args.clients,
        "cores": os.cpu_count(), "results": out, "events_recorded": events, "events_expected": expected,
        "click_vs_healthz": round(out["click (one-click rating)"]["per_second"] / out["healthz (baseline)"]["per_second"], 2),
        "click_vs_bare_sqlite": round(out["click (one-click rating)"]["per_second"]
                                      / out["bare sqlite insert (floor)"]["per_second"], 2),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "survey.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    if events != expected:
        raise SystemExit(f"recorded {events} events, expected {expected}")


if __name__ == "__main__":
    main()
