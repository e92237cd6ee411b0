"""The whole rebuild of the LR-bench sample (``revbench demo --world lrbench=...``): imported world,
ingest, identities, pools with the real model, survey answered from the benchmark, ratings, release,
evaluation and the comparison; then a planted label change in a copy of the original, which the
same rebuild must report as reversed."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from revbench.app.rebuild import load_source, run_rebuild
from revbench.evaluation.importers.registry import load_benchmark
from revbench.rebuild.compare import comparison
from revbench.rebuild.run import REBUILD_SCORERS
from revbench.schemas.tables import AUTHOR_LINKS, RATINGS
from revbench.settings import ReplaySettings, Settings
from revbench.tasks.rebuild import MISS_REASONS, kendall_tau
from revbench.warehouse import Warehouse
from tests.support.rebuild import copy_sample

pytestmark = pytest.mark.slow
SEED = 7


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory, external: Path) -> dict[str, Any]:
    """One rebuild of the sample, as the command line runs it (its replay faults included), with
    the arguments its comparison was computed from."""
    root = tmp_path_factory.mktemp("rebuild")
    real = comparison
    seen: dict[str, Any] = {}

    def spy(*args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.update(inspect.signature(real).bind(*args, **kwargs).arguments)
        return real(*args, **kwargs)

    settings = Settings(data_dir=root / "data")
    replay = ReplaySettings(fault_rate=0.05, fault_seed=SEED, timeout_delay_seconds=3.0, retry_after_seconds=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setattr("revbench.app.rebuild.comparison", spy)  # where the run looks it up
        result = run_rebuild(settings, load_source(f"lrbench={external / 'lrbench-sample'}"), SEED, replay, track=False)
    return {"root": root, "settings": settings, "result": result, "args": seen}


def test_the_rebuild_keeps_the_originals_labels(rebuilt: dict[str, Any]) -> None:
    data = rebuilt["settings"].data_dir
    report = data / "reports" / "rebuild"
    on_disk = json.loads((report / "lrbench" / "rebuild.json").read_text())
    assert on_disk == json.loads(json.dumps(rebuilt["result"], default=str))
    assert (report / "rebuild.json").read_text() == (report / "lrbench" / "rebuild.json").read_text()
    assert (report / "lrbench" / "rebuild.md").read_text().startswith("# Rebuild of lrbench")
    assert (report / "lrbench" / "rebuild.png").stat().st_size > 1000
    assert {"pool_recall", "tuples", "scorers", "kendall_tau"} <= set(on_disk)

    # Pool recall: every original rated pair is recalled or missed for one reason, with the pools
    # fitted to the original (the ones the comparison uses); the product's settings beside them.
    r, pools, d = on_disk["pool_recall"], on_disk["pools"], on_disk["defaults"]
    assert pools["used"] == "fitted" and r["tau"] == pools["fitted"]["tau"] <= 0.4
    assert pools["defaults"]["tau"] == d["pool_recall"]["tau"] == Settings().pools.tau
    assert r["pairs"] == d["pool_recall"]["pairs"] == 29 and d["pool_recall"]["recalled"] <= r["recalled"]
    assert d["pool_recall"]["recalled"] + sum(d["pool_recall"]["missed_by_reason"].values()) == 29
    for x in d["scorers"]:  # the product's pools keep a subset of the fitted pools' tuples
        assert x["rebuilt_n"] is None or x["rebuilt_n"] <= next(y["rebuilt_n"] for y in on_disk["scorers"]
                                                                if y["name"] == x["name"])
    assert set(on_disk["pooling_bias"]) == {"recall_by_rating", "recall_by_stratum", "loss_change"}
    assert "## Our pipeline or our settings" in (report / "lrbench" / "rebuild.md").read_text()
    assert set(r["missed_by_reason"]) == set(MISS_REASONS)
    assert r["recalled"] + sum(r["missed_by_reason"].values()) == r["pairs"]
    assert len(r["missed"]) == r["pairs"] - r["recalled"] and all(m["reason"] in MISS_REASONS for m in r["missed"])
    assert sum(x["pairs"] for x in r["by_stratum"]) == sum(x["pairs"] for x in r["by_rating"]) == r["pairs"]
    assert sum(x["recalled"] for x in r["by_stratum"]) == sum(x["recalled"] for x in r["by_rating"]) == r["recalled"]
    assert r["recall"] == pytest.approx(r["recalled"] / r["pairs"]) and r["recalled"] >= 2

    # Tuples: the rebuild holds every recalled original tuple with the same label.
    t = on_disk["tuples"]
    assert t["original"] == 16
    assert t["labels_identical"] is True and t["reversed"] == 0 and t["tied"] == 0
    assert t["recalled"] >= 1 and t["matched"] == t["recalled"]
    assert t["rebuilt"] == t["matched"] + t["extra"]
    assert t["ratings_identical"] is True and t["ratings_compared"] == r["recalled"]

    # Scorers: each offline scorer's loss with its interval on both sides, and their rank agreement.
    assert {s["name"] for s in on_disk["scorers"]} == set(REBUILD_SCORERS)
    for s in on_disk["scorers"]:
        assert {"name", "original_loss", "original_ci", "rebuilt_loss", "rebuilt_ci"} <= set(s)
        for side, n in (("original", t["original"]), ("rebuilt", t["rebuilt"])):
            low, high = s[f"{side}_ci"]
            assert 0 <= low <= s[f"{side}_loss"] <= high <= 1, s
            assert s[f"{side}_n"] == n
    trivial = next(s for s in on_disk["scorers"] if s["name"] == "trivial")
    assert trivial["original_loss"] == trivial["rebuilt_loss"] == 0.5
    tau = on_disk["kendall_tau"]
    assert tau is not None and -1 <= tau <= 1 and tau == pytest.approx(kendall_tau(on_disk["scorers"]))


def test_every_rebuilt_rating_is_the_originals_level(rebuilt: dict[str, Any]) -> None:
    """Read from the warehouse and the world's truth here, not from the comparison."""
    s, world = rebuilt["args"]["s"], rebuilt["args"]["world_dir"]
    with Warehouse.open(s.warehouse_path, read_only=True) as wh:
        ratings = wh.read(RATINGS).filter(pl.col("status") == "kept")
        links = wh.read(AUTHOR_LINKS)
    person = links.join(pl.read_parquet(world / "truth" / "mentions.parquet"), on=["arxiv_id", "position"]).select(
        pl.col("author_id").alias("reviewer_id"), "person_id").unique()
    assert person["reviewer_id"].n_unique() == person.height  # no author stands for two people
    held = pl.read_parquet(world / "truth" / "benchmark_ratings.parquet").select(
        "person_id", pl.col("arxiv_id").alias("paper_id"), "level")
    joined = ratings.join(person, on="reviewer_id", how="left").join(held, on=["person_id", "paper_id"], how="left")
    assert ratings.height == rebuilt["result"]["pool_recall"]["recalled"]
    assert joined.height == ratings.height and joined["level"].null_count() == 0  # the panel answers held pairs alone
    assert (joined["rating"] == joined["level"]).all()


