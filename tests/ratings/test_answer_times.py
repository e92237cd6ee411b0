"""Quality flags on pace read the answers' recorded times, not the machine's: the SYNTHETIC panel
answers over HTTP with the time on its simulated clock, the survey server for it records that
time, and the same round answered by a panel slowed down (as on a loaded machine) raises exactly
the flags, with exactly the evidence, it raises at full speed."""

from __future__ import annotations

import shutil
from pathlib import Path

from revbench.app.demo import survey_round
from revbench.flows.ratings import ratings_flow
from revbench.settings import Settings
from revbench.synth.respondents import answer
from revbench.synth.truth import load_truth
from revbench.warehouse import Warehouse

PACE = {"burst_min_papers": 2, "burst_window_seconds": 0.3, "min_seconds_per_paper": 0.12, "evaluate_after": False}
"""Rules on the panel's fast clock (it reads an abstract in 0.25 s): any two papers rated within
0.3 s are a burst, so the flags follow the pace the answers' times show."""


def _burst_flags(round_warehouse: Path, small_world: Path, data: Path,
                 stall_seconds: float) -> dict[tuple[str, tuple[str, ...]], dict[str, float]]:
    """Round 1 of a fresh copy of the round sent and answered by the SYNTHETIC panel (stalling
    ``stall_seconds`` of real time before each answer), then flagged: (reviewer, papers) ->
    evidence of each burst (invitation ids differ: each copy signs with its own demo key)."""
    shutil.copytree(round_warehouse, data, ignore=shutil.ignore_patterns("*.run.json", "prefect"))
    s = Settings(data_dir=data)
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        corpus = wh.ingest.corpus_papers()
    truth = load_truth(small_world)
    _wave, panel, _counts, s = survey_round(s, lambda messages, recorded: answer(
        truth, messages, corpus, 3, data / "panel", recorded, pace_seconds=0.25, workers=8,
        stall_seconds=stall_seconds), track=False)
    assert panel["ratings"] > 0
    out = ratings_flow.fn(s.with_overrides(ratings=PACE), decide="keep", curator="test")
    return {(f["reviewer_id"], tuple(f["paper_ids"])): f["evidence"] for f in out.flag_list if f["rule"] == "burst"}


def test_a_slowed_panel_raises_the_same_flags_as_a_fast_one(round_warehouse: Path, small_world: Path,
                                                            tmp_path: Path) -> None:
    fast = _burst_flags(round_warehouse, small_world, tmp_path / "fast", 0.0)
    slow = _burst_flags(round_warehouse, small_world, tmp_path / "slow", 0.4)  # slower than any window above
    assert len(fast) >= 3 and slow == fast
    # The evidence is the simulated pace: readers 0.25 s a paper, rushers a tenth of it.
    assert {e["seconds_per_paper"] for e in fast.values()} <= {0.25, 0.025}
