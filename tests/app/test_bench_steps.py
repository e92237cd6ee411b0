"""The benchmark's step timer (``benchmarks.steps``): the timed functions still run and answer as
before, each call adds to its step, a step never called reads 0, the originals are back after the
block however it ends, and a step naming nothing is refused before anything is wrapped. The bulk
benchmark's steps name functions the graph flow calls by those names, and its report says them."""

from __future__ import annotations

import sys
import time
import types

import pytest

from benchmarks.steps import timed_steps


@pytest.fixture
def mod() -> types.ModuleType:
    m = types.ModuleType("_steps_probe")
    m.slow = lambda x: (time.sleep(0.02), x * 2)[1]  # type: ignore[attr-defined]
    m.never = lambda: None  # type: ignore[attr-defined]
    sys.modules[m.__name__] = m
    yield m
    del sys.modules[m.__name__]


def test_each_call_adds_to_its_step_and_the_originals_come_back(mod: types.ModuleType) -> None:
    slow, never = mod.slow, mod.never
    with timed_steps({"s": ("_steps_probe", "slow"), "n": ("_steps_probe", "never")}) as seconds:
        assert mod.slow(2) == 4 and mod.slow(3) == 6
        assert mod.slow is not slow
    assert 0.04 <= seconds["s"] < 5 and seconds["n"] == 0.0
    assert mod.slow is slow and mod.never is never
    with pytest.raises(RuntimeError), timed_steps({"s": ("_steps_probe", "slow")}):
        raise RuntimeError("the run failed")
    assert mod.slow is slow


def test_a_step_naming_nothing_is_refused_before_anything_is_wrapped(mod: types.ModuleType) -> None:
    slow = mod.slow
    with pytest.raises(AttributeError, match="no missing"), \
            timed_steps({"s": ("_steps_probe", "slow"), "x": ("_steps_probe", "missing")}):
        pass
    assert mod.slow is slow


def test_the_bulk_benchmarks_steps_are_the_flows_names_and_its_report_says_them() -> None:
    from benchmarks.bulk_bench import STEPS
    from benchmarks.bulk_report import STEP_NAMES, _steps

    with timed_steps(STEPS):  # every one found where the flow looks it up
        pass
    assert set(STEP_NAMES) == set(STEPS)
    line = _steps("the day later", {"seconds": 9.5, "steps_s": dict.fromkeys(STEPS, 1.0)})
    assert line is not None and "S2AG's release brought up to date 1.00" in line and "the rest (3.5 s)" in line
    assert _steps("x", {"seconds": 1.0}) is None and _steps("x", {"seconds": 1.0, "exit_code": -9, "steps_s": {}}) is None


def test_the_day_laters_work_in_rows_is_set_beside_the_first_runs() -> None:
    from benchmarks.bulk_report import _work_share

    first = {"seconds": 50.0, "references_saved": 900, "re_checked": 100, "re_resolved": 0}
    later = {"seconds": 5.0, "references_saved": 30, "re_checked": 20, "re_resolved": 7}
    (line,) = _work_share(first, later)
    assert "30 references saved" in line and "20 older references checked again, 7 of them" in line
    assert "together 5.0% of the first run's 1,000" in line and "10.0% of the first run's" in line
    assert _work_share({"seconds": 1.0}, later) == []  # a run measured before the counts were recorded


def test_a_statement_is_sorted_by_what_it_stands_on() -> None:
    from benchmarks.steps import STORES, statement_store

    assert statement_store("  COMMIT") == "commits"
    assert statement_store("DELETE FROM citations WHERE rowid IN (SELECT _r FROM _resolved)") == "references table"
    assert statement_store("SELECT count(*) FROM CITATIONS") == "references table"
    # a table whose name only contains the word is another table
    assert statement_store("SELECT * FROM citations_old_x") == "other warehouse tables"
    assert statement_store("INSERT INTO paper_topics SELECT * FROM t") == "other warehouse tables"
    assert statement_store("SELECT * FROM citations", "s2ag") == "S2AG release kept"
    assert statement_store("COMMIT", "openalex") == "OpenAlex snapshot"
    with pytest.raises(ValueError, match="unknown store 'x'"):
        statement_store("SELECT 1", "x")
    assert len(set(STORES)) == 5


