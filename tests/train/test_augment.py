"""Augmented self-supervision: the views are what the module says (seeded, a sentence always
kept, one masked span), training on unrated papers lowers the loss and never reads a query paper,
a killed run (augment, and the factors objective through the same loop) resumes to the same
adapter, and the adapter scores as ``embedding:model=PATH``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from revbench.evaluation.scorers import Context, make_scorer
from revbench.flows.train_contrastive import augment_flow
from revbench.ml.augment import sentence_dropout, span_mask, views
from revbench.settings import Settings
from tests.support.cli import cli
from tests.support.kill import kill_at_first_checkpoint
from tests.support.evaluation import bench
from tests.support.models import tiny_bert
from tests.support.topics_warehouse import topics_warehouse

pytestmark = pytest.mark.slow


def test_views_are_seeded_keep_a_sentence_and_mask_one_span() -> None:
    text = "First sentence here. Second one follows! A third? And a fourth."
    for seed in range(50):
        a = sentence_dropout(text, np.random.default_rng(seed), p=0.9)
        assert a and set(a.split()) <= set(text.split())
        assert a == sentence_dropout(text, np.random.default_rng(seed), p=0.9)
    words = "one two three four five six seven eight nine ten".split()
    masked = span_mask(" ".join(words), np.random.default_rng(1), "[MASK]", share=0.3).split()
    assert len(masked) == 10 and masked.count("[MASK]") == 3
    at = [i for i, w in enumerate(masked) if w == "[MASK]"]
    assert at == list(range(at[0], at[0] + 3))  # one contiguous span
    assert [w for w in masked if w != "[MASK]"] == [w for i, w in enumerate(words) if i not in at]
    title, other = views("A title", "Some abstract. More of it.", np.random.default_rng(0), "[MASK]")
    assert title == "A title" and other != title
    x, y = views(None, "Only an abstract. With two sentences here.", np.random.default_rng(0), "[MASK]")
    assert "title" not in x and x and y
    assert views("Only a title", None, np.random.default_rng(0), "[MASK]") == ("Only a title", "Only a title")


@pytest.fixture
def world(settings: Settings, tmp_path: Path) -> tuple[Settings, dict[str, list[str]]]:
    made = topics_warehouse(settings, citing=24)
    base = tiny_bert(tmp_path / "tiny-bert", seed=9)
    return settings.with_overrides(train={"base_model": str(base), "batch_size": 6, "epochs": 12, "max_seq_length": 48,
                                          "learning_rate": 1e-2, "checkpoint_every": 3, "temperature": 0.1}), made


def test_augment_trains_on_unrated_papers_and_scores(world: tuple[Settings, dict[str, list[str]]]) -> None:
    s, made = world
    out = augment_flow.fn(s, name="aug")
    folder = s.data_dir / "models" / "aug"
    papers = set(pl.read_parquet(folder / "papers.parquet")["paper_id"])
    assert papers and not papers & set(made["queries"])
    assert out.steps == 12 * -(-len(papers) // 6) and out.status == "trained"
    assert np.mean(out.losses[-8:]) < np.mean(out.losses[:8]), out.losses
    assert (folder / "adapter" / "loss.png").exists()
    again = augment_flow.fn(s, name="aug")
    assert again.status == "skipped" and again.scorer == out.scorer
    b = bench()
    tuned = make_scorer(out.scorer, Context(s)).score(b).draws[0]
    plain = make_scorer(f"embedding:model={s.train.base_model}", Context(s)).score(b).draws[0]
    assert tuned.height == plain.height == 4 and not np.allclose(tuned["score"], plain["score"])


@pytest.mark.parametrize(("objective", "epochs"), [("augment", 30), ("factors", 12)])
def test_a_killed_contrastive_training_resumes_to_the_same_adapter(world: tuple[Settings, dict[str, list[str]]],
                                                                   tmp_path: Path, objective: str, epochs: int) -> None:
    import shutil

    from safetensors.numpy import load_file

    s, _ = world
    s = s.with_overrides(train={**s.train.model_dump(), "epochs": epochs, "anchors": 90})
    whole = s.with_overrides(data_dir=tmp_path / "whole")
    whole.data_dir.mkdir(parents=True)
    shutil.copy(s.warehouse_path, whole.warehouse_path)
    done = cli(whole, "train", "--objective", objective, "--no-track")
    assert done.returncode == 0, done.stderr
    proc = cli(s, "train", "--objective", objective, "--no-track", wait=False)
    folder = s.data_dir / "models" / objective
    kill_at_first_checkpoint(proc, folder, folder / "adapter")
    resumed = cli(s, "train", "--objective", objective, "--no-track")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed at step" in resumed.stdout
    a = load_file(str(whole.data_dir / "models" / objective / "adapter" / "adapter_model.safetensors"))
    b = load_file(str(folder / "adapter" / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and a
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_damaged_training_rows_are_one_line(world: tuple[Settings, dict[str, list[str]]]) -> None:
    from revbench.errors import InputError
    from revbench.flows.train_contrastive import augment_flow as flow

    s, _ = world
    s = s.with_overrides(train={**s.train.model_dump(), "epochs": 1})
    flow.fn(s, name="dmg")
    folder = s.data_dir / "models" / "dmg"
    import shutil

    shutil.rmtree(folder / "adapter")
    (folder / "papers.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"papers.parquet is damaged .*--replace") as err:
        flow.fn(s, name="dmg")
    assert "\n" not in str(err.value)
    assert flow.fn(s, name="dmg", replace=True).status == "trained"
