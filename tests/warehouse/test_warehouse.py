from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.schemas.quality import DataQualityError, validate_frames
from revbench.schemas.tables import ALL_TABLES, ARXIV_RECORDS, MENTIONS, PAPERS, REJECTS, TABLES
from revbench.warehouse import Warehouse
from revbench.warehouse.ddl import create_table_sql, duckdb_type
from revbench.warehouse.migrations import LATEST_VERSION

NOW = datetime(2026, 10, 1, tzinfo=UTC)


def _paper(arxiv_id: str = "2609.00001", **kw: object) -> dict[str, object]:
    row = dict(arxiv_id=arxiv_id, version=1, title="A title", abstract="An abstract long enough", primary_category="cs.IR",
               categories=["cs.IR"], updated=NOW, year=2026, pdf_sha256="a" * 64, title_similarity=1.0, n_authors=1,
               input_hash="h1", loaded_at=NOW)
    row.update(kw)
    return row


def test_ddl_derived_from_schemas() -> None:
    for table in ALL_TABLES:
        sql = create_table_sql(table)
        for col in table.columns:
            assert f'"{col.name}"' in sql
    assert duckdb_type(pl.List(pl.Struct({"a": pl.Utf8}))) == 'STRUCT("a" VARCHAR)[]'


def test_migrations_apply_once(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with Warehouse.open(path) as wh:
        assert wh.schema_version() == LATEST_VERSION
        cols = {r[0] for r in wh._exec("SELECT table_name FROM information_schema.tables")}
        assert set(TABLES) <= cols
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []


def test_upsert_by_natural_key_and_newest_version_wins(tmp_path: Path) -> None:
    rec = dict(arxiv_id="2609.00001", version=2, title="v2", updated=NOW, record_hash="h", crawled_at=NOW)
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.ingest.save_slice(pl.DataFrame([rec]), None)
        wh.ingest.save_slice(pl.DataFrame([{**rec, "version": 1, "title": "v1"}]), None)
        wh.ingest.save_slice(pl.DataFrame([{**rec, "version": 2, "title": "v2 again"}]), None)
        out = wh.read(ARXIV_RECORDS)
    assert out.height == 1
    assert out.row(0, named=True)["version"] == 2 and out.row(0, named=True)["title"] == "v2 again"


def test_load_corpus_is_all_or_nothing(tmp_path: Path) -> None:
    papers = pl.DataFrame([_paper()])
    bad_mentions = pl.DataFrame([dict(arxiv_id="2609.00001", position=0)])  # name is required
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        with pytest.raises(Exception):
            wh.ingest.load_corpus(papers, bad_mentions, REJECTS.empty())
        assert wh.count(PAPERS) == 0 and wh.count(MENTIONS) == 0


def test_rejected_later_version_leaves_the_corpus(tmp_path: Path) -> None:
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.ingest.load_corpus(pl.DataFrame([_paper()]), pl.DataFrame([dict(arxiv_id="2609.00001", position=0, name="A B")]), REJECTS.empty())
        rej = pl.DataFrame([dict(arxiv_id="2609.00001", version=2, stage="reconcile", reason="title_mismatch",
                                 input_hash="h2", recorded_at=NOW)])
        wh.ingest.load_corpus(PAPERS.empty(), MENTIONS.empty(), rej)
        assert wh.count(PAPERS) == 0 and wh.count(MENTIONS) == 0 and wh.count(REJECTS) == 1


def test_quality_suite_reports_each_broken_rule() -> None:
    papers = pl.DataFrame([_paper(), _paper(arxiv_id="not-an-id", title_similarity=1.5)])
    rejects = pl.DataFrame([dict(arxiv_id="2609.00002", version=1, stage="reconcile", reason="made_up",
                                 input_hash="h", recorded_at=NOW)])
    report = validate_frames({PAPERS: papers, REJECTS: rejects})
    failed = {(o.table, o.column, o.expectation) for o in report.failures}
    assert ("papers", "arxiv_id", "expect_column_values_to_match_regex") in failed
    assert ("papers", "title_similarity", "expect_column_values_to_be_between") in failed
    assert ("rejects", "reason", "expect_column_values_to_be_in_set") in failed
    md = report.to_markdown()
    assert "FAILED" in md and "not-an-id" in md
    assert "data quality" in str(DataQualityError(report))


def test_quality_suite_passes_good_frames() -> None:
    assert validate_frames({PAPERS: pl.DataFrame([_paper()]), MENTIONS: MENTIONS.empty()}).success


def test_an_interrupt_anywhere_in_a_transaction_leaves_none_open(tmp_path: Path) -> None:
    """Interrupts land at every point of many transactions (BEGIN, the block, COMMIT, the
    rollback); after each, the warehouse takes a new transaction and holds only whole ones."""
    import signal

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    interrupted = 0
    try:
        with Warehouse.open(tmp_path / "w.duckdb") as wh:
            wh._exec("CREATE TABLE a (i INTEGER)")
            wh._exec("CREATE TABLE b (i INTEGER)")
            for i in range(300):
                signal.setitimer(signal.ITIMER_REAL, 0.00005 + (i % 50) * 0.0001)
                try:
                    with wh.transaction():
                        wh._exec("INSERT INTO a VALUES (?)", [i])
                        wh._exec("INSERT INTO b SELECT i FROM a WHERE i = ?", [i])
                    signal.setitimer(signal.ITIMER_REAL, 0)
                except KeyboardInterrupt:
                    interrupted += 1
                try:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    # A signal that arrived during the last C call may have its handler still to run:
                    # it runs here (time.sleep is a call that checks), not inside the check below.
                    time.sleep(0)
                except KeyboardInterrupt:
                    interrupted += 1
                with wh.transaction():  # a transaction left open would refuse this one
                    a, b = wh._exec("SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)")[0]
                assert a == b  # whole transactions only
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert 0 < interrupted < 300


def test_an_interrupt_wrapped_by_duckdb_is_still_an_interrupt(tmp_path: Path) -> None:
    """DuckDB reports a KeyboardInterrupt raised while it reads a registered Python source as
    its own error; the warehouse hands it on as the interrupt it was."""
    import pyarrow as pa

    schema = pa.schema([("i", pa.int64())])

    def batches():
        yield pa.record_batch([pa.array([1, 2])], schema=schema)
        raise KeyboardInterrupt("signal 15")

    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh.con.register("source", pa.RecordBatchReader.from_batches(schema, batches()))
        with pytest.raises(KeyboardInterrupt):
            wh._exec("SELECT count(*) FROM source")
        assert wh._exec("SELECT 1") == [(1,)]


def test_a_run_interrupted_inside_a_library_ends_cancelled(tmp_path: Path) -> None:
    """After Ctrl-C or SIGTERM, whatever error the interrupt surfaces as ends the run as
    cancelled (the next run resumes), never as failed."""
    from revbench.errors import note_interrupt
    from revbench.flows.common import flow_run
    from revbench.settings import Settings

    s = Settings(data_dir=tmp_path / "data")
    with pytest.raises(KeyboardInterrupt):
        with flow_run(s, "ingest", {}):
            note_interrupt()
            raise TypeError("'<unprintable str object>' is not a Polars data type")  # what polars made of one
    with pytest.raises(ValueError):
        with flow_run(s, "ingest", {}):
            raise ValueError("a real failure")
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        statuses = [r[0] for r in wh._exec("SELECT status FROM runs ORDER BY started_at")]
    assert statuses == ["cancelled", "failed"]


def test_two_sessions_of_one_process_write_the_same_table_in_turn(tmp_path: Path) -> None:
    """Two runs on threads of one process (both resumed by one curator's decision) each replace a
    derived table: DuckDB shares one database between them and would fail the later transaction
    ("Conflict on tuple deletion"); each waits its turn instead, and the table ends as one of
    them wrote it."""
    import threading

    path = tmp_path / "w.duckdb"
    frames = [pl.DataFrame([_paper(f"2609.{i:05d}", title=f"by {who}") for i in range(200)]) for who in "ab"]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(df: pl.DataFrame) -> None:
        try:
            with Warehouse.open(path) as wh:
                start.wait()
                for _ in range(15):
                    wh.replace_all(PAPERS, df)
        except BaseException as exc:  # noqa: BLE001 - the test reports what a thread raised
            errors.append(exc)

    Warehouse.open(path).__enter__().close()
    threads = [threading.Thread(target=writer, args=(df,)) for df in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    with Warehouse.open(path) as wh:
        titles = set(wh.read(PAPERS)["title"])
    assert len(titles) == 1 and titles <= {"by a", "by b"}
