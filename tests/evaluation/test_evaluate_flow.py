"""The evaluate flow through Prefect: JSON rows, the warehouse table, the report, predictions in and out."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from revbench.flows.evaluate import evaluate_flow
from revbench.schemas.tables import EVAL_RESULTS
from revbench.warehouse import Warehouse
from tests.support.common import run_cli
from tests.support.evaluation import write_openreview

pytestmark = pytest.mark.slow
KEYS = {"benchmark", "benchmark_version", "split", "scorer", "metric", "value", "ci_low", "ci_high", "n", "run_id",
        "evaluated_at", "spec", "predictions_sha256", "coverage", "benchmark_digest", "ties", "basis", "baseline"}


def test_evaluate_flow_end_to_end(prefect_server, settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "gold_style.json").write_text(json.dumps({"ir": {"s1": 0.9, "s2": 0.1}, "gnn": {"s1": 0.2, "s2": 0.8}}))
    (tmp_path / "or_style.csv").write_text("s1,~ir,0.1\ns2,~ir,0.9\ns1,~gnn,0.5\ns2,~gnn,0.5\n")
    out_json = tmp_path / "rows.json"
    result = evaluate_flow(
        settings, benchmarks=[f"openreview={data}"], scorers=["trivial", "tpms"],
        predictions=[f"oracle={tmp_path / 'gold_style.json'}", f"backwards={tmp_path / 'or_style.csv'}"],
        baseline="tpms", bootstrap=200, report_dir=str(tmp_path / "report"), json_out=str(out_json),
    )
    rows = json.loads(out_json.read_text())
    assert rows and all(set(r) == KEYS for r in rows)
    by = {(r["scorer"], r["metric"]): r for r in rows}
    assert by[("trivial", "loss")]["value"] == 0.5
    assert by[("oracle", "loss")]["value"] == 0.0 and by[("oracle", "accuracy")]["value"] == 1.0
    # backwards: ir inverted (weight 4), gnn tied (weight 4, half) -> 6/8.
    assert by[("backwards", "loss")]["value"] == pytest.approx(0.75)
    assert ("oracle - tpms", "loss") in by and by[("oracle - tpms", "loss")]["value"] <= 0
    assert by[("tpms", "loss")]["spec"] == "tpms:compat=revbench,regime=title+abstract"
    assert by[("oracle", "loss")]["spec"] == "predictions:gold_style.json"
    assert {"P_hard@5", "NDCG@10", "MRR_hard@10", "Recall_soft@5", "WKTD@5"} <= {m for _, m in by}
    report = Path(result.report_dir)
    assert (report / "report.md").read_text().count("**") >= 2 and (report / "loss.png").stat().st_size > 1000
    exported = json.loads((report / "predictions" / "openreview" / "tpms.json").read_text())
    assert set(exported) == {"ir", "gnn"} and set(exported["ir"]) == {"s1", "s2"}
    with Warehouse.open(settings.warehouse_path) as wh:
        first = wh.read(EVAL_RESULTS)
    evaluate_flow(settings, benchmarks=[f"openreview={data}"], scorers=["trivial", "tpms"], bootstrap=200,
                  report_dir=str(tmp_path / "r2"))
    with Warehouse.open(settings.warehouse_path) as wh:
        second = wh.read(EVAL_RESULTS)
    # Append-only: the second run adds its own rows; the first run's stay as they were.
    assert second["run_id"].n_unique() == 2 and second.filter(pl.col("run_id") == result.run_id).equals(first)
    assert first.filter((first["scorer"] == "tpms") & (first["metric"] == "loss"))["benchmark_version"].len() == 1


def _said(args: list[str]) -> tuple[int, str]:
    code, out, err = run_cli(*args)
    return code, " ".join((out + err).split())


def test_cli_errors_are_clear(prefect_server, tmp_path: Path) -> None:
    code, out = _said(["evaluate", "-b", "goldstandard"])
    assert code == 2 and "NAME=PATH" in out
    code, out = _said(["evaluate", "-b", f"goldstandard={tmp_path / 'nowhere'}"])
    assert code == 2 and "does not exist" in out
    code, out = _said(["evaluate", "-b", f"openreview={write_openreview(tmp_path / 'x')}", "-s", "magic"])
    assert code == 2 and "unknown scorer" in out


def test_a_baseline_written_with_its_defaults_is_the_same_scorer(settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    out = evaluate_flow.fn(settings, benchmarks=[f"openreview={data}"], scorers=["trivial", "tpms"],
                           baseline="tpms:compat=revbench", bootstrap=20, plot=False, report_dir=str(tmp_path / "report"))
    paired = [r for r in out.rows if r["scorer"] == "trivial - tpms"]
    assert paired and all(r["ci_low"] is not None for r in paired if r["value"] is not None)
    # results.json says what each difference is against; a scorer's own rows carry a null baseline.
    rows = json.loads((tmp_path / "report" / "results.json").read_text())
    assert rows == out.rows and all("baseline" in r for r in rows)
    assert {r["baseline"] for r in rows if r["scorer"] == "trivial - tpms"} == {"tpms"}
    assert {r["baseline"] for r in rows if r["scorer"] in ("trivial", "tpms")} == {None}


def test_assignment_and_attack_travel_into_results_report_and_warehouse(prefect_server, settings, tmp_path: Path) -> None:
    from revbench.evaluation.assignment_eval import CANDIDATES

    data = write_openreview(tmp_path / "or")
    settings = settings.with_overrides(assignment={"reviewers_per_paper": 1, "max_load": 1}, attack={"pairs_per_rank": 2})
    result = evaluate_flow(settings, benchmarks=[f"openreview={data}"], scorers=["trivial", "tpms", "bm25:pooling=mean"],
                           baseline="trivial", bootstrap=50, report_dir=str(tmp_path / "report"), assignment=True, attack=True)
    rows = json.loads((Path(result.report_dir) / "results.json").read_text())
    assigned = {(r["scorer"], r["metric"]): r for r in rows if r["split"] == CANDIDATES}
    assert assigned[("tpms", "known_share")]["value"] == 1.0
    assert assigned[("tpms", "assigned_rating")]["basis"] == "k=1 per paper, load<=1, objective=sum"
    assert ("tpms - trivial", "assigned_rating") in assigned
    attacked = [r for r in rows if r["split"].startswith("attack")]
    assert {r["scorer"] for r in attacked} == {"trivial", "tpms", "bm25:pooling=mean"}
    assert all(r["basis"].startswith("immune") for r in attacked if r["scorer"] == "trivial")
    md = (Path(result.report_dir) / "report.md").read_text()
    assert "assignment over each paper's rated candidates" in md and "collusion attack" in md
    assert result.judgements and result.judgements[0].startswith("Assignment:")
    with Warehouse.open(settings.warehouse_path) as wh:
        stored = wh.read(EVAL_RESULTS)
    assert stored.filter(pl.col("split") == CANDIDATES).height == len(assigned)