def test_the_warehouses_and_the_bulk_readers_statements_are_timed_and_put_back(tmp_path) -> None:  # noqa: ANN001
    from benchmarks.steps import timed_statements
    from revbench.warehouse import bulk, bulk_state
    from revbench.warehouse.core import WarehouseBase
    from revbench.warehouse.db import Warehouse

    originals = (WarehouseBase._exec, WarehouseBase._frame, bulk.piece_connection, bulk_state.piece_connection, bulk._connect)
    with Warehouse.open(tmp_path / "w.duckdb") as wh, timed_statements() as sql:
        assert wh.graph._exec("SELECT count(*) FROM citations") == [(0,)]
        assert wh.graph._frame("SELECT count(*) AS n FROM papers")["n"].to_list() == [0]
        con = bulk_state.piece_db(1)
        try:
            assert con.execute("SELECT 42").fetchall() == [(42,)]
            assert con.sql("SELECT 7 AS x").pl()["x"].to_list() == [7]
        finally:
            con.close()
    assert sql.by_store["references table"] > 0 and sql.by_store["other warehouse tables"] > 0
    assert sql.by_store["S2AG release kept"] > 0 and sql.by_store["OpenAlex snapshot"] == 0
    top = {r["statement"]: r for r in sql.top(50)}
    assert top["SELECT 42"]["runs"] == 1 and top["SELECT 42"]["store"] == "S2AG release kept"
    assert top["SELECT count(*) FROM citations"]["store"] == "references table"
    assert (WarehouseBase._exec, WarehouseBase._frame, bulk.piece_connection, bulk_state.piece_connection,
            bulk._connect) == originals
    with pytest.raises(RuntimeError), timed_statements():
        raise RuntimeError("the run failed")
    assert bulk_state.piece_connection is bulk.piece_connection and WarehouseBase._exec is originals[0]


def test_the_report_sets_what_each_run_stood_on_side_by_side() -> None:
    from benchmarks.bulk_report import OUTSIDE_SQL, _stands_on
    from benchmarks.steps import STORES

    first = {"seconds": 50.0, "sql_s": dict(zip(STORES, (4.0, 10.0, 2.0, 8.0, 6.0), strict=True))}
    later = {"seconds": 5.0, "sql_s": dict(zip(STORES, (1.0, 2.0, 0.1, 0.4, 0.0), strict=True)),
             "sql_top": [{"seconds": 0.9, "runs": 1, "store": "references table", "statement": "WITH hit AS"}]}
    text = "\\n".join(_stands_on(first, later))
    assert "| commits | 4.00 | 1.00 | 25.0% |" in text and "| OpenAlex snapshot | 6.00 | 0.00 | 0.0% |" in text
    assert f"| {OUTSIDE_SQL} | 20.00 | 1.50 | 7.5% |" in text
    assert "alone took 3.0 s, 6.0% of the first run's time" in text and "0.90 s (1x, references table) `WITH hit AS`" in text
    parallel = "\n".join(_stands_on({**first, "seconds": 25.0}, later))
    assert f"| {OUTSIDE_SQL} | - (SQL on several threads at once) | 1.50 | - |" in parallel
    assert _stands_on({"seconds": 1.0}, later) == [] and _stands_on(first, {**later, "exit_code": -9}) == []


def test_the_report_says_whether_the_api_run_was_measured_the_same_day() -> None:
    from benchmarks.bulk_report import _bulk_one

    run = {"seconds": 10.0, "peak_rss_mb": 1024, "papers_asked": 1, "code": "0.1.0+abc"}
    d = {"when": "2026-11-01T00:00:00", "machine": "2 cores", "command": "python -m benchmarks.bulk_bench --papers 20000",
         "world": {"papers": 3, "references": 9}, "corpus_papers": 3, "api": {**run, "seconds": 100.0, "code": "0.1.0+old"},
         "bulk": {**run, "measured_again": "2026-11-30T06:00:00"}}
    first = "\\n".join(_bulk_one(d))
    assert "the API run as first measured, on commit `0.1.0+old`" in first and "--api`" not in first
    d["api"] = {**d["api"], "code": "0.1.0+abc", "measured_again": "2026-11-30T05:40:00"}
    again = "\\n".join(_bulk_one(d))
    assert "(`python -m benchmarks.bulk_again --papers 20000 --api`)" in again
    assert "the API run measured again before them, once, 2026-11-30, on commit `0.1.0+abc`" in again
    # an API run of another commit was an earlier invocation's: named by its time, not by this command's flag
    d["bulk"] = {**d["bulk"], "code": "0.1.0+new"}
    later = "\\n".join(_bulk_one(d))
    assert "(`python -m benchmarks.bulk_again --papers 20000`)" in later
    assert "the API run measured again earlier, once, 2026-11-30 05:40 UTC (with --api), on commit `0.1.0+abc`" in later


