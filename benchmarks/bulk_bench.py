"""The graph stage from bulk files against the same stage over the APIs, same world, same run.

A SYNTHETIC world of ``--papers`` papers (160k: LR-bench's size; no PDFs, the graph stage reads
none) is written as Semantic Scholar's S2AG datasets (papers, citations) and as the OpenAlex
snapshot (works and authors by ``updated_date``), and served by the replay server as the two
APIs. The corpus (the world's arXiv listing, as the ingest would leave it: the graph stage reads
each paper's arXiv id, DOI, title and year) is loaded once into a template warehouse, copied for
each path. Then, each in a process of its own so each has its own peak memory:

- ``api``: the graph stage asking Semantic Scholar and OpenAlex over HTTP, as without files;
- ``bulk``: the same stage with ``s2.bulk_dir`` and ``openalex.snapshot_dir`` set: the files are
  scanned in place by DuckDB, the APIs asked only for what the files lack;
- ``day_later``: the world grown by a day, the corpus given the day's papers, the snapshot's new
  partition and S2AG's next release written, and the bulk warehouse's graph stage run again.

The two first runs' tables (citations, topics, authorships, affiliations) are compared row for
row on the columns both sources fill. Peak memory is the stage process's resident set, sampled.

    .venv/bin/python -m benchmarks.bulk_bench [--papers 160000] [--phases api,bulk,day_later] [--resume]

Results go to ``benchmarks/results/bulk[-<n>k].json``, written after each phase (``--resume``
keeps the phases already measured).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
FIRST_RELEASE, NEXT_RELEASE = "2026-10-31", "2026-11-01"
PARTS = 8
CORRECTED_EVERY = 1009
"""S2AG's releases come in shards (about 30 files a dataset); 8 here, so the scan runs in pieces."""
COMPARED = ("citations", "paper_topics", "paper_authorships", "author_affiliations")
STAMPED = ("run_id", "fetched_at", "updated_at", "loaded_at")
"""What each run stamps: left out of the comparison."""
S2AG_CARRIES_OTHERWISE = {
    "cited_title": "a reference S2 could not place: S2AG holds no title (nor year) for it",
    "cited_year": "the same references",
    "cited_doi": "S2AG holds a cited paper's identifiers once; the replay's reference lists vary them by citing paper",
    "cited_arxiv": "the same",
    "cited_arxiv_id": "resolved to our papers from those identifiers",
    "external_ids": "S2AG's externalids carry CorpusId; the replay's API answers leave it out",
    "match_keys": "derived from the identifiers above",
}
"""Columns whose values the two paths may differ in on the SYNTHETIC world, and why: each is
counted per column in the results; a difference in any other column makes the tables not the same."""


def _tag(xml: str, name: str) -> str:
    m = re.search(rf"<{name}>(.*?)</{name}>", xml, re.S)
    return m.group(1).strip() if m else ""


def corpus_frames(world: Path, only: set[str] | None = None) -> tuple[Any, Any, Any]:
    """The world's papers as the ingest would load them (latest version), with no mentions and no
    rejects: the graph stage reads the papers alone."""
    import polars as pl

    from revbench.schemas.tables import MENTIONS, PAPERS, REJECTS

    arxiv = pl.read_parquet(world / "arxiv.parquet")
    now = datetime.now(UTC)
    rows = []
    for r in arxiv.iter_rows(named=True):
        if only is not None and r["arxiv_id"] not in only:
            continue
        v = max(r["versions"], key=lambda x: x["version"])
        entry = v["entry"]
        title, abstract = _tag(entry, "title"), _tag(entry, "summary")
        if not title or not abstract:  # the world's deliberately bad records: the ingest rejects them
            continue
        published = min(x["date"] for x in r["versions"])
        rows.append({
            "arxiv_id": r["arxiv_id"], "version": v["version"], "title": title, "abstract": abstract,
            "primary_category": r["primary_category"], "categories": r["categories"], "published": published,
            "updated": v["date"], "year": published.year, "s2_paper_id": None,
            "pdf_sha256": hashlib.sha256(r["arxiv_id"].encode()).hexdigest(), "pdf_title": title,
            "title_similarity": 1.0, "n_authors": max(1, entry.count("<author>")), "input_hash": "bulk-bench",
            "run_id": None, "loaded_at": now, "orphan_affiliations": None, "journal_ref": None,
            "doi": _tag(entry, "arxiv:doi") or None})
    papers = pl.DataFrame(rows, schema=PAPERS.polars_schema) if rows else PAPERS.empty()
    return papers, MENTIONS.empty(), REJECTS.empty()


