"""An evaluation request is checked before any work: names, kinds, paths, scorer parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from revbench.evaluation.plan import DEFAULT_SCORERS, PlanError, plan_evaluation
from revbench.settings import Settings


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "gold").mkdir()
    (tmp_path / "p.json").write_text("{}")
    (tmp_path / "q.json").write_text("{}")
    return {"gold": tmp_path / "gold", "p": tmp_path / "p.json", "q": tmp_path / "q.json"}


def test_a_scorer_and_a_file_of_one_name_is_an_error(settings: Settings, files) -> None:
    with pytest.raises(PlanError, match=r"--predictions tpms=.* has the name of the scorer --scorer 'tpms'"):
        plan_evaluation(settings, [f"goldstandard={files['gold']}"], ["tpms"], [f"tpms={files['p']}"])
    with pytest.raises(PlanError, match="same scorer"):
        plan_evaluation(settings, [f"goldstandard={files['gold']}"], ["tpms", "tpms:regime=title+abstract"], [])
    with pytest.raises(PlanError, match="given twice"):
        plan_evaluation(settings, [f"goldstandard={files['gold']}"], None, [f"x={files['p']}", f"x={files['q']}"])


def test_defaults_run_only_when_nothing_was_asked(settings: Settings, files) -> None:
    assert plan_evaluation(settings, [f"goldstandard={files['gold']}"], None, []).scorers == list(DEFAULT_SCORERS)
    only_files = plan_evaluation(settings, [f"goldstandard={files['gold']}"], None, [f"tpms={files['p']}"])
    assert only_files.scorers == [] and only_files.predictions[0].name == "tpms"
    assert plan_evaluation(settings, [], None, [f"rate={files['p']}"]).scorers == []


@pytest.mark.parametrize(("benchmarks", "scorers", "predictions", "message"), [
    (["goldstandard"], None, [], "is not NAME=PATH"),
    (["gold={gold}"], None, [], "unknown kind 'gold'"),
    (["goldstandard={gold}/missing"], None, [], "does not exist"),
    (["goldstandard={gold}"], ["tpms:regime=everything"], [], "--scorer 'tpms:regime=everything'"),
    (["goldstandard={gold}"], ["magic"], [], "unknown scorer"),
    (["goldstandard={gold}"], None, ["x@lrbench={p}"], "no --benchmark named 'lrbench'"),
    (["goldstandard={gold}"], None, ["x={gold}/none.json"], "does not exist"),
    ([], None, [], "at least one"),
])
def test_bad_requests_name_the_flag(settings: Settings, files, benchmarks, scorers, predictions, message) -> None:
    fmt = {k: str(v) for k, v in files.items()}
    with pytest.raises(PlanError, match=message):
        plan_evaluation(settings, [b.format(**fmt) for b in benchmarks], scorers, [p.format(**fmt) for p in predictions])
