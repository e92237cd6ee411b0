"""Sizing the next pools round from an evaluation report's scorer pairs: the rule, the pair it
picks, and the command line's errors before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from revbench.errors import UsageError
from revbench.evaluation.separation import next_round_pair, read_separation
from revbench.tasks.pools import round_target
from revbench.warehouse import Warehouse
from tests.support.common import run_cli


def _row(a: str, b: str, split: str = "paper_centric", separated: bool = False, more: int | None = 10) -> dict:
    return {"benchmark": "warehouse", "split": split, "scorer_a": a, "scorer_b": b, "separated": separated,
            "more_clusters": more, "more_needed": None if more is None else 3 * more}


ROWS = [_row("tpms", "trivial", separated=True, more=None), _row("bm25", "tpms", more=40), _row("bm25", "embedding", more=12),
        _row("embedding", "tpms", split="pointwise", more=2), _row("tpms", "embedding", more=None)]


def test_the_round_grows_with_the_anchors_asked_over_the_yield() -> None:
    t = round_target(more_anchors=12, anchors=30, queries=50, categories=5)
    assert t.per_category == math.ceil(12 * 50 / (30 * 5)) == 4
    assert "0.60 each" in t.line() and "4 query papers in each of 5 categories" in t.line()
    assert round_target(1, 100, 100, 5).per_category == 1  # never a round of nothing
    with pytest.raises(ValueError, match="no yield"):
        round_target(12, 0, 50, 5)


def test_the_closest_open_paper_centric_pair_sets_the_round() -> None:
    assert (next_round_pair(ROWS)["scorer_a"], next_round_pair(ROWS)["scorer_b"]) == ("bm25", "embedding")
    assert next_round_pair(ROWS, "tpms,bm25")["more_clusters"] == 40  # either order
    with pytest.raises(UsageError, match="already separated"):
        next_round_pair(ROWS, "trivial,tpms")
    with pytest.raises(UsageError, match=r"no paper-centric pair.*it has: bm25,embedding; bm25,tpms"):
        next_round_pair(ROWS, "bm25,llm")
    with pytest.raises(UsageError, match="cannot be separated by size alone"):
        next_round_pair([ROWS[0], ROWS[3], ROWS[4]])
    # Scorer labels carry commas of their own; a public benchmark beside the warehouse sizes nothing.
    labelled = [_row("embedding:model=x,pooling=max", "bm25", more=7), {**_row("bm25", "tpms", more=1), "benchmark": "lrbench"}]
    assert next_round_pair(labelled, "bm25,embedding:model=x,pooling=max")["more_clusters"] == 7
    assert next_round_pair(labelled)["more_clusters"] == 7
    with pytest.raises(UsageError, match="no scorer pairs on revbench's own"):
        next_round_pair(labelled[1:])


def test_a_report_folder_without_pairs_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no separation.json there"):
        read_separation(tmp_path)
    (tmp_path / "separation.json").write_text("[{\"split\": ")
    with pytest.raises(UsageError, match="not readable JSON"):
        read_separation(tmp_path)
    (tmp_path / "separation.json").write_text(json.dumps([{"split": "paper_centric"}]))
    with pytest.raises(UsageError, match="not a list of scorer pairs"):
        read_separation(tmp_path)
    (tmp_path / "separation.json").write_text(json.dumps(ROWS))
    assert read_separation(tmp_path) == ROWS


@pytest.mark.parametrize(("args", "needle"), [
    (["--per-category", "3"], "--per-category and --target-from-report both size the round"),
    (["--target-pair", "bm25"], "give two scorer names as A,B"),
    ([], "no warehouse at"),
])
def test_the_command_refuses_before_any_work(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "separation.json").write_text(json.dumps(ROWS))
    code, _out, err = run_cli("pools", "--no-track", "--target-from-report", str(tmp_path / "report"), *args)
    assert code == 2 and needle in err, err
    assert not (tmp_path / "data" / "warehouse.duckdb").exists()


def test_a_warehouse_without_rated_rounds_has_no_yield_to_scale(tmp_path: Path) -> None:
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "separation.json").write_text(json.dumps(ROWS))
    (tmp_path / "data").mkdir(exist_ok=True)
    Warehouse(tmp_path / "data" / "warehouse.duckdb").close()  # created and migrated, no round yet
    code, _out, err = run_cli("pools", "--no-track", "--target-from-report", str(tmp_path / "report"))
    assert code == 2 and "no round has paper-centric tuples yet" in err, err


def test_target_pair_needs_a_report() -> None:
    code, _out, err = run_cli("pools", "--no-track", "--target-pair", "a,b")
    assert code == 2 and "--target-pair needs --target-from-report" in err