def test_bulk_again_refuses_api_with_fresh_only_before_anything_runs(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    from benchmarks import bulk_again

    ran = []
    monkeypatch.setattr(bulk_again, "again", lambda *a: ran.append(a))
    monkeypatch.setattr(sys, "argv", ["bulk_again", "--papers", "20000", "--work", str(tmp_path), "--api", "--fresh-only"])
    with pytest.raises(SystemExit) as stop:
        bulk_again.main()
    assert stop.value.code == 2 and "--api with --fresh-only" in capsys.readouterr().err and ran == []


def test_the_day_laters_run_again_at_once_is_timed_and_says_whether_it_did_anything() -> None:
    from benchmarks.bulk_bench import idle_run
    from benchmarks.bulk_report import _idle

    class Flow:  # the flow's result as graph_flow returns it, after a first run that left nothing to do
        calls = 0

        @classmethod
        def fn(cls, settings: object) -> types.SimpleNamespace:
            cls.calls += 1
            return types.SimpleNamespace(papers_asked=0, references_saved=0, re_checked=settings)

    idle = idle_run(Flow, 0)
    assert Flow.calls == 1 and idle["re_checked"] == 0 and idle["seconds"] >= 0
    first, later = {"seconds": 50.0}, {"seconds": 5.0, "idle": {**idle, "seconds": 1.0}}
    (line,) = _idle(first, later)
    assert "took 1.0 s (2.0% of the first run" in line and "idempotent" in line and "other 4.0 s (8.0%)" in line
    (busy,) = _idle(first, {**later, "idle": {**idle_run(Flow, 7), "seconds": 1.0}})
    assert "yet it did work: references checked again 7" in busy and "idempotent" not in busy
    assert _idle(first, {"seconds": 5.0}) == [] and _idle({"exit_code": -9}, later) == []


def test_bulk_bench_refuses_the_childs_idle_flag_before_anything_runs(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    from benchmarks import bulk_bench

    ran = []
    monkeypatch.setattr(bulk_bench, "run", lambda *a: ran.append(a))
    monkeypatch.setattr(sys, "argv", ["bulk_bench", "--papers", "20000", "--work", str(tmp_path), "--idle"])
    with pytest.raises(SystemExit) as stop:
        bulk_bench.main()
    assert stop.value.code == 2 and "--idle is the child's" in capsys.readouterr().err and ran == []


def test_the_demo_bench_keeps_every_earlier_formats_values_beside_new_rows(tmp_path) -> None:  # noqa: ANN001
    """A demo run rewrites the realism results with its rows and keeps what earlier world formats
    measured (the docs' "before" column), whichever format measured it."""
    import json

    from benchmarks.demo_bench import save_realism

    report, out = tmp_path / "report.json", tmp_path / "world_realism.json"
    report.write_text(json.dumps({"rows": [{"id": "a", "world": 0.5}]}))
    out.write_text(json.dumps({"rows": [{"id": "a", "world": 0.9}], "format7_before": {"a": 0.1}, "format7_note": "n7",
                               "format8_before": {"b": 0.2}, "format8_note": "n8", "measured": "old"}))
    run = {"when": "2026-11-30T00:00:00", "machine": "m", "facts": {"papers": 3, "seed": 7, "world": {"format": 9}}}
    save_realism(report, out, run)
    got = json.loads(out.read_text())
    assert got["rows"] == [{"id": "a", "world": 0.5}] and got["measured"] == "2026-11-30"
    assert {k: got[k] for k in ("format7_before", "format7_note", "format8_before", "format8_note")} == {
        "format7_before": {"a": 0.1}, "format7_note": "n7", "format8_before": {"b": 0.2}, "format8_note": "n8"}
    assert "world format 9" in got["command"]
