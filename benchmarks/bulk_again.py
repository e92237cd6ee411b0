"""The bulk path's first run and its day later measured again, on the current code, over the world
and the files a finished ``benchmarks.bulk_bench`` run left in its work folder: no world drawn,
grown or written again (at 160k papers those take most of an hour), the API phase kept as
measured (or, with ``--api``, measured again first, once: a quarter of an hour at 160k papers), the
tables compared with its warehouse again.

The files are put back as the first bulk run saw them (S2AG's next release and its diff set
aside, the OpenAlex snapshot written again from the world before its day), the bulk phase runs on
a fresh copy of the template warehouse against the replay of that world, the files are put back as
a day later, the day's papers loaded, and the day later runs. Each path is the one the original
run used, so the day later reads the increments, as it did. Files set aside are put back however
the run ends; a run killed outright leaves them under ``<work>/again-aside/``, where the next
``--again`` finds and restores them before anything else.

    .venv/bin/python -m benchmarks.bulk_again [--papers 160000] [--work data/bench/bulk] [--fresh | --fresh-only] [--repeat 3]
        [--api]

``--fresh`` then runs the bulk path afresh over the day-later world (S2AG's newest release read
whole) and compares its S2 rows with the day later's: a day later from increments must leave them
as a fresh run would (``day_later.fresh_run``). OpenAlex's rows are not compared: the SYNTHETIC
snapshot writes a grown world's older works again into their old partitions, which a day later
rightly does not read.

The results replace the ``bulk`` and ``day_later`` phases (and their ratios; with ``--api`` the
``api`` phase too) in the size's results file; each phase records its commit. A ratio of two phases
measured on different days mixes two paces of a shared machine: ``--api`` measures all three the same day.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.bulk_bench import (FIRST_RELEASE, NEXT_RELEASE, RESULTS, compare, from_template, joined_counts, load_corpus,
                                   run_child, work_lock)


def results_file(papers: int) -> Path:
    """The size's results file, as ``bulk_bench`` names it."""
    return RESULTS / ("bulk.json" if papers == 160_000 else f"bulk-{papers // 1000}k.json")


def day_papers(base: Path, world: Path) -> set[str]:
    """The arXiv ids the grown world lists that the base world does not: the day's papers."""
    import polars as pl

    ids = (lambda w: set(pl.read_parquet(w / "arxiv.parquet")["arxiv_id"].to_list()))
    return ids(world) - ids(base)


def set_aside(work: Path) -> Path:
    """S2AG's next release and diff, and the grown snapshot, moved under ``again-aside``."""
    aside = work / "again-aside"
    aside.mkdir(exist_ok=True)
    for src, name in ((work / "s2ag" / NEXT_RELEASE, "s2ag-next"), (work / "s2ag" / "diffs", "s2ag-diffs"),
                      (work / "openalex", "openalex")):
        if src.exists() and not (aside / name).exists():
            src.rename(aside / name)
    return aside


def put_back(work: Path) -> None:
    """The files as a day later (undoes :func:`set_aside`); a no-op when nothing is aside."""
    aside = work / "again-aside"
    if not aside.exists():
        return
    for name, dst in (("s2ag-next", work / "s2ag" / NEXT_RELEASE), ("s2ag-diffs", work / "s2ag" / "diffs"),
                      ("openalex", work / "openalex")):
        if (aside / name).exists():
            if dst.exists():
                shutil.rmtree(dst)  # the snapshot written again for the first run
            (aside / name).rename(dst)
    aside.rmdir()


