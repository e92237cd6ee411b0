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


@pytest.mark.parametrize(("scorers", "predictions", "needles"), [
    (["bm25:pooling=mean"], ["bm25_pooling_mean={p}"],
     ["--predictions bm25_pooling_mean=", "--scorer 'bm25:pooling=mean'", "rename", "-p bm25_pooling_mean_file="]),
    (["bm25:pooling=mean"], ["BM25_Pooling_Mean@goldstandard={p}"], ["--predictions BM25_Pooling_Mean@goldstandard="]),
    (["embedding:model=org/m", "embedding:model=org_m"], [],
     ["--scorer 'embedding:model=org/m' and --scorer 'embedding:model=org_m'", "separate runs"]),
    (None, ["x={p}", "x@goldstandard={q}"], ["--predictions x=", "--predictions x@goldstandard=", "a name of its own"]),
    (None, ["a:b={p}", "a_b={q}"], ["--predictions a:b=", "--predictions a_b=", "a name of its own"]),
    (["tpms"], ["TPMS_d2={p}"], ["--predictions TPMS_d2=", "--scorer 'tpms'", "named 'TPMS_d2'"]),  # a draw's file
])
def test_names_that_become_one_export_file_name_are_an_error(settings: Settings, files, scorers, predictions,
                                                             needles, monkeypatch: pytest.MonkeyPatch) -> None:
    # Downloads on: a hub name not cached (org/m) is then no refusal of its own, and the plan loads no model.
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    fmt = {k: str(v) for k, v in files.items()}
    with pytest.raises(PlanError, match="would both write export files named") as e:
        plan_evaluation(settings, [f"goldstandard={files['gold']}"], scorers, [p.format(**fmt) for p in predictions])
    assert "\n" not in str(e.value) and all(n in str(e.value) for n in needles), str(e.value)


def test_files_of_one_name_on_different_benchmarks_are_not_a_clash(settings: Settings, files, tmp_path: Path) -> None:
    (tmp_path / "lr").mkdir()
    plan = plan_evaluation(settings, [f"goldstandard={files['gold']}", f"lrbench={tmp_path / 'lr'}"], ["trivial"],
                           [f"x@goldstandard={files['p']}", f"x@lrbench={files['q']}"])
    assert [p.name for p in plan.predictions] == ["x", "x"]
    assert plan_evaluation(settings, [f"goldstandard={files['gold']}"], ["tpms"], [f"tpms_draw={files['p']}"]).scorers
