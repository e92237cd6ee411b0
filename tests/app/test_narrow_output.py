"""Output read in a log at 80 columns (not a terminal: CI, `| tee`, a cron mail): every scorer's
name is printed whole, tables that would not fit are printed a row at a time instead of cut, and a
default run prints no third-party warning (``-v`` brings the details back)."""

from __future__ import annotations

import json
from pathlib import Path

from revbench.settings import Settings
from tests.support.cli import RATED, cli
from tests.support.evaluation import write_openreview

SCORERS = ("tpms", "bm25:pooling=mean", "bm25:pooling=topk_mean:3", "embedding:model=hashing,pooling=topk_mean:3")


def test_an_evaluation_in_an_80_column_log_names_every_scorer_whole(tmp_path: Path, settings: Settings) -> None:
    data = write_openreview(tmp_path / "or")
    (tmp_path / "mine_with_a_long_name_for_its_predictions.json").write_text(json.dumps(RATED))
    args = ["evaluate", "-b", f"openreview={data}", *[a for s in SCORERS for a in ("-s", s)],
            "-p", f"mine_with_a_long_name_for_its_predictions={tmp_path / 'mine_with_a_long_name_for_its_predictions.json'}",
            "--bootstrap", "20", "--report", str(tmp_path / "report")]
    done = cli(settings, *args, extra={"COLUMNS": "80", "TERM": "dumb"})
    assert done.returncode == 0, done.stderr
    for name in (*SCORERS, "mine_with_a_long_name_for_its_predictions"):
        assert name in done.stdout, name
    assert "…" not in done.stdout, "a cell was cut"
    report = str(tmp_path / "report")
    assert any(report in line for line in done.stdout.splitlines()), "the report's path is printed in one piece"
    assert "Warning" not in done.stderr, done.stderr  # no third-party warning by default