def load_corpus(world: Path, warehouse: Path, only: set[str] | None = None) -> int:
    """Load the world's papers into ``warehouse``; the number loaded."""
    from revbench.warehouse import Warehouse

    papers, mentions, rejects = corpus_frames(world, only)
    with Warehouse.open(warehouse) as wh:
        wh.ingest.load_corpus(papers, mentions, rejects)
    return papers.height


def _settings(data: Path, base: str, s2ag: Path | None, snapshot: Path | None) -> Any:
    from revbench.replay.server import replay_overrides
    from revbench.settings import Settings

    services = replay_overrides(base)
    services["openalex"] = {**services["openalex"], "enabled": True,
                            **({"snapshot_dir": snapshot} if snapshot else {})}
    if s2ag:
        services["s2"] = {**services["s2"], "bulk_dir": s2ag}
    return Settings(data_dir=data).with_overrides(**services, warehouse={"memory_limit": "8GB"})


STEPS = {
    "s2ag_release": ("revbench.flows.graph_bulk", "s2ag_read"),
    "s2ag_answers": ("revbench.flows.graph_bulk", "s2ag_answers"),
    "openalex_files": ("revbench.flows.graph_bulk", "read_bulk"),
    "saving_files_answers": ("revbench.flows.graph", "save_bulk"),
    "re_resolution": ("revbench.flows.graph", "resolve_stage"),
    "match_rates": ("revbench.flows.graph", "run_match_rates"),
}
"""The steps of a graph run timed in the stage's process (``benchmarks.steps``), none inside
another: S2AG's release brought up to date (read whole, or its increments), S2's answers read
from it, OpenAlex's snapshot read, both sources' file answers resolved and saved, older
references resolved again, and the run's match rates; the rest is finding the references to patch,
the API pieces past the save they run beside, reading the papers, coverage and the flow's own steps."""


def child_main(a: argparse.Namespace) -> None:
    """One graph stage in this process; prints one JSON line."""
    import psutil

    from benchmarks.steps import timed_statements, timed_steps

    from revbench.flows.graph import graph_flow

    s = _settings(Path(a.data), a.base, Path(a.s2ag) if a.s2ag else None, Path(a.snapshot) if a.snapshot else None)
    peak = {"rss": 0.0}
    done = threading.Event()

    def sample() -> None:
        me = psutil.Process()
        while not done.wait(0.2):
            peak["rss"] = max(peak["rss"], me.memory_info().rss / 2**20)

    threading.Thread(target=sample, daemon=True).start()
    with timed_steps(STEPS) as steps, timed_statements() as sql:
        t = time.perf_counter()
        out = graph_flow.fn(s)
        seconds = time.perf_counter() - t
    done.set()
    extra = {"idle": idle_run(graph_flow, s)} if a.idle else {}
    print(json.dumps({**extra, "seconds": round(seconds, 1), "peak_rss_mb": round(peak["rss"]),
                      "stages_s": stage_seconds(s.warehouse_path, out.run_id),
                      "steps_s": {k: round(v, 2) for k, v in steps.items()},
                      # what the run's SQL stands on: the day's work, or the size of what is kept
                      "sql_s": {k: round(v, 2) for k, v in sql.by_store.items()}, "sql_top": sql.top(),
                      "papers_asked": out.papers_asked, "failed": out.failed, "coverage": out.coverage,
                      # the run's work in rows, beside its time: what a day later must do, whatever its speed
                      "references_saved": out.references_saved, "re_checked": out.re_checked,
                      "re_resolved": out.re_resolved}, default=str))


