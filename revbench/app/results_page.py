"""``revbench report --html``: the warehouse's results read, the run pages looked up in the
Prefect UI, and the page written (its HTML comes from :mod:`revbench.evaluation.html_report`)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from rich.markup import escape

import revbench
from revbench.app.console import console, err_console
from revbench.app.entry import prefect_api_configured
from revbench.errors import NoSpace, UsageError
from revbench.evaluation.html_report import results_page, separation_by_version
from revbench.files import no_space, write_atomic, writing_folder
from revbench.schemas.tables import EVAL_RESULTS
from revbench.settings import Settings
from revbench.warehouse.db import Warehouse

Pairs = tuple[list[dict[str, Any]], list[dict[str, Any]]]
"""The scorer pairs (``separation.json``) and the result rows (``results.json``) of one report folder."""


def read_evaluation_report(folder: Path) -> Pairs:
    """The scorer pairs (``separation.json``) and result rows (``results.json``) of a folder
    ``revbench evaluate --report`` wrote."""
    out = []
    needed = {"separation.json": {"benchmark", "split", "scorer_a", "scorer_b", "value", "n"},
              "results.json": {"benchmark", "benchmark_version", "run_id"}}
    for name, keys in needed.items():
        path = folder.expanduser() / name
        try:
            rows = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--evaluation-report {folder}: cannot read {name} ({type(exc).__name__}); give a folder "
                             "`revbench evaluate --report` wrote") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) and keys <= r.keys() for r in rows):
            raise UsageError(f"--evaluation-report {folder}: {name} is not a list of rows with "
                             f"{', '.join(sorted(keys))}")
        out.append(rows)
    return out[0], out[1]


def write_results_page(settings: Settings, out: Path, pairs: list[Pairs]) -> None:
    """``out/index.html`` from the latest evaluation of each scorer on each benchmark version,
    with the scorer pairs of the evaluation report folders given. The page vouches for the
    releases it names with their status: each is verified against its manifest, and the manifest
    against the warehouse's record, first (a changed release is refused by name, no page written)."""
    from revbench.release_checks import verify_recorded

    results = None
    if settings.warehouse_path.exists():
        with Warehouse.open(settings.warehouse_path, read_only=True,
                            lock_wait=settings.warehouse.lock_wait_seconds) as wh:
            results = wh.evaluate.evaluation_results() if wh.has_table(EVAL_RESULTS.name) else None
            recorded = [] if results is None else results.filter(
                (pl.col("benchmark") == "release") & pl.col("release_status").is_not_null())["version"].unique().sort()
            for version in recorded:
                verify_recorded(settings, settings.releases_dir / version, wh)
            synthetic = synthetic_versions(settings, results, wh.release.synthetic_corpus()) if results is not None else set()
    if results is None or results.height == 0:
        raise UsageError(f"no evaluation results in the warehouse at {settings.warehouse_path}: run `revbench "
                         "evaluate` (or `revbench demo`) first")
    run_ids = sorted({*results["run_id"].to_list(), *(r["run_id"] for _, rows in pairs for r in rows)})
    urls = run_urls(run_ids)
    separation = {k: v for sep, rows in pairs for k, v in separation_by_version(sep, rows, urls).items()}
    shown = set(results.select("benchmark", "version").iter_rows())
    for key in sorted(set(separation) - shown):
        err_console.print(f"The scorer pairs of {key[0]} {key[1]} are left out: this warehouse has no results of that "
                          "version.", highlight=False, markup=False, soft_wrap=True)
    page, version = results_page(results, urls, f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC", revbench.__version__,
                                 separation, synthetic)
    try:
        with writing_folder(out) as folder:
            write_atomic(folder / "index.html", page)
    except OSError as exc:
        why = no_space(exc)
        if why is None:
            raise
        raise NoSpace(f"no space left to write the results page into {out} ({why}); nothing was written: free space "
                      "there and run again") from None
    console.print(f"Results page: [cyan]{escape(str(out / 'index.html'))}[/] (template {version}; opens from a file, "
                  "offline)")


DERIVED = ("warehouse", "weak")
"""Benchmarks built from this warehouse's corpus (its own benchmark, its weak labels): SYNTHETIC
when that corpus is."""


def synthetic_versions(settings: Settings, results: pl.DataFrame, corpus_synthetic: bool) -> set[tuple[str, str]]:
    """The (benchmark, version) pairs of ``results`` built from SYNTHETIC data: a release whose
    manifest says so (or, where its folder is gone or its manifest predates the flag, any release
    of a warehouse whose ingest read a simulated world), the LR-bench reading of such a release's
    folder (known by its version), this warehouse's own benchmark and the weak benchmark built
    from it when its ingest read a simulated world, and a cross-benchmark average (``all``) with
    any of these among its parts. Benchmarks read from elsewhere (the gold standard, LR-bench
    itself, OpenReview) are not."""
    from revbench.evaluation.importers.lrbench import lrbench_version

    def release_synthetic(folder: Path) -> bool:
        try:
            flag = json.loads((folder / "manifest.json").read_text()).get("synthetic")
        except (OSError, ValueError, AttributeError):
            flag = None
        return flag is True or (flag is None and corpus_synthetic)

    keys = set(results.select("benchmark", "version").unique().iter_rows())
    out = {(b, v) for b, v in keys
           if (b == "release" and release_synthetic(settings.releases_dir / v)) or (b in DERIVED and corpus_synthetic)}
    lr = {v for b, v in keys if b == "lrbench"}
    if lr and settings.releases_dir.is_dir():
        # A release's JSON read back as LR-bench (`-b lrbench=data/releases/v1`) carries the release's data.
        releases = [f for f in sorted(settings.releases_dir.iterdir()) if (f / "manifest.json").is_file()]
        out |= {("lrbench", v) for f in releases if release_synthetic(f) and (v := lrbench_version(f)) in lr}
    # The cross-benchmark average's version names its parts: "lrbench@<version>+weak@<version>".
    out |= {(b, v) for b, v in keys if b == "all" and any(tuple(p.split("@", 1)) in out for p in v.split("+"))}
    return out


def run_urls(run_ids: list[str]) -> dict[str, str]:
    """The Prefect UI page of each of ``run_ids`` that the configured Prefect API tracked; none
    without an API or a UI address (runs are then shown by id)."""
    if not run_ids or not prefect_api_configured():
        return {}
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.settings import PREFECT_UI_URL
    from prefect.utilities.urls import url_for

    if not PREFECT_UI_URL.value():
        return {}
    ids = []
    for run_id in run_ids:
        try:
            ids.append(uuid.UUID(run_id))
        except ValueError:  # a legacy id: no Prefect run behind it
            continue
    if not ids:
        return {}
    known = []
    with get_client(sync_client=True) as client:
        if client.api_healthcheck() is not None:
            err_console.print("The Prefect API does not answer: the page names runs by id, without links.", soft_wrap=True)
            return {}
        for start in range(0, len(ids), 200):  # the server's default cap on one read
            chunk = ids[start:start + 200]
            known += client.read_flow_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=chunk)), limit=len(chunk))
    return {str(r.id): url for r in known if (url := url_for("flow-run", obj_id=str(r.id)))}
