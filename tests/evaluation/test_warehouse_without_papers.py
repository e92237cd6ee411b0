"""A warehouse with kept ratings but none of the rated papers (a papers table lost, or ratings
restored without their corpus): the evaluation on it ends in one line that says what is
missing and how to get it back, writes nothing, and TPMS never meets an empty matrix."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from revbench.evaluation.model import Benchmark
from revbench.evaluation.scorers import Context, make_scorer
from revbench.schemas.tables import EVAL_RESULTS, PAPERS, RATINGS
from revbench.settings import Settings
from revbench.warehouse import Warehouse
from tests.support.cli import evaluate_cli, one_line_error
from tests.support.evaluation import bench

RATED = [("r1", "2609.00001", 5), ("r1", "2609.00002", 2), ("r2", "2609.00001", 1), ("r2", "2609.00002", 4)]


def test_evaluate_on_ratings_without_their_papers_is_one_line(tmp_path: Path, isolated_env: Path) -> None:
    path = isolated_env / "data" / "warehouse.duckdb"  # the warehouse the command writes to, too
    rows = [dict(reviewer_id=r, paper_id=p, rating=x, invitation_id=f"inv_{r}", round=1, category="cs.IR", event_id=i,
                 epoch="e1", rated_at=datetime(2026, 9, 21, tzinfo=UTC), n_events=1, status="kept", flags=[])
            for i, (r, p, x) in enumerate(RATED, start=1)]
    with Warehouse.open(path) as wh:
        wh.upsert(RATINGS, pl.DataFrame(rows))
        assert wh.count(PAPERS) == 0
    # What a user runs on the warehouse benchmark: the default scorers (trivial and tpms).
    line = one_line_error(*evaluate_cli(tmp_path, "-b", f"warehouse={path}"), 2, f"the warehouse at {path}",
                          "4 kept ratings of 2 papers but none of those papers (e.g. '2609.00001')", "revbench ingest")
    assert "Error" not in line.split(":", 1)[1]  # no exception's name: a sentence
    with Warehouse.open(path, read_only=True) as wh:
        assert wh.count(EVAL_RESULTS) == 0
    assert not (tmp_path / "rows.json").exists() and not (tmp_path / "report").exists()


def test_tpms_on_a_benchmark_without_a_word_of_text_scores_nothing(settings: Settings) -> None:
    b = bench()
    bare = Benchmark(b.name, b.version, b.submissions.clear(), [b.draws[0].clear()], b.splits)
    assert make_scorer("tpms", Context(settings)).score(bare).draws[0].height == 0
    wordless = Benchmark(b.name, b.version, b.submissions.with_columns(pl.lit("").alias("title"), pl.lit("").alias("abstract")),
                         [b.draws[0].with_columns(pl.lit("a").alias("title"), pl.lit("").alias("abstract"))], b.splits)
    scores = make_scorer("tpms", Context(settings)).score(wordless).draws[0]
    assert scores.height == 4 and scores["score"].to_list() == [0.0] * 4