def idle_run(flow: Any, settings: Any) -> dict[str, Any]:
    """The graph stage again at once, with nothing new to read: what a day later costs whatever the
    day holds (the process and the page cache warm), and whether a re-run is idempotent (it asks,
    saves and checks nothing)."""
    t = time.perf_counter()
    out = flow.fn(settings)
    return {"seconds": round(time.perf_counter() - t, 2), "papers_asked": out.papers_asked,
            "references_saved": out.references_saved, "re_checked": out.re_checked}


def stage_seconds(warehouse: Path, run_id: str) -> dict[str, float]:
    """What each of the run's stages took, as the run recorded it (the rest of the run's time is
    the flow's own: reading the papers, coverage, match rates)."""
    from revbench.warehouse import Warehouse

    with Warehouse.open(warehouse, read_only=True) as wh:
        stages = wh.runs.run_stages(run_id)
    return {stage: round(sec, 1) for stage, sec in stages.select("stage", "seconds").iter_rows()}


def from_template(work: Path, data: Path) -> Path:
    """``data`` emptied and given a copy of the work folder's template warehouse (the corpus loaded,
    no graph yet): where one phase's run starts; returns ``data``."""
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    shutil.copy(work / "template" / "warehouse.duckdb", data / "warehouse.duckdb")
    return data


def run_child(data: Path, base: str, s2ag: Path | None, snapshot: Path | None, idle: bool = False) -> dict[str, Any]:
    """The graph stage in a child process; its JSON line, with the replay's requests it made
    (``idle``: with :func:`idle_run` after it)."""
    before = replay_requests(base)
    cmd = [sys.executable, "-m", "benchmarks.bulk_bench", "--child", "--data", str(data), "--base", base]
    cmd += ["--idle"] if idle else []
    cmd += ["--s2ag", str(s2ag)] if s2ag else []
    cmd += ["--snapshot", str(snapshot)] if snapshot else []
    load0, r0, t0 = os.getloadavg()[0], resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        # Recorded, not raised: a stage killed for memory (-9) is a result at this size.
        print(f"graph stage failed ({data}), exit {proc.returncode}:\n{proc.stderr[-3000:]}", flush=True)
        return {"exit_code": proc.returncode, "seconds": round(time.perf_counter() - t0, 1),
                "peak_rss_mb": round(r1.ru_maxrss / 1024), "stderr_tail": proc.stderr[-500:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    after = replay_requests(base)
    # The machine is shared: its load at each end, and the stage's own CPU time, which others' load disturbs less.
    out["load_average_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    out["cpu_s"] = round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 1)
    out["requests"] = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) - before.get(k, 0)}
    out["code"] = code_version()  # each phase's own: a long run's phases may start on different commits
    return out


def code_version() -> str:
    """The checkout's commit, marked when files differ from it."""
    from revbench.flows.common import code_version as version

    # The results files are what the runs write: a phase written before another starts is no change of code;
    # nor are the docs' pages, which the numbers are generated into between runs.
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results",
                            ":!docs/*.md"],
                           capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent).stdout.strip()
    return version() + ("+dirty" if dirty else "")


def replay_requests(base: str) -> dict[str, int]:
    """What the replay server has served, by service."""
    import httpx

    return httpx.get(f"{base}/_replay/stats", timeout=30).json().get("served", {})


