"""Export files are named after each scorer and predictions file (issue 33, "Why" 7): two names
that become one file name are refused before any work, in one line naming both flags; names that
differ get files of their own, each listed once in ``exports.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import RATED, evaluate_cli, nothing_written, one_line_error
from tests.support.evaluation import write_openreview


@pytest.fixture
def data_dir(isolated_env: Path) -> Path:
    return isolated_env / "data"


def test_a_file_named_as_a_scorers_export_is_refused_before_work(tmp_path: Path, data_dir: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "mine.json").write_text(json.dumps(RATED))
    res = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "bm25:pooling=mean",
                       "-p", f"bm25_pooling_mean={tmp_path / 'mine.json'}")
    one_line_error(*res, 2, f"--predictions bm25_pooling_mean={tmp_path / 'mine.json'}", "--scorer 'bm25:pooling=mean'",
                   "would both write export files named 'bm25_pooling_mean'",
                   f"-p bm25_pooling_mean_file={tmp_path / 'mine.json'}")
    nothing_written(data_dir, tmp_path)


def _flat() -> list[dict]:
    return [{"anchor_id": f"a{i}", "positive_id": f"p{i}", "negative_id": f"n{i}", "type": "paper_centric",
             "positive_score": 0.7, "negative_score": 0.2, "positive_ref_score": 4, "negative_ref_score": 2} for i in range(3)]


def test_two_lr_flat_files_of_one_file_name_are_refused_before_work(tmp_path: Path, data_dir: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "RATE_pc.json").write_text(json.dumps(_flat()))
    res = evaluate_cli(tmp_path, "-p", f"first={tmp_path / 'a' / 'RATE_pc.json'}",
                       "-p", f"second={tmp_path / 'b' / 'RATE_pc.json'}")
    one_line_error(*res, 2, f"--predictions first={tmp_path / 'a' / 'RATE_pc.json'}",
                   f"--predictions second={tmp_path / 'b' / 'RATE_pc.json'}", "trec/lrbench_RATE_pc/")
    nothing_written(data_dir, tmp_path)


def test_every_export_file_is_listed_once(tmp_path: Path) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "mine.json").write_text(json.dumps(RATED))
    code, out, err = evaluate_cli(tmp_path, "-b", f"openreview={data}", "-s", "bm25:pooling=mean",
                                  "-p", f"bm25_pooling_mean_file={tmp_path / 'mine.json'}", "--bootstrap", "10")
    assert code == 0, out + err
    paths = [e["path"] for e in json.loads((tmp_path / "report" / "exports.json").read_text())]
    assert len(paths) == len(set(paths)) and all((tmp_path / "report" / p).is_file() for p in paths), paths
    scorers = {e["scorer"] for e in json.loads((tmp_path / "report" / "exports.json").read_text()) if e["scorer"]}
    assert scorers == {"bm25:pooling=mean", "bm25_pooling_mean_file"}
