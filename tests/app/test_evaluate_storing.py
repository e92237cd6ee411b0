"""Which evaluations store their run and rows (``runs``, ``eval_results``) without ``--record``
(``revbench.app.commands.evaluate.stores``): prediction files alone, on no benchmark or on
benchmarks read from files (``goldstandard``, ``lrbench``, ``openreview`` as KIND=PATH), store
nothing unless asked, the warehouse not even opened; a scorer's run and an evaluation on this
project's own benchmarks (the warehouse, a release, weak labels) always store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from revbench.app.commands.evaluate import stores
from revbench.evaluation.plan import EvaluationPlan, PredictionsFile
from revbench.schemas.tables import EVAL_RESULTS
from revbench.warehouse import Warehouse
from tests.support.cli import RATED, write_gold
from tests.support.common import run_cli
from tests.support.evaluation import write_openreview


@pytest.mark.parametrize("kind", ["goldstandard", "openreview"])
def test_prediction_files_on_a_benchmark_read_from_files_are_stored_only_with_record(
        tmp_path: Path, data_dir: Path, kind: str) -> None:
    bench = write_gold(tmp_path / "gold") if kind == "goldstandard" else write_openreview(tmp_path / "or")
    (tmp_path / "p.json").write_text(json.dumps(RATED))
    args = ["evaluate", "-b", f"{kind}={bench}", "-p", f"p={tmp_path / 'p.json'}", "--bootstrap", "0", "--no-track",
            "--json-out", str(tmp_path / "rows.json")]
    code, out, err = run_cli(*args)
    assert code == 0, out + err
    assert json.loads((tmp_path / "rows.json").read_text()) and not (data_dir / "warehouse.duckdb").exists()
    code, out, err = run_cli(*args, "--record")
    assert code == 0, out + err
    rows = json.loads((tmp_path / "rows.json").read_text())
    with Warehouse.open(data_dir / "warehouse.duckdb", read_only=True) as wh:
        runs = wh.runs.latest_runs(5).to_dicts()
        stored = wh.read(EVAL_RESULTS)
    assert [(r["flow"], r["status"], r["run_id"]) for r in runs] == [("evaluate", "completed", rows[0]["run_id"])]
    assert stored.height == len(rows) and set(stored["run_id"]) == {rows[0]["run_id"]}


def test_a_scorers_run_on_a_benchmark_read_from_files_is_stored(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "p.json").write_text(json.dumps(RATED))
    code, out, err = run_cli("evaluate", "-b", f"openreview={write_openreview(tmp_path / 'or')}", "-s", "trivial",
                             "-p", f"p={tmp_path / 'p.json'}", "--bootstrap", "0", "--no-track")
    assert code == 0, out + err
    with Warehouse.open(data_dir / "warehouse.duckdb", read_only=True) as wh:
        assert set(wh.read(EVAL_RESULTS)["scorer"]) == {"trivial", "p"}


def test_what_stores_without_record(tmp_path: Path) -> None:
    (tmp_path / "release").mkdir()
    (tmp_path / "release" / "manifest.json").write_text("{}")
    preds = [PredictionsFile("p", None, tmp_path / "p.json")]

    def plan(benchmarks: list[tuple[str, Path]], scorers: list[str] | None = None) -> EvaluationPlan:
        return EvaluationPlan(benchmarks, scorers or [], preds)

    assert not stores(plan([]))
    assert not stores(plan([("goldstandard", tmp_path), ("lrbench", tmp_path), ("openreview", tmp_path)]))
    assert stores(plan([], ["tpms"])) and stores(plan([("goldstandard", tmp_path)], ["trivial"]))
    for kind in ("warehouse", "release", "weak"):
        assert stores(plan([("goldstandard", tmp_path), (kind, tmp_path)]))
    assert stores(plan([("lrbench", tmp_path / "release")]))  # LR-bench's layout of a release
