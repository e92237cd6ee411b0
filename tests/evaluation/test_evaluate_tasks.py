"""What the evaluate flow stores and returns of its metric rows."""

from __future__ import annotations

from datetime import UTC, datetime

from revbench.evaluation.model import MetricValue
from revbench.evaluation.report import results_frame
from revbench.tasks.evaluate import dropped_by_benchmark, json_rows, stored_results
from tests.support.evaluation import bench


def test_stored_rows_carry_version_digest_run_and_time() -> None:
    b = bench()
    b.digest, b.dropped = "d" * 64, {"archives: blank title": 2}
    other = bench()
    other.name, other.version = "other", "7"
    rows = [MetricValue("hand", "pointwise", "tpms", "loss", 0.25, 0.1, 0.4, 4),
            MetricValue("other", "pointwise", "tpms", "loss", 0.5, None, None, 4),
            MetricValue("all", "average", "tpms", "loss", 0.375, None, None, 8)]
    when = datetime(2026, 9, 1, 12, tzinfo=UTC)
    stored = stored_results(results_frame(rows), [b, other], "run-1", when)
    got = {r["benchmark"]: r for r in stored.to_dicts()}
    assert got["hand"]["benchmark_version"] == "1" and got["hand"]["benchmark_digest"] == "d" * 64
    assert got["other"]["benchmark_digest"] is None
    assert got["all"]["benchmark_version"] == "hand@1+other@7" and got["all"]["benchmark_digest"] is None
    assert {r["run_id"] for r in got.values()} == {"run-1"}
    assert json_rows(stored)[0]["evaluated_at"] == when.isoformat()
    assert dropped_by_benchmark([b, other]) == {"hand": {"archives: blank title": 2}}