def joined_counts(a: Path, b: Path, tables: dict[str, str], sets: bool = True) -> dict[str, dict[str, Any]]:
    """Per graph table (``tables``: name -> the rows compared, SQL), the two warehouses' rows joined
    on its key: ``a_rows``, ``b_rows``, ``joined``, and per column how many joined rows differ
    (columns each run stamps left out; lists compared as sets of their items with ``sets``).
    Joined in DuckDB, both warehouses attached read-only: at 160k papers the two citations tables
    (over ten million rows) do not fit this machine's memory as frames."""
    import duckdb
    import polars as pl

    from revbench.schemas import graph

    schemas = {t.name: t for t in (graph.CITATIONS, graph.PAPER_TOPICS, graph.PAPER_AUTHORSHIPS, graph.AUTHOR_AFFILIATIONS,
                                   graph.GRAPH_FETCHES)}
    con = duckdb.connect()
    con.execute("SET memory_limit = '6GB'")
    con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
    out: dict[str, dict[str, Any]] = {}
    try:
        for name, where in tables.items():
            t = schemas[name]
            key = list(t.primary_key)
            cols = [c for c in t.names if c not in key and c not in STAMPED]
            lists = {c for c, dtype in t.polars_schema.items() if isinstance(dtype, pl.List)} if sets else set()
            side = (lambda c, x, lists=lists: f'list_sort({x}."{c}")' if c in lists else f'{x}."{c}"')
            on = " AND ".join(f'x."{k}" = y."{k}"' for k in key)
            differ_sql = ", ".join(f"count(*) FILTER (WHERE {side(c, 'x')} IS DISTINCT FROM {side(c, 'y')})" for c in cols)
            a_rows, b_rows = (con.execute(f"SELECT count(*) FROM {db}.{name} WHERE {where}").fetchall()[0][0] for db in "ab")
            joined, *counts = con.execute(f"SELECT count(*), {differ_sql} FROM (SELECT * FROM a.{name} WHERE {where}) x "
                                          f"JOIN (SELECT * FROM b.{name} WHERE {where}) y ON {on}").fetchall()[0]
            out[name] = {"a_rows": a_rows, "b_rows": b_rows, "joined": joined,
                         "differ": {c: int(n) for c, n in zip(cols, counts, strict=True) if n}}
    finally:
        con.close()
    return out


def compare(api: Path, bulk: Path) -> dict[str, Any]:
    """The graph tables of the two warehouses joined on their keys (:func:`joined_counts`): rows
    only one side holds, and per column how many joined rows differ."""
    out: dict[str, Any] = {}
    for name, c in joined_counts(api, bulk, dict.fromkeys(COMPARED, "TRUE")).items():
        out[name] = {"api_rows": c["a_rows"], "bulk_rows": c["b_rows"], "only_api": c["a_rows"] - c["joined"],
                     "only_bulk": c["b_rows"] - c["joined"], "columns_differing": c["differ"],
                     "same": c["a_rows"] == c["b_rows"] == c["joined"] and not set(c["differ"]) - set(S2AG_CARRIES_OTHERWISE)}
    out["columns_not_compared"] = list(STAMPED)
    out["s2ag_carries_otherwise"] = S2AG_CARRIES_OTHERWISE
    return out


def finished(result: dict[str, Any], *phases: str) -> bool:
    """Whether each of ``phases`` ran to its end (a stage killed for memory did not)."""
    return all(p in result and "exit_code" not in result[p] for p in phases)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--papers", type=int, default=160_000)
    p.add_argument("--phases", default="api,bulk,day_later")
    p.add_argument("--work", type=Path, default=Path("data/bench/bulk"))
    p.add_argument("--resume", action="store_true", help="keep the work folder and the phases already measured")
    p.add_argument("--out", type=Path)
    p.add_argument("--child", action="store_true")
    p.add_argument("--idle", action="store_true", help=argparse.SUPPRESS)  # the child's: the stage again at once
    for name in ("--data", "--base", "--s2ag", "--snapshot"):
        p.add_argument(name)
    a = p.parse_args()
    if a.idle and not a.child:
        p.error("--idle is the child's (the stage run again at once); the day later passes it itself")
    if a.child:
        child_main(a)
        return
    phases = [x.strip() for x in a.phases.split(",") if x.strip()]
    if bad := set(phases) - {"api", "bulk", "day_later"}:
        p.error(f"--phases: unknown {', '.join(sorted(bad))} (api, bulk, day_later)")
    with work_lock(a.work):
        run(a, phases)


@contextlib.contextmanager
def work_lock(work: Path) -> Iterator[None]:
    """Hold the lock of a benchmark's work folder (beside it: a run from scratch removes the folder),
    or end with one line naming who holds it: two runs over one folder would move and rewrite each
    other's files."""
    from revbench.errors import UsageError
    from revbench.files import lock_held

    try:
        with lock_held(work.with_name(work.name + ".lock"), 0, lambda who: SystemExit(
                f"{work}: another benchmark ({who}) is using this folder; run again when it has finished")):
            yield
    except UsageError as exc:
        raise SystemExit(str(exc)) from None


