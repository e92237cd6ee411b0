"""Migration 20 on a warehouse built at schema 19: ``eval_results`` keeps its rows and gains
``baseline``, read off each older row's scorer name as every reader read it then (the part after the
first " - ", else null); rows stored since keep theirs, a later rebuild of the table included."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.schemas.tables import EVAL_RESULTS
from revbench.warehouse.db import Warehouse
from revbench.warehouse.ddl import rebuild_table_sql
from tests.support.migrations import warehouse_at

NOW = datetime(2026, 10, 1, tzinfo=UTC)
OLD_ROWS = {"tpms": None, "bm25 - tpms": "tpms", "rate:model=/m/RATE - v2 - tpms": "v2 - tpms"}
"""Scorer -> the baseline the old readers took it to have (a name with " - " was a difference)."""


def _warehouse_at_19(path: Path) -> None:
    con = warehouse_at(path, 19, applied_at=NOW)
    assert "baseline" not in {r[0] for r in con.execute("DESCRIBE eval_results").fetchall()}
    for scorer in OLD_ROWS:
        con.execute("""INSERT INTO eval_results (benchmark, benchmark_version, split, scorer, metric, value, n, run_id,
                                                 evaluated_at, spec)
                       VALUES ('lrbench', 'v1', 'lr_paper_centric', ?, 'loss', 0.25, 16, 'r1', ?, ?)""",
                    [scorer, NOW, scorer])
    con.close()


def test_a_schema_19_warehouse_reads_its_differences_as_before(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    _warehouse_at_19(path)
    with Warehouse.open(path) as wh:
        assert wh.schema_version() >= 20
        got = dict(wh._frame("SELECT scorer, baseline FROM eval_results").iter_rows())
        assert got == OLD_ROWS
        assert wh._exec("SELECT description FROM schema_version WHERE version = 20")[0][0].startswith("eval_results.baseline")
        # Stored since: a scorer's own row keeps its null baseline, whatever its name holds.
        new = EVAL_RESULTS.conform(pl.DataFrame([dict(benchmark="lrbench", benchmark_version="v1", split="lr_paper_centric",
                                                      scorer="rate:model=/m/RATE - v3", metric="loss", value=0.2, n=16,
                                                      run_id="r2", evaluated_at=NOW)]))
        wh.evaluate.upsert(EVAL_RESULTS, new)
        shown = wh.evaluate.evaluation_results()
    assert dict(shown.select("scorer", "baseline").iter_rows()) == {**OLD_ROWS, "rate:model=/m/RATE - v3": None}
    with Warehouse.open(path) as wh:
        assert wh.migrate() == []


def test_a_later_rebuild_of_the_table_leaves_a_null_baseline_null(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    _warehouse_at_19(path)
    with Warehouse.open(path) as wh:
        wh._exec("UPDATE eval_results SET baseline = NULL")  # as own rows stored since 20 are
        for stmt in rebuild_table_sql(EVAL_RESULTS, version=21):  # a later migration changing its key, say
            wh._exec(stmt)
        assert {b for (b,) in wh._exec("SELECT baseline FROM eval_results")} == {None}
        assert wh._exec("SELECT count(*) FROM eval_results")[0][0] == len(OLD_ROWS)
    # The migration that adds it is the one that fills it from the names.
    assert any("strpos(scorer, ' - ')" in s for s in rebuild_table_sql(EVAL_RESULTS, version=20))
    assert not any("strpos" in s for s in rebuild_table_sql(EVAL_RESULTS, version=21))


def test_report_releases_leaves_out_paired_differences_by_their_baseline(tmp_path: Path) -> None:
    """``report --releases`` draws one line per scorer: a --baseline's difference rows are not scorers,
    and a scorer whose own name holds " - " is one."""
    with Warehouse.open(tmp_path / "w.duckdb") as wh:
        wh._exec("""INSERT INTO releases (version, status, manifest_sha256, counts, built_at)
                    VALUES ('v1', 'published', 'd1', '{}', ?)""", [NOW])
        rows = [dict(benchmark="release", benchmark_version="v1", benchmark_digest="d1", split="average", scorer=scorer,
                     metric="loss", value=0.2, n=16, run_id="r1", evaluated_at=NOW, baseline=baseline)
                for scorer, baseline in (("tpms", None), ("rate:model=/m/RATE - v2", None),
                                         ("rate:model=/m/RATE - v2 - tpms", "tpms"))]
        wh.evaluate.upsert(EVAL_RESULTS, EVAL_RESULTS.conform(pl.DataFrame(rows)))
        got = wh.evaluate.release_results("loss", "average")
    assert sorted(got["scorer"]) == ["rate:model=/m/RATE - v2", "tpms"]


def test_a_report_on_an_older_warehouse_reads_it_as_it_is(tmp_path: Path) -> None:
    """A report opens the warehouse read-only, which migrates nothing (``status`` shows the file as it
    is): on a schema 19 file no write has migrated yet it still reads ``baseline``, as migration 20
    would fill it, rather than failing on the column the file lacks."""
    path = tmp_path / "w.duckdb"
    _warehouse_at_19(path)
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.schema_version() == 19
        assert dict(wh.evaluate.evaluation_results().select("scorer", "baseline").iter_rows()) == OLD_ROWS
        assert wh.evaluate.release_results("loss", "average").is_empty()
