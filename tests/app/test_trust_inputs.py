"""Bad input and bad flags, through the command line: one line naming the file, row or flag, a
non-zero exit, and nothing written. Each case was a wrong number that looked right, or a late
failure, before."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from revbench.schemas.tables import EVAL_RESULTS
from revbench.warehouse import Warehouse
from tests.support.cli import RATED, evaluate_cli, gold_row, nothing_written, one_line_error, write_gold
from tests.support.common import run_cli
from tests.support.evaluation import write_openreview


@pytest.mark.parametrize(("scores", "needle"), [
    ({"ir": {"s1": float("nan"), "s2": float("nan")}, "gnn": {"s1": float("nan"), "s2": float("nan")}}, "nan is not a finite number"),
    ({"ir": {"s1": 0.9, "s2": float("nan")}, "gnn": {"s1": 0.2, "s2": 0.8}}, "paper 's2': nan is not a finite number"),
    ({"ir": {"s1": float("inf"), "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}, "inf is not a finite number"),
    ({"ir": {"s1": "0.9", "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}, "'0.9' is not a number"),
    ({"ir": {"s1": True, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}, "True is not a number"),
])
def test_scores_that_are_not_finite_numbers_are_refused(tmp_path: Path, data_dir: Path, scores: dict, needle: str) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "bad.json").write_text(json.dumps(scores))
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"x={tmp_path / 'bad.json'}")
    one_line_error(*res, 2, "bad.json", "reviewer", needle)
    nothing_written(data_dir, tmp_path)


def test_partial_predictions_are_refused_unless_allowed_and_then_shown(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "half.json").write_text(json.dumps({"ir": RATED["ir"]}))
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"half={tmp_path / 'half.json'}")
    one_line_error(*res, 2, "scores 2 of the 4 reviewer-paper pairs", "--allow-partial")
    nothing_written(data_dir, tmp_path)
    (tmp_path / "full.json").write_text(json.dumps(RATED))
    code, out, err = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-p", f"half={tmp_path / 'half.json'}",
                               "-p", f"full={tmp_path / 'full.json'}", "--allow-partial", "--bootstrap", "0")
    assert code == 0, out + err
    rows = json.loads((tmp_path / "rows.json").read_text())
    cov = {r["scorer"]: r["coverage"] for r in rows if r["metric"] == "loss"}
    assert cov["half"] == 0.5 and cov["full"] == 1.0
    report = (tmp_path / "report" / "report.md").read_text()
    half_line = next(ln for ln in report.splitlines() if ln.startswith("| half "))
    assert "| coverage |" in report and "50%" in half_line and "**" not in half_line


def test_a_scorer_whose_every_score_is_missing_is_never_best(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "none.json").write_text(json.dumps({"someone_else": {"s1": 1.0}}))
    code, out, err = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "trivial", "-p", f"none={tmp_path / 'none.json'}",
                               "--allow-partial", "--bootstrap", "0")
    assert code == 0, out + err
    rows = json.loads((tmp_path / "rows.json").read_text())
    none = {r["metric"]: r for r in rows if r["scorer"] == "none"}
    assert none["loss"]["value"] is None and none["loss"]["coverage"] == 0.0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "**" not in next(ln for ln in report.splitlines() if ln.startswith("| none "))


def test_ratings_outside_the_scale_are_refused(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    ratings = pl.read_csv(data / "ratings.csv").with_columns(pl.when(pl.col("rating") == 5).then(42.0).otherwise(pl.col("rating")).alias("rating"))
    ratings.write_csv(data / "ratings.csv")
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}")
    one_line_error(*res, 2, "ratings.csv row 2", "rating 42 is outside the benchmark's 1-5 scale")
    nothing_written(data_dir, tmp_path)


@pytest.mark.parametrize(("rows", "needle"), [
    ([gold_row("ir", ["s1", "s2"], ["5", "lots"])], "row 2: Expertise2 'lots' is not a number"),
    ([gold_row("ir", ["s1"], [""])], "row 2: Paper1 and Expertise1 must both be given"),
    ([gold_row("", ["s1"], ["4"])], "row 2: empty ParticipantID"),
    ([gold_row("ir", ["s1", "s2"], ["5", "1"]), gold_row("gnn", ["s1"], ["42"])], "row 3 Expertise1: rating 42 is outside"),
])
def test_a_garbage_row_of_the_gold_standard_is_named(tmp_path: Path, data_dir: Path, rows: list[str], needle: str) -> None:
    gold = write_gold(tmp_path / "gold", rows)
    res = evaluate_cli(tmp_path, "-b", f"goldstandard={gold}")
    one_line_error(*res, 2, "evaluations.tsv", needle)
    nothing_written(data_dir, tmp_path)


def test_a_comma_separated_evaluations_file_is_named(tmp_path: Path, data_dir: Path) -> None:
    gold = write_gold(tmp_path / "gold", sep=",", name="evaluations.csv")
    res = evaluate_cli(tmp_path, "-b", f"goldstandard={gold}")
    one_line_error(*res, 2, "evaluations.csv", "expected tab-separated columns", "comma-separated")
    nothing_written(data_dir, tmp_path)


@pytest.mark.parametrize(("change", "needle"), [
    (lambda t: t.pop("negative_score"), "item 1: missing negative_score"),
    (lambda t: t.update(positive_ref_score=42), "item 1 positive_ref_score: rating 42 is outside"),
    (lambda t: t.update(positive_score=float("nan")), "item 1 positive_score: nan is not a finite number"),
])
def test_lr_flat_predictions_are_checked(tmp_path: Path, data_dir: Path, change, needle: str) -> None:
    items = [{"anchor_id": f"a{i}", "positive_id": f"p{i}", "negative_id": f"n{i}", "type": "paper_centric",
              "positive_score": 0.7, "negative_score": 0.2, "positive_ref_score": 4, "negative_ref_score": 2} for i in range(3)]
    change(items[1])
    (tmp_path / "rate.json").write_text(json.dumps(items))
    res = evaluate_cli(tmp_path, "-p", f"rate={tmp_path / 'rate.json'}")
    one_line_error(*res, 2, "rate.json", needle)
    nothing_written(data_dir, tmp_path)


def test_results_are_appended_and_carry_what_produced_them(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "v1.json").write_text(json.dumps(RATED))
    (tmp_path / "v2.json").write_text(json.dumps({"ir": {"s1": 0.1, "s2": 0.9}, "gnn": {"s1": 0.8, "s2": 0.2}}))
    for f in ("v1.json", "v2.json"):
        code, out, err = run_cli("evaluate", "-b", f"openreview={data}", "-p", f"specter={tmp_path / f}", "--bootstrap", "0",
                                 "--json-out", str(tmp_path / f"rows-{f}"), "--record")
        assert code == 0, out + err
    with Warehouse.open(data_dir / "warehouse.duckdb", read_only=True) as wh:
        rows = wh.read(EVAL_RESULTS).filter((pl.col("scorer") == "specter") & (pl.col("metric") == "loss"))
    assert rows.height == 2 and rows["run_id"].n_unique() == 2 and rows["predictions_sha256"].n_unique() == 2
    assert sorted(rows["value"].to_list()) == [0.0, 1.0]
    # The JSON holds exactly the warehouse's rows of its run.
    first = json.loads((tmp_path / "rows-v1.json").read_text())
    run1 = first[0]["run_id"]
    with Warehouse.open(data_dir / "warehouse.duckdb", read_only=True) as wh:
        stored = wh.read(EVAL_RESULTS).filter(pl.col("run_id") == run1)
    assert len(first) == stored.height and {r["metric"] for r in first} == set(stored["metric"])


@pytest.mark.parametrize(("args", "needle"), [
    (["-s", "embedding:pooling=bogus"], "unknown pooling 'bogus'"),
    (["-s", "bm25:b=7"], "bm25"),
    (["-s", "trivial:value=nan"], "finite number"),
    (["--bootstrap", "-5"], "--bootstrap"),
    (["--json-out", "/nonexistent-folder/rows.json"], "--json-out"),
])
def test_flags_are_checked_before_any_work(tmp_path: Path, data_dir: Path, args: list[str], needle: str) -> None:
    data = write_openreview(tmp_path / "or")
    res = run_cli("evaluate", "-b", f"openreview={data}", *args)
    one_line_error(*res, 2, needle)
    assert not (data_dir / "warehouse.duckdb").exists() and not (data_dir / "reports").exists()


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    data = write_openreview(tmp_path / "or")
    read = Path.read_bytes

    def failing_disk(self: Path) -> bytes:  # reading it fails in a way nobody planned for
        if self.name == "submissions.json":
            raise OSError(errno.EIO, "Input/output error", str(self))
        return read(self)

    monkeypatch.setattr(Path, "read_bytes", failing_disk)
    code, out, err = run_cli("evaluate", "-b", f"openreview={data}")
    line = one_line_error(code, out, err, 1, "OSError", "--debug")
    assert "Traceback" not in err and line
    import contextlib
    import io

    from revbench.app.cli import run
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(io.StringIO()):
        assert run(["evaluate", "-b", f"openreview={data}"], debug=True) == 1
    assert "Traceback" in buf.getvalue()


def test_settings_typos_and_wrong_types_are_named(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (isolated_env / ".env").write_text("REVBENCH_HTTP__TIMEOUT_SECOND=5\n")
    one_line_error(*run_cli("status"), 2, "unknown setting REVBENCH_HTTP__TIMEOUT_SECOND", ".env",
                    "did you mean REVBENCH_HTTP__TIMEOUT_SECONDS?")
    (isolated_env / ".env").unlink()
    monkeypatch.setenv("REVBENCH_HTTP__TIMEOUT_SECONDS", "soon")
    one_line_error(*run_cli("status"), 2, "REVBENCH_HTTP__TIMEOUT_SECONDS='soon'", "valid number")
    monkeypatch.delenv("REVBENCH_HTTP__TIMEOUT_SECONDS")
    monkeypatch.setenv("REVBENCH_LOG_LEVEL", "loud")
    one_line_error(*run_cli("status"), 2, "REVBENCH_LOG_LEVEL='LOUD'", "'DEBUG'")


def test_log_level_reaches_revbench_loggers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    monkeypatch.setenv("REVBENCH_LOG_LEVEL", "debug")
    data = write_openreview(tmp_path / "or")
    code, out, err = run_cli("evaluate", "-b", f"openreview={data}", "--bootstrap", "0")
    assert code == 0, out + err
    assert logging.getLogger("revbench").getEffectiveLevel() == logging.DEBUG
    assert "evaluate run" in out + err  # the run's start, logged at DEBUG


def test_unknown_categories_are_refused_before_anything(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_line_error(*run_cli("ingest", "--since", "2026-09-01", "--until", "2026-09-02", "-c", "cs.XX"), 2,
                    "--categories", "unknown arXiv category 'cs.XX'")
    monkeypatch.setenv("REVBENCH_ARXIV__CATEGORIES", '["cs.CL", "cs.XY"]')
    one_line_error(*run_cli("status"), 2, "REVBENCH_ARXIV__CATEGORIES", "'cs.XY'")
    assert not data_dir.exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--fault-rate", "2"], "--fault-rate 2.0"),
    (["--papers", "3"], "--papers"),
])
def test_demo_parameters_are_checked_before_the_world(data_dir: Path, args: list[str], needle: str) -> None:
    one_line_error(*run_cli("demo", *args), 2, needle)
    assert not (data_dir / "worlds").exists()


@pytest.mark.parametrize("damage", ["empty", "truncated", "random"])
def test_a_damaged_warehouse_is_named_with_the_way_out(data_dir: Path, tmp_path: Path, damage: str) -> None:
    data_dir.mkdir(parents=True)
    path = data_dir / "warehouse.duckdb"
    with Warehouse.open(path) as wh:
        wh.upsert(EVAL_RESULTS, pl.DataFrame([dict(benchmark="b", benchmark_version="1", split="s", scorer="x", metric="loss",
                                                   value=0.1, n=1, run_id="r", evaluated_at=datetime(2026, 1, 1, tzinfo=UTC))]))
    good = path.read_bytes()
    path.write_bytes({"empty": b"", "truncated": good[:10_000], "random": os.urandom(len(good))}[damage])
    before = path.read_bytes()
    for args in (["status"], ["evaluate", "-p", f"x={tmp_path / 'missing.json'}"]):
        if args[0] == "evaluate":
            (tmp_path / "missing.json").write_text("[]")
            args = ["evaluate", "-b", f"openreview={write_openreview(tmp_path / 'or')}"]
        one_line_error(*run_cli(*args), 5, str(path), "move it aside")
    assert path.read_bytes() == before