def run(a: argparse.Namespace, phases: list[str]) -> None:
    from revbench.replay import spawn_replay
    from revbench.replay.snapshot import write_snapshot
    from revbench.settings import ReplaySettings
    from revbench.synth.bulk_files import write_s2ag
    from revbench.synth.draw import WorldSpec
    from revbench.synth.world import ensure_world

    out_file = a.out or RESULTS / ("bulk.json" if a.papers == 160_000 else f"bulk-{a.papers // 1000}k.json")
    result: dict[str, Any] = json.loads(out_file.read_text()) if a.resume and out_file.exists() else {}
    if not a.resume:
        shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(result, indent=2) + "\n")

    world, s2ag, snap = a.work / "world", a.work / "s2ag", a.work / "openalex"
    if "world" not in result:
        t = time.perf_counter()
        manifest = ensure_world(a.work / f"world-base-{a.papers // 1000}k", WorldSpec(n_papers=a.papers, seed=11, documents=False))
        gen = time.perf_counter() - t
        shutil.rmtree(world, ignore_errors=True)
        shutil.copytree(a.work / f"world-base-{a.papers // 1000}k", world)
        template = a.work / "template" / "warehouse.duckdb"
        template.parent.mkdir(parents=True, exist_ok=True)
        loaded = load_corpus(world, template)
        result.update({
            "when": datetime.now(UTC).isoformat(timespec="seconds"), "machine": f"{os.cpu_count()} cores",
            "command": f"python -m benchmarks.bulk_bench --papers {a.papers}",
            "world": {k: manifest["counts"].get(k) for k in ("papers", "references", "paper_topics", "affiliations")},
            "corpus_papers": loaded, "world_generation_s": round(gen, 1)})
        save()
    if "files" not in result and {"bulk", "day_later"} & set(phases):
        # Written when a phase reads them (the API phase needs none): the world as S2AG and the snapshot.
        shutil.rmtree(s2ag, ignore_errors=True)
        shutil.rmtree(snap, ignore_errors=True)
        t = time.perf_counter()
        result["files"] = {"s2ag": write_s2ag(world, s2ag, release=FIRST_RELEASE, parts=PARTS),
                           "openalex": write_snapshot(world, snap)}
        result["files_written_s"] = round(time.perf_counter() - t, 1)
        result["files_mb"] = {k: round(sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) / 2**20, 1)
                              for k, d in (("s2ag", s2ag), ("openalex", snap))}
        save()
    replay = ReplaySettings(timeout_delay_seconds=1.0, retry_after_seconds=0)
    for phase in phases:
        if phase in result:
            if phase == "bulk" and finished(result, "api", "bulk") and "same_tables" not in result and "day_later" not in result:
                result["same_tables"] = compare(a.work / "api" / "warehouse.duckdb", a.work / "bulk" / "warehouse.duckdb")
                result["bulk_over_api"] = round(result["bulk"]["seconds"] / result["api"]["seconds"], 4)
                save()
            continue
        print(f"{phase}:", flush=True)
        data = a.work / ("bulk" if phase == "day_later" else phase)
        if phase == "day_later":
            result[phase] = day_later(a, world, s2ag, snap, data, replay)
        else:
            from_template(a.work, data)
            with spawn_replay(world, replay) as base:
                result[phase] = run_child(data, base, s2ag if phase == "bulk" else None, snap if phase == "bulk" else None)
        save()
        if phase == "bulk" and finished(result, "api", "bulk"):
            # Compared right after the bulk run, before a day later changes its warehouse.
            result["same_tables"] = compare(a.work / "api" / "warehouse.duckdb", a.work / "bulk" / "warehouse.duckdb")
            result["bulk_over_api"] = round(result["bulk"]["seconds"] / result["api"]["seconds"], 4)
            save()
    if finished(result, "day_later", "bulk"):
        result["day_later_over_bulk"] = round(result["day_later"]["seconds"] / result["bulk"]["seconds"], 4)
        save()
    print(json.dumps({k: result.get(k) for k in ("bulk_over_api", "day_later_over_bulk", "same_tables")}, indent=2))