def _swap_one_recalled_tuple(items: list[dict[str, Any]], missed: set[tuple[str, str]]) -> int:
    """Swap the reviewers of the first tuple whose pairs were both rated in the rebuild and appear
    in no other tuple, keeping the scores where they were: the original now says the other
    reviewer is better."""
    uses: dict[tuple[str, str], int] = {}
    for t in items:
        for side in ("positive", "negative"):
            key = (t[side]["author_id"], t["anchor"]["paper_id"])
            uses[key] = uses.get(key, 0) + 1
    for i, t in enumerate(items):
        pairs = [(t[side]["author_id"], t["anchor"]["paper_id"]) for side in ("positive", "negative")]
        if all(p not in missed and uses[p] == 1 for p in pairs):
            t["positive"], t["negative"] = t["negative"], t["positive"]
            t["positive"]["score"], t["negative"]["score"] = t["negative"]["score"], t["positive"]["score"]
            return i
    raise AssertionError("no recalled tuple to plant a change in")


def test_a_planted_label_change_is_reported_reversed(rebuilt: dict[str, Any], external: Path, tmp_path: Path) -> None:
    copy = copy_sample(external / "lrbench-sample", tmp_path / "lrbench-changed")
    f = copy / "evaluations_pc.sample.json"
    items = json.loads(f.read_text())
    missed = {(m["reviewer_id"], m["paper_id"]) for m in rebuilt["result"]["pool_recall"]["missed"]}
    i = _swap_one_recalled_tuple(items, missed)
    f.write_text(json.dumps(items))
    changed = load_benchmark("lrbench", copy)
    assert changed.version != rebuilt["args"]["bench"].version
    args = {**rebuilt["args"], "bench": changed, "source": copy}
    out = comparison(**args)
    t, before = out["tuples"], rebuilt["result"]["tuples"]
    assert t["reversed"] == 1 and t["labels_identical"] is False
    assert (t["recalled"], t["matched"], t["tied"]) == (before["recalled"], before["matched"] - 1, before["tied"])
    assert t["ratings_identical"] is True  # the rebuild's ratings are still the world's levels
    (disagreement,) = t["by_kind"][0]["disagreements"]
    swapped = items[i]
    assert disagreement == {"anchor": swapped["anchor"]["paper_id"], "positive": swapped["positive"]["author_id"],
                            "negative": swapped["negative"]["author_id"],
                            "original": [float(swapped["positive"]["score"]), float(swapped["negative"]["score"])],
                            "rebuilt": [float(swapped["negative"]["score"]), float(swapped["positive"]["score"])]}
    # The unchanged original, compared with the same rebuild again, gives what the rebuild reported.
    again = comparison(**rebuilt["args"])
    assert again["tuples"] == before and again["pool_recall"] == rebuilt["result"]["pool_recall"]