def again(papers: int, work: Path, repeat: int = 1, api: bool = False) -> dict[str, Any]:
    """Both phases measured again, each ``repeat`` times (the run of median time kept, every time
    recorded), after the API phase once with ``api``; the updated results."""
    from revbench.replay import spawn_replay
    from revbench.settings import ReplaySettings

    out_file = results_file(papers)
    result: dict[str, Any] = json.loads(out_file.read_text())
    if "day_later" not in result or "exit_code" in result["day_later"]:
        raise SystemExit(f"{out_file}: no finished day later to measure again (run benchmarks.bulk_bench first)")
    base, world = work / f"world-base-{papers // 1000}k", work / "world"
    if not (work / "s2ag" / FIRST_RELEASE).is_dir() or not base.is_dir():
        raise SystemExit(f"{work}: not the work folder of that run (no s2ag/{FIRST_RELEASE} or {base.name})")
    put_back(work)  # a run killed outright left them aside
    replay = ReplaySettings(timeout_delay_seconds=1.0, retry_after_seconds=0)
    if api:
        result["api"] = api_again(work, base, replay)
        out_file.write_text(json.dumps(result, indent=2) + "\n")  # kept, whatever the bulk phases do next
    data = work / "bulk"
    try:
        set_aside(work)
        # In a process of its own: at 160k papers the world it loads would stay in this one's
        # memory through the timed runs, leaving the page cache less room than the first run had.
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                        "from revbench.replay.snapshot import write_snapshot; write_snapshot(Path(sys.argv[1]), Path(sys.argv[2]))",
                        str(base), str(work / "openalex")], check=True)
        print("bulk:", flush=True)
        with spawn_replay(base, replay) as url:
            def first() -> dict[str, Any]:
                return run_child(from_template(work, data), url, work / "s2ag", work / "openalex")
            bulk = median_run(first, repeat)
    finally:
        put_back(work)
    if "exit_code" in bulk:
        raise SystemExit(f"the bulk phase failed: {bulk}")
    if (work / "api" / "warehouse.duckdb").is_file():
        # Compared before the day later changes the bulk warehouse, as the first measurement was.
        result["same_tables"] = compare(work / "api" / "warehouse.duckdb", data / "warehouse.duckdb")
    before = work / "bulk-before-day"
    if repeat > 1:  # each day later from the same state: the first run's, as it left it
        shutil.rmtree(before, ignore_errors=True)
        shutil.copytree(data, before)
    print("day_later:", flush=True)
    loaded: dict[str, int] = {}
    with spawn_replay(world, replay) as url:
        def day() -> dict[str, Any]:
            if repeat > 1:
                shutil.rmtree(data, ignore_errors=True)
                shutil.copytree(before, data)
            loaded["papers"] = load_corpus(world, data / "warehouse.duckdb", only=day_papers(base, world))
            return run_child(data, url, work / "s2ag", work / "openalex", idle=True)
        later = median_run(day, repeat)
    shutil.rmtree(before, ignore_errors=True)
    added = loaded["papers"]
    kept = {k: result["day_later"][k] for k in ("new_papers", "files_written_s", "files") if k in result["day_later"]}
    when = datetime.now(UTC).isoformat(timespec="seconds")
    result["bulk"] = {**bulk, "measured_again": when}
    result["day_later"] = {**later, **kept, "corpus_added": added, "measured_again": when}
    if "api" in result and "exit_code" not in result["api"]:
        result["bulk_over_api"] = round(bulk["seconds"] / result["api"]["seconds"], 4)
    if "exit_code" not in later:
        result["day_later_over_bulk"] = round(later["seconds"] / bulk["seconds"], 4)
    out_file.write_text(json.dumps(result, indent=2) + "\n")
    return result


def api_again(work: Path, base: Path, replay: Any) -> dict[str, Any]:
    """The API phase again, once, as ``bulk_bench`` ran it: a fresh copy of the template warehouse,
    no files, the world before its day served; its result, stamped ``measured_again``."""
    from revbench.replay import spawn_replay

    print("api:", flush=True)
    # Beside the last API warehouse until it finishes: a run stopped half-way must not leave a
    # partial warehouse where the next run compares the bulk path's tables with the API path's.
    data = from_template(work, work / "api.partial")
    with spawn_replay(base, replay) as url:
        got = run_child(data, url, None, None)
    if "exit_code" in got:
        raise SystemExit(f"the API phase failed (the last API warehouse kept): {got}")
    shutil.rmtree(work / "api", ignore_errors=True)
    data.rename(work / "api")
    return {**got, "measured_again": datetime.now(UTC).isoformat(timespec="seconds")}


def median_run(run: Callable[[], dict[str, Any]], repeat: int) -> dict[str, Any]:
    """``run`` (a phase) ``repeat`` times: the result of the run of median time, with every run's
    seconds in ``seconds_each``; the last run's files are left (every run writes the same tables, so
    the next phase starts from any as from the median's). A run stopped (killed for memory) is the result."""
    runs: list[dict[str, Any]] = []
    for i in range(repeat):
        runs.append(run())
        if "exit_code" in runs[-1]:
            return runs[-1]
        if repeat > 1:
            print(f"  run {i + 1} of {repeat}: {runs[-1]['seconds']} s", flush=True)
    median = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]
    return {**median, "seconds_each": [r["seconds"] for r in runs]} if repeat > 1 else median


S2_ROWS = {"citations": "source = 's2'", "paper_topics": "scheme = 's2-fos'", "graph_fetches": "source = 's2'"}
"""S2's rows of the graph tables: what a day later from S2AG's increments must leave as a fresh run would."""


def compare_s2(later: Path, fresh: Path) -> dict[str, Any]:
    """S2's rows (:data:`S2_ROWS`) of the two warehouses joined on their keys, the columns each run
    stamps left out (``bulk_bench.joined_counts``; lists as they are, order and all): rows only
    one side holds, and per column how many joined rows differ."""
    out: dict[str, Any] = {}
    for name, c in joined_counts(later, fresh, S2_ROWS, sets=False).items():
        out[name] = {"day_later_rows": c["a_rows"], "fresh_rows": c["b_rows"], "only_day_later": c["a_rows"] - c["joined"],
                     "only_fresh": c["b_rows"] - c["joined"], "columns_differing": c["differ"],
                     "same": c["a_rows"] == c["b_rows"] == c["joined"] and not c["differ"]}
    return out