def day_later(a: argparse.Namespace, world: Path, s2ag: Path, snap: Path, data: Path, replay: Any) -> dict[str, Any]:
    """A day later: the world grows a day, the files get the snapshot's next partition and S2AG's
    next release with its diff, the corpus the day's papers, and the bulk path runs again."""
    import polars as pl

    from revbench.replay import spawn_replay
    from revbench.replay.snapshot import write_snapshot
    from revbench.synth.world import grow_world

    before = set(pl.read_parquet(world / "arxiv.parquet")["arxiv_id"].to_list())
    grown = grow_world(world, 1)
    t = time.perf_counter()
    files = {"s2ag": next_release(world, s2ag), "openalex": write_snapshot(world, snap)}
    written = time.perf_counter() - t
    new = set(pl.read_parquet(world / "arxiv.parquet")["arxiv_id"].to_list()) - before
    added = load_corpus(world, data / "warehouse.duckdb", only=new)
    with spawn_replay(world, replay) as base:
        out = run_child(data, base, s2ag, snap, idle=True)
    return {**out, "new_papers": grown["days"]["papers_per_day"], "corpus_added": added,
            "files_written_s": round(written, 1), "files": files}


def next_release(world: Path, s2ag: Path) -> dict[str, int]:
    """S2AG's next release and its diff: the first release's rows as they were, the grown world's
    new papers and their citations added, and S2's corrections (``revision``) applied.

    The generator draws the works of people outside the corpus again when the world grows, so
    the grown world's rows would differ from the first release's for most of them; S2 does not
    rewrite a paper's references because others appeared, so the rows the first release held are
    kept as they were (the drawn-again ones are left out).

    Streamed, as :func:`write_s2ag` writes the first: the first release is read twice (its keys,
    then its rows through the corrections) and only the day's new rows are held."""
    from revbench.synth.bulk_files import KEYS, Shards, corpus_of, iter_s2ag, revision

    def old_rows(dataset: str) -> Iterator[dict[str, Any]]:
        for f in sorted((s2ag / FIRST_RELEASE / dataset).glob("*.jsonl.gz")):
            with gzip.open(f, "rt", encoding="utf-8") as lines:
                yield from (json.loads(line) for line in lines if line.strip())

    held = {d: {r[key] for r in old_rows(d)} for d, key in KEYS.items()}
    cites, fresh = [], []
    for dataset, row in iter_s2ag(world):
        if row[KEYS[dataset]] in held[dataset]:
            continue
        (cites if dataset == "citations" else fresh).append(row)
    # The new papers and those their citations name; not the outside works drawn again
    wanted = {r["citingcorpusid"] for r in cites} | {r["citedcorpusid"] for r in cites}
    fresh = [p for p in fresh if p["corpusid"] in wanted or p["publicationtypes"]]
    # S2's corrections of a week: a cited paper in a thousand retitled (the default, one in 31,
    # would touch most corpus papers through their references)
    revised = revision(corpus_of(old_rows("papers")) + corpus_of(fresh), every=CORRECTED_EVERY)
    diff = s2ag / "diffs" / f"{FIRST_RELEASE}_{NEXT_RELEASE}"
    counts: dict[str, int] = {}
    for dataset, new in (("papers", fresh), ("citations", cites)):
        out, updates, deletes = (Shards(s2ag / NEXT_RELEASE / dataset, PARTS), Shards(diff / dataset / "updates"),
                                 Shards(diff / dataset / "deletes"))
        for row in old_rows(dataset):
            kept = revised(dataset, row)
            if kept is None:
                deletes.add({KEYS[dataset]: row[KEYS[dataset]]})
                continue
            out.add(kept)
            if kept != row:
                updates.add(kept)
        for row in new:
            if (kept := revised(dataset, row)) is not None:
                out.add(kept)
                updates.add(kept)
        counts[dataset] = out.close()
        counts[f"{dataset}_updates"], counts[f"{dataset}_deletes"] = updates.close(), deletes.close()
    return counts


if __name__ == "__main__":
    main()
