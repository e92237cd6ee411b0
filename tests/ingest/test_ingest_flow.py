"""The ingest flow end to end: real clients, a real replay server, the Prefect engine, DuckDB."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, date, datetime

import polars as pl
import pytest

from revbench.flows.ingest import ingest_flow
from revbench.schemas.tables import DOCUMENTS, MENTIONS, PAPERS, REJECTS
from revbench.warehouse import Warehouse
from tests.support.common import WORLD_SINCE, WORLD_UNTIL, on_replay, run_cli, settings_env
from tests.support.ingest import REFERENCE, assert_same, reference_run, snapshot

pytestmark = pytest.mark.slow


def test_bad_records_end_as_named_rejects_and_rerun_changes_nothing(prefect_server, small_world, replay, settings) -> None:
    ref = reference_run(small_world, replay, settings)
    truth = pl.read_parquet(small_world / "truth" / "bad_records.parquet")
    rejects = ref["rejects"].select("arxiv_id", "reason")
    got = truth.join(rejects, on="arxiv_id", how="left")
    assert got.filter(pl.col("reason") != pl.col("expected_reason")).height == 0, got
    assert set(truth["kind"]) == {"tei_no_abstract", "title_mismatch", "non_utf8", "truncated_pdf", "no_authors", "no_pdf"}
    # Only the planted records are rejected; everything else loads.
    assert set(rejects["arxiv_id"]) == set(truth["arxiv_id"])
    n_world = pl.read_parquet(small_world / "arxiv.parquet").height
    assert ref["papers"].height == n_world - truth.height
    # Mentions are unique per (paper, position) and cover every author of every loaded paper.
    m = ref["mentions"]
    assert m.select("arxiv_id", "position").is_duplicated().sum() == 0
    assert m.height == int(ref["papers"]["n_authors"].sum())
    assert m["email"].drop_nulls().len() > 0 and m["institution"].drop_nulls().len() > 0

    s = on_replay(REFERENCE["settings"], replay(world=small_world))
    again = ingest_flow(s, WORLD_SINCE, WORLD_UNTIL, synthetic=True)
    assert [st["rows_out"] for st in again.stages] == [0, 0, 0, 0]
    assert again.notes["extract"]["pdf_requests"] == 0 and again.notes["crawl"]["requests"] == 0
    assert_same(snapshot(s), ref)


def test_twenty_percent_transient_faults_give_the_same_warehouse(prefect_server, small_world, replay, settings) -> None:
    ref = reference_run(small_world, replay, settings)
    app = replay(world=small_world, fault_rate=0.2, fault_seed=5)
    s = on_replay(settings, app).with_overrides(data_dir=settings.data_dir / "faulty")
    ingest_flow(s, WORLD_SINCE, WORLD_UNTIL, synthetic=True)
    injected = app.faults.stats()["injected"]
    assert sum(injected.values()) > 30
    assert {k.split(":")[1] for k in injected} >= {"429", "timeout", "truncated", "malformed"}
    assert_same(snapshot(s), ref)


def test_killed_run_resumes_without_duplicates(prefect_server, small_world, replay, settings, tmp_path) -> None:
    ref = reference_run(small_world, replay, settings)
    app = replay(world=small_world)
    s = on_replay(settings, app).with_overrides(data_dir=tmp_path / "killed", ingest={"commit_every": 5},
                                                grobid={"concurrency": 1})
    # The command line reads its settings from the environment, as a user's process does.
    env = {**os.environ, "PREFECT_API_URL": prefect_server, **settings_env(s)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "revbench", "ingest", "--since", str(WORLD_SINCE), "--until", str(WORLD_UNTIL)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while app.faults.stats()["served"].get("grobid", 0) < 40:
        assert proc.poll() is None, "ingest finished before it could be killed"
        assert time.monotonic() < deadline, "ingest never reached the extract stage"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Warehouse.open(s.warehouse_path) as wh:
        done_before = wh.count(DOCUMENTS)
    assert done_before >= 5
    summary = ingest_flow(s, WORLD_SINCE, WORLD_UNTIL, synthetic=True)
    extract = next(st for st in summary.stages if st["stage"] == "extract")
    assert extract["rows_in"] <= ref["documents"].height - done_before + 5
    assert_same(snapshot(s), ref)
    with Warehouse.open(s.warehouse_path) as wh:
        statuses = wh.runs.latest_runs(10)["status"].to_list()[::-1]
    assert statuses == ["crashed", "completed"]


def test_widening_the_window_by_a_day_processes_only_that_day(prefect_server, small_world, replay, settings) -> None:
    s = on_replay(settings, replay(world=small_world))
    ingest_flow(s, date(2026, 9, 1), date(2026, 9, 10))
    second = ingest_flow(s, date(2026, 9, 1), date(2026, 9, 11))
    world = pl.read_parquet(small_world / "arxiv.parquet")
    day11 = world.filter(
        pl.col("versions").list.last().struct.field("date").dt.date() == date(2026, 9, 11)
    ).height
    stages = {s["stage"]: s for s in second.stages}
    assert stages["crawl"]["rows_in"] == 5  # one new day, five categories
    assert stages["crawl"]["rows_out"] == day11
    assert stages["extract"]["rows_in"] == day11
    assert stages["reconcile"]["rows_in"] == day11


def test_a_new_version_replaces_the_old_one(prefect_server, small_world, replay, settings) -> None:
    world = pl.read_parquet(small_world / "arxiv.parquet")
    cut = datetime(2026, 9, 10, 23, 59, tzinfo=UTC)
    revised = [
        r for r in world.iter_rows(named=True)
        if len(r["versions"]) > 1 and r["versions"][0]["date"] >= datetime(2026, 9, 1, tzinfo=UTC)
        and r["versions"][0]["date"] <= cut < r["versions"][-1]["date"]
    ]
    if not revised:
        pytest.skip("this world has no paper revised across the cut")
    ingest_flow(on_replay(settings, replay(world=small_world, as_of=cut)), date(2026, 9, 1), date(2026, 9, 10))
    ingest_flow(on_replay(settings, replay(world=small_world)), date(2026, 9, 1), WORLD_UNTIL)
    with Warehouse.open(settings.warehouse_path) as wh:
        papers, rejects, mentions = wh.read(PAPERS), wh.read(REJECTS), wh.read(MENTIONS)
    for r in revised:
        latest = r["versions"][-1]["version"]
        rows = papers.filter(pl.col("arxiv_id") == r["arxiv_id"])
        rej = rejects.filter(pl.col("arxiv_id") == r["arxiv_id"])
        assert rows.height + rej.height == 1
        assert (rows["version"].to_list() or rej["version"].to_list()) == [latest]
        if rows.height:
            assert mentions.filter(pl.col("arxiv_id") == r["arxiv_id"]).height == rows["n_authors"][0]
    # Every affiliation of an aligned PDF author reaches its mention; the flat columns hold the first.
    aligned = mentions.filter(pl.col("pdf_name").is_not_null()).to_dicts()
    assert aligned and all(m["affiliations"] is not None for m in aligned)
    assert all(m["institution"] == (m["affiliations"][0]["institution"] if m["affiliations"] else None) for m in aligned)
    assert papers["orphan_affiliations"].null_count() == 0


def test_status_command_and_curator_artifacts(prefect_server, small_world, replay, settings) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    summary = ingest_flow(on_replay(settings, replay(world=small_world)), date(2026, 9, 1), date(2026, 9, 20))
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[summary.run_id]))
        )
    by_key = {a.key: a for a in arts}
    assert {"ingest-stages", "ingest-rejects", "ingest-summary"} <= set(by_key)
    assert any(a.type == "progress" for a in arts)
    assert "pdf_truncated" in str(by_key["ingest-rejects"].data)
    assert "Sample of papers loaded" in str(by_key["ingest-summary"].data)
    # Curators see the rejected papers themselves: id, title, reason and what the check saw.
    bad = pl.read_parquet(small_world / "truth" / "bad_records.parquet")
    listed = str(by_key["ingest-rejected-papers"].data)
    planted = bad.filter(pl.col("kind") == "title_mismatch").row(0, named=True)
    assert planted["arxiv_id"] in listed and "title_mismatch" in listed and "Papers rejected in this run" in str(by_key["ingest-summary"].data)
    assert {r["arxiv_id"] for r in summary.rejected_papers} == set(bad["arxiv_id"])
    assert all(r["title"] for r in summary.rejected_papers)
    code, out, err = run_cli("status")
    assert code == 0, out + err
    assert "papers" in out and "mentions" in out
    assert "pdf_truncated" in out or "title_mismatch" in out


def test_status_without_warehouse_says_what_to_do() -> None:
    code, out, _err = run_cli("status")
    assert code == 1 and "revbench demo" in out