def found_differs(work: Path, later: Path, fresh: Path) -> dict[str, int]:
    """The papers S2 found in one run and not in the other, and how many of them the first
    release already held a record of under their arXiv id (``papers``: an untyped record of
    another work linked to the id by mistake, before the paper joined the corpus). A day later
    keeps the citations of the corpus's papers alone, so it asks the API for a paper the kept
    release held uncovered; a fresh run takes that record."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{later}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{fresh}' AS b (READ_ONLY)")
        ids = [r[0] for r in con.execute("""SELECT DISTINCT x.arxiv_id FROM a.graph_fetches x JOIN b.graph_fetches y
                                            USING (arxiv_id, source, kind) WHERE x.source = 's2'
                                              AND x.found IS DISTINCT FROM y.found""").fetchall()]
        held = 0
        if ids:
            shards = sorted(str(f) for f in (work / "s2ag" / FIRST_RELEASE / "papers").glob("*.jsonl.gz"))
            held = con.execute("SELECT count(DISTINCT a) FROM (SELECT externalids->>'ArXiv' AS a FROM read_json(?, "
                               "format = 'newline_delimited', columns = {externalids: 'JSON'})) WHERE list_contains(?, a)",
                               [shards, ids]).fetchall()[0][0]
    finally:
        con.close()
    return {"papers": len(ids), "held_by_first_release": int(held)}


def fresh_run(papers: int, work: Path) -> dict[str, Any]:
    """A fresh bulk run over the day-later world (the corpus with the day's papers, S2AG's newest
    release read whole, the whole snapshot), its S2 tables compared with the day later's (the bulk
    warehouse as the day later left it); recorded under the results' ``day_later.fresh_run``."""
    from revbench.replay import spawn_replay
    from revbench.settings import ReplaySettings

    out_file = results_file(papers)
    result: dict[str, Any] = json.loads(out_file.read_text())
    base, world, fresh = work / f"world-base-{papers // 1000}k", work / "world", work / "fresh"
    put_back(work)
    from_template(work, fresh)
    load_corpus(world, fresh / "warehouse.duckdb", only=day_papers(base, world))
    print("fresh:", flush=True)
    with spawn_replay(world, ReplaySettings(timeout_delay_seconds=1.0, retry_after_seconds=0)) as url:
        run = run_child(fresh, url, work / "s2ag", work / "openalex")
    if "exit_code" in run:
        raise SystemExit(f"the fresh run failed: {run}")
    later = work / "bulk" / "warehouse.duckdb"
    result["day_later"]["fresh_run"] = {"seconds": run["seconds"], "code": run["code"],
                                        "s2_tables": compare_s2(later, fresh / "warehouse.duckdb"),
                                        "found_differs": found_differs(work, later, fresh / "warehouse.duckdb")}
    out_file.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--papers", type=int, default=160_000)
    p.add_argument("--work", type=Path, default=Path("data/bench/bulk"))
    p.add_argument("--fresh", action="store_true",
                   help="then a fresh bulk run over the day-later world, its S2 tables compared with the day later's")
    p.add_argument("--fresh-only", action="store_true", help="only the fresh run, after an earlier --again")
    p.add_argument("--api", action="store_true",
                   help="the API phase measured again first (once), so that every ratio is of one day's runs")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each phase, the one of median time kept: a shared machine's pace moves a single run's time")
    a = p.parse_args()
    if a.api and a.fresh_only:
        p.error("--api with --fresh-only: --fresh-only measures no phase again (use --api --fresh)")
    if a.papers <= 0:
        p.error(f"--papers {a.papers}: must be positive")
    if not 1 <= a.repeat <= 9:
        p.error(f"--repeat {a.repeat}: must be 1 to 9")
    if not a.work.is_dir():
        p.error(f"--work {a.work}: no such folder")
    # Checked before anything is set aside or run: the results to update, the run's folder.
    if not results_file(a.papers).is_file():
        p.error(f"--papers {a.papers}: no {results_file(a.papers)} (run benchmarks.bulk_bench --papers {a.papers} first)")
    for need in (f"world-base-{a.papers // 1000}k", "world", "template/warehouse.duckdb", f"s2ag/{FIRST_RELEASE}"):
        if not (a.work / need).exists():
            p.error(f"--work {a.work}: no {need}: not the work folder of a bulk_bench run at --papers {a.papers}")
    if a.fresh_only and not (a.work / "bulk" / "warehouse.duckdb").is_file():
        p.error(f"--fresh-only: no {a.work / 'bulk' / 'warehouse.duckdb'} (a day later to compare with; run --fresh instead)")
    with work_lock(a.work):
        r = {} if a.fresh_only else again(a.papers, a.work, a.repeat, a.api)
        if a.fresh or a.fresh_only:
            r = fresh_run(a.papers, a.work)
            print(json.dumps({k: v["same"] for k, v in r["day_later"]["fresh_run"]["s2_tables"].items()}))
    print(json.dumps({k: r.get(k) for k in ("bulk_over_api", "day_later_over_bulk")}, indent=2))


if __name__ == "__main__":
    main()
