"""The embed flow's rules outside the flow: the precision an export's manifest records
(``tasks.embed.export_dtype``), and the benchmarks it loads planned without any scorer
(``revbench.evaluation.plan.plan_benchmarks``), checked as an evaluation checks them."""

from __future__ import annotations

from pathlib import Path

import pytest

from revbench.evaluation import plan as plan_module
from revbench.evaluation.plan import PlanError, plan_benchmarks, plan_evaluation
from revbench.settings import Settings
from revbench.tasks.embed import export_dtype
from tests.support.evaluation import write_openreview


@pytest.mark.parametrize(("device", "runtime", "dtype"), [
    ("cuda", "torch", "float16 weights, float32 vectors"),
    ("cpu", "torch", "float32"),
    ("cuda", "onnx-int8", "int8 weights, float32 vectors"),
    ("cpu", "onnx-int8", "int8 weights, float32 vectors"),
    ("cuda", "onnx", "float32"),
    ("cpu", "onnx", "float32"),
])
def test_the_manifest_dtype_follows_the_device_and_runtime(device: str, runtime: str, dtype: str) -> None:
    assert export_dtype(device, runtime) == dtype


def test_benchmarks_are_planned_without_any_scorer(settings: Settings, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_openreview(tmp_path / "or")
    evaluated = plan_evaluation(settings, [f"openreview={data}"], ["trivial"], [])

    def no_scorer(*_args: object) -> None:
        raise AssertionError("planning benchmarks builds no scorer")

    monkeypatch.setattr(plan_module, "make_scorer", no_scorer)
    planned = plan_benchmarks(settings, [f"openreview={data}"])
    assert planned.benchmarks == evaluated.benchmarks == [("openreview", data)]
    assert planned.scorers == [] and planned.predictions == []
    assert planned.baseline is None and planned.graph_from is None


def test_the_warehouse_is_this_installation_s_own(settings: Settings) -> None:
    settings.warehouse_path.parent.mkdir(parents=True, exist_ok=True)
    settings.warehouse_path.touch()
    assert plan_benchmarks(settings, [" warehouse "]).benchmarks == [("warehouse", settings.warehouse_path)]


def test_benchmark_errors_are_an_evaluation_s(settings: Settings, tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    for given in ([f"nosuch={data}"], [f"openreview={tmp_path / 'missing'}"], ["openreview"], []):
        with pytest.raises(PlanError) as planned:
            plan_benchmarks(settings, given)
        with pytest.raises(PlanError) as evaluated:
            plan_evaluation(settings, given, ["trivial"], [])
        assert str(planned.value) == str(evaluated.value)
